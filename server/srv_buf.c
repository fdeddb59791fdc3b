/* srv_buf.c - growable byte buffer with a ceiling. */
#include "server/srv_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"

void srv_buf_init(struct srv_buf *b, size_t max_len)
{
	*b = (struct srv_buf){ .max_len = max_len };
}

static int srv_buf_reserve(struct srv_buf *b, size_t n)
{
	if (n > b->max_len - b->len || b->len > b->max_len)
		return -ST_TOOBIG;
	size_t need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = mem_realloc(b->data, cap);
	if (!p)
		return -ST_NOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int srv_buf_append(struct srv_buf *b, const void *p, size_t n)
{
	int rc = srv_buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int srv_buf_printf(struct srv_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ST_INVAL;
	int rc = srv_buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void srv_buf_reset(struct srv_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

char *srv_buf_steal(struct srv_buf *b)
{
	char *p = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void srv_buf_fini(struct srv_buf *b)
{
	mem_free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
