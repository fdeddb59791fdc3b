/* clock.c - the monotonic clock (clock.h). */
#include "common/clock.h"

#include <time.h>

double st_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
