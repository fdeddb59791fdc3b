/* dev_int.h - internals of devices/ shared by dev_spec.c, dev_cpu.c,
 * dev_queue.c and the unit tests; engine/ includes dev.h only.
 */
#ifndef DEV_INT_H
#define DEV_INT_H

#include <stddef.h>
#include <stdint.h>

#include "devices/dev.h"

/* What the machine offers this process (filled by the probes). */
struct dev__hw {
	int n_cpus;		/* ids in cpus */
	int cpus[DEV_MAX_CPUS]; /* ascending CPU ids this process may use */
	uint64_t mem_bytes;	/* physical memory of the machine; 0: unknown */
};

/* dev__cpus_parse - parse a CPU list, "N", "A-B" or a comma list of those
 * ("0,2-3"), into ids[DEV_MAX_CPUS] ascending without duplicates. Strict:
 * digits, '-' and ',' only, no empty items, ids < DEV_MAX_CPUS, A <= B.
 * Returns how many ids (>= 1) or -ST_INVAL with err saying where. */
int dev__cpus_parse(const char *list, int *ids, char *err, size_t errlen);

/* dev__cpus_format - the canonical list of ids[n] (ascending, unique):
 * runs of consecutive ids as "A-B", joined by ','; "" for n == 0. Written
 * into buf[len] (len >= 4); when it does not fit, what fits of whole items
 * followed by "...". */
void dev__cpus_format(const int *ids, int n, char *buf, size_t len);

/* dev__probe_hwloc / dev__probe_os - fill hw from hwloc (the process
 * binding within the allowed cpuset; the root object's memory) or from
 * the OS alone (sched_getaffinity of the calling thread; sysconf).
 * Return 0, or -ST_IO when nothing usable came back. */
int dev__probe_hwloc(struct dev__hw *hw);
int dev__probe_os(struct dev__hw *hw);

#endif /* DEV_INT_H */
