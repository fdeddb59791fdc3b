/* test_mel.c - kn_mel against faster-whisper's FeatureExtractor.
 *
 * Reference files come from tests/reference/make_mel_reference.py (read its
 * header for what each holds). Samples are read here from the same 16 kHz
 * 16-bit WAV files the script reads (int16 / 32768), so both sides see
 * identical input. Found through $INFERD_SOURCE_ROOT (the repo root).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "common/mem.h"
#include "common/st.h"
#include "kernels/kn_mel.h"
#include "tests/unit/kernels/kn_test_file.h"

#define MEL_TOL	   1e-3f /* max abs error allowed on log-mel features */
#define FILTER_TOL 1e-7f /* max abs error allowed on filterbank weights */
#define FW_PADDING 160	 /* zeros faster-whisper's transcribe appends */

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Samples of a mono 16-bit WAV (int16 / 32768), plus extra zeros appended;
 * *n excludes nothing: it counts samples + pad. */
static float *read_wav16(const char *rel, size_t pad, size_t *n)
{
	size_t len = 0;
	uint8_t *b = kn_test_read_file(rel, &len);
	assert_non_null(b);
	size_t pos = 12;
	while (pos + 8 <= len && memcmp(b + pos, "data", 4) != 0)
		pos += 8 + le32(b + pos + 4);
	assert_true(pos + 8 <= len);
	size_t ns = le32(b + pos + 4) / 2;
	assert_true(pos + 8 + ns * 2 <= len);
	float *x = mem_calloc(ns + pad, sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < ns; i++) {
		const uint8_t *p = b + pos + 8 + 2 * i;
		x[i] = (float)(int16_t)(p[0] | p[1] << 8) / 32768.0f;
	}
	mem_free(b);
	*n = ns + pad;
	return x;
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
	float mx = 0.0f;
	for (size_t i = 0; i < n; i++) {
		float d = fabsf(a[i] - b[i]);
		mx = d > mx ? d : mx;
	}
	return mx;
}

/* Features of x[0..n) with a fresh 80-mel kn_mel; *n_frames set. */
static float *compute(const float *x, size_t n, size_t *n_frames)
{
	struct kn_mel *m = NULL;
	assert_int_equal(kn_mel_create(80, &m), 0);
	size_t sl = kn_mel_scratch_len(m);
	float *scratch = mem_alloc(sizeof(*scratch) * sl);
	*n_frames = kn_mel_n_frames(n);
	float *out = mem_alloc(sizeof(*out) * 80 * (*n_frames ? *n_frames : 1));
	assert_non_null(scratch);
	assert_non_null(out);
	assert_int_equal(kn_mel_compute(m, x, n, out, scratch, sl), 0);
	mem_free(scratch);
	kn_mel_destroy(m);
	return out;
}

static void check_filters(int n_mels, const char *rel)
{
	struct kn_mel *m = NULL;
	assert_int_equal(kn_mel_create(n_mels, &m), 0);
	assert_int_equal(kn_mel_n_mels(m), n_mels);
	size_t len = 0;
	float *ref = kn_test_read_file(rel, &len);
	assert_non_null(ref);
	size_t n = (size_t)n_mels * KN_MEL_N_BINS;
	assert_int_equal(len, n * sizeof(float));
	float err = max_abs_diff(kn_mel_filters(m), ref, n);
	print_message("filters %d: max abs error vs librosa %.3g\n", n_mels, (double)err);
	assert_true(err <= FILTER_TOL);
	mem_free(ref);
	kn_mel_destroy(m);
}

static void test_filters_80(void **state)
{
	(void)state;
	check_filters(80, "tests/reference/mel/filters_80.f32");
}

static void test_filters_128(void **state)
{
	(void)state;
	check_filters(128, "tests/reference/mel/filters_128.f32");
}

/* Whole clip + 160 zeros, as faster-whisper's transcribe computes it. */
static void check_clip(const char *stem)
{
	char wav[256], ref_path[256];
	snprintf(wav, sizeof(wav), "tests/data/audio/%s.wav", stem);
	snprintf(ref_path, sizeof(ref_path), "tests/reference/mel/%s.f32", stem);
	size_t n = 0, n_frames = 0, len = 0;
	float *x = read_wav16(wav, FW_PADDING, &n);
	float *out = compute(x, n, &n_frames);
	float *ref = kn_test_read_file(ref_path, &len);
	assert_non_null(ref);
	size_t stored = len / sizeof(float) / 80; /* the script may keep a prefix */
	assert_true(stored > 0 && stored <= n_frames);
	float err = 0.0f;
	for (size_t mel = 0; mel < 80; mel++) {
		float e = max_abs_diff(out + mel * n_frames, ref + mel * stored, stored);
		err = e > err ? e : err;
	}
	print_message("%s: %zu frames, max abs error vs faster-whisper %.3g\n", stem, n_frames,
		      (double)err);
	assert_true(err <= MEL_TOL);
	mem_free(ref);
	mem_free(out);
	mem_free(x);
}

static void test_clip_jfk(void **state)
{
	(void)state;
	check_clip("jfk");
}

static void test_clip_sense(void **state)
{
	(void)state;
	check_clip("sense_and_sensibility_01_austen_64kb-0930");
}

/* The script's SYNTH(n), no padding appended. */
static void check_edge(size_t n)
{
	float *x = mem_alloc(sizeof(*x) * (n ? n : 1));
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(0.5 * sin(0.05 * (double)i) + 0.25 * sin(1.3 * (double)i + 0.2));
	size_t n_frames = 0, len = 0;
	float *out = compute(x, n, &n_frames);
	assert_int_equal(n_frames, n / 160);
	if (n_frames) {
		char rel[128];
		snprintf(rel, sizeof(rel), "tests/reference/mel/edge_%zu.f32", n);
		float *ref = kn_test_read_file(rel, &len);
		assert_non_null(ref);
		assert_int_equal(len, 80 * n_frames * sizeof(float));
		float err = max_abs_diff(out, ref, 80 * n_frames);
		print_message("edge n=%zu: %zu frames, max abs error %.3g\n", n, n_frames,
			      (double)err);
		assert_true(err <= MEL_TOL);
		mem_free(ref);
	}
	mem_free(out);
	mem_free(x);
}

static void test_edge_sizes(void **state)
{
	(void)state;
	const size_t ns[] = {0, 1, 161, 170, 399, 400, 401};
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		check_edge(ns[i]);
	assert_int_equal(kn_mel_n_frames(0), 0);
	assert_int_equal(kn_mel_n_frames(159), 0);
	assert_int_equal(kn_mel_n_frames(160), 1);
	assert_int_equal(kn_mel_n_frames(176000 + 160), 1101);
	assert_int_equal(kn_mel_n_frames(480000), 3000);
}

static void test_bad_args(void **state)
{
	(void)state;
	struct kn_mel *m = (struct kn_mel *)1;
	assert_int_equal(kn_mel_create(64, &m), -ST_INVAL);
	assert_null(m);
	assert_int_equal(kn_mel_create(80, NULL), -ST_INVAL);
	assert_int_equal(kn_mel_create(80, &m), 0);
	float x[400] = {0}, out[80 * 2], s[1];
	assert_int_equal(kn_mel_compute(m, x, 400, out, s, 1), -ST_INVAL);
	assert_int_equal(kn_mel_compute(NULL, x, 400, out, s, 1), -ST_INVAL);
	kn_mel_destroy(m);
	kn_mel_destroy(NULL);
	for (long k = 0; k < 4; k++) { /* allocation failure at each step */
		mem_fail_after(k);
		int rc = kn_mel_create(80, &m);
		mem_fail_after(-1);
		assert_true(rc == -ST_NOMEM || rc == 0);
		kn_mel_destroy(m);
	}
}

/* All-zero audio: every value is the floor, (log10(1e-10) + 4) / 4. */
static void test_silence(void **state)
{
	(void)state;
	float *x = mem_calloc(16000, sizeof(*x));
	assert_non_null(x);
	size_t n_frames = 0;
	float *out = compute(x, 16000, &n_frames);
	assert_int_equal(n_frames, 100);
	for (size_t i = 0; i < 80 * n_frames; i++)
		assert_float_equal(out[i], -1.5f, 1e-6f);
	mem_free(out);
	mem_free(x);
}

/* Ten minutes of a synthetic signal; reports the time (no hard limit here,
 * machines vary; the budget is "well under a second per minute"). */
static void test_speed(void **state)
{
	(void)state;
	size_t n = 600 * 16000, n_frames = 0;
	float *x = mem_alloc(sizeof(*x) * n);
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)sin(0.01 * (double)i) * (float)((i * 2654435761u) % 1000) / 1000.0f;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	float *out = compute(x, n, &n_frames);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	print_message("10 min of audio (%zu frames): %.3f s\n", n_frames, s);
	assert_true(s < 60.0); /* a gross regression only */
	mem_free(out);
	mem_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filters_80), cmocka_unit_test(test_filters_128),
		cmocka_unit_test(test_clip_jfk),   cmocka_unit_test(test_clip_sense),
		cmocka_unit_test(test_edge_sizes), cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_silence),	   cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
