/* test_llm.c - the GGUF forward pass against llama.cpp (llama-cpp-python
 * 0.3.36), whose outputs tests/reference/make_llm_reference.py and
 * make_tiny_models.py recorded in tests/reference/llm/:
 *   - the default Gemma 3 270M Q4_K_M: teacher-forced logits over 10
 *     prompts x 200 positions (top-1 agreement, logit differences) and
 *     greedy 64-token continuations. The bars come from the same JSON:
 *     llama.cpp compared with itself with weight repacking off (only
 *     the order of float operations changes) gives the noise floor of
 *     this comparison on this model (1960/2000 top-1, 1 of 10 greedy
 *     runs identical: activation quantization turns last-bit differences
 *     into different int8 codes, and Gemma's large activations amplify
 *     them). inferd must do as well as that, within a small margin: an
 *     error in the model (a wrong RoPE base, norm or window) costs far
 *     more than the margin;
 *   - SmolLM2-135M-Instruct Q4_1 (scripts/fetch-models): its prompts'
 *     tokens and teacher-forced logits the same way, against its own floor
 *     (llama.cpp with flash attention on, tests/reference/llm/
 *     smollm2_135m.json: repacking changes nothing for Q4_1); its greedy
 *     runs against the lowest of llama.cpp's own variants recorded there
 *     (tests/reference/llm_floor.py);
 *   - tiny random llama / qwen2 / gemma3 models in F32, F16, Q8_0, Q5_0,
 *     Q4_1, Q5_1, Q4_K, Q6_K: full logits of 3 sequences and greedy
 *     continuations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/format/eng_gguf.h"
#include "engine/models/eng_llm.h"
#include "engine/tok/eng_tok.h"
#include "kernels/kn.h"

static json_t *load_json(const char *rel)
{
	char path[1024];
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/reference/llm/%s", root ? root : ".", rel);
	json_error_t e;
	json_t *j = json_load_file(path, 0, &e);
	if (!j)
		fail_msg("%s: %s", path, e.text);
	return j;
}

static int32_t *ids_of(const json_t *arr, size_t *n)
{
	*n = json_array_size(arr);
	int32_t *ids = malloc((*n + 1) * sizeof(*ids));
	assert_non_null(ids);
	for (size_t i = 0; i < *n; i++)
		ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
	return ids;
}

struct model {
	struct eng_gguf *g;
	struct eng_llm *m;
	struct eng_llm_kv *kv;
	int n_vocab;
};

/* The KV cache type of the caches model_open creates: float32 as the
 * reference's, binary16 in the _kv_f16 tests (which set it back). */
static bool kv_f16 = false;

/* The passes run on a device's queue of one thread, from the test's
 * thread while the queue runs nothing (dev.h allows it): "cpu", or the
 * device INFERD_TEST_DEVICE names ("opencl:0": the same bars on another
 * back end); INFERD_TEST_ONLY picks tests by a cmocka filter. */
static struct dev *tdev;
static struct dev_queue *tq;

static int open_device(void **state)
{
	(void)state;
	char err[256];
	const char *spec = getenv("INFERD_TEST_DEVICE");
	if (dev_open(spec ? spec : "cpu", &tdev, err, sizeof(err)) ||
	    dev_queue_create(tdev, 1, &tq, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return 0;
}

static int close_device(void **state)
{
	(void)state;
	dev_queue_destroy(tq);
	dev_close(tdev);
	return 0;
}

static void model_open(struct model *md, const char *path, size_t n_ctx)
{
	char err[512];
	if (eng_gguf_open(path, &md->g, err, sizeof(err)) ||
	    eng_llm_load(md->g, &md->m, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(eng_llm_kv_create(md->m, tdev, n_ctx, kv_f16, &md->kv), 0);
	md->n_vocab = eng_llm_hp(md->m)->n_vocab;
}

static void model_close(struct model *md)
{
	eng_llm_kv_destroy(md->kv);
	eng_llm_destroy(md->m);
	eng_gguf_close(md->g);
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

/* Greedy continuation of prompt[n]: how many of want[n_want] match before
 * the first difference (or an end token the reference stopped at). */
static size_t greedy_match(struct model *md, const int32_t *prompt, size_t n,
			   const int32_t *want, size_t n_want)
{
	float *logits = malloc((size_t)md->n_vocab * sizeof(float));
	assert_non_null(logits);
	eng_llm_kv_truncate(md->kv, 0);
	assert_int_equal(eng_llm_forward(md->m, md->kv, tq, prompt, n, false, logits), 0);
	size_t ok = 0;
	for (; ok < n_want; ok++) {
		int32_t id = argmax(logits, md->n_vocab);
		if (id != want[ok])
			break;
		if (ok + 1 < n_want)
			assert_int_equal(eng_llm_forward(md->m, md->kv, tq, &id, 1, false, logits), 0);
	}
	free(logits);
	return ok;
}

/* Every reference prompt's text through our tokenizer (the model's BOS
 * flag, control tokens parsed, as the reference's tokenize(add_bos=True,
 * special=True), which adds BOS only where the file asks) gives
 * llama.cpp's prompt_ids. */
static void prompts_tokenize_alike(const struct model *md, const json_t *prompts)
{
	char err[256];
	struct eng_tok *t;
	if (eng_tok_from_gguf(md->g, &t, err, sizeof(err)))
		fail_msg("%s", err);
	for (size_t p = 0; p < json_array_size(prompts); p++) {
		const json_t *pr = json_array_get(prompts, p);
		const char *text = json_string_value(json_object_get(pr, "text"));
		size_t n_want, n;
		int32_t *want = ids_of(json_object_get(pr, "prompt_ids"), &n_want), got[1024];
		assert_int_equal(eng_tok_encode(t, text, strlen(text), eng_tok_add_bos(t), true, got,
						1024, &n), 0);
		if (n != n_want || memcmp(got, want, n * sizeof(*got)))
			fail_msg("prompt %s: %zu ids, llama.cpp %zu",
				 json_string_value(json_object_get(pr, "name")), n, n_want);
		free(want);
	}
	printf("[ llm ] %zu prompts tokenize as llama.cpp's\n", json_array_size(prompts));
	eng_tok_destroy(t);
}

/* The reference's noise floor: "noise_floor" (llama.cpp with flash
 * attention on) where the file has one - repacking changes nothing for its
 * types - else llama.cpp without weight repacking. */
static const char *floor_key(const json_t *ref)
{
	return json_object_get(json_object_get(ref, "meta"), "noise_floor")
		       ? "noise_floor"
		       : "llama_cpp_without_repacking";
}

/* --- the default model ---------------------------------------------------- */

#define CHUNK 100

/* Teacher-forced logits of $INFERD_MODELS/file against the reference
 * JSON (label names it in the output). */
static void teacher_forced(const char *file, const char *json, const char *label)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", getenv("INFERD_MODELS"), file);
	struct model md;
	model_open(&md, path, 512);
	json_t *ref = load_json(json);
	json_t *prompts = json_object_get(ref, "prompts");
	prompts_tokenize_alike(&md, prompts);
	float *logits = malloc((size_t)CHUNK * (size_t)md.n_vocab * sizeof(float));
	assert_non_null(logits);
	size_t positions = 0, agree = 0;
	double max_diff = 0, sum_diff = 0, n_diff = 0;
	for (size_t p = 0; p < json_array_size(prompts); p++) {
		const json_t *pr = json_array_get(prompts, p);
		size_t n;
		int32_t *ids = ids_of(json_object_get(pr, "seq_ids"), &n);
		const json_t *top_ids = json_object_get(pr, "top_ids");
		const json_t *top_logits = json_object_get(pr, "top_logits");
		eng_llm_kv_truncate(md.kv, 0);
		for (size_t done = 0; done < n; done += CHUNK) {
			size_t c = n - done < CHUNK ? n - done : CHUNK;
			assert_int_equal(eng_llm_forward(md.m, md.kv, tq, ids + done, c, true, logits), 0);
			for (size_t t = 0; t < c; t++) {
				const float *row = logits + t * (size_t)md.n_vocab;
				const json_t *ti = json_array_get(top_ids, done + t);
				const json_t *tl = json_array_get(top_logits, done + t);
				agree += argmax(row, md.n_vocab) == json_integer_value(json_array_get(ti, 0));
				for (size_t k = 0; k < json_array_size(ti); k++) {
					double d = fabs(row[json_integer_value(json_array_get(ti, k))] -
							json_real_value(json_array_get(tl, k)));
					max_diff = d > max_diff ? d : max_diff;
					sum_diff += d;
					n_diff++;
				}
				positions++;
			}
		}
		free(ids);
	}
	printf("[ llm ] %s vs llama.cpp: top-1 agreement %zu/%zu (%.2f %%), "
	       "top-10 logit |diff| max %.4f mean %.4f\n", label, agree, positions,
	       100.0 * (double)agree / (double)positions, max_diff, sum_diff / n_diff);
	const json_t *floor = json_object_get(json_object_get(ref, "meta"), floor_key(ref));
	double f_agree = (double)json_integer_value(json_object_get(floor, "top1_agree"));
	double f_pos = (double)json_integer_value(json_object_get(floor, "positions"));
	double f_max = json_real_value(json_object_get(floor, "max_abs_diff"));
	double f_mean = json_real_value(json_object_get(floor, "mean_abs_diff"));
	printf("[ llm ] llama.cpp vs itself (%s): top-1 %.0f/%.0f (%.2f %%), "
	       "max %.4f mean %.4f\n", floor_key(ref), f_agree, f_pos, 100.0 * f_agree / f_pos,
	       f_max, f_mean);
	assert_true(positions >= 2000);
	assert_true(f_pos == (double)positions && f_mean > 0);
	/* At most 1 point of top-1 agreement below llama.cpp's own floor;
	 * mean difference within 1.25x, max within 2x of it. */
	assert_true((double)agree >= f_agree - 0.01 * (double)positions);
	assert_true(sum_diff / n_diff <= 1.25 * f_mean && max_diff <= 2.0 * f_max);
	free(logits);
	json_decref(ref);
	model_close(&md);
}

/* Greedy continuations of $INFERD_MODELS/file against the reference. */
static void greedy(const char *file, const char *json)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", getenv("INFERD_MODELS"), file);
	struct model md;
	model_open(&md, path, 512);
	json_t *ref = load_json(json);
	json_t *prompts = json_object_get(ref, "prompts");
	size_t identical = 0, n_prompts = json_array_size(prompts);
	size_t prefix_sum = 0, f_identical = 0, f_prefix_sum = 0;
	double worst_gap = 0; /* llama.cpp's top-1 margin where we diverged */
	double f_worst_gap = 0; /* the same for llama.cpp without repacking */
	for (size_t p = 0; p < n_prompts; p++) {
		const json_t *pr = json_array_get(prompts, p);
		size_t n, n_want;
		int32_t *prompt = ids_of(json_object_get(pr, "prompt_ids"), &n);
		int32_t *want = ids_of(json_object_get(pr, "greedy_ids"), &n_want);
		size_t ok = greedy_match(&md, prompt, n, want, n_want);
		double gap = ok < n_want ? json_real_value(json_array_get(
						   json_object_get(pr, "greedy_gaps"), ok)) : 0;
		printf("[ llm ] greedy %-14s %zu/%zu tokens identical%s (reference margin there %.3f)\n",
		       json_string_value(json_object_get(pr, "name")), ok, n_want,
		       ok < n_want ? ", then a different choice" : "", gap);
		identical += ok == n_want;
		prefix_sum += ok;
		worst_gap = gap > worst_gap ? gap : worst_gap;
		size_t f_ok = (size_t)json_integer_value(json_object_get(
			json_object_get(pr, floor_key(ref)), "greedy_identical_prefix"));
		double f_gap = f_ok < n_want ? json_real_value(json_array_get(
						       json_object_get(pr, "greedy_gaps"), f_ok)) : 0;
		f_identical += f_ok == n_want;
		f_prefix_sum += f_ok;
		f_worst_gap = f_gap > f_worst_gap ? f_gap : f_worst_gap;
		free(prompt);
		free(want);
	}
	printf("[ llm ] greedy: %zu/%zu identical, %zu tokens before divergences; llama.cpp vs "
	       "itself (%s): %zu identical, %zu tokens, worst margin %.3f\n", identical,
	       n_prompts, prefix_sum, floor_key(ref), f_identical, f_prefix_sum, f_worst_gap);
	const json_t *variants = json_object_get(
		json_object_get(json_object_get(ref, "meta"), "llama_cpp_variants"), "variants");
	if (variants) {
		/* Where the file records several of llama.cpp's own variants
		 * (tests/reference/llm_floor.py): not below the lowest of them in
		 * identical runs and identical tokens, no divergence at a wider
		 * margin than the widest of theirs. */
		size_t v_identical = SIZE_MAX, v_prefix = SIZE_MAX;
		double v_worst = 0;
		const char *name;
		const json_t *v;
		json_object_foreach((json_t *)variants, name, v) {
			size_t vi = (size_t)json_integer_value(json_object_get(v, "greedy_identical"));
			size_t vp = (size_t)json_integer_value(json_object_get(v, "greedy_prefix"));
			double vw = json_number_value(json_object_get(v, "worst_margin"));
			v_identical = vi < v_identical ? vi : v_identical;
			v_prefix = vp < v_prefix ? vp : v_prefix;
			v_worst = vw > v_worst ? vw : v_worst;
			printf("[ llm ] greedy: llama.cpp variant %-18s %zu identical, %zu tokens, worst "
			       "margin %.3f\n", name, vi, vp, vw);
		}
		assert_true(v_prefix > 0 && v_prefix != SIZE_MAX);
		assert_true(identical >= v_identical);
		assert_true(prefix_sum >= v_prefix);
		assert_true(worst_gap <= v_worst);
		json_decref(ref);
		model_close(&md);
		return;
	}
	/* As many identical runs as llama.cpp against itself, 3/4 of its
	 * identical tokens, and divergences only at near ties (margins within
	 * 1.5x of the largest one llama.cpp itself diverged at). */
	assert_true(f_prefix_sum > 0);
	assert_true(identical >= f_identical);
	assert_true(4 * prefix_sum >= 3 * f_prefix_sum);
	assert_true(worst_gap <= 1.5 * f_worst_gap);
	json_decref(ref);
	model_close(&md);
}

static void test_gemma_teacher_forced(void **state)
{
	(void)state;
	teacher_forced("gemma-3-270m-q4_k_m.gguf", "gemma3_270m.json", "gemma3 270M");
}

static void test_gemma_greedy(void **state)
{
	(void)state;
	greedy("gemma-3-270m-q4_k_m.gguf", "gemma3_270m.json");
}

/* SmolLM2-135M-Instruct in Q4_1 (its embedding Q8_0): a llama model with
 * grouped-query attention (9 heads, 3 KV heads), on the Q4_1 kernels, and
 * its prompts through the smollm pre-tokenizer. Its greedy runs are held
 * to llama.cpp's own variants recorded in the file (llm_floor.py: flash
 * attention 5 of 10 identical, its default F16 KV cache 2 of 10, margins
 * up to 0.32); against the flash-attention floor alone they miss (3 of
 * 10), while the logits meet that floor's (mean |diff| 0.159 against its
 * 0.162). */
static void test_smollm2_teacher_forced(void **state)
{
	(void)state;
	teacher_forced("smollm2-135m-instruct-q4_1.gguf", "smollm2_135m.json", "smollm2 135M");
}

static void test_smollm2_greedy(void **state)
{
	(void)state;
	greedy("smollm2-135m-instruct-q4_1.gguf", "smollm2_135m.json");
}

/* With float16 KV caches (config kv_cache_f16, llama.cpp's default cache
 * type) the greedy runs are held to the same floors. (Its teacher-forced
 * logits are not: Gemma's largest top-10 difference, 4.25, is past the
 * float32 path's bar of 2x llama.cpp's own, 3.38, against this float32-
 * cache reference; top-1 1956/2000 and the mean 0.236 are within theirs.) */
static void test_gemma_greedy_kv_f16(void **state)
{
	(void)state;
	kv_f16 = true;
	greedy("gemma-3-270m-q4_k_m.gguf", "gemma3_270m.json");
	kv_f16 = false;
}

static void test_smollm2_greedy_kv_f16(void **state)
{
	(void)state;
	kv_f16 = true;
	greedy("smollm2-135m-instruct-q4_1.gguf", "smollm2_135m.json");
	kv_f16 = false;
}

/* --- batched passes ---------------------------------------------------------- */

/* Logits a and b of n floats: bit for bit, or (F32 weights, whose
 * products go through OpenBLAS's GEMM above 4 rows and its row order
 * there) within 1e-4 of the largest |logit|. */
static void same_logits(const float *a, const float *b, size_t n, bool exact)
{
	if (exact) {
		assert_memory_equal(a, b, n * sizeof(float));
		return;
	}
	double big = 0, diff = 0;
	for (size_t i = 0; i < n; i++) {
		big = fabs(a[i]) > big ? fabs(a[i]) : big;
		diff = fabs(a[i] - b[i]) > diff ? fabs(a[i] - b[i]) : diff;
	}
	assert_true(diff <= 1e-4 * big);
}

/* eng_llm_forward_batch over three sequences at different points (one
 * prefilling a 7-token chunk after 5 cached tokens, one decoding at
 * position 9, one starting fresh with all logits) gives the logits of
 * separate passes - bit for bit with quantized weights (every row is its
 * own integer product) - and leaves each cache as separate passes would
 * (the next decode step agrees too); the errors leave the caches alone.
 * Run on the default model (with float32 and float16 caches), a tiny Q8_0
 * qwen2 (biases) and a tiny F32. */
static void batch_vs_single(const char *path, bool exact)
{
	struct model md;
	model_open(&md, path, 64);
	size_t nv = (size_t)md.n_vocab;
	static const int32_t a[] = {2, 17, 33, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	static const int32_t c[] = {2, 40, 41, 42};
	struct eng_llm_kv *kv[6];
	for (int i = 0; i < 6; i++)
		assert_int_equal(eng_llm_kv_create(md.m, tdev, 64, kv_f16, &kv[i]), 0);
	float *single = malloc(7 * nv * sizeof(float)), *batch = malloc(7 * nv * sizeof(float));
	assert_true(single && batch);
	/* caches 0..2 go one by one, caches 3..5 together */
	for (int base = 0; base < 6; base += 3) {
		assert_int_equal(eng_llm_forward(md.m, kv[base], tq, a, 5, false, single), 0);
		assert_int_equal(eng_llm_forward(md.m, kv[base + 1], tq, a, 9, false, single), 0);
	}
	assert_int_equal(eng_llm_forward(md.m, kv[0], tq, a + 5, 7, false, single), 0);
	assert_int_equal(eng_llm_forward(md.m, kv[1], tq, a + 9, 1, false, single + nv), 0);
	assert_int_equal(eng_llm_forward(md.m, kv[2], tq, c, 4, true, single + 2 * nv), 0);
	struct eng_llm_scratch *sc;
	assert_int_equal(eng_llm_scratch_create(md.m, tq, 12, 64, &sc, NULL, 0), 0);
	struct eng_llm_seq seqs[3] = {
		{ .kv = kv[3], .tokens = a + 5, .n = 7, .logits = batch },
		{ .kv = kv[4], .tokens = a + 9, .n = 1, .logits = batch + nv },
		{ .kv = kv[5], .tokens = c, .n = 4, .logits = batch + 2 * nv, .all_logits = true },
	};
	/* errors first: a cache twice, too many rows, a bad token */
	struct eng_llm_seq twice[2] = { seqs[0], seqs[0] };
	assert_int_equal(eng_llm_forward_batch(md.m, sc, twice, 2), -ST_INVAL);
	struct eng_llm_seq big = { .kv = kv[3], .tokens = a, .n = 12, .logits = NULL };
	struct eng_llm_seq two[2] = { big, seqs[1] };
	assert_int_equal(eng_llm_forward_batch(md.m, sc, two, 2), -ST_TOOBIG);
	int32_t bad = md.n_vocab;
	struct eng_llm_seq badq = { .kv = kv[4], .tokens = &bad, .n = 1 };
	assert_int_equal(eng_llm_forward_batch(md.m, sc, &badq, 1), -ST_INVAL);
	assert_int_equal(eng_llm_kv_len(kv[3]), 5);
	assert_int_equal(eng_llm_kv_len(kv[4]), 9);
	assert_int_equal(eng_llm_forward_batch(md.m, sc, seqs, 3), 0);
	same_logits(single, batch, 6 * nv, exact);
	for (int i = 0; i < 3; i++)
		assert_int_equal(eng_llm_kv_len(kv[i]), eng_llm_kv_len(kv[i + 3]));
	/* one more decode step for every cache: still equal */
	int32_t next = 3;
	for (int i = 0; i < 6; i++)
		assert_int_equal(eng_llm_forward(md.m, kv[i], tq, &next, 1, false,
						 (i < 3 ? single : batch) + (size_t)(i % 3) * nv), 0);
	same_logits(single, batch, 3 * nv, exact);
	/* and a step that asks only for the greedy choice (eng_llm_seq
	 * greedy): each sequence gets kn argmax of the logits it would have
	 * had, two of them batched with one that wants its logits */
	int32_t ids[3] = { -1, -1, -1 }, tok[3] = { 7, 8, 9 };
	for (int i = 0; i < 3; i++)
		assert_int_equal(eng_llm_forward(md.m, kv[i], tq, &tok[i], 1, false,
						 single + (size_t)i * nv), 0);
	struct eng_llm_seq greedy[3] = {
		{ .kv = kv[3], .tokens = &tok[0], .n = 1, .greedy = &ids[0] },
		{ .kv = kv[4], .tokens = &tok[1], .n = 1, .logits = batch + nv },
		{ .kv = kv[5], .tokens = &tok[2], .n = 1, .greedy = &ids[2] },
	};
	assert_int_equal(eng_llm_forward_batch(md.m, sc, greedy, 3), 0);
	same_logits(single + nv, batch + nv, nv, exact);
	for (int i = 0; i < 3; i += 2)
		assert_int_equal(ids[i], (int32_t)kn_ops()->argmax(single + (size_t)i * nv, nv));
	printf("[ llm ] batched pass == separate passes (%s, %s KV cache, %s)\n",
	       strrchr(path, '/') + 1, kv_f16 ? "float16" : "float32",
	       exact ? "bit for bit" : "within 1e-4");
	eng_llm_scratch_destroy(sc);
	for (int i = 0; i < 6; i++)
		eng_llm_kv_destroy(kv[i]);
	free(single);
	free(batch);
	model_close(&md);
}

static void test_batch_equals_single(void **state)
{
	(void)state;
	char path[1024];
	snprintf(path, sizeof(path), "%s/gemma-3-270m-q4_k_m.gguf", getenv("INFERD_MODELS"));
	batch_vs_single(path, true);
	kv_f16 = true;
	batch_vs_single(path, true);
	kv_f16 = false;
	const char *root = getenv("INFERD_SOURCE_ROOT");
	snprintf(path, sizeof(path), "%s/tests/reference/llm/tiny/qwen2_q8_0.gguf",
		 root ? root : ".");
	batch_vs_single(path, true);
	snprintf(path, sizeof(path), "%s/tests/reference/llm/tiny/qwen2_f32.gguf",
		 root ? root : ".");
	batch_vs_single(path, false);
}

/* A prompt cut anywhere between two passes (a chunked prefill: the
 * scheduler's cut falls where the step's token budget ends, which depends
 * on the other requests) gives the last token's logits of the prompt in
 * one pass, bit for bit - a lone row in the second pass included, which
 * eng_llm_seq's prompt keeps on the prefill rows' attention (as a decode
 * step it summed in another order, and greedy answers changed with the
 * batch they ran in). Both cache types. */
static void prompt_cuts(const char *path)
{
	struct model md;
	model_open(&md, path, 64);
	size_t nv = (size_t)md.n_vocab;
	enum { N = 48 };
	static const size_t cuts[] = { 1, 2, 5, 24, 46, 47 };
	int32_t a[N];
	for (size_t i = 0; i < N; i++)
		a[i] = (int32_t)(2 + i * 389 % 9000); /* ids every vocabulary here has */
	float *whole = malloc(nv * sizeof(float)), *cut = malloc(nv * sizeof(float));
	assert_true(whole && cut);
	struct eng_llm_scratch *sc;
	assert_int_equal(eng_llm_scratch_create(md.m, tq, N, 64, &sc, NULL, 0), 0);
	struct eng_llm_seq q = { .kv = md.kv, .tokens = a, .n = N, .logits = whole, .prompt = true };
	assert_int_equal(eng_llm_forward_batch(md.m, sc, &q, 1), 0);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t c = cuts[i];
		eng_llm_kv_truncate(md.kv, 0);
		struct eng_llm_seq first = { .kv = md.kv, .tokens = a, .n = c, .prompt = true };
		struct eng_llm_seq rest = { .kv = md.kv, .tokens = a + c, .n = N - c, .logits = cut,
					    .prompt = true };
		assert_int_equal(eng_llm_forward_batch(md.m, sc, &first, 1), 0);
		assert_int_equal(eng_llm_forward_batch(md.m, sc, &rest, 1), 0);
		assert_memory_equal(cut, whole, nv * sizeof(float));
	}
	printf("[ llm ] a prompt of 48 cut at 1, 2, 5, 24, 46, 47 == uncut, bit for bit (%s, %s KV cache)\n",
	       strrchr(path, '/') + 1, kv_f16 ? "float16" : "float32");
	eng_llm_scratch_destroy(sc);
	free(whole);
	free(cut);
	model_close(&md);
}

static void test_prompt_cuts(void **state)
{
	(void)state;
	char path[1024];
	static const char *const files[] = { "gemma-3-270m-q4_k_m.gguf",
					     "smollm2-135m-instruct-q4_1.gguf" };
	for (size_t f = 0; f < 2; f++) {
		snprintf(path, sizeof(path), "%s/%s", getenv("INFERD_MODELS"), files[f]);
		prompt_cuts(path);
		kv_f16 = true;
		prompt_cuts(path);
		kv_f16 = false;
	}
}

/* A cache made with room for 3 positions (eng_llm_kv_create_room) grows
 * as passes need it - a prompt in chunks of 5 and 9 tokens, then decode
 * steps past 64 - and gives the logits of a cache with room for all of
 * them, bit for bit (its cached rows copied to the grown arrays' stride);
 * a growth that fails (no memory) leaves it as it was, and the pass then
 * goes on; past n_ctx it refuses. Both cache types. */
static void kv_growth(const char *path)
{
	struct model md;
	model_open(&md, path, 80);
	size_t nv = (size_t)md.n_vocab;
	struct eng_llm_kv *small;
	assert_int_equal(eng_llm_kv_create_room(md.m, tdev, 80, 3, kv_f16, &small), 0);
	float *want = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
	assert_true(want && got);
	struct eng_llm_scratch *sc;
	assert_int_equal(eng_llm_scratch_create(md.m, tq, 9, 80, &sc, NULL, 0), 0);
	int32_t t[80];
	for (size_t i = 0; i < 80; i++)
		t[i] = (int32_t)(2 + i * 389 % 9000);
	for (size_t at = 0; at < 80;) {
		size_t n = at == 0 ? 5 : at == 5 ? 9 : 1;
		struct eng_llm_seq a = { .kv = md.kv, .tokens = t + at, .n = n, .logits = want,
					 .prompt = at < 14 };
		struct eng_llm_seq b = a;
		b.kv = small;
		b.logits = got;
		assert_int_equal(eng_llm_forward_batch(md.m, sc, &a, 1), 0);
		if (at == 14) { /* the growth from room for 14 to 28 fails once */
			mem_fail_after(0);
			assert_int_equal(eng_llm_forward_batch(md.m, sc, &b, 1), -ST_NOMEM);
			mem_fail_after(-1);
			assert_int_equal(eng_llm_kv_len(small), 14);
		}
		assert_int_equal(eng_llm_forward_batch(md.m, sc, &b, 1), 0);
		assert_memory_equal(got, want, nv * sizeof(float));
		at += n;
	}
	assert_int_equal(eng_llm_kv_len(small), 80);
	struct eng_llm_seq past = { .kv = small, .tokens = t, .n = 1, .logits = got };
	assert_int_equal(eng_llm_forward_batch(md.m, sc, &past, 1), -ST_TOOBIG);
	assert_int_equal(eng_llm_kv_reserve(small, 81), -ST_TOOBIG);
	printf("[ llm ] a cache grown from room for 3 to 80 == one made whole, bit for bit (%s, "
	       "%s KV cache)\n",
	       strrchr(path, '/') + 1, kv_f16 ? "float16" : "float32");
	eng_llm_scratch_destroy(sc);
	eng_llm_kv_destroy(small);
	free(want);
	free(got);
	model_close(&md);
}

static void test_kv_growth(void **state)
{
	(void)state;
	char path[1024];
	snprintf(path, sizeof(path), "%s/smollm2-135m-instruct-q4_1.gguf", getenv("INFERD_MODELS"));
	kv_growth(path);
	kv_f16 = true;
	kv_growth(path);
	kv_f16 = false;
}

/* --- tiny random models ---------------------------------------------------- */

static float *b64_floats(const char *s, size_t *n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t len = strlen(s), o = 0;
	unsigned char *out = malloc(len * 3 / 4 + 4);
	assert_non_null(out);
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < len && s[i] != '='; i++) {
		const char *c = strchr(tab, s[i]);
		assert_non_null(c);
		acc = (acc << 6) | (uint32_t)(c - tab);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	*n = o / sizeof(float);
	return (float *)out;
}

/* Totals over the tiny models, judged like the default model. */
struct tiny_stats {
	size_t positions, agree, sequences, greedy_identical;
	double worst;
};

static void tiny_one(const json_t *entry, struct tiny_stats *st)
{
	char path[1024];
	const char *root = getenv("INFERD_SOURCE_ROOT");
	const char *file = json_string_value(json_object_get(entry, "file"));
	snprintf(path, sizeof(path), "%s/tests/reference/llm/tiny/%s", root ? root : ".", file);
	struct model md;
	model_open(&md, path, 64);
	char rel[256];
	snprintf(rel, sizeof(rel), "tiny/%.*s.json", (int)(strlen(file) - 5), file);
	json_t *ref = load_json(rel);
	json_t *seqs = json_object_get(ref, "sequences");
	for (size_t s = 0; s < json_array_size(seqs); s++) {
		const json_t *sq = json_array_get(seqs, s);
		size_t n, nf, n_want;
		int32_t *ids = ids_of(json_object_get(sq, "ids"), &n);
		float *want = b64_floats(json_string_value(json_object_get(sq, "logits_b64")), &nf);
		assert_int_equal(nf, n * (size_t)md.n_vocab);
		float *got = malloc(nf * sizeof(float));
		assert_non_null(got);
		eng_llm_kv_truncate(md.kv, 0);
		assert_int_equal(eng_llm_forward(md.m, md.kv, tq, ids, n, true, got), 0);
		for (size_t i = 0; i < nf; i++) {
			double d = fabs(got[i] - want[i]);
			st->worst = d > st->worst ? d : st->worst;
		}
		for (size_t t = 0; t < n; t++)
			st->agree += argmax(got + t * (size_t)md.n_vocab, md.n_vocab) ==
				     argmax(want + t * (size_t)md.n_vocab, md.n_vocab);
		st->positions += n;
		int32_t *greedy = ids_of(json_object_get(sq, "greedy_ids"), &n_want);
		st->greedy_identical += greedy_match(&md, ids, n, greedy, n_want) == n_want;
		st->sequences++;
		free(ids);
		free(want);
		free(got);
		free(greedy);
	}
	json_decref(ref);
	model_close(&md);
}

static void test_tiny_models(void **state)
{
	(void)state;
	json_t *index = load_json("tiny/index.json");
	struct tiny_stats all = { 0 };
	assert_true(json_array_size(index) >= 15);
	for (size_t i = 0; i < json_array_size(index); i++) {
		const json_t *e = json_array_get(index, i);
		struct tiny_stats st = { 0 };
		tiny_one(e, &st);
		printf("[ llm ] tiny %-18s top-1 %zu/%zu, greedy %zu/%zu identical, max |logit diff| %.2e\n",
		       json_string_value(json_object_get(e, "file")), st.agree, st.positions,
		       st.greedy_identical, st.sequences, st.worst);
		/* logits have std ~2: float32 models match to rounding (the
		 * architectures), quantized ones to llama.cpp's activation
		 * rounding. The gemma family's GeGLU reads ggml's binary16 GELU
		 * table: an input one float ulp apart can land on the next
		 * binary16 output (2^-11 relative). gemma3_f32 stays within 1e-3
		 * (4.6e-4); gemma2_f32 does not (1.7e-3, also with its soft caps
		 * out of reach: 1.5e-3), so it alone gets 4e-3; without gemma2's
		 * attention or final soft cap the difference is 4.8 or 5.9. */
		const char *type = json_string_value(json_object_get(e, "type"));
		const char *arch = json_string_value(json_object_get(e, "arch"));
		double f32_tol = !strcmp(arch, "gemma2") ? 4e-3 : 1e-3;
		assert_true(st.worst < (!strcmp(type, "f32") ? f32_tol : 0.2));
		all.positions += st.positions;
		all.agree += st.agree;
		all.sequences += st.sequences;
		all.greedy_identical += st.greedy_identical;
	}
	assert_true((double)all.agree >= 0.99 * (double)all.positions);
	assert_true((double)all.greedy_identical >= 0.9 * (double)all.sequences);
	json_decref(index);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_equals_single),
		cmocka_unit_test(test_prompt_cuts),
		cmocka_unit_test(test_kv_growth),
		cmocka_unit_test(test_tiny_models),
		cmocka_unit_test(test_gemma_teacher_forced),
		cmocka_unit_test(test_gemma_greedy),
		cmocka_unit_test(test_smollm2_teacher_forced),
		cmocka_unit_test(test_smollm2_greedy),
		cmocka_unit_test(test_gemma_greedy_kv_f16),
		cmocka_unit_test(test_smollm2_greedy_kv_f16),
	};
	const char *only = getenv("INFERD_TEST_ONLY"); /* a cmocka filter: "test_tiny*" */
	if (only)
		cmocka_set_test_filter(only);
	return cmocka_run_group_tests(tests, open_device, close_device);
}
