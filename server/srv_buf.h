/* srv_buf.h - a growable byte buffer with a hard ceiling (curl's
 * curlx_dyn_init(&b, toobig)). Every request buffer - URL, headers, body,
 * decompressed body, response - is one of these, so no input can grow
 * memory past a limit chosen when the buffer was made.
 */
#ifndef SRV_BUF_H
#define SRV_BUF_H

#include <stddef.h>

struct srv_buf {
	char *data;      /* NUL-terminated after every append (not counted in len) */
	size_t len;      /* bytes held */
	size_t cap;      /* bytes allocated */
	size_t max_len;  /* ceiling on len */
};

/* srv_buf_init - empty buffer that may grow to max_len bytes. No allocation. */
void srv_buf_init(struct srv_buf *b, size_t max_len);

/* srv_buf_append - append n bytes. Returns 0, -ST_TOOBIG when len would
 * pass max_len (the buffer is left as it was), or -ST_NOMEM. */
int srv_buf_append(struct srv_buf *b, const void *p, size_t n);

/* srv_buf_printf - append formatted text; errors as srv_buf_append. */
int srv_buf_printf(struct srv_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* srv_buf_reset - drop the contents, keep the memory. */
void srv_buf_reset(struct srv_buf *b);

/* srv_buf_steal - hand the data (malloc'd through mem.h, free with
 * mem_free) to the caller and leave the buffer empty; NULL when empty. */
char *srv_buf_steal(struct srv_buf *b);

/* srv_buf_fini - free the memory; the buffer may be used again after
 * srv_buf_init. */
void srv_buf_fini(struct srv_buf *b);

#endif /* SRV_BUF_H */
