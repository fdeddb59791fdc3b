/* test_common.c - the status enum names, the error-buffer helper, the monotonic
 * clock and the allocation wrapper's fault injection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/mem.h"
#include "common/st.h"

static void test_st_str(void **state)
{
	(void)state;
	assert_string_equal(st_str(ST_OK), "ST_OK");
	assert_string_equal(st_str(-ST_NOMEM), "ST_NOMEM");
	assert_string_equal(st_str(ST_CORRUPT), "ST_CORRUPT");
	assert_string_equal(st_str(ST_COUNT), "ST_UNKNOWN");
	assert_string_equal(st_str(-1000), "ST_UNKNOWN");
	for (int i = 0; i < ST_COUNT; i++)
		assert_true(strncmp(st_str(i), "ST_", 3) == 0);
}

static void test_st_errf(void **state)
{
	(void)state;
	char err[16];
	assert_int_equal(st_errf(-ST_CORRUPT, err, sizeof(err), "bad %s %d", "magic", 7),
			 -ST_CORRUPT);
	assert_string_equal(err, "bad magic 7");
	assert_int_equal(st_errf(0, err, sizeof(err), "%s", "a long message, truncated"), 0);
	assert_string_equal(err, "a long message,");
	/* no buffer: nothing written, rc still returned */
	assert_int_equal(st_errf(-ST_IO, NULL, 10, "x"), -ST_IO);
	err[0] = 'z';
	assert_int_equal(st_errf(-ST_IO, err, 0, "x"), -ST_IO);
	assert_int_equal(err[0], 'z');
}

/* verrf_via - a wrapper in the style of the readers' "LABEL: ..." helpers. */
__attribute__((format(printf, 5, 6)))
static int verrf_via(int rc, char *err, size_t errlen, const char *prefix, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	rc = st_verrf(rc, err, errlen, prefix, fmt, ap);
	va_end(ap);
	return rc;
}

static void test_st_verrf_prefix(void **state)
{
	(void)state;
	char err[32];
	assert_int_equal(verrf_via(-ST_INVAL, err, sizeof(err), "f.gguf", "at %d", 3), -ST_INVAL);
	assert_string_equal(err, "f.gguf: at 3");
	verrf_via(0, err, sizeof(err), "", "no prefix %s", "here");
	assert_string_equal(err, "no prefix here");
	verrf_via(0, err, sizeof(err), NULL, "none");
	assert_string_equal(err, "none");
	/* a prefix that does not fit: err holds the truncated prefix only */
	char small[6];
	verrf_via(0, small, sizeof(small), "longname", "msg");
	assert_string_equal(small, "longn");
	/* the message is cut to what is left after the prefix */
	verrf_via(0, small, sizeof(small), "ab", "cdefg");
	assert_string_equal(small, "ab: c");
	assert_int_equal(verrf_via(-ST_IO, NULL, 0, "p", "m"), -ST_IO);
}

static void test_st_now_ms(void **state)
{
	(void)state;
	double a = st_now_ms();
	struct timespec ts = { .tv_nsec = 2000000 };
	nanosleep(&ts, NULL);
	double b = st_now_ms();
	assert_true(a > 0.0);
	assert_true(b - a >= 1.5 && b - a < 10000.0);
}

/* mem_alloc_huge: 64-byte aligned, writable to its end, small blocks
 * apart from each other in a shared slab and a large one on its own;
 * freed by mem_free_huge in any order, a slab's space back once its
 * blocks are gone; counted by the fault injection. */
static void test_mem_alloc_huge(void **state)
{
	(void)state;
	size_t n = (5u << 20) + 123, small[3] = { 100, 3000, 1u << 20 };
	unsigned char *p = mem_alloc_huge(n), *q[3];
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 64, 0);
	memset(p, 0xab, n);
	for (int i = 0; i < 3; i++) {
		q[i] = mem_alloc_huge(small[i]);
		assert_non_null(q[i]);
		assert_int_equal((uintptr_t)q[i] % 64, 0);
		memset(q[i], 0x10 + i, small[i]);
	}
	for (int i = 0; i < 3; i++) /* none wrote over another */
		for (size_t j = 0; j < small[i]; j++)
			assert_int_equal(q[i][j], 0x10 + i);
	assert_int_equal(p[0], 0xab);
	assert_int_equal(p[n - 1], 0xab);
	mem_free_huge(q[1]);
	mem_free_huge(p);
	mem_free_huge(q[0]);
	mem_free_huge(q[2]);
	/* more than a slab holds, in blocks of 4 MiB (a slab's largest) */
	unsigned char *r[9];
	for (int i = 0; i < 9; i++) {
		r[i] = mem_alloc_huge(4u << 20);
		assert_non_null(r[i]);
		r[i][0] = (unsigned char)i;
		r[i][(4u << 20) - 1] = (unsigned char)i;
	}
	for (int i = 0; i < 9; i++) {
		assert_int_equal(r[i][0], i);
		assert_int_equal(r[i][(4u << 20) - 1], i);
		mem_free_huge(r[i]);
	}
	mem_free_huge(NULL);
	mem_fail_after(0);
	assert_null(mem_alloc_huge(n));
	assert_null(mem_alloc_huge(100));
	mem_fail_after(-1);
}

/* Under a sanitizer, malloc is the sanitizer's own: mallopt and
 * malloc_trim do not reach it, and the test below is not built. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_SANITIZED_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED_MALLOC 1
#endif
#if defined(__GLIBC__) && !defined(TEST_SANITIZED_MALLOC)
/* The resident set in bytes (/proc/self/statm's second field). */
static size_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* 64 MiB freed: mem_release_freed hands them back (RSS falls by at least
 * 48 MiB of them); glibc, as mem_keep_freed sets it, kept them until then.
 * Whichever allocator the build links (jemalloc by default, glibc's with
 * -Dallocator=libc); mem_stats_read sees the 64 MiB held, and what stayed
 * resident after the free as kept. */
static void test_mem_release_freed(void **state)
{
	(void)state;
	enum { N = 64, SZ = 1 << 20 };
	char *blocks[N];
	struct mem_stats st0, st1;
	mem_keep_freed();
	mem_stats_read(&st0);
	size_t base = rss_bytes();
	for (int i = 0; i < N; i++) {
		blocks[i] = mem_alloc(SZ);
		assert_non_null(blocks[i]);
		memset(blocks[i], i + 1, SZ);
	}
	size_t peak = rss_bytes();
	mem_stats_read(&st1);
	assert_true(strcmp(st1.allocator, "jemalloc") == 0 || strcmp(st1.allocator, "glibc") == 0);
	assert_true(st1.allocated + SZ >= st0.allocated + (size_t)N * SZ); /* less what others freed */
	for (int i = N - 1; i >= 0; i--)
		mem_free(blocks[i]);
	size_t kept = rss_bytes();
	struct mem_stats st2;
	mem_stats_read(&st2); /* what stayed resident is what the allocator says it kept */
	assert_true(st2.kept + (16u << 20) >= (kept > base ? kept - base : 0));
	/* glibc, as mem_keep_freed sets it, keeps them all; jemalloc's decay
	 * already hands back part of a burst at free */
	if (strcmp(st1.allocator, "glibc") == 0)
		assert_true(kept + (16u << 20) >= peak);
	mem_release_freed();
	size_t after = rss_bytes();
	assert_true(after + (48u << 20) <= peak);
	mem_stats_read(&st1);
	assert_true(st1.kept <= st0.kept + (16u << 20)); /* nothing kept */
}
#endif

static void test_mem_fail_after(void **state)
{
	(void)state;
	mem_fail_after(2);
	void *a = mem_alloc(8), *b = mem_calloc(2, 8), *c = mem_alloc(8);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(c);
	assert_null(mem_strdup("x"));
	mem_fail_after(-1);
	char *d = mem_strdup("hello");
	assert_string_equal(d, "hello");
	char *e = mem_strndup("hello", 3);
	assert_string_equal(e, "hel");
	mem_free(a);
	mem_free(b);
	mem_free(d);
	mem_free(e);
	mem_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_st_str),
		cmocka_unit_test(test_st_errf),
		cmocka_unit_test(test_st_verrf_prefix),
		cmocka_unit_test(test_st_now_ms),
		cmocka_unit_test(test_mem_fail_after),
		cmocka_unit_test(test_mem_alloc_huge),
#if defined(__GLIBC__) && !defined(TEST_SANITIZED_MALLOC)
		cmocka_unit_test(test_mem_release_freed),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
