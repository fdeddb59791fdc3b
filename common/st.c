/* st.c - names for the project status enum, and the one helper that
 * formats an error into a caller's buffer. */
#include "common/st.h"

#include <assert.h>
#include <stdio.h>

static const char *const st_names[] = {
	[ST_OK] = "ST_OK",
	[ST_NOMEM] = "ST_NOMEM",
	[ST_INVAL] = "ST_INVAL",
	[ST_TOOBIG] = "ST_TOOBIG",
	[ST_AGAIN] = "ST_AGAIN",
	[ST_CANCELED] = "ST_CANCELED",
	[ST_IO] = "ST_IO",
	[ST_DEVICE] = "ST_DEVICE",
	[ST_NOTFOUND] = "ST_NOTFOUND",
	[ST_CORRUPT] = "ST_CORRUPT",
	[ST_UNSUPPORTED] = "ST_UNSUPPORTED",
	[ST_BUSY] = "ST_BUSY",
	[ST_TIMEDOUT] = "ST_TIMEDOUT",
	[ST_CLOSED] = "ST_CLOSED",
};
static_assert(sizeof(st_names) / sizeof(st_names[0]) == ST_COUNT,
	      "st_names must name every status");

const char *st_str(int status)
{
	if (status < 0)
		status = -status;
	if (status >= ST_COUNT)
		return "ST_UNKNOWN";
	return st_names[status];
}

int st_verrf(int rc, char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
{
	if (!err || errlen == 0)
		return rc;
	size_t n = 0;
	if (prefix && prefix[0]) {
		int k = snprintf(err, errlen, "%s: ", prefix);
		if (k < 0 || (size_t)k >= errlen)
			return rc;
		n = (size_t)k;
	}
	vsnprintf(err + n, errlen - n, fmt, ap);
	return rc;
}

int st_errf(int rc, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = st_verrf(rc, err, errlen, NULL, fmt, ap);
	va_end(ap);
	return rc;
}
