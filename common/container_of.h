/* container_of.h - recover the struct that embeds a member from a pointer
 * to that member (the Linux kernel's and libuv's idiom: a uv handle sits
 * inside our struct, its callback gets the handle, we want our struct).
 *
 * ptr must really point at the member of a live type; nothing is checked.
 */
#ifndef CONTAINER_OF_H
#define CONTAINER_OF_H

#include <stddef.h>

/* container_of - the (type *) whose member is at ptr. */
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#endif /* CONTAINER_OF_H */
