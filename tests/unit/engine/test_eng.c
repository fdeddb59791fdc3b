/* test_eng.c - the model registry (engine/eng.h): eng_create on both
 * default models with AUTO detection, the accessors, eng_model_find, the
 * one-line errors for a missing path and a corrupt file, and eng_inspect.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <time.h>
#include <unistd.h>

#include "common/st.h"
#include "devices/dev.h"
#include "engine/eng.h"
#include "engine/eng_int.h"
#include "engine/models/eng_whisper.h"
#include "engine/models/eng_whisper_int.h"

static char gemma[4096], whisper[4096];

static int setup(void **state)
{
	(void)state;
	const char *dir = getenv("INFERD_MODELS");
	if (!dir)
		return -1;
	snprintf(gemma, sizeof(gemma), "%s/gemma-3-270m-q4_k_m.gguf", dir);
	snprintf(whisper, sizeof(whisper), "%s/whisper-tiny.en", dir);
	return 0;
}

static void test_create_both(void **state)
{
	(void)state;
	char err[1024];
	struct eng *eng;
	const struct eng_model_spec specs[] = {
		{ .name = "whisper", .path = whisper, .format = ENG_FORMAT_AUTO, .replica_count = 1 },
		{ .name = "gemma", .path = gemma, .format = ENG_FORMAT_AUTO, .replica_count = 2 },
	};
	int64_t before = (int64_t)time(NULL);
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), 0);
	int64_t after = (int64_t)time(NULL);
	assert_true(eng_is_ready(eng));
	assert_int_equal(eng_model_count(eng), 2);
	const struct eng_model *w = eng_model_at(eng, 0), *g = eng_model_at(eng, 1);
	assert_null(eng_model_at(eng, 2));
	assert_ptr_equal(eng_model_find(eng, "gemma"), g);
	assert_ptr_equal(eng_model_find(eng, "whisper"), w);
	assert_null(eng_model_find(eng, "nope"));
	assert_string_equal(eng_model_name(w), "whisper");
	assert_int_equal(eng_model_task(w), ENG_TASK_TRANSCRIPTION);
	assert_int_equal(eng_model_format(w), ENG_FORMAT_CT2);
	assert_string_equal(eng_model_arch(w), "WhisperSpec");
	assert_int_equal(eng_model_size_bytes(w), 75529741u);
	assert_true(eng_model_is_ready(w));
	assert_int_equal(eng_model_task(g), ENG_TASK_GENERATION);
	assert_int_equal(eng_model_format(g), ENG_FORMAT_GGUF);
	assert_string_equal(eng_model_arch(g), "gemma3");
	assert_int_equal(eng_model_size_bytes(g), 246587904u);
	assert_true(eng_model_created(g) >= before && eng_model_created(g) <= after);
	assert_string_equal(eng_task_str(eng_model_task(g)), "generation");
	assert_string_equal(eng_task_str(ENG_TASK_TRANSCRIPTION), "transcription");
	assert_string_equal(eng_format_str(ENG_FORMAT_CT2), "ct2");
	assert_string_equal(eng_format_str(ENG_FORMAT_GGUF), "gguf");
	assert_string_equal(eng_format_str(ENG_FORMAT_AUTO), "auto");
	eng_destroy(eng);
	eng_destroy(NULL);
	assert_false(eng_is_ready(NULL));
}

static void test_explicit_formats(void **state)
{
	(void)state;
	char err[1024];
	struct eng *eng;
	struct eng_model_spec s = { .name = "g", .path = gemma, .format = ENG_FORMAT_GGUF, .replica_count = 1 };
	assert_int_equal(eng_create(&s, 1, &eng, err, sizeof(err)), 0);
	eng_destroy(eng);
	s.format = ENG_FORMAT_CT2; /* a GGUF file is no CT2 folder */
	assert_int_equal(eng_create(&s, 1, &eng, err, sizeof(err)), -ST_IO);
	assert_null(eng);
	assert_true(strncmp(err, "model 'g': ", 11) == 0);
	assert_non_null(strstr(err, "/model.bin: "));
}

static void test_missing_path(void **state)
{
	(void)state;
	char err[1024];
	struct eng *eng = (struct eng *)1;
	const struct eng_model_spec specs[] = {
		{ .name = "gemma", .path = gemma, .replica_count = 1 },
		{ .name = "ghost", .path = "/nonexistent/model.gguf", .replica_count = 1 },
	};
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_NOTFOUND);
	assert_null(eng);
	assert_string_equal(err, "model 'ghost': /nonexistent/model.gguf: No such file or directory");
}

static void test_bad_specs(void **state)
{
	(void)state;
	char err[1024];
	struct eng *eng;
	struct eng_model_spec specs[] = {
		{ .name = "a", .path = gemma, .replica_count = 1 },
		{ .name = "a", .path = whisper, .replica_count = 1 },
	};
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "model 'a': name used twice");
	specs[1].name = "b";
	specs[1].replica_count = -1;
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "model 'b': replicas: expected a count >= 1 or placements");
	specs[1].replica_count = 1000;
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_INVAL);
	assert_non_null(strstr(err, "model 'b': 1000 replicas need at least 1000 cores"));
	specs[1].replica_count = 1;
	struct eng_replica_spec far = { .device = "cpu:1023", .threads = 1 };
	specs[1].replicas = &far;
	specs[1].n_replicas = 1;
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_NOTFOUND);
	assert_non_null(strstr(err, "model 'b': replica 0:"));
	struct eng_replica_spec many = { .device = "cpu:0", .threads = 2 };
	specs[1].replicas = &many;
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_INVAL);
	assert_non_null(strstr(err, "model 'b': replica 0: 2 threads on cpu:0"));
	specs[1].replicas = NULL;
	specs[1].n_replicas = 0;
	specs[1].path = "/";
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_NOTFOUND);
	assert_string_equal(err, "model 'b': /: folder has no model.bin (not a CTranslate2 model)");
	specs[1].path = "/etc/hostname";
	assert_int_equal(eng_create(specs, 2, &eng, err, sizeof(err)), -ST_UNSUPPORTED);
	assert_non_null(strstr(err, "unknown model format"));
	assert_int_equal(eng_create(specs, 0, &eng, err, sizeof(err)), 0);
	assert_int_equal(eng_model_count(eng), 0);
	eng_destroy(eng);
}

/* copy_prefix - write the first n bytes of src to a new temp file. */
static void copy_prefix(const char *src, size_t n, char *tmp)
{
	FILE *in = fopen(src, "rb");
	int fd = mkstemp(tmp);
	assert_non_null(in);
	assert_true(fd >= 0);
	char buf[65536];
	while (n > 0) {
		size_t k = fread(buf, 1, n < sizeof(buf) ? n : sizeof(buf), in);
		assert_true(k > 0);
		assert_int_equal(write(fd, buf, k), (ssize_t)k);
		n -= k;
	}
	close(fd);
	fclose(in);
}

static void test_corrupt_file(void **state)
{
	(void)state;
	char err[1024], want[4200], tmp[] = "/tmp/inferd-eng-XXXXXX";
	struct eng *eng;
	copy_prefix(gemma, 6525100, tmp); /* ends in the last tensor info (6525053..6525112) */
	struct eng_model_spec s = { .name = "bad", .path = tmp, .replica_count = 1 };
	assert_int_equal(eng_create(&s, 1, &eng, err, sizeof(err)), -ST_CORRUPT);
	snprintf(want, sizeof(want), "model 'bad': %s: truncated at byte ", tmp);
	if (strncmp(err, want, strlen(want)) != 0)
		print_error("got '%s'\n", err);
	assert_true(strncmp(err, want, strlen(want)) == 0);
	assert_non_null(strstr(err, "reading the type and offset of tensor 'blk.17.post_ffw_norm.weight' (index 235)"));
	assert_null(strchr(err, '\n'));
	unlink(tmp);
}

/* inspect - eng_inspect(path) into a string (free()). */
static char *inspect(const char *path, int want_rc)
{
	char err[1024], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(eng_inspect(path, f, err, sizeof(err)), want_rc);
	fclose(f);
	return text;
}

static void test_inspect(void **state)
{
	(void)state;
	char *t = inspect(gemma, 0);
	assert_non_null(strstr(t, "format: gguf\n"));
	assert_non_null(strstr(t, "version: 3\n"));
	assert_non_null(strstr(t, "  general.architecture: string = \"gemma3\"\n"));
	assert_non_null(strstr(t, "  gemma3.context_length: u32 = 32768\n"));
	assert_non_null(strstr(t, "  tokenizer.ggml.tokens: [string; 262144] \"<pad>\", \"<eos>\", \"<bos>\""));
	assert_non_null(strstr(t, "  tokenizer.ggml.add_bos_token: bool = true\n"));
	assert_non_null(strstr(t, "token_embd.weight"));
	assert_non_null(strstr(t, "[640, 262144]"));
	assert_non_null(strstr(t, "total: 236 tensors, 246587904 bytes"));
	free(t);
	t = inspect(whisper, 0);
	assert_non_null(strstr(t, "format: ct2\n"));
	assert_non_null(strstr(t, "binary version: 6\nspec: WhisperSpec\nspec revision: 3\n"));
	assert_non_null(strstr(t, "  lang_ids: [array; 98] 50259, 50260"));
	assert_non_null(strstr(t, "encoder/conv1/weight"));
	assert_non_null(strstr(t, "[384, 80, 3]"));
	assert_non_null(strstr(t, "  decoder/projection/weight -> decoder/embeddings/weight\n"));
	assert_non_null(strstr(t, "total: 148 variables"));
	free(t);
	t = inspect("/nonexistent", -ST_NOTFOUND);
	assert_string_equal(t, "");
	free(t);
}

/* eng_generate's context arithmetic on the tiny llama model
 * (tests/reference/llm/tiny/llama_f32.gguf, context_length 256): a request
 * that does not fit is -ST_TOOBIG with the numbers; with max_tokens_fit the
 * same request is cut to the context and ends with "length" after exactly
 * the tokens the context had left (greedy: this prompt never reaches the
 * tiny model's EOS). */
static void test_generate_context(void **state)
{
	(void)state;
	char path[1024], err[256];
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/reference/llm/tiny/llama_f32.gguf",
		 root ? root : ".");
	struct eng *eng;
	const struct eng_model_spec spec = { .name = "tiny", .path = path,
					     .format = ENG_FORMAT_AUTO, .replica_count = 1 };
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	const struct eng_model *m = eng_model_find(eng, "tiny");
	assert_int_equal(eng_model_context(m), 256);
	struct eng_gen_params p;
	eng_gen_params_init(&p);
	p.prompt = "abcabc";
	p.temperature = 0;
	p.max_tokens = 1000;
	struct eng_gen_result *res = NULL;
	assert_int_equal(eng_generate(m, &p, &res, err, sizeof(err)), -ST_TOOBIG);
	assert_null(res);
	assert_non_null(strstr(err, "this model's context is 256 tokens"));
	assert_non_null(strstr(err, "1000 for max_tokens"));
	p.max_tokens_fit = true;
	err[0] = '\0';
	assert_int_equal(eng_generate(m, &p, &res, err, sizeof(err)), 0);
	assert_non_null(res);
	assert_true(res->n_prompt_tokens > 1 && res->n_prompt_tokens < 256);
	printf("[ eng ] tiny: %zu prompt + %zu completion tokens, finish %d\n",
	       res->n_prompt_tokens, res->n_completion_tokens, (int)res->finish);
	assert_int_equal(res->finish, ENG_FINISH_LENGTH);
	assert_int_equal(res->n_prompt_tokens + res->n_completion_tokens, 256);
	eng_gen_result_destroy(res);
	eng_destroy(eng);
}

/* max_model_len on the same tiny model (trained context 256): 64 is the
 * context requests get (a request that fits 256 but not 64 is refused,
 * one that fits 64 runs); 512, past the trained context, is refused at
 * load naming both numbers; on a Whisper model the key is refused. */
static void test_max_model_len(void **state)
{
	(void)state;
	char path[1024], err[512];
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/reference/llm/tiny/llama_f32.gguf",
		 root ? root : ".");
	struct eng *eng;
	struct eng_model_spec spec = { .name = "tiny", .path = path, .format = ENG_FORMAT_AUTO,
				       .replica_count = 1, .max_model_len = 64 };
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	const struct eng_model *m = eng_model_find(eng, "tiny");
	assert_int_equal(eng_model_context(m), 64);
	struct eng_gen_params p;
	eng_gen_params_init(&p);
	p.prompt = "abcabc";
	p.temperature = 0;
	p.max_tokens = 100; /* fits 256, not 64 */
	struct eng_gen_result *res = NULL;
	assert_int_equal(eng_generate(m, &p, &res, err, sizeof(err)), -ST_TOOBIG);
	assert_non_null(strstr(err, "this model's context is 64 tokens"));
	p.max_tokens = 8;
	assert_int_equal(eng_generate(m, &p, &res, err, sizeof(err)), 0);
	assert_int_equal(res->n_completion_tokens, 8);
	eng_gen_result_destroy(res);
	eng_destroy(eng);

	spec.max_model_len = 512;
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), -ST_INVAL);
	assert_null(eng);
	assert_non_null(strstr(err, "model 'tiny': "));
	assert_non_null(strstr(err, "max_model_len is 512 tokens, but the model was trained for "
				    "a context of 256 (llama.context_length)"));
	spec.max_model_len = 256; /* the whole trained context is allowed */
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	assert_int_equal(eng_model_context(eng_model_find(eng, "tiny")), 256);
	eng_destroy(eng);

	spec = (struct eng_model_spec){ .name = "w", .path = whisper, .format = ENG_FORMAT_AUTO,
					.replica_count = 1, .max_model_len = 64 };
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), -ST_UNSUPPORTED);
	assert_non_null(strstr(err, "max_model_len applies to GGUF generation models only"));
}

/* Transcription batching computes what each request would alone, bit for
 * bit: eng_whisper_encode_batch over two windows of different (random)
 * log-mel input against eng_whisper_encode of each (output and
 * cross-attention keys/values), and eng_whisper_decode_steps against
 * eng_whisper_decode per sequence: three sequences (two on one window, at
 * different cache lengths), five steps. Window 0 is trimmed to 1008
 * encoder positions (eng_whisper_enc_trim, a live stream's 20 s), so the
 * stacked rows, the cross-attention and the decode steps mix window
 * sizes; a trim to 0 or past 1500 is the full window. */
static void test_whisper_batched_steps(void **state)
{
	(void)state;
	char err[512];
	struct eng *eng;
	const struct eng_model_spec spec = { .name = "w", .path = whisper,
					     .format = ENG_FORMAT_AUTO, .replica_count = 1 };
	assert_int_equal(eng_create(&spec, 1, &eng, err, sizeof(err)), 0);
	const struct eng_whisper *w = ((const struct eng_model *)eng_model_at(eng, 0))->whisper;
	struct dev *dv;
	struct dev_queue *q; /* one thread: every op on this one */
	assert_int_equal(dev_open("cpu", &dv, err, sizeof(err)), 0);
	assert_int_equal(dev_queue_create(dv, 1, &q, err, sizeof(err)), 0);
	const struct eng_whisper_hp *hp = eng_whisper_hp(w);
	size_t nv = (size_t)hp->n_vocab, T = ENG_WHISPER_N_FRAMES, M = (size_t)hp->n_mels;
	float *mel = malloc(M * T * sizeof(float));
	assert_non_null(mel);
	float *mel2 = malloc(M * T * sizeof(float));
	assert_non_null(mel2);
	uint32_t r = 7;
	struct eng_whisper_enc *enc[2], *benc[2];
	for (int e = 0; e < 2; e++) {
		float *m = e ? mel2 : mel;
		for (size_t i = 0; i < M * T; i++) {
			r = r * 1664525u + 1013904223u;
			m[i] = (float)(r >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
		}
		assert_int_equal(eng_whisper_enc_create(w, dv, &enc[e], err, sizeof(err)), 0);
		assert_int_equal(eng_whisper_enc_create(w, dv, &benc[e], err, sizeof(err)), 0);
		eng_whisper_enc_trim(w, enc[e], e ? 0 : 1008);
		eng_whisper_enc_trim(w, benc[e], e ? 5000 : 1008);
		assert_int_equal(eng_whisper_encode(w, enc[e], q, m, T, 0, e ? T : 2000), 0); /* 0: 20 s */
	}
	size_t A = (size_t)hp->n_audio_ctx, d = (size_t)hp->d_model;
	assert_int_equal(eng_whisper_enc_ctx(enc[0]), 1008);
	assert_int_equal(eng_whisper_enc_ctx(benc[1]), A);
	const float *mels[2] = { mel, mel2 };
	const size_t strides[2] = { T, T }, f0[2] = { 0, 0 }, nf[2] = { 2000, T };
	assert_int_equal(eng_whisper_encode_batch(w, q, benc, mels, strides, f0, nf, 2), 0);
	for (int e = 0; e < 2; e++) {
		size_t n = eng_whisper_enc_ctx(enc[e]);
		assert_memory_equal(enc[e]->x, benc[e]->x, n * d * sizeof(float));
		for (int li = 0; li < hp->dec_layers; li++)
			assert_memory_equal(enc[e]->cross_kv + (size_t)li * A * 2 * d,
					    benc[e]->cross_kv + (size_t)li * A * 2 * d,
					    n * 2 * d * sizeof(float));
	}
	/* caches 0..2 alone, 3..5 batched; sequence i uses window i % 2 */
	struct eng_whisper_kv *kv[6];
	float *alone = malloc(3 * nv * sizeof(float)), *batch = malloc(3 * nv * sizeof(float));
	assert_true(alone && batch);
	const int32_t prompt[] = { 50257, 50362, 400, 500, 600 };
	for (int i = 0; i < 6; i++) {
		assert_int_equal(eng_whisper_kv_create(w, dv, &kv[i]), 0);
		size_t n = (size_t)(i % 3) + 2; /* cache lengths 2, 3, 4 */
		assert_int_equal(eng_whisper_decode(w, enc[i % 3 % 2], kv[i], q, prompt, n,
						    alone, NULL, 0), 0);
	}
	for (int step = 0; step < 5; step++) {
		struct eng_whisper_step st[3];
		int32_t tok[3];
		for (int i = 0; i < 3; i++) {
			tok[i] = 1000 + 37 * step + i;
			assert_int_equal(eng_whisper_decode(w, enc[i % 2], kv[i], q, &tok[i], 1,
							    alone + (size_t)i * nv, NULL, 0), 0);
			st[i] = (struct eng_whisper_step){ enc[i % 2], kv[i + 3], &tok[i], 1,
							   batch + (size_t)i * nv, NULL, 0 };
		}
		assert_int_equal(eng_whisper_decode_steps(w, q, st, 3), 0);
		assert_memory_equal(alone, batch, 3 * nv * sizeof(float));
		for (int i = 0; i < 3; i++)
			assert_int_equal(eng_whisper_kv_len(kv[i]), eng_whisper_kv_len(kv[i + 3]));
	}
	int32_t badtok = (int32_t)nv;
	struct eng_whisper_step bad = { enc[0], kv[3], &badtok, 1, batch, NULL, 0 };
	assert_int_equal(eng_whisper_decode_steps(w, q, &bad, 1), -ST_INVAL);
	/* short prompts (2..4 tokens, one with the logits of its first token
	 * too) in one pass, against eng_whisper_decode alone */
	struct eng_whisper_kv *pk[4];
	float *at_a = malloc(nv * sizeof(float)), *at_b = malloc(nv * sizeof(float));
	assert_true(at_a && at_b);
	for (int i = 0; i < 4; i++)
		assert_int_equal(eng_whisper_kv_create(w, dv, &pk[i]), 0);
	assert_int_equal(eng_whisper_decode(w, enc[0], pk[0], q, prompt, 4, alone, at_a, 0), 0);
	assert_int_equal(eng_whisper_decode(w, enc[1], pk[1], q, prompt + 1, 2, alone + nv,
					    NULL, 0), 0);
	struct eng_whisper_step ps[2] = {
		{ enc[0], pk[2], prompt, 4, batch, at_b, 0 },
		{ enc[1], pk[3], prompt + 1, 2, batch + nv, NULL, 0 },
	};
	assert_int_equal(eng_whisper_decode_steps(w, q, ps, 2), 0);
	assert_memory_equal(alone, batch, 2 * nv * sizeof(float));
	assert_memory_equal(at_a, at_b, nv * sizeof(float));
	assert_int_equal(eng_whisper_kv_len(pk[2]), 4);
	for (int i = 0; i < 4; i++)
		eng_whisper_kv_destroy(pk[i]);
	free(at_a);
	free(at_b);
	for (int i = 0; i < 6; i++)
		eng_whisper_kv_destroy(kv[i]);
	for (int e = 0; e < 2; e++) {
		eng_whisper_enc_destroy(enc[e]);
		eng_whisper_enc_destroy(benc[e]);
	}
	free(mel);
	free(mel2);
	free(alone);
	free(batch);
	dev_queue_destroy(q);
	dev_close(dv);
	eng_destroy(eng);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_both),
		cmocka_unit_test(test_explicit_formats),
		cmocka_unit_test(test_missing_path),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_corrupt_file),
		cmocka_unit_test(test_inspect),
		cmocka_unit_test(test_generate_context),
		cmocka_unit_test(test_max_model_len),
		cmocka_unit_test(test_whisper_batched_steps),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
