/* test_ocl.c - the `opencl` back end of dev.h (devices/opencl/dev_ocl*.c) on
 * whatever OpenCL device this machine has (PoCL's CPU device on a machine
 * without a GPU: scripts/install-deps installs pocl-opencl-icd): specs
 * and their errors, caps, fake device addresses and their resolution,
 * transfers at offsets, dev_copy in every direction, a kernel launched on
 * a queue, the on-disk program cache (written, used, a corrupt entry
 * rebuilt), thread counts and dev_list.
 *
 * inferd's program cache goes to a temporary directory (INFERD_CACHE_DIR,
 * set by the group setup), never ~/.cache/inferd (PoCL keeps its own
 * kernel cache, in ~/.cache/pocl unless POCL_CACHE_DIR says). cmocka's
 * assertions longjmp, so they run on the test's thread only: the work
 * item that launches a kernel records what it saw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"

#define ERR_LEN 512

static char cache_dir[256];

/* The files of dir whose names end in ".bin", the last one's path into
 * path[len]. */
static int cache_files(const char *dir, char *path, size_t len)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return 0;
	int n = 0;
	for (struct dirent *e; (e = readdir(dp));) {
		size_t l = strlen(e->d_name);
		if (l > 4 && !strcmp(e->d_name + l - 4, ".bin")) {
			snprintf(path, len, "%s/%s", dir, e->d_name);
			n++;
		}
	}
	closedir(dp);
	return n;
}

/* Remove every file of dir. */
static void cache_clear(const char *dir)
{
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	for (struct dirent *e; (e = readdir(dp));) {
		char p[512];
		if (e->d_name[0] == '.' && (!e->d_name[1] || !strcmp(e->d_name, "..")))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(dp);
}

static int group_setup(void **state)
{
	(void)state;
	snprintf(cache_dir, sizeof(cache_dir), "%s/inferd-test-ocl-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(cache_dir))
		return -1;
	return setenv("INFERD_CACHE_DIR", cache_dir, 1);
}

static int group_teardown(void **state)
{
	(void)state;
	cache_clear(cache_dir);
	rmdir(cache_dir);
	return 0;
}

static struct dev *open_ok(const char *spec)
{
	struct dev *d = NULL;
	char err[ERR_LEN];
	int rc = dev_open(spec, &d, err, sizeof(err));
	if (rc)
		print_error("dev_open(%s): %s\n", spec, err);
	assert_int_equal(rc, 0);
	assert_non_null(d);
	assert_string_equal(err, "");
	return d;
}

/* ---- specs and caps ---------------------------------------------- */

static void check_caps(const struct dev *d)
{
	const struct dev_caps *c = dev_caps(d);
	char name[256] = "";
	assert_int_equal(c->kind, DEV_KIND_OPENCL);
	assert_string_equal(c->name, "opencl:0.0");
	assert_string_equal(c->simd, "opencl");
	clGetDeviceInfo(dev__ocl_device(d), CL_DEVICE_NAME, sizeof(name), name, NULL);
	assert_true(name[0]);
	assert_string_equal(c->model, name);
	cl_ulong mem = 0;
	cl_uint cu = 0;
	clGetDeviceInfo(dev__ocl_device(d), CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL);
	clGetDeviceInfo(dev__ocl_device(d), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL);
	assert_true(mem > 0);
	assert_int_equal(c->mem_bytes, mem);
	assert_true(cu > 0);
	assert_int_equal(c->compute_units, (int)cu);
	assert_int_equal(c->n_cores, (int)cu);
	int n;
	assert_null(dev_cpu_ids(d, &n));
	assert_int_equal(n, 0);
	assert_non_null(dev__ocl_context(d));
}

static void test_open_specs(void **state)
{
	(void)state;
	const char *specs[] = {"opencl", "opencl:0", "opencl:0.0"};
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct dev *d = open_ok(specs[i]);
		check_caps(d);
		dev_close(d);
	}
}

static void open_fails(const char *spec, int want, const char *needle)
{
	struct dev *d = (struct dev *)1;
	char err[ERR_LEN];
	int rc = dev_open(spec, &d, err, sizeof(err));
	if (rc != want || !strstr(err, needle))
		print_error("dev_open(%s): %d %s\n", spec, rc, err);
	assert_int_equal(rc, want);
	assert_null(d);
	assert_non_null(strstr(err, needle));
	assert_null(strchr(err, '\n')); /* one line */
}

static void test_bad_specs(void **state)
{
	(void)state;
	const char *bad[] = {"opencl:",	  "opencl:x",	"opencl:0.",	  "opencl:-1",
			     "opencl:.0", "opencl:0.x", "opencl:0.0.0", "opencl: 0",
			     "opencl:0 ", "opencl:+1",	"opencl:0,1",	  "opencl:123456789012"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		open_fails(bad[i], -ST_INVAL, "expected opencl, opencl:N or opencl:P.D");
	struct dev *d = open_ok("opencl:0.0");
	char present[300];
	snprintf(present, sizeof(present), "(present: opencl:0.0 \"%s\"", dev_caps(d)->model);
	dev_close(d);
	const char *absent[] = {"opencl:99", "opencl:0.9", "opencl:9.0", "opencl:9999"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
		open_fails(absent[i], -ST_NOTFOUND, "no such OpenCL device");
		open_fails(absent[i], -ST_NOTFOUND, present);
	}
	open_fails("opencl:99", -ST_NOTFOUND, "device \"opencl:99\": no such OpenCL device");
}

/* ---- memory ------------------------------------------------------ */

static void check_resolve(struct dev *d, const char *p, size_t n)
{
	cl_mem m;
	size_t off;
	assert_int_equal(dev__ocl_resolve(d, p, n, &m, &off), 0);
	assert_non_null(m);
	assert_int_equal(off, 0);
	if (n) {
		assert_int_equal(dev__ocl_resolve(d, p + n - 1, 1, &m, &off), 0);
		assert_int_equal(off, n - 1);
		if (n > 1) {
			assert_int_equal(dev__ocl_resolve(d, p + 1, n - 1, &m, &off), 0);
			assert_int_equal(off, 1);
		}
		/* one past: at the end, straddling it */
		assert_int_equal(dev__ocl_resolve(d, p + n, 1, &m, &off), -ST_INVAL);
		assert_null(m);
		assert_int_equal(dev__ocl_resolve(d, p + n, 0, &m, &off), -ST_INVAL);
		assert_int_equal(dev__ocl_resolve(d, p, n + 1, &m, &off), -ST_INVAL);
		assert_int_equal(dev__ocl_resolve(d, p + n - 1, 2, &m, &off), -ST_INVAL);
	} else {
		assert_int_equal(dev__ocl_resolve(d, p, 1, &m, &off), -ST_INVAL);
		assert_int_equal(dev__ocl_resolve(d, p + 1, 0, &m, &off), -ST_INVAL);
	}
	assert_int_equal(dev__ocl_resolve(d, p - 1, 1, &m, &off), -ST_INVAL);
}

static void test_alloc(void **state)
{
	(void)state;
	struct dev *d = open_ok("opencl");
	const size_t sizes[] = {0, 0, 1, 7, 4095, 4096, 4097, 1 << 20};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	char *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = dev_alloc(d, sizes[i]);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % 64, 0);
		for (int j = 0; j < i; j++)
			assert_true(p[i] != p[j]);
	}
	for (int i = 0; i < N; i++)
		check_resolve(d, p[i], sizes[i]);
	int host = 0;
	cl_mem m;
	size_t off;
	assert_int_equal(dev__ocl_resolve(d, &host, sizeof(host), &m, &off), -ST_INVAL);
	dev_free(d, p[3]);
	assert_int_equal(dev__ocl_resolve(d, p[3], 1, &m, &off), -ST_INVAL);
	dev_free(d, NULL);
	for (int i = 0; i < N; i++)
		if (i != 3)
			dev_free(d, p[i]);
	dev_close(d);
}

static struct dev_queue *queue_ok(struct dev *d)
{
	struct dev_queue *q = NULL;
	char err[ERR_LEN];
	int rc = dev_queue_create(d, 1, &q, err, sizeof(err));
	if (rc)
		print_error("dev_queue_create: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(dev__ocl_queue(q));
	return q;
}

static void test_upload_download(void **state)
{
	(void)state;
	struct dev *d = open_ok("opencl");
	struct dev_queue *q = queue_ok(d);
	enum { N = 4096 };
	unsigned char *buf = dev_alloc(d, N), zero[N] = {0}, in[300], out[N];
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + 1);
	assert_int_equal(dev_upload(q, buf, zero, N), 0);
	assert_int_equal(dev_upload(q, buf + 123, in, sizeof(in)), 0);
	assert_int_equal(dev_upload(q, buf + N - 1, in, 1), 0); /* the last byte */
	memset(out, 0xee, sizeof(out));
	assert_int_equal(dev_download(q, out, buf + 123, sizeof(in)), 0);
	assert_memory_equal(out, in, sizeof(in));
	assert_int_equal(dev_download(q, out, buf, N), 0);
	for (size_t i = 0; i < N; i++) {
		unsigned char want = i >= 123 && i < 123 + sizeof(in) ? in[i - 123] : 0;
		assert_int_equal(out[i], i == N - 1 ? in[0] : want);
	}
	/* out of the allocation: refused, nothing written */
	assert_int_equal(dev_upload(q, buf + N - 1, in, 2), -ST_INVAL);
	assert_int_equal(dev_download(q, out, buf + N, 1), -ST_INVAL);
	assert_int_equal(dev_upload(q, buf, in, 0), 0);
	dev_queue_destroy(q);
	dev_free(d, buf);
	dev_close(d);
}

static void test_copy(void **state)
{
	(void)state;
	struct dev *d = open_ok("opencl");
	enum { N = 1000 };
	char *a = dev_alloc(d, N), *b = dev_alloc(d, 2 * N);
	char in[N], out[N], host[N];
	for (int i = 0; i < N; i++)
		in[i] = (char)(i * 13 + 5);
	dev_copy(d, a, in, N);		/* host -> device */
	dev_copy(d, b + N, a, N);	/* device -> device, at an offset */
	dev_copy(d, b + 10, b + N, 100);/* inside one allocation */
	dev_copy(d, out, b + N, N);	/* device -> host */
	assert_memory_equal(out, in, N);
	dev_copy(d, out, b + 10, 100);
	assert_memory_equal(out, in, 100);
	dev_copy(d, host, in, N); /* host -> host */
	assert_memory_equal(host, in, N);
	dev_copy(d, a, in, 0);
	dev_free(d, a);
	dev_free(d, b);
	dev_close(d);
}

/* ---- kernels ----------------------------------------------------- */

struct fill_item {
	struct dev_queue *q;
	float *y; /* device address */
	float v;
	unsigned n;
	int rc;			   /* first failure: dev__ocl_kernel's, else -1000 - CL error */
	char err[ERR_LEN];
};

static void fill_run(void *arg, struct dev_pool *pool)
{
	(void)pool;
	struct fill_item *it = arg;
	struct dev *d = dev_queue_device(it->q);
	cl_kernel k;
	cl_mem m;
	size_t off;
	it->rc = dev__ocl_kernel(it->q, "fill_f32", &k, it->err, sizeof(it->err));
	if (it->rc)
		return;
	it->rc = dev__ocl_resolve(d, it->y, it->n * sizeof(float), &m, &off);
	if (it->rc)
		return;
	cl_ulong off64 = off;
	cl_uint n = it->n;
	cl_int e = clSetKernelArg(k, 0, sizeof(m), &m);
	e = e ? e : clSetKernelArg(k, 1, sizeof(off64), &off64);
	e = e ? e : clSetKernelArg(k, 2, sizeof(it->v), &it->v);
	e = e ? e : clSetKernelArg(k, 3, sizeof(n), &n);
	size_t global = (n + 63) / 64 * 64;
	e = e ? e : clEnqueueNDRangeKernel(dev__ocl_queue(it->q), k, 1, NULL, &global, NULL, 0,
					  NULL, NULL);
	it->rc = e ? -1000 + e : 0;
}

/* fill y[0..n) with v through a work item on q. */
static void fill(struct dev_queue *q, float *y, float v, unsigned n)
{
	struct fill_item it = {.q = q, .y = y, .v = v, .n = n};
	assert_int_equal(dev_queue_submit(q, fill_run, &it), 0);
	assert_int_equal(dev_queue_sync(q), 0);
	if (it.rc)
		print_error("fill: %d %s\n", it.rc, it.err);
	assert_int_equal(it.rc, 0);
}

/* Fill the middle of an allocation and check the whole of it. */
static void check_fill(struct dev *d)
{
	struct dev_queue *q = queue_ok(d);
	enum { N = 1003 };
	float *y = dev_alloc(d, N * sizeof(float)), out[N];
	assert_non_null(y);
	fill(q, y, 0.0f, N);
	fill(q, y + 5, 2.5f, N - 10);
	assert_int_equal(dev_download(q, out, y, sizeof(out)), 0);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == (i >= 5 && i < N - 5 ? 2.5f : 0.0f));
	cl_kernel k;
	char err[ERR_LEN];
	assert_int_equal(dev__ocl_kernel(q, "no_such_kernel", &k, err, sizeof(err)), -ST_NOTFOUND);
	assert_null(k);
	assert_non_null(strstr(err, "no_such_kernel"));
	dev_queue_destroy(q);
	dev_free(d, y);
}

static void test_fill_kernel(void **state)
{
	(void)state;
	struct dev *d = open_ok("opencl");
	check_fill(d);
	/* a second queue gets its own kernel; the program is built once */
	check_fill(d);
	dev_close(d);
}

/* Open the device and build its program; whether it came from the cache. */
static bool build_cached(void)
{
	struct dev *d = open_ok("opencl");
	cl_program prog;
	char err[ERR_LEN];
	assert_false(dev__ocl_program_cached(d));
	int rc = dev__ocl_program(d, &prog, err, sizeof(err));
	if (rc)
		print_error("dev__ocl_program: %s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(prog);
	bool cached = dev__ocl_program_cached(d);
	check_fill(d);
	dev_close(d);
	return cached;
}

/* Replace cache file path by a well-formed entry (dev_ocl_prog.c's header,
 * a right checksum) whose payload no driver would load. */
static void cache_write_garbage(const char *path)
{
	uint8_t payload[64], hdr[8 + 8 + SHA256_DIGEST_SIZE];
	uint64_t n = sizeof(payload);
	struct sha256_ctx c;
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	memcpy(hdr, "INFDOCL1", 8);
	memcpy(hdr + 8, &n, sizeof(n));
	sha256_init(&c);
	sha256_update(&c, sizeof(payload), payload);
	sha256_digest(&c, SHA256_DIGEST_SIZE, hdr + 16);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(hdr, 1, sizeof(hdr), f), sizeof(hdr));
	assert_int_equal(fwrite(payload, 1, sizeof(payload), f), sizeof(payload));
	assert_int_equal(fclose(f), 0);
}

static void test_cache(void **state)
{
	(void)state;
	char path[600];
	cache_clear(cache_dir);
	assert_int_equal(cache_files(cache_dir, path, sizeof(path)), 0);
	assert_false(build_cached()); /* from source, then written */
	assert_int_equal(cache_files(cache_dir, path, sizeof(path)), 1);
	assert_true(build_cached()); /* from the file */
	/* corrupt a payload byte: rebuilt from source, rewritten */
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	FILE *f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, st.st_size / 2, SEEK_SET);
	int c = fgetc(f);
	fseek(f, st.st_size / 2, SEEK_SET);
	fputc(c ^ 0x5a, f);
	fclose(f);
	assert_false(build_cached());
	assert_true(build_cached());
	/* truncated, then empty */
	assert_int_equal(truncate(path, st.st_size / 3), 0);
	assert_false(build_cached());
	assert_int_equal(truncate(path, 0), 0);
	assert_false(build_cached());
	assert_true(build_cached());
	/* intact, but not a binary the driver loads */
	cache_write_garbage(path);
	assert_false(build_cached());
	assert_true(build_cached());
	assert_int_equal(cache_files(cache_dir, path, sizeof(path)), 1);
}

/* A cache directory that cannot be created: built from source, no error. */
static void test_cache_unwritable(void **state)
{
	(void)state;
	char file[300];
	snprintf(file, sizeof(file), "%s/not-a-dir", cache_dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	char sub[400];
	snprintf(sub, sizeof(sub), "%s/cache", file);
	assert_int_equal(setenv("INFERD_CACHE_DIR", sub, 1), 0);
	assert_false(build_cached());
	assert_false(build_cached());
	assert_int_equal(setenv("INFERD_CACHE_DIR", cache_dir, 1), 0);
	unlink(file);
}

/* ---- queues and the device list ------------------------------------ */

static void test_queue_threads(void **state)
{
	(void)state;
	struct dev *d = open_ok("opencl");
	struct dev_queue *q = NULL;
	char err[ERR_LEN];
	assert_int_equal(dev_queue_create(d, 2, &q, err, sizeof(err)), -ST_INVAL);
	assert_null(q);
	assert_non_null(strstr(err, "opencl:0.0"));
	assert_int_equal(dev_queue_create(d, 0, &q, err, sizeof(err)), -ST_INVAL);
	q = queue_ok(d);
	assert_int_equal(dev_queue_threads(q), 1);
	assert_ptr_equal(dev_queue_device(q), d);
	dev_queue_destroy(q);
	dev_close(d);
}

static void test_list(void **state)
{
	(void)state;
	struct dev_caps caps[64];
	int n = dev_list(caps, 64);
	assert_true(n >= 2);
	assert_int_equal(caps[0].kind, DEV_KIND_CPU);
	assert_true(!strncmp(caps[0].name, "cpu:", 4));
	int n_ocl = 0;
	for (int i = 1; i < n; i++) {
		if (caps[i].kind != DEV_KIND_OPENCL)
			continue;
		if (!n_ocl++) {
			assert_string_equal(caps[i].name, "opencl:0.0");
			struct dev *d = open_ok("opencl");
			assert_string_equal(caps[i].model, dev_caps(d)->model);
			assert_int_equal(caps[i].mem_bytes, dev_caps(d)->mem_bytes);
			assert_int_equal(caps[i].compute_units, dev_caps(d)->compute_units);
			assert_string_equal(caps[i].simd, "opencl");
			dev_close(d);
		}
	}
	assert_true(n_ocl >= 1);
	assert_int_equal(dev_list(caps, 1), 1); /* cpu only */
	assert_int_equal(dev_list(caps, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_specs),     cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_alloc),	       cmocka_unit_test(test_upload_download),
		cmocka_unit_test(test_copy),	       cmocka_unit_test(test_fill_kernel),
		cmocka_unit_test(test_cache),	       cmocka_unit_test(test_cache_unwritable),
		cmocka_unit_test(test_queue_threads), cmocka_unit_test(test_list),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
