/* test_sched_defaults.c - the scheduling knobs' defaults agree: a model
 * loaded with a config file that leaves them out (config/cfg_knobs.c's table)
 * gets the same settings as one opened with an eng_model_spec that leaves
 * them 0 (the scheduler's fallbacks), and both are common/sched_defaults.h's.
 * Opens the default Whisper model (INFERD_MODELS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/sched_defaults.h"
#include "config/cfg.h"
#include "engine/eng.h"
#include "engine/eng_int.h"
#include "engine/sched/eng_sched.h"

static void test_config_defaults_are_the_engines(void **state)
{
	(void)state;
	char err[1024], whisper[4096];
	const char *dir = getenv("INFERD_MODELS");
	assert_non_null(dir);
	snprintf(whisper, sizeof(whisper), "%s/whisper-tiny.en", dir);

	static const char json[] = "{\"models\": [{\"name\": \"m\", \"path\": \"p\"}]}";
	struct cfg *cfg = NULL;
	assert_int_equal(cfg_load_string(json, strlen(json), &cfg, err, sizeof(err)), 0);
	const struct cfg_model *cm = &cfg->models[0];

	/* the engine with every knob left to its own fallback */
	struct eng *eng = NULL;
	const struct eng_model_spec spec = { .name = "m", .path = whisper };
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	const struct eng_sched *s = eng_model_at(eng, 0)->sched;

	assert_int_equal(cm->replica_count, s->n_reps);
	assert_int_equal(cm->max_batch_size, s->max_batch_size);
	assert_int_equal(cm->max_queue_delay_ms, s->max_queue_delay_ms);
	assert_int_equal(cm->max_queue_size, s->max_queue_size);
	assert_int_equal(cm->max_num_seqs, s->max_num_seqs);
	assert_int_equal(cm->max_batch_tokens, s->max_batch_tokens);
	assert_int_equal(cm->timeout_ms, s->timeout_ms);
	assert_int_equal(cm->slow_replica_factor, s->slow_factor);
	assert_true((size_t)cm->prefix_cache_mb << 20 == s->prefix_cache_bytes);

	/* and both are the shared header's */
	assert_int_equal(s->n_reps, ST_SCHED_DEF_REPLICAS);
	assert_int_equal(s->max_batch_size, ST_SCHED_DEF_MAX_BATCH_SIZE);
	assert_int_equal(s->max_queue_delay_ms, ST_SCHED_DEF_MAX_QUEUE_DELAY_MS);
	assert_int_equal(s->max_queue_size, ST_SCHED_DEF_MAX_QUEUE_SIZE);
	assert_int_equal(s->max_num_seqs, ST_SCHED_DEF_MAX_NUM_SEQS);
	assert_int_equal(s->max_batch_tokens, ST_SCHED_DEF_MAX_BATCH_TOKENS);
	assert_int_equal(s->timeout_ms, ST_SCHED_DEF_TIMEOUT_MS);
	assert_int_equal(s->slow_factor, ST_SCHED_DEF_SLOW_REPLICA_FACTOR);
	assert_true(s->prefix_cache_bytes == (size_t)ST_SCHED_DEF_PREFIX_CACHE_MB << 20);

	eng_destroy(eng);
	cfg_destroy(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults_are_the_engines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
