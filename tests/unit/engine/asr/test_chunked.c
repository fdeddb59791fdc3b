/* test_chunked.c - batched long-form transcription (engine/asr/
 * eng_asr_chunked.c): where eng__asr_chunks cuts (synthetic signals with
 * known quiet gaps), and on the real model that a batched transcription of
 * jfk.wav repeated nine times (about 103 s) comes back whole, its
 * segments in order and in time, with the chunks' passes computed together
 * (steps of as many windows or sequences as there are chunks) and the
 * chunks on the replica at the same time - as the scheduler's own records
 * (eng_model_stats_get) show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/audio/eng_audio.h"
#include "engine/eng.h"
#include "engine/sched/eng_stats.h"

#define RATE 16000

/* x[n] of noise (a fixed LCG, amplitude 0.1) with silence in the
 * [gap_s[i], gap_s[i] + gap_len_s) spans. */
static float *noise_with_gaps(size_t n, const double *gap_s, size_t n_gaps, double gap_len_s)
{
	float *x = malloc(n * sizeof(float));
	uint32_t s = 12345;
	for (size_t i = 0; i < n; i++) {
		s = s * 1664525u + 1013904223u;
		x[i] = 0.1f * ((float)(s >> 8) / 8388608.0f - 1.0f);
	}
	for (size_t g = 0; g < n_gaps; g++)
		for (size_t i = (size_t)(gap_s[g] * RATE); i < (size_t)((gap_s[g] + gap_len_s) * RATE); i++)
			x[i] = 0.0f;
	return x;
}

static void test_cuts_short_audio(void **state)
{
	(void)state;
	size_t start[4] = { 99 };
	float *x = noise_with_gaps(30 * RATE, NULL, 0, 0);
	assert_int_equal(eng__asr_chunks(x, 0, start, 4), 0);
	assert_int_equal(eng__asr_chunks(x, 1, start, 4), 1);
	assert_int_equal(eng__asr_chunks(x, 30 * RATE, start, 4), 1);
	assert_int_equal(start[0], 0);
	free(x);
}

static void test_cuts_in_the_gaps(void **state)
{
	(void)state;
	const double gaps[] = { 24.0, 50.0 };
	size_t n = 75 * RATE, start[8];
	float *x = noise_with_gaps(n, gaps, 2, 0.5);
	assert_int_equal(eng__asr_chunks(x, n, start, 8), 3);
	assert_int_equal(start[0], 0);
	for (size_t i = 1; i < 3; i++) {
		/* the quietest 200 ms lie inside the 500 ms gap: its middle is
		 * at least 100 ms from either edge */
		assert_true(start[i] >= (size_t)((gaps[i - 1] + 0.1) * RATE));
		assert_true(start[i] <= (size_t)((gaps[i - 1] + 0.4) * RATE));
	}
	free(x);
}

static void test_cuts_without_gaps(void **state)
{
	(void)state;
	size_t n = 95 * RATE, start[8];
	float *x = noise_with_gaps(n, NULL, 0, 0);
	size_t k = eng__asr_chunks(x, n, start, 8);
	assert_true(k >= 4 && k <= 5);
	for (size_t i = 0; i < k; i++) {
		size_t end = i + 1 < k ? start[i + 1] : n;
		assert_true(end - start[i] <= ENG_ASR_CHUNK_MAX_SAMPLES);
		if (i + 1 < k) /* the cut is in the chunk's last 10 s */
			assert_true(end - start[i] >= 20 * RATE);
	}
	free(x);
}

/* jfk.wav decoded, then copies of it with 0.5 s of silence after each. */
static float *jfk_repeated(int copies, size_t *n_out)
{
	char path[4096], err[256];
	snprintf(path, sizeof(path), "%s/tests/data/audio/jfk.wav", getenv("INFERD_SOURCE_ROOT"));
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[1 << 20];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	struct eng_audio a;
	assert_int_equal(eng_audio_decode(buf, len, NULL, &a, err, sizeof(err)), 0);
	size_t gap = RATE / 2, one = a.n_samples + gap, n = one * (size_t)copies;
	float *x = calloc(n, sizeof(float));
	for (int c = 0; c < copies; c++)
		memcpy(x + (size_t)c * one, a.samples, a.n_samples * sizeof(float));
	eng_audio_fini(&a);
	*n_out = n;
	return x;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t k = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		k++;
	return k;
}

/* The compute steps of exactly `size` windows (encoder) or sequences
 * (decoder) the stats recorded. */
static uint64_t steps_of_size(const struct eng_model_stats *s, int size)
{
	return size < ENG_STATS_MAX_BATCH ? s->batch_count[size] : 0;
}

static void test_batched_transcription(void **state)
{
	(void)state;
	char path[4096], err[1024];
	snprintf(path, sizeof(path), "%s/whisper-tiny.en", getenv("INFERD_MODELS"));
	struct eng_replica_spec rep = { .device = "cpu", .threads = 2 };
	struct eng_model_spec spec = { .name = "w", .path = path, .replicas = &rep,
				       .n_replicas = 1 };
	struct eng *eng;
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	const struct eng_model *m = eng_model_find(eng, "w");
	size_t n;
	float *x = jfk_repeated(9, &n);
	size_t start[16], k = eng__asr_chunks(x, n, start, 16);
	assert_true(k >= 4 && k <= 8);

	struct eng_transcribe_params p;
	eng_transcribe_params_init(&p);
	p.temperatures[0] = 0;
	p.n_temperatures = 1;
	p.batched = true;
	struct eng_transcript *t;
	assert_int_equal(eng_transcribe(m, x, n, &p, &t, err, sizeof(err)), 0);
	assert_true(t->duration_s > 102.0 && t->duration_s < 104.0);
	/* each copy's last words, once per copy: nothing lost or repeated at
	 * the cuts (which lie in the pauses) */
	assert_int_equal(count_of(t->text, "can do for your country"), 9);
	assert_true(t->n_segments >= 9);
	for (size_t i = 0; i < t->n_segments; i++) {
		const struct eng_segment *s = &t->segments[i];
		assert_int_equal(s->id, (int)i + 1);
		assert_true(s->start_s <= s->end_s && s->end_s <= t->duration_s + 1e-6);
		if (i)
			assert_true(s->start_s >= t->segments[i - 1].start_s);
	}

	/* what the scheduler recorded: k requests, steps of k windows or
	 * sequences, all k on the replica at once */
	struct eng_stats st;
	assert_int_equal(eng_model_stats_get(m, &st), 0);
	assert_int_equal(st.model.completed, k);
	assert_true(steps_of_size(&st.model, (int)k) >= 1);
	const struct eng_recent_req *r[ENG_STATS_RECENT];
	size_t nr = eng_stats_recent(&st.model, r);
	assert_int_equal(nr, k);
	for (size_t i = 0; i < nr; i++)
		for (size_t j = 0; j < nr; j++)
			assert_true(r[i]->admitted_ms < r[j]->ended_ms);
	eng_stats_fini(&st);

	/* encoded input is refused in batched mode, clearly */
	struct eng_asr_input in = { .data = "RIFF", .len = 4 };
	assert_int_equal(eng_transcribe_submit(m, &in, &p, NULL, NULL, NULL, err, sizeof(err)),
			 -ST_INVAL);
	assert_non_null(strstr(err, "batched"));
	eng_transcript_destroy(t);
	free(x);
	eng_destroy(eng);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuts_short_audio),
		cmocka_unit_test(test_cuts_in_the_gaps),
		cmocka_unit_test(test_cuts_without_gaps),
		cmocka_unit_test(test_batched_transcription),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
