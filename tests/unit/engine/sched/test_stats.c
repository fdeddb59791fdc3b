/* test_stats.c - the scheduler's stats helpers (engine/sched/eng_stats.h):
 * histogram buckets, exact batch sizes and the ring of recently ended
 * requests (order, wrap-around, per-replica counts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine/sched/eng_stats.h"

static void test_hist_buckets(void **state)
{
	(void)state;
	static const double bounds[] = { 1, 10, 100 };
	struct eng_hist h;
	eng_hist_init(&h, bounds, 3);
	const double v[] = { 0.5, 1, 2, 10, 99, 100, 101, 1e9 };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		eng_hist_add(&h, v[i]);
	assert_int_equal(h.counts[0], 2); /* <= 1 */
	assert_int_equal(h.counts[1], 2); /* <= 10 */
	assert_int_equal(h.counts[2], 2); /* <= 100 */
	assert_int_equal(h.counts[3], 2); /* above */
	assert_int_equal(h.count, 8);
}

static void test_batch_sizes(void **state)
{
	(void)state;
	struct eng_model_stats s;
	eng_model_stats_init(&s);
	eng_stats_batch(&s, 0, 5); /* no step: ignored */
	eng_stats_batch(&s, 2, 3);
	eng_stats_batch(&s, 2, 4);
	eng_stats_batch(&s, ENG_STATS_MAX_BATCH + 9, 1); /* counted in the last slot */
	assert_int_equal(s.batch_size.count, 3);
	assert_int_equal(s.batch_count[2], 2);
	assert_true(s.batch_ms[2] == 7.0);
	assert_int_equal(s.batch_count[ENG_STATS_MAX_BATCH], 1);
}

static struct eng_recent_req ended(int i)
{
	return (struct eng_recent_req){ .replica = i % 2, .rc = 0, .submitted_ms = i,
					.admitted_ms = i + 0.5, .ended_ms = i + 1.0,
					.generated_tokens = (uint64_t)i };
}

static void test_recent_ring(void **state)
{
	(void)state;
	struct eng_model_stats s;
	struct eng_replica_stats reps[2];
	const struct eng_recent_req *got[ENG_STATS_RECENT];
	eng_model_stats_init(&s);
	memset(reps, 0, sizeof(reps));
	assert_int_equal(eng_stats_recent(&s, got), 0);

	for (int i = 0; i < 3; i++) {
		struct eng_recent_req e = ended(i);
		eng_stats_ended(&s, &reps[e.replica], &e);
	}
	assert_int_equal(eng_stats_recent(&s, got), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(got[i]->generated_tokens, i); /* oldest first */

	/* past the ring's size: the newest ENG_STATS_RECENT, oldest first */
	int total = ENG_STATS_RECENT * 2 + 5;
	for (int i = 3; i < total; i++) {
		struct eng_recent_req e = ended(i);
		eng_stats_ended(&s, &reps[e.replica], &e);
	}
	assert_int_equal(eng_stats_recent(&s, got), ENG_STATS_RECENT);
	for (int i = 0; i < ENG_STATS_RECENT; i++) {
		int want = total - ENG_STATS_RECENT + i;
		assert_int_equal(got[i]->generated_tokens, want);
		assert_int_equal(got[i]->replica, want % 2);
		assert_true(got[i]->admitted_ms == want + 0.5 && got[i]->ended_ms == want + 1.0);
	}
	assert_int_equal(reps[0].requests + reps[1].requests, total);
	assert_int_equal(reps[1].requests, total / 2);
	assert_int_equal(s.n_recent_total, total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_buckets),
		cmocka_unit_test(test_batch_sizes),
		cmocka_unit_test(test_recent_ring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
