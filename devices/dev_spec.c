/* dev_spec.c - CPU lists in device specs: parsing "0,2-3" strictly into a
 * sorted set, and printing a set back in its canonical form, the one
 * dev_caps.name and error messages use. Pure string work: no system
 * calls, so the tests can feed it sets this machine does not have.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/st.h"
#include "devices/dev_int.h"

/* One CPU id at s: digits only, below DEV_MAX_CPUS. Returns the first
 * character after it, or NULL (err set). */
static const char *dev_parse_id(const char *s, const char *list, int *id, char *err, size_t errlen)
{
	if (*s < '0' || *s > '9') {
		st_errf(0, err, errlen, "CPU list \"%s\": expected a CPU id at offset %zu", list,
			(size_t)(s - list));
		return NULL;
	}
	long v = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
		if (v >= DEV_MAX_CPUS) {
			st_errf(0, err, errlen, "CPU list \"%s\": CPU id out of range (0..%d)",
				list, DEV_MAX_CPUS - 1);
			return NULL;
		}
	}
	*id = (int)v;
	return s;
}

/* One item, "N" or "A-B", at s into in[]. Returns what follows it, or
 * NULL (err set). */
static const char *dev_parse_item(const char *s, const char *list, bool *in, char *err,
				  size_t errlen)
{
	int a, b;
	s = dev_parse_id(s, list, &a, err, errlen);
	if (!s)
		return NULL;
	b = a;
	if (*s == '-') {
		s = dev_parse_id(s + 1, list, &b, err, errlen);
		if (!s)
			return NULL;
		if (b < a) {
			st_errf(0, err, errlen, "CPU list \"%s\": range %d-%d runs backwards", list,
				a, b);
			return NULL;
		}
	}
	for (int i = a; i <= b; i++)
		in[i] = true;
	return s;
}

int dev__cpus_parse(const char *list, int *ids, char *err, size_t errlen)
{
	bool in[DEV_MAX_CPUS] = {false};
	const char *s = list;
	for (;;) {
		s = dev_parse_item(s, list, in, err, errlen);
		if (!s)
			return -ST_INVAL;
		if (*s == '\0')
			break;
		if (*s != ',')
			return st_errf(-ST_INVAL, err, errlen,
				       "CPU list \"%s\": unexpected character at offset %zu", list,
				       (size_t)(s - list));
		s++;
	}
	int n = 0;
	for (int i = 0; i < DEV_MAX_CPUS; i++)
		if (in[i])
			ids[n++] = i;
	return n;
}

/* Append piece to buf[len] at *off if it fits with room left for "...";
 * false when it does not (nothing written). */
static bool dev_append(char *buf, size_t len, size_t *off, const char *piece)
{
	size_t n = strlen(piece);
	if (*off + n + 4 > len)
		return false;
	memcpy(buf + *off, piece, n + 1);
	*off += n;
	return true;
}

void dev__cpus_format(const int *ids, int n, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		char piece[32];
		const char *sep = i ? "," : "";
		if (j == i)
			snprintf(piece, sizeof(piece), "%s%d", sep, ids[i]);
		else
			snprintf(piece, sizeof(piece), "%s%d-%d", sep, ids[i], ids[j]);
		/* The last piece may use the room kept for "...". */
		bool last = j + 1 == n;
		if (!dev_append(buf, len + (last ? 3 : 0), &off, piece)) {
			memcpy(buf + off, "...", 4);
			return;
		}
		i = j + 1;
	}
}
