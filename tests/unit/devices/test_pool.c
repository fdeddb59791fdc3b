/* test_pool.c - the CPU device's worker team: every thread runs every
 * task exactly once, runs do not overlap, dev_split covers ranges
 * exactly, and many short runs in a row (a decode step's pattern) work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#include <cmocka.h>

#include "common/st.h"
#include "devices/dev_pool.h"

struct count_task {
	_Atomic int calls;
	_Atomic int seen[16];
	_Atomic int nth_seen; /* every thread stores it */
};

static void count_fn(void *arg, int ith, int nth)
{
	struct count_task *t = arg;
	atomic_fetch_add(&t->calls, 1);
	atomic_fetch_add(&t->seen[ith], 1);
	t->nth_seen = nth;
}

static void test_every_thread_once(void **state)
{
	(void)state;
	for (int n = 1; n <= 4; n++) {
		struct dev_pool *p;
		assert_int_equal(dev_pool_create(n, NULL, &p), 0);
		assert_int_equal(dev_pool_size(p), n);
		for (int run = 0; run < 100; run++) {
			struct count_task t = { 0 };
			dev_pool_run(p, count_fn, &t);
			assert_int_equal(atomic_load(&t.calls), n); /* all done on return */
			for (int i = 0; i < n; i++)
				assert_int_equal(atomic_load(&t.seen[i]), 1);
			assert_int_equal(atomic_load(&t.nth_seen), n);
		}
		dev_pool_destroy(p);
	}
}

/* Each thread adds its share of 0..n-1; the sum must be exact. */
struct sum_task {
	long n;
	_Atomic long long sum;
};

static void sum_fn(void *arg, int ith, int nth)
{
	struct sum_task *t = arg;
	long b, e;
	dev_split(t->n, ith, nth, 7, &b, &e);
	long long s = 0;
	for (long i = b; i < e; i++)
		s += i;
	atomic_fetch_add(&t->sum, s);
}

static void test_many_short_runs(void **state)
{
	(void)state;
	struct dev_pool *p;
	assert_int_equal(dev_pool_create(2, NULL, &p), 0);
	for (long run = 0; run < 5000; run++) {
		struct sum_task t = { .n = run % 101 };
		dev_pool_run(p, sum_fn, &t);
		assert_int_equal(atomic_load(&t.sum), (long long)t.n * (t.n - 1) / 2);
	}
	dev_pool_destroy(p);
}

static void test_split_covers_exactly(void **state)
{
	(void)state;
	long ns[] = { 0, 1, 7, 8, 9, 100, 1500, 51864 };
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
		for (int nth = 1; nth <= 9; nth++)
			for (long align = 1; align <= 64; align *= 4) {
				long expect = 0;
				for (int ith = 0; ith < nth; ith++) {
					long b, e;
					dev_split(ns[k], ith, nth, align, &b, &e);
					assert_true(b == expect && e >= b && e <= ns[k]);
					if (e < ns[k] && e > b)
						assert_int_equal(e % align, 0);
					expect = e;
				}
				assert_int_equal(expect, ns[k]);
			}
}

/* dev_pool_barrier: in each of 3 phases every thread writes its slot,
 * meets the others at the barrier, then finds every slot of the phase
 * written (no thread ran ahead into the next phase's writes). */
struct bar_task {
	struct dev_pool *p;
	_Atomic int slots[8];
	_Atomic int bad;
};

static void bar_fn(void *arg, int ith, int nth)
{
	struct bar_task *t = arg;
	for (int phase = 1; phase <= 3; phase++) {
		atomic_store(&t->slots[ith], phase);
		dev_pool_barrier(t->p);
		for (int i = 0; i < nth; i++)
			if (atomic_load(&t->slots[i]) < phase)
				atomic_fetch_add(&t->bad, 1);
		dev_pool_barrier(t->p);
	}
}

static void test_barrier(void **state)
{
	(void)state;
	for (int n = 1; n <= 4; n++) {
		struct dev_pool *p;
		assert_int_equal(dev_pool_create(n, NULL, &p), 0);
		for (int run = 0; run < 2000; run++) {
			struct bar_task t = { .p = p };
			dev_pool_run(p, bar_fn, &t);
			assert_int_equal(atomic_load(&t.bad), 0);
			for (int i = 0; i < n; i++)
				assert_int_equal(atomic_load(&t.slots[i]), 3);
		}
		dev_pool_destroy(p);
	}
	dev_pool_barrier(NULL);
}

static void test_null_and_bad(void **state)
{
	(void)state;
	struct dev_pool *p = (struct dev_pool *)1;
	assert_int_equal(dev_pool_create(0, NULL, &p), -ST_INVAL);
	assert_null(p);
	struct count_task t = { 0 };
	dev_pool_run(NULL, count_fn, &t); /* inline */
	assert_int_equal(atomic_load(&t.calls), 1);
	assert_int_equal(dev_pool_size(NULL), 1);
	dev_pool_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_thread_once),
		cmocka_unit_test(test_many_short_runs),
		cmocka_unit_test(test_split_covers_exactly),
		cmocka_unit_test(test_null_and_bad),
		cmocka_unit_test(test_barrier),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
