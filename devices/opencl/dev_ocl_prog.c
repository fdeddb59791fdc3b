/* dev_ocl_prog.c - OpenCL programs and kernels of the `opencl` back end.
 *
 * The OpenCL C sources under kernels/opencl/ are concatenated and embedded
 * at build time (devices/meson.build, scripts/embed-file) as
 * dev__ocl_cl_src: one program per device, built the first time a kernel
 * is asked for. Building from source can take a second or more (PoCL runs
 * LLVM), so the device's binary is cached on disk (dev_ocl.h says where
 * and under which key). A cache file is
 *
 *   "INFDOCL1"  magic, 8 bytes
 *   u64         payload bytes (host order: the cache is this machine's)
 *   sha256      of the payload, 32 bytes
 *   payload     what CL_PROGRAM_BINARIES gave for the device
 *
 * so a torn or corrupted file is caught before the driver sees it; one the
 * driver will not load is rebuilt from source as well.
 */
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"

/* kernels/opencl/ *.cl, concatenated (generated: dev_ocl_cl_src.c) */
extern const char dev__ocl_cl_src[];
extern const size_t dev__ocl_cl_src_len;

/* Divisions and square roots correctly rounded, as on the host: the
 * quantization of x in dev_linear_xq.cl divides as kernels/ref/quant.c
 * does, and must give its bits. */
#define OCL_BUILD_OPTS "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt"
#define OCL_MAGIC "INFDOCL1"
#define OCL_HDR_BYTES (8 + 8 + SHA256_DIGEST_SIZE)
#define OCL_CACHE_MAX ((size_t)256 << 20) /* bytes: a larger file is not read */
#define OCL_PATH_MAX 4096

/* The cache directory into buf[len]; -1 when there is none to name. */
static int ocl_cache_dir(char *buf, size_t len)
{
	const char *e = getenv("INFERD_CACHE_DIR");
	int w;
	if (e && *e)
		w = snprintf(buf, len, "%s", e);
	else if ((e = getenv("XDG_CACHE_HOME")) && *e)
		w = snprintf(buf, len, "%s/inferd/opencl", e);
	else if ((e = getenv("HOME")) && *e)
		w = snprintf(buf, len, "%s/.cache/inferd/opencl", e);
	else
		return -1;
	return w > 0 && (size_t)w < len ? 0 : -1;
}

/* mkdir -p path (a copy is cut at each '/'). */
static int ocl_mkdirs(const char *path)
{
	char p[OCL_PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0755) && errno != EEXIST ? -1 : 0;
}

/* The cache key of d's program: 64 hex digits and a NUL. */
static void ocl_cache_key(const struct dev *d, char hex[2 * SHA256_DIGEST_SIZE + 1])
{
	const struct dev_ocl *o = d->impl;
	const char *parts[] = {d->caps.model, o->platform_name, o->driver, OCL_BUILD_OPTS};
	struct sha256_ctx c;
	uint8_t h[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, dev__ocl_cl_src_len + 1, (const uint8_t *)dev__ocl_cl_src);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		sha256_update(&c, strlen(parts[i]) + 1, (const uint8_t *)parts[i]);
	sha256_digest(&c, SHA256_DIGEST_SIZE, h);
	for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

/* n bytes from fd into buf; -1 on a short read or an error. */
static int ocl_read_all(int fd, void *buf, size_t n)
{
	for (size_t at = 0; at < n;) {
		ssize_t r = read(fd, (char *)buf + at, n - at);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		at += (size_t)r;
	}
	return 0;
}

/* The payload of cache file path, checked against its header: new
 * (mem_free) into *bin and *len, or -1. */
static int ocl_cache_load(const char *path, uint8_t **bin, size_t *len)
{
	*bin = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	uint8_t *buf = NULL, h[SHA256_DIGEST_SIZE];
	uint64_t n = 0;
	int rc = -1;
	if (fstat(fd, &st) || st.st_size < OCL_HDR_BYTES || (size_t)st.st_size > OCL_CACHE_MAX)
		goto out_close;
	buf = mem_alloc((size_t)st.st_size);
	if (!buf || ocl_read_all(fd, buf, (size_t)st.st_size))
		goto out_close;
	memcpy(&n, buf + 8, sizeof(n));
	if (memcmp(buf, OCL_MAGIC, 8) || n != (uint64_t)st.st_size - OCL_HDR_BYTES)
		goto out_close;
	struct sha256_ctx c;
	sha256_init(&c);
	sha256_update(&c, (size_t)n, buf + OCL_HDR_BYTES);
	sha256_digest(&c, SHA256_DIGEST_SIZE, h);
	if (memcmp(h, buf + 16, SHA256_DIGEST_SIZE))
		goto out_close;
	memmove(buf, buf + OCL_HDR_BYTES, (size_t)n);
	*bin = buf;
	*len = (size_t)n;
	buf = NULL;
	rc = 0;
out_close:
	mem_free(buf);
	close(fd);
	return rc;
}

/* Write bin[len] as cache file dir/key.bin: a temporary file in dir,
 * renamed over it. Failures leave no file behind and are not reported. */
static void ocl_cache_store(const char *dir, const char *key, const uint8_t *bin, size_t len)
{
	char tmp[OCL_PATH_MAX], path[OCL_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.bin", dir, key);
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, key) >= (int)sizeof(tmp) ||
	    ocl_mkdirs(dir))
		return;
	int fd = mkstemp(tmp);
	if (fd < 0)
		return;
	uint8_t hdr[OCL_HDR_BYTES];
	uint64_t n = len;
	struct sha256_ctx c;
	memcpy(hdr, OCL_MAGIC, 8);
	memcpy(hdr + 8, &n, sizeof(n));
	sha256_init(&c);
	sha256_update(&c, len, bin);
	sha256_digest(&c, SHA256_DIGEST_SIZE, hdr + 16);
	bool ok = write(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr) &&
		  write(fd, bin, len) == (ssize_t)len;
	ok = !close(fd) && ok;
	if (!ok || rename(tmp, path))
		unlink(tmp);
}

/* The start of the build log of prog into err (one line: newlines become
 * spaces). */
static void ocl_build_log(struct dev *d, cl_program prog, cl_int e, char *err, size_t errlen)
{
	struct dev_ocl *o = d->impl;
	char log[1024] = "";
	size_t sz = 0;
	if (clGetProgramBuildInfo(prog, o->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &sz) ==
		    CL_SUCCESS &&
	    sz <= sizeof(log))
		clGetProgramBuildInfo(prog, o->device, CL_PROGRAM_BUILD_LOG, sz, log, NULL);
	log[sizeof(log) - 1] = '\0';
	for (char *s = log; *s; s++)
		if (*s == '\n' || *s == '\r')
			*s = ' ';
	st_errf(0, err, errlen, "%s: the OpenCL program did not build (error %d): %s",
		d->caps.name, (int)e, *log ? log : "(no build log)");
}

/* A program of d from bin[len] (a cache entry), built; NULL if the driver
 * refuses it. */
static cl_program ocl_from_binary(struct dev_ocl *o, const uint8_t *bin, size_t len)
{
	cl_int e, status;
	cl_program prog =
		clCreateProgramWithBinary(o->ctx, 1, &o->device, &len, &bin, &status, &e);
	if (e != CL_SUCCESS || status != CL_SUCCESS)
		goto out_release;
	if (clBuildProgram(prog, 1, &o->device, OCL_BUILD_OPTS, NULL, NULL) != CL_SUCCESS)
		goto out_release;
	return prog;
out_release:
	if (prog)
		clReleaseProgram(prog);
	return NULL;
}

/* d's program from the embedded source, into *out. */
static int ocl_from_source(struct dev *d, cl_program *out, char *err, size_t errlen)
{
	struct dev_ocl *o = d->impl;
	const char *src = dev__ocl_cl_src;
	size_t len = dev__ocl_cl_src_len;
	cl_int e;
	*out = clCreateProgramWithSource(o->ctx, 1, &src, &len, &e);
	if (e != CL_SUCCESS)
		return st_errf(-ST_DEVICE, err, errlen, "%s: cannot create the OpenCL program (error %d)",
			       d->caps.name, (int)e);
	e = clBuildProgram(*out, 1, &o->device, OCL_BUILD_OPTS, NULL, NULL);
	if (e != CL_SUCCESS) {
		ocl_build_log(d, *out, e, err, errlen);
		clReleaseProgram(*out);
		*out = NULL;
		return -ST_DEVICE;
	}
	return 0;
}

/* The device binary of prog (one device): new (mem_free), or NULL. */
static uint8_t *ocl_binary(cl_program prog, size_t *len)
{
	size_t n = 0;
	if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof(n), &n, NULL) != CL_SUCCESS ||
	    n == 0)
		return NULL;
	uint8_t *bin = mem_alloc(n);
	if (bin && clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof(bin), &bin, NULL) !=
			   CL_SUCCESS) {
		mem_free(bin);
		return NULL;
	}
	*len = n;
	return bin;
}

/* o->prog from the cache, else from source (then cached). Under prog_mu. */
static int ocl_program_load(struct dev *d, char *err, size_t errlen)
{
	struct dev_ocl *o = d->impl;
	char dir[OCL_PATH_MAX - 128], path[OCL_PATH_MAX], key[2 * SHA256_DIGEST_SIZE + 1];
	bool cache = !ocl_cache_dir(dir, sizeof(dir));
	uint8_t *bin = NULL;
	size_t len = 0;
	ocl_cache_key(d, key);
	if (cache)
		snprintf(path, sizeof(path), "%s/%s.bin", dir, key);
	if (cache && !ocl_cache_load(path, &bin, &len)) {
		o->prog = ocl_from_binary(o, bin, len);
		mem_free(bin);
		bin = NULL;
		o->prog_cached = o->prog != NULL;
		if (o->prog)
			return 0;
	}
	int rc = ocl_from_source(d, &o->prog, err, errlen);
	if (rc)
		return rc;
	if (cache && (bin = ocl_binary(o->prog, &len)))
		ocl_cache_store(dir, key, bin, len);
	mem_free(bin);
	return 0;
}

int dev__ocl_program(struct dev *d, cl_program *out, char *err, size_t errlen)
{
	struct dev_ocl *o = d->impl;
	pthread_mutex_lock(&o->prog_mu);
	int rc = o->prog ? 0 : ocl_program_load(d, err, errlen);
	*out = o->prog;
	pthread_mutex_unlock(&o->prog_mu);
	return rc;
}

bool dev__ocl_program_cached(struct dev *d)
{
	struct dev_ocl *o = d->impl;
	pthread_mutex_lock(&o->prog_mu);
	bool cached = o->prog_cached;
	pthread_mutex_unlock(&o->prog_mu);
	return cached;
}

/* Room for one more kernel in oq's array. */
static int ocl_kernels_grow(struct dev_ocl_queue *oq)
{
	if (oq->n_kernels < oq->cap_kernels)
		return 0;
	int cap = oq->cap_kernels ? 2 * oq->cap_kernels : 8;
	struct dev_ocl_kernel *k = mem_realloc(oq->kernels, (size_t)cap * sizeof(*k));
	if (!k)
		return -ST_NOMEM;
	oq->kernels = k;
	oq->cap_kernels = cap;
	return 0;
}

int dev__ocl_kernel(struct dev_queue *q, const char *name, cl_kernel *out, char *err,
		    size_t errlen)
{
	struct dev_ocl_queue *oq = dev__queue_impl(q);
	struct dev *d = dev_queue_device(q);
	*out = NULL;
	for (int i = 0; i < oq->n_kernels; i++) {
		if (!strcmp(oq->kernels[i].name, name)) {
			*out = oq->kernels[i].k;
			return 0;
		}
	}
	if (strlen(name) >= sizeof(oq->kernels[0].name))
		return st_errf(-ST_NOTFOUND, err, errlen, "%s: no OpenCL kernel \"%s\"",
			       d->caps.name, name);
	cl_program prog;
	int rc = dev__ocl_program(d, &prog, err, errlen);
	if (!rc && ocl_kernels_grow(oq))
		rc = st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", d->caps.name);
	if (rc)
		return rc;
	cl_int e;
	cl_kernel k = clCreateKernel(prog, name, &e);
	if (e != CL_SUCCESS)
		return st_errf(e == CL_INVALID_KERNEL_NAME ? -ST_NOTFOUND : -ST_DEVICE, err, errlen,
			       "%s: no OpenCL kernel \"%s\" (error %d)", d->caps.name, name, (int)e);
	struct dev_ocl_kernel *slot = &oq->kernels[oq->n_kernels++];
	snprintf(slot->name, sizeof(slot->name), "%s", name);
	slot->k = k;
	*out = k;
	return 0;
}

void dev__ocl_kernels_free(struct dev_ocl_kernel *kernels, int n)
{
	for (int i = 0; i < n; i++)
		clReleaseKernel(kernels[i].k);
	mem_free(kernels);
}
