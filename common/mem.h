/* mem.h - the one allocation wrapper (STYLE practice 9).
 *
 * All heap allocation in inferd goes through these so that tests can fail
 * the k-th allocation (mem_fail_after) and see every error path. They
 * behave like their libc counterparts: NULL on failure, mem_free(NULL) is a
 * no-op. Thread-safe. Start-up code may treat NULL as fatal; request paths
 * must turn it into ST_NOMEM.
 */
#ifndef MEM_H
#define MEM_H

#include <stddef.h>

void *mem_alloc(size_t size_bytes);
void *mem_calloc(size_t n, size_t size_bytes);
void *mem_realloc(void *p, size_t size_bytes);
char *mem_strdup(const char *s);
char *mem_strndup(const char *s, size_t n);
void mem_free(void *p);

/* mem_fail_after - test hook: the next n allocations succeed and every later one fails, until called
 * again with n < 0 (never fail, the default). Process-wide, for tests only. */
void mem_fail_after(long n);

#endif /* MEM_H */
