/* dev_ocl.h - internals of the `opencl` back end (dev_ocl.c: devices and
 * queues, dev_ocl_mem.c: memory, dev_ocl_prog.c: programs and kernels),
 * for those files, the ops that launch OpenCL kernels, and the tests.
 * engine/ includes dev.h only.
 *
 * Addresses: dev_alloc on an OpenCL device returns a fake address, a
 * reserved range of host address space (PROT_NONE: dereferencing it on
 * the host faults) as long as the allocation, so callers may do pointer
 * arithmetic on device memory as they do on host memory (ggml's way).
 * dev__ocl_resolve turns any address inside an allocation back into its
 * cl_mem and an offset, which is what an OpenCL call takes.
 *
 * Kernels: the OpenCL C sources (kernels/opencl/ *.cl, embedded at build
 * time) form one program per device, built on first use and cached on
 * disk; cl_kernel objects are per queue, because clSetKernelArg is not
 * thread safe: a queue's kernels are used by its own thread (its work
 * items) only, or by another thread while no item of the queue runs.
 */
#ifndef DEV_OCL_H
#define DEV_OCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120 /* the OpenCL 1.2 API: any 1.2+ driver */
#endif

#include <CL/cl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/dev.h"
#include "devices/dev_int.h"

/* One allocation: host address range [base, base + span) reserved, the
 * first n bytes of it backed by mem (max(n, 1) bytes). */
struct dev_ocl_alloc {
	uintptr_t base; /* the fake address dev_alloc returned (page aligned) */
	size_t n;	/* bytes asked for (0 allowed) */
	size_t span;	/* bytes reserved: n + 1 rounded up to pages */
	cl_mem mem;	/* the device buffer */
};

/* A device's state (struct dev's impl). */
struct dev_ocl {
	cl_platform_id platform;
	cl_device_id device;
	cl_context ctx;
	cl_command_queue copy_q;      /* in-order, for dev_copy (blocking calls) */
	char driver[DEV_NAME_MAX];    /* CL_DRIVER_VERSION (the cache key has it) */
	char platform_name[DEV_NAME_MAX]; /* CL_PLATFORM_NAME (likewise) */
	pthread_mutex_t mem_mu;	      /* guards allocs, n_allocs, cap_allocs */
	struct dev_ocl_alloc *allocs; /* [n_allocs] sorted by base */
	size_t n_allocs, cap_allocs;
	pthread_mutex_t prog_mu; /* guards prog, prog_cached */
	cl_program prog;	 /* built program; NULL until first use */
	bool prog_cached;	 /* prog came from the on-disk cache */
};

/* A queue's kernel, by name (its queue state holds an array of them). */
struct dev_ocl_kernel {
	char name[64];
	cl_kernel k;
};

/* A queue's state (dev__queue_impl). */
struct dev_ocl_queue {
	cl_command_queue cq;		/* in-order */
	struct dev_ocl_kernel *kernels; /* [n_kernels], made on first use */
	int n_kernels, cap_kernels;
};

/* dev__ocl_context / dev__ocl_device - d's cl_context and cl_device_id
 * (d an opencl device). Borrowed: valid until dev_close. Inline: the files
 * using them are the ones dev_ocl.c's back-end table refers to, and a call
 * back into dev_ocl.c would be a cycle (check-src's call-cycle). */
static inline cl_context dev__ocl_context(const struct dev *d)
{
	return ((const struct dev_ocl *)d->impl)->ctx;
}

static inline cl_device_id dev__ocl_device(const struct dev *d)
{
	return ((const struct dev_ocl *)d->impl)->device;
}

/* dev__ocl_queue - q's in-order cl_command_queue (q on an opencl device).
 * Borrowed: valid until dev_queue_destroy. Work enqueued on it by q's
 * items runs in order with dev_upload/dev_download on q. */
static inline cl_command_queue dev__ocl_queue(const struct dev_queue *q)
{
	return ((const struct dev_ocl_queue *)dev__queue_impl(q))->cq;
}

/* dev__ocl_resolve - the buffer and byte offset of device address addr,
 * which with the n bytes after it must lie inside one allocation of d
 * (n == 0: addr itself inside it; the end of a non-empty allocation is
 * not). *mem is borrowed: valid until dev_free of that allocation.
 * Returns 0, or -ST_INVAL (*mem NULL, *off 0). Any thread. */
int dev__ocl_resolve(struct dev *d, const void *addr, size_t n, cl_mem *mem, size_t *off);

/* dev__ocl_kernel - q's kernel `name` (a __kernel function of
 * kernels/opencl/ *.cl), creating it on first use, and building d's
 * program first if no one has (dev__ocl_program). *out is borrowed, owned
 * by q until dev_queue_destroy; use it on q's thread only (see above).
 * Returns 0, -ST_NOTFOUND (no such kernel), -ST_DEVICE (the program did
 * not build: err has the build log's start), -ST_NOMEM; err may be NULL
 * when errlen is 0. */
int dev__ocl_kernel(struct dev_queue *q, const char *name, cl_kernel *out, char *err,
		    size_t errlen);

/* dev__ocl_program - d's program, built once (under prog_mu) from the
 * embedded sources, or loaded from the on-disk cache: the directory
 * $INFERD_CACHE_DIR, else $XDG_CACHE_HOME/inferd/opencl, else
 * $HOME/.cache/inferd/opencl; one file per key, the sha256 of the
 * sources, device name, platform name, driver version and build options,
 * written to a temporary file and renamed; an entry that fails its
 * checksum or does not load is rebuilt from source and rewritten. A cache
 * that cannot be written is skipped. *out borrowed until dev_close.
 * Returns 0, -ST_DEVICE (build failed: err has the log's start),
 * -ST_NOMEM. Any thread. */
int dev__ocl_program(struct dev *d, cl_program *out, char *err, size_t errlen);

/* dev__ocl_program_cached - whether d's program came from the disk cache
 * (false before dev__ocl_program succeeded). For the tests. */
bool dev__ocl_program_cached(struct dev *d);

/* dev__ocl_kernels_free - release the kernels dev__ocl_kernel made for a
 * queue (kernels[n], then the array). dev_ocl.c's queue_close calls it. */
void dev__ocl_kernels_free(struct dev_ocl_kernel *kernels, int n);

/* The memory calls of dev_backend (dev_ocl_mem.c); mem_fini frees every
 * allocation left (dev_close). */
void *dev__ocl_alloc(struct dev *d, size_t n);
void dev__ocl_free(struct dev *d, void *p);
void dev__ocl_copy(struct dev *d, void *dst, const void *src, size_t n);
int dev__ocl_upload(struct dev_queue *q, void *dst, const void *src, size_t n);
int dev__ocl_download(struct dev_queue *q, void *dst, const void *src, size_t n);
void dev__ocl_mem_fini(struct dev_ocl *o);

/* The weights and products of struct dev_ops (dev_ocl_mat.c). */
int dev__ocl_mat_create(struct dev_mat *m, const void *host, char *err, size_t errlen);
void dev__ocl_mat_destroy(struct dev_mat *m);
int dev__ocl_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
		    const float *b, float *y);
int dev__ocl_conv1d(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
		    size_t stride, size_t pad, const float *x, size_t t_in, const float *b,
		    float *y);

#endif /* DEV_OCL_H */
