/* dev_ocl.c - the `opencl` back end of dev.h: a device is one OpenCL
 * device (a GPU, or a CPU through PoCL), its memory the device's global
 * memory, a queue one in-order cl_command_queue driven by the queue's
 * host thread (dev_queue.c; threads is 1: the device computes).
 *
 * Specs: "opencl" (the first device), "opencl:N" (the Nth device,
 * counting over the platforms in the ICD loader's order), "opencl:P.D"
 * (platform P, device D); digits only. caps.name is the canonical
 * "opencl:P.D". The device list is read again at every dev_open and
 * dev_list: drivers may come and go, and nothing is kept between calls.
 *
 * Memory lives in dev_ocl_mem.c, programs and kernels in dev_ocl_prog.c;
 * dev_ocl.h says how they fit together.
 */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"

#define OCL_MAX_PLATFORMS 16 /* platforms looked at; the rest are ignored */
#define OCL_MAX_DEVICES 64   /* devices per platform looked at */
#define OCL_MAX_ID 9999	     /* largest number a spec may hold */

/* Every device of every platform, as the ICD loader reports them. */
struct ocl_all {
	cl_uint n_plat;
	cl_platform_id plat[OCL_MAX_PLATFORMS];
	cl_uint n_dev[OCL_MAX_PLATFORMS];			 /* devices of plat[p] */
	cl_device_id dev[OCL_MAX_PLATFORMS][OCL_MAX_DEVICES]; /* [p][n_dev[p]] */
};

/* Fill a; no platform (no ICD, or CL_PLATFORM_NOT_FOUND_KHR) is n_plat 0,
 * a platform whose devices cannot be listed has none. */
static void ocl_enumerate(struct ocl_all *a)
{
	cl_uint np = 0;
	a->n_plat = 0;
	if (clGetPlatformIDs(OCL_MAX_PLATFORMS, a->plat, &np) != CL_SUCCESS)
		return;
	a->n_plat = np < OCL_MAX_PLATFORMS ? np : OCL_MAX_PLATFORMS;
	for (cl_uint p = 0; p < a->n_plat; p++) {
		cl_uint nd = 0;
		if (clGetDeviceIDs(a->plat[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, a->dev[p],
				   &nd) != CL_SUCCESS)
			nd = 0;
		a->n_dev[p] = nd < OCL_MAX_DEVICES ? nd : OCL_MAX_DEVICES;
	}
}

/* A string property of a device or platform into buf[len] (truncated;
 * "" when the driver says nothing). */
static void ocl_info_str(cl_device_id dev, cl_platform_id plat, cl_uint param, char *buf,
			 size_t len)
{
	size_t sz = 0;
	buf[0] = '\0';
	cl_int e = dev ? clGetDeviceInfo(dev, param, 0, NULL, &sz)
		       : clGetPlatformInfo(plat, param, 0, NULL, &sz);
	char *tmp = e == CL_SUCCESS && sz ? mem_alloc(sz + 1) : NULL;
	if (!tmp)
		return;
	e = dev ? clGetDeviceInfo(dev, param, sz, tmp, NULL)
		: clGetPlatformInfo(plat, param, sz, tmp, NULL);
	tmp[sz] = '\0';
	if (e == CL_SUCCESS)
		snprintf(buf, len, "%s", tmp);
	mem_free(tmp);
}

/* The caps of device dev, device d of platform p. */
static void ocl_caps_fill(struct dev_caps *c, cl_device_id dev, cl_uint p, cl_uint d)
{
	*c = (struct dev_caps){.kind = DEV_KIND_OPENCL, .simd = "opencl"};
	snprintf(c->name, sizeof(c->name), "opencl:%u.%u", (unsigned)p, (unsigned)d);
	ocl_info_str(dev, NULL, CL_DEVICE_NAME, c->model, sizeof(c->model));
	cl_ulong mem = 0;
	cl_uint cu = 0;
	if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL) != CL_SUCCESS)
		mem = 0;
	if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL) != CL_SUCCESS)
		cu = 0;
	c->mem_bytes = mem;
	c->compute_units = c->n_cores = (int)cu;
}

/* A decimal number at *s (digits only, at most OCL_MAX_ID); *s moves past
 * it. -1 when there is none or it is too large. */
static long ocl_parse_num(const char **s)
{
	long v = 0;
	const char *p = *s;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > OCL_MAX_ID)
			return -1;
	}
	if (p == *s)
		return -1;
	*s = p;
	return v;
}

/* rest of "opencl:rest": NULL (first device: *plat -1, *idx 0), "N"
 * (*plat -1, *idx N) or "P.D". -ST_INVAL with err otherwise. */
static int ocl_spec_parse(const char *spec, const char *rest, long *plat, long *idx, char *err,
			  size_t errlen)
{
	*plat = -1;
	*idx = 0;
	if (!rest)
		return 0;
	const char *s = rest;
	long a = ocl_parse_num(&s), b = -1;
	if (a >= 0 && *s == '.') {
		s++;
		b = ocl_parse_num(&s);
		if (b < 0)
			a = -1;
	}
	if (a < 0 || *s != '\0')
		return st_errf(-ST_INVAL, err, errlen,
			       "bad device spec \"%s\": expected opencl, opencl:N or opencl:P.D"
			       " (decimal numbers 0..%d)",
			       spec, OCL_MAX_ID);
	if (b >= 0) {
		*plat = a;
		*idx = b;
	} else {
		*idx = a;
	}
	return 0;
}

/* The device a spec names: platform plat (-1: count over all) device idx. */
static bool ocl_find(const struct ocl_all *a, long plat, long idx, cl_uint *p, cl_uint *d)
{
	for (cl_uint i = 0; i < a->n_plat; i++) {
		if (plat >= 0 && (long)i != plat)
			continue;
		if (idx < (long)a->n_dev[i]) {
			*p = i;
			*d = (cl_uint)idx;
			return true;
		}
		idx -= a->n_dev[i];
	}
	return false;
}

/* -ST_NOTFOUND, err naming spec and what is present, on one line. */
static int ocl_not_found(const struct ocl_all *a, const char *spec, char *err, size_t errlen)
{
	if (a->n_plat == 0)
		return st_errf(-ST_NOTFOUND, err, errlen,
			       "device \"%s\": no OpenCL platform found (no ICD loaded: install"
			       " an OpenCL driver, e.g. pocl-opencl-icd)",
			       spec);
	char present[512] = "none";
	size_t at = 0;
	for (cl_uint p = 0; p < a->n_plat; p++) {
		for (cl_uint d = 0; d < a->n_dev[p] && at < sizeof(present); d++) {
			char model[DEV_NAME_MAX];
			ocl_info_str(a->dev[p][d], NULL, CL_DEVICE_NAME, model, sizeof(model));
			int w = snprintf(present + at, sizeof(present) - at, "%sopencl:%u.%u \"%s\"",
					 at ? ", " : "", (unsigned)p, (unsigned)d, model);
			at = w < 0 ? sizeof(present) : at + (size_t)w;
		}
	}
	return st_errf(-ST_NOTFOUND, err, errlen, "device \"%s\": no such OpenCL device (present: %s)",
		       spec, present);
}

/* d->impl for device dev of platform plat: a context and dev_copy's queue. */
static int ocl_impl_create(struct dev *d, cl_platform_id plat, cl_device_id dev, const char *spec,
			   char *err, size_t errlen)
{
	struct dev_ocl *o = mem_calloc(1, sizeof(*o));
	if (!o)
		return st_errf(-ST_NOMEM, err, errlen, "device \"%s\": out of memory", spec);
	o->platform = plat;
	o->device = dev;
	pthread_mutex_init(&o->mem_mu, NULL);
	pthread_mutex_init(&o->prog_mu, NULL);
	d->impl = o;
	cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
	cl_int e;
	o->ctx = clCreateContext(props, 1, &dev, NULL, NULL, &e);
	if (e == CL_SUCCESS)
		o->copy_q = clCreateCommandQueue(o->ctx, dev, 0, &e);
	if (e != CL_SUCCESS)
		return st_errf(-ST_DEVICE, err, errlen,
			       "device \"%s\": cannot create an OpenCL context and queue (error %d)",
			       spec, (int)e);
	ocl_info_str(dev, NULL, CL_DRIVER_VERSION, o->driver, sizeof(o->driver));
	ocl_info_str(NULL, plat, CL_PLATFORM_NAME, o->platform_name, sizeof(o->platform_name));
	return 0;
}

static void ocl_close(struct dev *d)
{
	struct dev_ocl *o = d->impl;
	if (!o)
		return;
	dev__ocl_mem_fini(o);
	if (o->prog)
		clReleaseProgram(o->prog);
	if (o->copy_q)
		clReleaseCommandQueue(o->copy_q);
	if (o->ctx)
		clReleaseContext(o->ctx);
	pthread_mutex_destroy(&o->prog_mu);
	pthread_mutex_destroy(&o->mem_mu);
	mem_free(o);
	d->impl = NULL;
}

static int ocl_open(struct dev *d, const char *spec, const char *rest, char *err, size_t errlen)
{
	long plat, idx;
	int rc = ocl_spec_parse(spec, rest, &plat, &idx, err, errlen);
	if (rc)
		return rc;
	struct ocl_all *a = mem_alloc(sizeof(*a));
	if (!a)
		return st_errf(-ST_NOMEM, err, errlen, "device \"%s\": out of memory", spec);
	ocl_enumerate(a);
	cl_uint p, i;
	if (!ocl_find(a, plat, idx, &p, &i)) {
		rc = ocl_not_found(a, spec, err, errlen);
		goto out_free;
	}
	rc = ocl_impl_create(d, a->plat[p], a->dev[p][i], spec, err, errlen);
	if (rc) {
		ocl_close(d);
		goto out_free;
	}
	ocl_caps_fill(&d->caps, a->dev[p][i], p, i);
	d->n_cpus = 0; /* its queue thread is not pinned */
out_free:
	mem_free(a);
	return rc;
}

static int ocl_list(struct dev_caps *out, int max)
{
	struct ocl_all *a = mem_alloc(sizeof(*a));
	if (!a)
		return 0;
	ocl_enumerate(a);
	int n = 0;
	for (cl_uint p = 0; p < a->n_plat; p++)
		for (cl_uint d = 0; d < a->n_dev[p] && n < max; d++)
			ocl_caps_fill(&out[n++], a->dev[p][d], p, d);
	mem_free(a);
	return n;
}

static int ocl_queue_open(struct dev_queue *q, char *err, size_t errlen)
{
	struct dev *d = dev_queue_device(q);
	struct dev_ocl *o = d->impl;
	struct dev_ocl_queue *oq = mem_calloc(1, sizeof(*oq));
	if (!oq)
		return st_errf(-ST_NOMEM, err, errlen, "queue on %s: out of memory", d->caps.name);
	cl_int e;
	oq->cq = clCreateCommandQueue(o->ctx, o->device, 0, &e);
	if (e != CL_SUCCESS) {
		mem_free(oq);
		return st_errf(-ST_DEVICE, err, errlen,
			       "queue on %s: cannot create an OpenCL command queue (error %d)",
			       d->caps.name, (int)e);
	}
	dev__queue_set_impl(q, oq);
	return 0;
}

static int ocl_queue_finish(struct dev_queue *q)
{
	struct dev_ocl_queue *oq = dev__queue_impl(q);
	return clFinish(oq->cq) == CL_SUCCESS ? 0 : -ST_DEVICE;
}

/* After the queue thread has stopped: the device's work first. */
static void ocl_queue_close(struct dev_queue *q)
{
	struct dev_ocl_queue *oq = dev__queue_impl(q);
	if (!oq)
		return;
	clFinish(oq->cq);
	dev__ocl_kernels_free(oq->kernels, oq->n_kernels);
	clReleaseCommandQueue(oq->cq);
	mem_free(oq);
	dev__queue_set_impl(q, NULL);
}

const struct dev_backend dev__ocl_backend = {
	.kind = "opencl",
	.open = ocl_open,
	.close = ocl_close,
	.alloc = dev__ocl_alloc,
	.free = dev__ocl_free,
	.copy = dev__ocl_copy,
	.upload = dev__ocl_upload,
	.download = dev__ocl_download,
	.queue_open = ocl_queue_open,
	.queue_close = ocl_queue_close,
	.queue_finish = ocl_queue_finish,
	.list = ocl_list,
	.ops = &dev__ocl_ops,
};
