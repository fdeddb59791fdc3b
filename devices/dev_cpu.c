/* dev_cpu.c - the `cpu` back end of dev.h: a device is a set of cores this
 * process may run on, its memory is host memory.
 *
 * Which cores exist comes from hwloc (the process's binding within the
 * allowed cpuset, so cgroup limits and offline CPUs are honoured), with
 * sched_getaffinity as the fallback when hwloc cannot load a topology.
 * Queues live in dev_queue.c, spec strings in dev_spec.c.
 *
 * Memory: dev_alloc over-allocates through mem_alloc (so the tests' fault
 * injection reaches it) and keeps the start of the block in the word
 * just below the 64-byte aligned pointer it hands out.
 */
#include <hwloc.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "kernels/kn.h"

#define DEV_ALIGN 64 /* bytes: a cache line, and an AVX-512 vector */

struct dev {
	struct dev_caps caps;
	int n_cpus;		/* == caps.n_cores */
	int cpus[DEV_MAX_CPUS]; /* [n_cpus] ascending */
};

int dev__probe_hwloc(struct dev__hw *hw)
{
	hwloc_topology_t topo;
	if (hwloc_topology_init(&topo))
		return -ST_IO;
	int rc = -ST_IO;
	hwloc_bitmap_t set = NULL;
	if (hwloc_topology_load(topo))
		goto out_topo;
	set = hwloc_bitmap_alloc();
	if (!set || hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS))
		goto out_set;
	hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
	hw->n_cpus = 0;
	for (int id = hwloc_bitmap_first(set); id >= 0 && id < DEV_MAX_CPUS;
	     id = hwloc_bitmap_next(set, id))
		hw->cpus[hw->n_cpus++] = id;
	hw->mem_bytes = hwloc_get_root_obj(topo)->total_memory;
	rc = hw->n_cpus > 0 ? 0 : -ST_IO;
out_set:
	hwloc_bitmap_free(set);
out_topo:
	hwloc_topology_destroy(topo);
	return rc;
}

static uint64_t dev_phys_mem_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

int dev__probe_os(struct dev__hw *hw)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set))
		return -ST_IO;
	hw->n_cpus = 0;
	for (int id = 0; id < DEV_MAX_CPUS && id < CPU_SETSIZE; id++)
		if (CPU_ISSET(id, &set))
			hw->cpus[hw->n_cpus++] = id;
	hw->mem_bytes = dev_phys_mem_bytes();
	return hw->n_cpus > 0 ? 0 : -ST_IO;
}

/* hwloc first, the OS alone when hwloc fails. */
static int dev_probe(struct dev__hw *hw)
{
	int rc = dev__probe_hwloc(hw);
	if (rc)
		rc = dev__probe_os(hw);
	if (!rc && hw->mem_bytes == 0)
		hw->mem_bytes = dev_phys_mem_bytes();
	return rc;
}

int dev_cpus_available(int *cpus, int max)
{
	if (!cpus || max < 1)
		return -ST_INVAL;
	struct dev__hw hw;
	int rc = dev_probe(&hw);
	if (rc)
		return rc;
	int n = hw.n_cpus < max ? hw.n_cpus : max;
	memcpy(cpus, hw.cpus, (size_t)n * sizeof(*cpus));
	return n;
}

/* The kind of spec, "cpu" or "cpu:<list>" (0, *list set to the list or
 * NULL), else why not. A kind is lowercase letters. */
static int dev_spec_kind(const char *spec, const char **list, char *err, size_t errlen)
{
	size_t k = strspn(spec, "abcdefghijklmnopqrstuvwxyz");
	*list = NULL;
	if (k == 0 || (spec[k] != '\0' && spec[k] != ':'))
		return st_errf(-ST_INVAL, err, errlen,
			       "bad device spec \"%s\": expected cpu, cpu:N, cpu:A-B or cpu:0,2-3",
			       spec);
	if (k == 3 && !strncmp(spec, "cpu", 3)) {
		*list = spec[k] == ':' ? spec + k + 1 : NULL;
		return 0;
	}
	if (k == 4 && !strncmp(spec, "cuda", 4))
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "device \"%s\": no cuda back end in this build", spec);
	return st_errf(-ST_UNSUPPORTED, err, errlen,
		       "device \"%s\": unknown kind \"%.*s\" (this build has: cpu)", spec, (int)k,
		       spec);
}

/* Every id of d must be one hw offers (both lists ascending). */
static int dev_check_available(const struct dev *d, const struct dev__hw *hw, char *err,
			       size_t errlen)
{
	int j = 0;
	for (int i = 0; i < d->n_cpus; i++) {
		while (j < hw->n_cpus && hw->cpus[j] < d->cpus[i])
			j++;
		if (j < hw->n_cpus && hw->cpus[j] == d->cpus[i])
			continue;
		char avail[DEV_NAME_MAX];
		dev__cpus_format(hw->cpus, hw->n_cpus, avail, sizeof(avail));
		return st_errf(-ST_NOTFOUND, err, errlen,
			       "cpu %d is not available to this process (available: cpu:%s)",
			       d->cpus[i], avail);
	}
	return 0;
}

static void dev_caps_fill(struct dev *d, const struct dev__hw *hw)
{
	d->caps.kind = DEV_KIND_CPU;
	memcpy(d->caps.name, "cpu:", 5);
	dev__cpus_format(d->cpus, d->n_cpus, d->caps.name + 4, sizeof(d->caps.name) - 4);
	d->caps.n_cores = d->n_cpus;
	d->caps.simd = kn_ops()->name; /* keeps an earlier kn_init's choice */
	d->caps.mem_bytes = hw->mem_bytes;
}

/* The cores of spec's list (every available one when list is NULL). */
static int dev_cpus_pick(struct dev *d, const char *list, struct dev__hw *hw, char *err,
			 size_t errlen)
{
	if (list) {
		int n = dev__cpus_parse(list, d->cpus, err, errlen);
		if (n < 0)
			return n;
		d->n_cpus = n;
	}
	if (dev_probe(hw))
		return st_errf(-ST_IO, err, errlen, "cannot list the CPUs this process may use");
	if (!list) {
		d->n_cpus = hw->n_cpus;
		memcpy(d->cpus, hw->cpus, (size_t)hw->n_cpus * sizeof(*d->cpus));
	}
	return dev_check_available(d, hw, err, errlen);
}

int dev_open(const char *spec, struct dev **out, char *err, size_t errlen)
{
	*out = NULL;
	st_errf(0, err, errlen, "%s", "");
	if (!spec)
		return st_errf(-ST_INVAL, err, errlen, "no device spec");
	const char *list;
	int rc = dev_spec_kind(spec, &list, err, errlen);
	if (rc)
		return rc;
	struct dev *d = mem_calloc(1, sizeof(*d));
	if (!d)
		return st_errf(-ST_NOMEM, err, errlen, "device \"%s\": out of memory", spec);
	struct dev__hw hw;
	rc = dev_cpus_pick(d, list, &hw, err, errlen);
	if (rc)
		goto out_free;
	dev_caps_fill(d, &hw);
	*out = d;
	return 0;
out_free:
	mem_free(d);
	return rc;
}

void dev_close(struct dev *d)
{
	mem_free(d);
}

const struct dev_caps *dev_caps(const struct dev *d)
{
	return &d->caps;
}

const int *dev_cpu_ids(const struct dev *d, int *n)
{
	*n = d->n_cpus;
	return d->cpus;
}

void *dev_alloc(struct dev *d, size_t n)
{
	(void)d;
	size_t extra = DEV_ALIGN + sizeof(void *);
	if (n > SIZE_MAX - extra)
		return NULL;
	char *base = mem_alloc(n + extra);
	if (!base)
		return NULL;
	uintptr_t p =
		((uintptr_t)base + sizeof(void *) + DEV_ALIGN - 1) & ~(uintptr_t)(DEV_ALIGN - 1);
	memcpy((char *)p - sizeof(void *), &base, sizeof(base));
	return (void *)p;
}

void dev_free(struct dev *d, void *p)
{
	(void)d;
	if (!p)
		return;
	void *base;
	memcpy(&base, (char *)p - sizeof(void *), sizeof(base));
	mem_free(base);
}

void dev_copy(struct dev *d, void *dst, const void *src, size_t n)
{
	(void)d;
	if (n)
		memcpy(dst, src, n);
}
