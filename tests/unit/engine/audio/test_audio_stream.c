/* test_audio_stream.c - eng_audio_stream (engine/audio/eng_audio.h): raw
 * audio pushed in pieces of any size (odd, one byte, mid-frame) decodes to
 * what eng_audio_decode gives for the whole bytes at once - exactly at
 * 16 kHz, and at other rates but for the resampler's last few samples,
 * which a stream never flushes - and bad streams are refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/audio/eng_audio.h"

#define N_FRAMES 20011 /* not a multiple of any packet size */

/* A deterministic two-tone signal as interleaved little-endian s16 frames. */
static uint8_t *make_s16(int rate, int channels, size_t *len)
{
	*len = (size_t)N_FRAMES * (size_t)channels * 2;
	uint8_t *b = mem_alloc(*len);
	assert_non_null(b);
	for (size_t i = 0; i < (size_t)N_FRAMES; i++)
		for (int c = 0; c < channels; c++) {
			double t = (double)i / rate;
			int16_t v = (int16_t)(8000 * sin(2 * M_PI * 440 * t + c) +
					      3000 * sin(2 * M_PI * 1234 * t));
			size_t at = (i * (size_t)channels + (size_t)c) * 2;
			b[at] = (uint8_t)(v & 0xff);
			b[at + 1] = (uint8_t)((uint16_t)v >> 8);
		}
	return b;
}

/* Push data in pieces of the sizes in steps (cycled); the samples joined. */
static float *push_all(const struct eng_audio_raw *raw, const uint8_t *data, size_t len,
		       size_t *n_out)
{
	static const size_t steps[] = { 1, 7, 4799, 333, 2, 10000, 3 };
	struct eng_audio_stream *s;
	char err[256];
	assert_int_equal(eng_audio_stream_create(raw, &s, err, sizeof(err)), 0);
	float *out = mem_alloc(sizeof(*out) * (len * 48 + 16));
	assert_non_null(out);
	size_t n = 0;
	for (size_t off = 0, k = 0; off < len; k++) {
		size_t step = steps[k % (sizeof(steps) / sizeof(steps[0]))];
		step = step < len - off ? step : len - off;
		const float *got;
		size_t m;
		assert_int_equal(eng_audio_stream_push(s, data + off, step, &got, &m, err,
						       sizeof(err)), 0);
		if (m)
			memcpy(out + n, got, sizeof(*got) * m);
		n += m;
		off += step;
	}
	eng_audio_stream_destroy(s);
	*n_out = n;
	return out;
}

static void check_same(int rate, int channels, size_t max_missing)
{
	size_t len, n;
	uint8_t *data = make_s16(rate, channels, &len);
	struct eng_audio_raw raw = { .encoding = ENG_AUDIO_ENCODING_LINEAR16, .sample_rate = rate,
				     .channels = channels };
	struct eng_audio whole;
	char err[256];
	assert_int_equal(eng_audio_decode(data, len, &raw, &whole, err, sizeof(err)), 0);
	float *streamed = push_all(&raw, data, len, &n);
	assert_true(n <= whole.n_samples);
	if (whole.n_samples - n > max_missing)
		fail_msg("%d Hz x%d: %zu of %zu samples", rate, channels, n, whole.n_samples);
	for (size_t i = 0; i < n; i++)
		assert_float_equal(streamed[i], whole.samples[i], 1e-6);
	mem_free(streamed);
	eng_audio_fini(&whole);
	mem_free(data);
}

static void test_same_as_whole(void **state)
{
	(void)state;
	check_same(16000, 1, 0);
	check_same(16000, 2, 0);
	check_same(48000, 1, 64);
	check_same(8000, 1, 64);
	check_same(44100, 2, 64);
}

static void test_refused(void **state)
{
	(void)state;
	struct eng_audio_stream *s = NULL;
	char err[256];
	struct eng_audio_raw raw = { .encoding = ENG_AUDIO_ENCODING_FLAC, .sample_rate = 16000,
				     .channels = 1 };
	assert_int_equal(eng_audio_stream_create(&raw, &s, err, sizeof(err)), -ST_UNSUPPORTED);
	assert_null(s);
	raw = (struct eng_audio_raw){ .encoding = ENG_AUDIO_ENCODING_LINEAR16, .sample_rate = 10,
				      .channels = 1 };
	assert_int_not_equal(eng_audio_stream_create(&raw, &s, err, sizeof(err)), 0);
	raw = (struct eng_audio_raw){ .encoding = ENG_AUDIO_ENCODING_LINEAR32,
				      .sample_rate = 16000, .channels = 1 };
	assert_int_equal(eng_audio_stream_create(&raw, &s, err, sizeof(err)), 0);
	float f[4096] = { 0 };
	f[4000] = NAN;
	const float *got;
	size_t n;
	assert_int_equal(eng_audio_stream_push(s, f, sizeof(f), &got, &n, err, sizeof(err)),
			 -ST_INVAL);
	assert_non_null(strstr(err, "finite"));
	eng_audio_stream_destroy(s);
	eng_audio_stream_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_as_whole),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
