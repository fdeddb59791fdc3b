/* st.h - the one project-wide status enum.
 *
 * Every function that can fail returns 0 (ST_OK) or a negative status
 * (-ST_NOMEM, ...). Numbers are stable: never renumber, retire codes in
 * place (curl's practice). ST_AGAIN means "would block / try later" and is
 * not a failure. server/ maps statuses to HTTP codes in one table.
 */
#ifndef ST_H
#define ST_H

#include <stdarg.h>
#include <stddef.h>

enum st {
	ST_OK = 0,
	ST_NOMEM = 1,    /* allocation failed on a request path */
	ST_INVAL = 2,    /* malformed input or argument */
	ST_TOOBIG = 3,   /* a size ceiling was hit */
	ST_AGAIN = 4,    /* would block, try later */
	ST_CANCELED = 5, /* the caller or client gave up */
	ST_IO = 6,       /* an operating-system I/O call failed */
	ST_DEVICE = 7,   /* a device back end failed */
	ST_NOTFOUND = 8, /* no such file, model, route or key */
	ST_CORRUPT = 9,  /* a file's contents contradict its own format */
	ST_UNSUPPORTED = 10, /* valid but not handled (version, type) */
	ST_BUSY = 11,     /* a queue is full: retry later (HTTP 429) */
	ST_TIMEDOUT = 12, /* a deadline passed before the work finished (504) */
	ST_CLOSED = 13,   /* the object is shutting down; nothing new accepted */
	ST_COUNT
};

/* st_str - a short constant name for a status ("ST_NOMEM"); accepts either
 * sign; out-of-range values give "ST_UNKNOWN". Never NULL, never freed. */
const char *st_str(int status);

/* st_errf - format a message into the caller's error buffer and return rc,
 * so an error path is one line:
 *     return st_errf(-ST_CORRUPT, err, errlen, "%s: bad magic", path);
 * err: borrowed, errlen bytes; the message is truncated to fit and always
 * NUL-terminated. When err is NULL or errlen is 0 nothing is written. rc is
 * returned unchanged (any value, 0 included). Any thread. */
int st_errf(int rc, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* st_verrf - st_errf for wrappers that take their own `...`: formats ap,
 * preceded by "PREFIX: " when prefix is non-NULL and non-empty (a file
 * name, a config path). When even the prefix does not fit, err holds the
 * truncated prefix. Same NULL / errlen 0 behaviour and return as st_errf;
 * ap is consumed. */
int st_verrf(int rc, char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));

#endif /* ST_H */
