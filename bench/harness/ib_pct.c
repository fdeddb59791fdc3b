/* ib_pct.c - the figures' small arithmetic, shared by the summaries
 * (ib_stats.c) and the live streams' figures (ib_live_stats.c): ascending
 * order of doubles, nearest-rank percentiles (the value at rank
 * ceil(p/100 * n) of the sorted sample, the definition wrk and most load
 * testers print) and durations as the final table prints them. A leaf.
 */
#include <math.h>
#include <stdio.h>

#include "ib_int.h"

int ib_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double ib_pct(const double *x, size_t n, double p)
{
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);
	return x[rank ? rank - 1 : 0];
}

const char *ib_fmt_dur(json_t *o, const char *k, char *buf, size_t n)
{
	json_t *v = json_object_get(o, k);
	if (!json_is_number(v)) {
		snprintf(buf, n, "-");
		return buf;
	}
	double s = json_number_value(v);
	if (s < 1.0)
		snprintf(buf, n, "%.1fms", s * 1e3);
	else
		snprintf(buf, n, "%.2fs", s);
	return buf;
}
