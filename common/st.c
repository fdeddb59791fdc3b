/* st.c - names for the project status enum. */
#include "common/st.h"

#include <assert.h>

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
