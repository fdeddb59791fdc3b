/* dev_ocl_mem.c - memory of the `opencl` back end: fake addresses for
 * device buffers, and the copies between them and host memory.
 *
 * dev_alloc reserves address space (mmap PROT_NONE, MAP_NORESERVE: no
 * memory behind it, a host access faults) one byte longer than the
 * allocation, rounded up to pages, so every allocation has a unique
 * address range that also holds its end (base + n is never host memory
 * nor the next allocation), and creates a cl_mem of n bytes. A table of allocations sorted by
 * address (under mem_mu) maps any address inside one back to its cl_mem
 * and offset (dev__ocl_resolve). An address in no allocation's range is
 * host memory.
 *
 * dev_copy uses the device's own in-order queue with blocking calls (any
 * thread: OpenCL 1.2 calls other than clSetKernelArg are thread safe);
 * upload/download use the caller's queue, so they come after the work
 * its items enqueued. A driver failure in dev_copy (which returns
 * nothing) is said on stderr.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"

/* Index of the last allocation whose base <= addr (-1: none). Under mu. */
static long ocl_alloc_find(const struct dev_ocl *o, uintptr_t addr)
{
	size_t lo = 0, hi = o->n_allocs; /* answer in [lo - 1, hi - 1] */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->allocs[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/* Room for one more entry in the table. Under mu. */
static int ocl_alloc_grow(struct dev_ocl *o)
{
	if (o->n_allocs < o->cap_allocs)
		return 0;
	size_t cap = o->cap_allocs ? 2 * o->cap_allocs : 16;
	struct dev_ocl_alloc *t = mem_realloc(o->allocs, cap * sizeof(*t));
	if (!t)
		return -ST_NOMEM;
	o->allocs = t;
	o->cap_allocs = cap;
	return 0;
}

/* Insert a at its place in the table. */
static int ocl_alloc_insert(struct dev_ocl *o, const struct dev_ocl_alloc *a)
{
	pthread_mutex_lock(&o->mem_mu);
	int rc = ocl_alloc_grow(o);
	if (!rc) {
		size_t at = (size_t)(ocl_alloc_find(o, a->base) + 1);
		memmove(&o->allocs[at + 1], &o->allocs[at], (o->n_allocs - at) * sizeof(*a));
		o->allocs[at] = *a;
		o->n_allocs++;
	}
	pthread_mutex_unlock(&o->mem_mu);
	return rc;
}

void *dev__ocl_alloc(struct dev *d, size_t n)
{
	struct dev_ocl *o = d->impl;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (n > SIZE_MAX - 2 * page)
		return NULL;
	struct dev_ocl_alloc a = {.n = n, .span = (n + page) / page * page}; /* > n */
	void *p = mmap(NULL, a.span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a.base = (uintptr_t)p;
	cl_int e;
	a.mem = clCreateBuffer(o->ctx, CL_MEM_READ_WRITE, n ? n : 1, NULL, &e);
	if (e != CL_SUCCESS)
		goto out_unmap;
	if (ocl_alloc_insert(o, &a))
		goto out_release;
	return p;
out_release:
	clReleaseMemObject(a.mem);
out_unmap:
	munmap(p, a.span);
	return NULL;
}

void dev__ocl_free(struct dev *d, void *p)
{
	struct dev_ocl *o = d->impl;
	struct dev_ocl_alloc a = {0};
	pthread_mutex_lock(&o->mem_mu);
	long i = ocl_alloc_find(o, (uintptr_t)p);
	if (i >= 0 && o->allocs[i].base == (uintptr_t)p) {
		a = o->allocs[i];
		memmove(&o->allocs[i], &o->allocs[i + 1],
			(o->n_allocs - (size_t)i - 1) * sizeof(a));
		o->n_allocs--;
	}
	pthread_mutex_unlock(&o->mem_mu);
	if (!a.mem)
		return; /* not an allocation of d: nothing to free */
	clReleaseMemObject(a.mem);
	munmap((void *)a.base, a.span);
}

void dev__ocl_mem_fini(struct dev_ocl *o)
{
	for (size_t i = 0; i < o->n_allocs; i++) {
		clReleaseMemObject(o->allocs[i].mem);
		munmap((void *)o->allocs[i].base, o->allocs[i].span);
	}
	mem_free(o->allocs);
	o->allocs = NULL;
	o->n_allocs = o->cap_allocs = 0;
}

/* Where addr lies: 1 inside an allocation's reserved range (*mem, *off
 * set when [addr, addr + n) fits its bytes, else *mem NULL), 0 in none
 * (host memory). */
static int ocl_lookup(struct dev_ocl *o, const void *addr, size_t n, cl_mem *mem, size_t *off)
{
	uintptr_t x = (uintptr_t)addr;
	*mem = NULL;
	*off = 0;
	pthread_mutex_lock(&o->mem_mu);
	long i = ocl_alloc_find(o, x);
	int in = i >= 0 && x - o->allocs[i].base < o->allocs[i].span;
	if (in) {
		const struct dev_ocl_alloc *a = &o->allocs[i];
		size_t at = x - a->base;
		bool fits = at <= a->n && n <= a->n - at && (at < a->n || a->n == 0);
		*mem = fits ? a->mem : NULL;
		*off = fits ? at : 0;
	}
	pthread_mutex_unlock(&o->mem_mu);
	return in;
}

int dev__ocl_resolve(struct dev *d, const void *addr, size_t n, cl_mem *mem, size_t *off)
{
	ocl_lookup(d->impl, addr, n, mem, off);
	return *mem ? 0 : -ST_INVAL;
}

/* n bytes src -> dst on cq, blocking; either side a device address of d
 * or host memory. Returns 0, -ST_INVAL (a device range out of its
 * allocation) or -ST_IO. */
static int ocl_transfer(struct dev *d, cl_command_queue cq, void *dst, const void *src, size_t n)
{
	struct dev_ocl *o = d->impl;
	cl_mem dm, sm;
	size_t doff, soff;
	int dev_dst = ocl_lookup(o, dst, n, &dm, &doff);
	int dev_src = ocl_lookup(o, src, n, &sm, &soff);
	if ((dev_dst && !dm) || (dev_src && !sm))
		return -ST_INVAL;
	cl_int e = CL_SUCCESS;
	if (dev_dst && dev_src) {
		e = clEnqueueCopyBuffer(cq, sm, dm, soff, doff, n, 0, NULL, NULL);
		if (e == CL_SUCCESS)
			e = clFinish(cq);
	} else if (dev_dst) {
		e = clEnqueueWriteBuffer(cq, dm, CL_TRUE, doff, n, src, 0, NULL, NULL);
	} else if (dev_src) {
		e = clEnqueueReadBuffer(cq, sm, CL_TRUE, soff, n, dst, 0, NULL, NULL);
	} else {
		memcpy(dst, src, n);
	}
	return e == CL_SUCCESS ? 0 : -ST_IO;
}

void dev__ocl_copy(struct dev *d, void *dst, const void *src, size_t n)
{
	int rc = ocl_transfer(d, ((struct dev_ocl *)d->impl)->copy_q, dst, src, n);
	if (rc)
		fprintf(stderr, "inferd: dev_copy of %zu bytes on %s failed: %s\n", n, d->caps.name,
			rc == -ST_INVAL ? "a range outside its allocation" : "the OpenCL driver failed");
}

int dev__ocl_upload(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	return ocl_transfer(dev_queue_device(q), dev__ocl_queue(q), dst, src, n);
}

int dev__ocl_download(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	return ocl_transfer(dev_queue_device(q), dev__ocl_queue(q), dst, src, n);
}
