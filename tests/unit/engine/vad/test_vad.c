/* test_vad.c - Silero VAD (engine/vad/eng_vad.h) against
 * tests/reference/vad/reference.json (tests/reference/make_vad_reference.py:
 * onnxruntime running the same weights in silero-vad's ONNX graph, and
 * faster-whisper 1.2.1's get_speech_timestamps / collect_chunks /
 * SpeechTimestampsMap): window probabilities within PROB_TOL, speech spans
 * to the sample, chunks and mapped times exactly. Also: the safetensors
 * reader's refusals of hostile headers, concurrent callers, and the speed
 * on 60 s of audio (printed). Inputs: the 16 kHz 16-bit WAVs of
 * tests/data/audio (int16 / 32768), 20 s of zeros, and NOISE (the
 * script's LCG). Needs $INFERD_SOURCE_ROOT and $INFERD_MODELS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_safetensors.h"
#include "engine/vad/eng_vad.h"

#define PROB_TOL 1e-4 /* max abs difference from onnxruntime's probabilities */
#define SR	 ENG_VAD_SAMPLE_RATE

static struct eng_vad *vad;
static json_t *ref;

static uint32_t le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = mem_alloc(n > 0 ? (size_t)n : 1);
	*len = b ? fread(b, 1, (size_t)n, f) : 0;
	fclose(f);
	return b;
}

/* Samples of a mono 16-bit WAV of tests/data/audio (int16 / 32768). */
static float *read_wav16(const char *name, size_t *n)
{
	char path[1024];
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/data/audio/%s", root ? root : ".", name);
	size_t len = 0;
	uint8_t *b = read_file(path, &len);
	assert_non_null(b);
	size_t pos = 12;
	while (pos + 8 <= len && memcmp(b + pos, "data", 4) != 0)
		pos += 8 + le32(b + pos + 4);
	assert_true(pos + 8 <= len);
	size_t ns = le32(b + pos + 4) / 2;
	assert_true(pos + 8 + ns * 2 <= len);
	float *x = mem_calloc(ns ? ns : 1, sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < ns; i++) {
		const uint8_t *p = b + pos + 8 + 2 * i;
		x[i] = (float)(int16_t)(p[0] | p[1] << 8) / 32768.0f;
	}
	mem_free(b);
	*n = ns;
	return x;
}

/* NOISE(n) of make_vad_reference.py: an LCG's int16-valued samples. */
static float *noise(size_t n)
{
	float *x = mem_alloc(n * sizeof(*x));
	assert_non_null(x);
	uint64_t s = 1;
	for (size_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((int64_t)((s >> 33) % 19661) - 9830) / 32768.0f;
	}
	return x;
}

/* The input of a reference clip, n_samples of it. */
static float *clip_samples(const json_t *clip, size_t *n)
{
	const char *name = json_string_value(json_object_get(clip, "name"));
	size_t want = (size_t)json_integer_value(json_object_get(clip, "n_samples"));
	float *x;
	if (!strcmp(name, "silence20")) {
		x = mem_calloc(want, sizeof(*x));
		*n = want;
	} else if (!strcmp(name, "noise")) {
		x = noise(want);
		*n = want;
	} else {
		x = read_wav16(name, n);
	}
	assert_non_null(x);
	assert_int_equal(*n, want);
	return x;
}

static int setup(void **state)
{
	(void)state;
	char path[1024], err[256];
	const char *models = getenv("INFERD_MODELS");
	snprintf(path, sizeof(path), "%s/silero-vad/silero_vad_16k.safetensors",
		 models ? models : "models");
	int rc = eng_vad_load(path, &vad, err, sizeof(err));
	if (rc)
		fprintf(stderr, "test_vad: %s (run scripts/fetch-models)\n", err);
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/reference/vad/reference.json", root ? root : ".");
	json_error_t je;
	ref = json_load_file(path, 0, &je);
	return rc || !ref ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	eng_vad_destroy(vad);
	json_decref(ref);
	return 0;
}

static void test_probs(void **state)
{
	(void)state;
	size_t i;
	json_t *clip;
	int n_checked = 0;
	json_array_foreach(json_object_get(ref, "clips"), i, clip)
	{
		json_t *want = json_object_get(clip, "probs");
		if (!want)
			continue;
		size_t n;
		float *x = clip_samples(clip, &n);
		size_t nw = eng_vad_n_windows(n);
		assert_int_equal(nw, json_array_size(want));
		float *p = mem_alloc(nw * sizeof(*p));
		assert_non_null(p);
		assert_int_equal(eng_vad_probs(vad, x, n, p), 0);
		double mx = 0;
		for (size_t w = 0; w < nw; w++)
			mx = fmax(mx, fabs(p[w] - json_real_value(json_array_get(want, w))));
		printf("probs %-48s %5zu windows, max |diff| %.2e\n",
		       json_string_value(json_object_get(clip, "name")), nw, mx);
		assert_true(mx <= PROB_TOL);
		n_checked++;
		mem_free(p);
		mem_free(x);
	}
	assert_true(n_checked >= 2);
}

/* p = the defaults, overridden by the VadOptions fields o names. */
static void params_from(const json_t *o, struct eng_vad_params *p)
{
	eng_vad_params_init(p);
	const struct {
		const char *key;
		double *field;
	} f[] = {
		{"threshold", &p->threshold},
		{"neg_threshold", &p->neg_threshold},
		{"min_speech_duration_ms", &p->min_speech_duration_ms},
		{"max_speech_duration_s", &p->max_speech_duration_s},
		{"min_silence_duration_ms", &p->min_silence_duration_ms},
		{"speech_pad_ms", &p->speech_pad_ms},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		json_t *v = json_object_get(o, f[i].key);
		if (v)
			*f[i].field = json_number_value(v);
	}
}

static void check_spans(const json_t *want, const struct eng_vad_span *v, size_t n)
{
	assert_int_equal(n, json_array_size(want));
	for (size_t k = 0; k < n; k++) {
		json_t *s = json_array_get(want, k);
		assert_int_equal(v[k].start, json_integer_value(json_array_get(s, 0)));
		assert_int_equal(v[k].end, json_integer_value(json_array_get(s, 1)));
	}
}

static void check_collect(const json_t *want, const struct eng_vad_span *v, size_t n)
{
	struct eng_vad_chunk *c;
	size_t nc;
	double max_s = json_number_value(json_object_get(ref, "collect_max_s"));
	assert_int_equal(eng_vad_collect(v, n, max_s, &c, &nc), 0);
	assert_int_equal(nc, json_array_size(want));
	for (size_t k = 0; k < nc; k++) {
		json_t *w = json_array_get(want, k);
		assert_true((double)c[k].offset_samples / SR ==
			    json_number_value(json_object_get(w, "offset")));
		assert_true((double)c[k].n_samples / SR ==
			    json_number_value(json_object_get(w, "duration")));
		assert_int_equal(c[k].n_samples, json_integer_value(json_object_get(w, "n_audio")));
		check_spans(json_object_get(w, "segments"), v + c[k].seg_first, c[k].seg_count);
	}
	mem_free(c);
}

static void check_map(const json_t *want, const struct eng_vad_span *v, size_t n)
{
	struct eng_vad_map m;
	assert_int_equal(eng_vad_map_init(&m, v, n), 0);
	size_t i;
	json_t *row;
	json_array_foreach(want, i, row)
	{
		double t = json_number_value(json_array_get(row, 0));
		assert_true(eng_vad_map_time(&m, t, -1, 0) ==
			    json_number_value(json_array_get(row, 1)));
		assert_true(eng_vad_map_time(&m, t, -1, 1) ==
			    json_number_value(json_array_get(row, 2)));
		/* get_chunk_index picked first, as restore_speech_timestamps does */
		for (int e = 0; e < 2; e++) {
			long c = eng_vad_map_chunk(&m, t, e);
			assert_true(c >= 0 && (size_t)c < n);
			assert_true(eng_vad_map_time(&m, t, c, e) == eng_vad_map_time(&m, t, -1, e));
		}
	}
	eng_vad_map_fini(&m);
	struct eng_vad_map empty = { 0 };
	assert_int_equal(eng_vad_map_chunk(&empty, 1.0, 0), -1);
}

static void test_speech(void **state)
{
	(void)state;
	size_t i;
	json_t *clip;
	json_array_foreach(json_object_get(ref, "clips"), i, clip)
	{
		size_t n, ns;
		float *x = clip_samples(clip, &n);
		struct eng_vad_span *v;
		assert_int_equal(eng_vad_speech(vad, x, n, NULL, &v, &ns), 0);
		check_spans(json_object_get(clip, "speech"), v, ns);
		mem_free(v);
		struct eng_vad_params p;
		params_from(json_object_get(ref, "split_options"), &p);
		assert_int_equal(eng_vad_speech(vad, x, n, &p, &v, &ns), 0);
		check_spans(json_object_get(clip, "speech_split"), v, ns);
		if (ns) {
			check_collect(json_object_get(clip, "collect_split"), v, ns);
			check_map(json_object_get(clip, "map_split"), v, ns);
		}
		printf("speech %-48s %zu spans split, as faster-whisper\n",
		       json_string_value(json_object_get(clip, "name")), ns);
		mem_free(v);
		mem_free(x);
	}
}

/* get_speech_timestamps on the synthetic probability sequences, under
 * option sets that reach the max_speech_duration_s and padding branches. */
static void test_synthetic(void **state)
{
	(void)state;
	size_t i, k, n_cases = 0;
	json_t *seq, *c;
	json_array_foreach(json_object_get(ref, "synthetic"), i, seq)
	{
		json_t *jp = json_object_get(seq, "probs");
		size_t nw = json_array_size(jp);
		size_t n = (size_t)json_integer_value(json_object_get(seq, "n_samples"));
		assert_int_equal(eng_vad_n_windows(n), nw);
		float *probs = mem_alloc(nw * sizeof(*probs));
		assert_non_null(probs);
		for (size_t w = 0; w < nw; w++)
			probs[w] = (float)json_number_value(json_array_get(jp, w));
		json_array_foreach(json_object_get(seq, "cases"), k, c)
		{
			struct eng_vad_params p;
			struct eng_vad_span *v;
			size_t ns;
			params_from(json_object_get(c, "options"), &p);
			assert_int_equal(eng_vad_spans_from_probs(probs, nw, n, &p, &v, &ns), 0);
			check_spans(json_object_get(c, "speech"), v, ns);
			mem_free(v);
			n_cases++;
		}
		mem_free(probs);
	}
	printf("synthetic: %zu option sets x sequences, spans as faster-whisper\n", n_cases);
	assert_true(n_cases >= 10);
}

/* collect_chunks' corner cases: no spans -> one empty chunk; a first span
 * longer than max_duration -> an empty chunk first, and a span opening a
 * chunk is in its audio but not its segments. */
static void test_collect_edges(void **state)
{
	(void)state;
	struct eng_vad_chunk *c;
	size_t nc;
	assert_int_equal(eng_vad_collect(NULL, 0, INFINITY, &c, &nc), 0);
	assert_int_equal(nc, 1);
	assert_int_equal(c[0].n_samples, 0);
	assert_int_equal(c[0].seg_count, 0);
	mem_free(c);
	/* faster-whisper: max 2 s -> audio lengths [0, 48000, 16000], no
	 * segments anywhere; max 3.5 s -> [48000, 16000], segments [[0, 48000]], [] */
	struct eng_vad_span s[2] = {{0, 3 * SR}, {4 * SR, 5 * SR}};
	assert_int_equal(eng_vad_collect(s, 2, 2.0, &c, &nc), 0);
	assert_int_equal(nc, 3);
	int64_t len2[3] = {0, 3 * SR, 1 * SR}, off2[3] = {0, 0, 3 * SR};
	for (int k = 0; k < 3; k++) {
		assert_int_equal(c[k].n_samples, len2[k]);
		assert_int_equal(c[k].offset_samples, off2[k]);
		assert_int_equal(c[k].seg_count, 0);
	}
	mem_free(c);
	assert_int_equal(eng_vad_collect(s, 2, 3.5, &c, &nc), 0);
	assert_int_equal(nc, 2);
	assert_int_equal(c[0].seg_first, 0);
	assert_int_equal(c[0].seg_count, 1);
	assert_int_equal(c[1].audio_first, 1);
	assert_int_equal(c[1].audio_count, 1);
	assert_int_equal(c[1].seg_count, 0);
	assert_int_equal(c[1].offset_samples, 3 * SR);
	mem_free(c);
	/* a chunk's audio is its spans' samples end to end */
	struct eng_vad_chunk two = {.audio_first = 0, .audio_count = 2, .n_samples = 4 * SR};
	c = NULL;
	float *audio = mem_calloc(5 * SR, sizeof(*audio)), *out = mem_alloc(4 * SR * sizeof(*out));
	assert_non_null(audio);
	assert_non_null(out);
	audio[4 * SR] = 1.0f;
	eng_vad_chunk_audio(audio, s, &two, out);
	assert_true(out[3 * SR] == 1.0f);
	mem_free(out);
	mem_free(audio);
	mem_free(c);
}

/* A safetensors image: header json then data_len bytes of zeros. */
static uint8_t *st_image(const char *json, uint64_t hlen_field, size_t data_len, size_t *len)
{
	size_t hl = strlen(json);
	*len = 8 + hl + data_len;
	uint8_t *b = mem_calloc(*len, 1);
	assert_non_null(b);
	memcpy(b, &hlen_field, 8);
	memcpy(b + 8, json, hl);
	return b;
}

static int st_try(const char *json, int64_t hlen_field, size_t data_len)
{
	size_t len;
	uint8_t *b = st_image(json, hlen_field < 0 ? strlen(json) : (uint64_t)hlen_field, data_len,
			      &len);
	struct eng_st *st;
	char err[256] = "";
	int rc = eng_st_open_buffer(b, len, "img", &st, err, sizeof(err));
	if (rc) {
		assert_null(st);
		assert_true(strlen(err) > 0);
	}
	eng_st_destroy(st);
	mem_free(b);
	return rc;
}

static void test_hostile(void **state)
{
	(void)state;
	struct eng_st *st;
	assert_int_equal(eng_st_open_buffer(NULL, 0, "empty", &st, NULL, 0), -ST_CORRUPT);
	assert_int_equal(eng_st_open_buffer("\x01", 1, "short", &st, NULL, 0), -ST_CORRUPT);
	const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
			 "\"__metadata__\":{\"format\":\"pt\"}}";
	assert_int_equal(st_try(ok, -1, 24), 0);
	assert_int_equal(st_try(ok, -1, 23), -ST_CORRUPT);	   /* data past the end */
	assert_int_equal(st_try(ok, 1ull << 40, 24), -ST_CORRUPT); /* header length huge */
	assert_int_equal(st_try(ok, UINT64_MAX >> 1, 24), -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":", -1, 0), -ST_CORRUPT); /* bad JSON */
	assert_int_equal(st_try("[1,2]", -1, 0), -ST_CORRUPT);	 /* not an object */
	assert_int_equal(st_try("{\"a\":1}", -1, 0), -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
				"\"data_offsets\":[0,20]}}",
				-1, 24),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],"
				"\"data_offsets\":[24,0]}}",
				-1, 24),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],"
				"\"data_offsets\":[0,4]}}",
				-1, 4),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
				"4294967296],\"data_offsets\":[0,0]}}",
				-1, 0),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
				"\"data_offsets\":[0,4]}}",
				-1, 4),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],"
				"\"data_offsets\":[0,4]}}",
				-1, 4),
			 -ST_UNSUPPORTED);
	assert_int_equal(st_try("{\"a\":{\"dtype\":7,\"shape\":[1],"
				"\"data_offsets\":[0,4]}}",
				-1, 4),
			 -ST_CORRUPT);
	assert_int_equal(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
				"\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
				-1, 4),
			 -ST_CORRUPT); /* duplicate key */
}

/* The real file truncated at every length through its header, and with
 * 1-4 random bytes of its header changed (a fixed LCG): each parse either
 * succeeds or refuses; the sanitizer builds catch any stray read. */
static void test_mutations(void **state)
{
	(void)state;
	char path[1024];
	const char *models = getenv("INFERD_MODELS");
	snprintf(path, sizeof(path), "%s/silero-vad/silero_vad_16k.safetensors",
		 models ? models : "models");
	size_t len = 0;
	uint8_t *b = read_file(path, &len);
	assert_non_null(b);
	uint64_t hl;
	memcpy(&hl, b, 8);
	assert_true(hl + 8 < len);
	struct eng_st *st;
	int n_ok = 0;
	for (size_t cut = 0; cut <= hl + 8 + 64; cut++) {
		if (eng_st_open_buffer(b, cut, "cut", &st, NULL, 0) == 0)
			n_ok++;
		eng_st_destroy(st);
	}
	assert_int_equal(n_ok, 0); /* every tensor's data lies past the header */
	uint8_t *m = mem_alloc(len);
	assert_non_null(m);
	uint64_t s = 42;
	for (int it = 0; it < 4000; it++) {
		memcpy(m, b, len);
		for (int k = 0; k < 1 + it % 4; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			m[(s >> 33) % (hl + 8)] = (uint8_t)(s >> 20);
		}
		if (eng_st_open_buffer(m, len, "mut", &st, NULL, 0) == 0)
			for (size_t i = 0; i < eng_st_n_tensors(st); i++) {
				const struct eng_st_tensor *t = eng_st_tensor(st, i);
				assert_true(t->data >= m + 8 + hl);
				assert_true(t->data + t->size_bytes <= m + len);
			}
		eng_st_destroy(st);
	}
	mem_free(m);
	mem_free(b);
}

/* A valid safetensors file that is not the VAD is refused by eng_vad_load. */
static void test_load_refuses(void **state)
{
	(void)state;
	char path[] = "/tmp/test_vad_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t len;
	uint8_t *b = st_image("{\"stft_conv.weight\":{\"dtype\":\"F32\",\"shape\":[1],"
			      "\"data_offsets\":[0,4]}}",
			      0, 4, &len);
	uint64_t hl = len - 8 - 4;
	memcpy(b, &hl, 8);
	FILE *f = fdopen(fd, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
	struct eng_vad *v;
	char err[256];
	assert_int_equal(eng_vad_load(path, &v, err, sizeof(err)), -ST_CORRUPT);
	assert_null(v);
	assert_non_null(strstr(err, "stft_conv.weight"));
	assert_int_equal(eng_vad_load("/nonexistent/vad.safetensors", &v, err, sizeof(err)),
			 -ST_NOTFOUND);
	remove(path);
	mem_free(b);
}

static float *sixty_seconds(size_t *n)
{
	size_t nj;
	float *j = read_wav16("jfk.wav", &nj);
	*n = 60 * SR;
	float *x = mem_alloc(*n * sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < *n; i++)
		x[i] = j[i % nj];
	mem_free(j);
	return x;
}

struct job {
	const float *x;
	size_t n;
	float *p;
	int rc;
};

static void *job_run(void *arg)
{
	struct job *jb = arg;
	jb->rc = eng_vad_probs(vad, jb->x, jb->n, jb->p);
	return NULL;
}

/* Two threads on one model give the single-threaded answer; speed. */
static void test_threads_speed(void **state)
{
	(void)state;
	size_t n;
	float *x = sixty_seconds(&n);
	size_t nw = eng_vad_n_windows(n);
	float *p = mem_alloc(3 * nw * sizeof(*p));
	assert_non_null(p);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(eng_vad_probs(vad, x, n, p), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	printf("speed: 60 s of 16 kHz audio (%zu windows) in %.1f ms, %.0fx real time\n", nw, ms,
	       60e3 / ms);
	assert_true(ms < 60e3);
	struct job jb[2] = {{x, n, p + nw, -1}, {x, n, p + 2 * nw, -1}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, job_run, &jb[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jb[i].rc, 0);
		assert_memory_equal(p, jb[i].p, nw * sizeof(*p));
	}
	mem_free(p);
	mem_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* clang-format off */
		cmocka_unit_test(test_probs),
		cmocka_unit_test(test_speech),
		cmocka_unit_test(test_synthetic),
		cmocka_unit_test(test_collect_edges),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_load_refuses),
		cmocka_unit_test(test_threads_speed),
		/* clang-format on */
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
