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
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "kernels/kn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_i8.h"

#define DEV_ALIGN 64 /* bytes: a cache line, and an AVX-512 vector */

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

/* The CPU's model name from hwloc's "CPUModel" info of the first
 * package, else "" (left as is). */
static void dev_cpu_model(char *buf, size_t len)
{
	hwloc_topology_t topo;
	if (hwloc_topology_init(&topo))
		return;
	if (!hwloc_topology_load(topo)) {
		hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
		const char *m = pkg ? hwloc_obj_get_info_by_name(pkg, "CPUModel") : NULL;
		if (m)
			snprintf(buf, len, "%s", m);
	}
	hwloc_topology_destroy(topo);
}

static void dev_caps_fill(struct dev *d, const struct dev__hw *hw)
{
	d->caps.kind = DEV_KIND_CPU;
	memcpy(d->caps.name, "cpu:", 5);
	dev__cpus_format(d->cpus, d->n_cpus, d->caps.name + 4, sizeof(d->caps.name) - 4);
	d->caps.n_cores = d->n_cpus;
	d->caps.simd = kn_ops()->name; /* keeps an earlier kn_init's choice */
	d->caps.mem_bytes = hw->mem_bytes;
	d->caps.compute_units = d->n_cpus;
	dev_cpu_model(d->caps.model, sizeof(d->caps.model));
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

static int cpu_open(struct dev *d, const char *spec, const char *list, char *err, size_t errlen)
{
	(void)spec;
	struct dev__hw hw;
	int rc = dev_cpus_pick(d, list, &hw, err, errlen);
	if (rc)
		return rc;
	dev_caps_fill(d, &hw);
	return 0;
}

static void cpu_close(struct dev *d)
{
	(void)d;
}

static int cpu_list(struct dev_caps *out, int max)
{
	struct dev d = { 0 };
	struct dev__hw hw;
	if (max < 1 || dev_cpus_pick(&d, NULL, &hw, NULL, 0))
		return 0;
	dev_caps_fill(&d, &hw);
	out[0] = d.caps;
	return 1;
}

#define CPU_HUGE_MIN ((size_t)2 << 20) /* bytes from which cpu_alloc asks for huge pages */

static void *cpu_alloc(struct dev *d, size_t n)
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
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	/* a large block (a sequence's KV cache, a pass's activations) offered
	 * to transparent huge pages, as mem_alloc_huge's weights: a decode
	 * step reads its cache from memory, and on 4 KiB pages the attention
	 * took 38-59 against 34-41 us a layer of SmolLM2 after 600 tokens */
	if (n >= CPU_HUGE_MIN) {
		uintptr_t a = (p + 4095) & ~(uintptr_t)4095, e = (p + n) & ~(uintptr_t)4095;
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* advice only */
	}
#endif
	return (void *)p;
}

static void cpu_free(struct dev *d, void *p)
{
	(void)d;
	void *base;
	memcpy(&base, (char *)p - sizeof(void *), sizeof(base));
	mem_free(base);
}

static void cpu_copy(struct dev *d, void *dst, const void *src, size_t n)
{
	(void)d;
	memcpy(dst, src, n);
}

/* Host memory both ways: the queue's earlier work has returned when the
 * caller (an item on it, or after dev_queue_sync) gets here. */
static int cpu_transfer(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	(void)q;
	memcpy(dst, src, n);
	return 0;
}

const struct dev_backend dev__cpu_backend = {
	.kind = "cpu",
	.open = cpu_open,
	.close = cpu_close,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.copy = cpu_copy,
	.upload = cpu_transfer,
	.download = cpu_transfer,
	.queue_open = dev__cpu_queue_open,
	.queue_close = dev__cpu_queue_close,
	.list = cpu_list,
	.ops = &dev__cpu_ops,
};

int dev_cpu_kernels(char *buf, size_t len)
{
	const char *bad;
	kn_cpu_cap(&bad);
	if (bad)
		return st_errf(-ST_INVAL, buf, len,
			       "INFERD_CPU_ISA: expected native, avx512 or avx2, not '%s'", bad);
	kn_init(KN_ISA_COUNT);
	snprintf(buf, len, "%s, int8 %s, bfloat16 %s (INFERD_CPU_ISA %s)", kn_ops()->name,
		 kn_i8_ops()->name, kn_bf16_kernel_name(), kn_cap_name(kn_cpu_cap(NULL)));
	return 0;
}
