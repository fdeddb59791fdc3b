/* test_tok.c - the GGUF tokenizer (engine/tok/eng_tok.h) against llama.cpp:
 *   - SPM ("llama" model) on gemma-3-270m: ids, pieces and detokenized
 *     text recorded from llama.cpp by tests/reference/make_tokenizer_reference.py
 *     (tests/reference/llm/tokenizer_gemma3.json);
 *   - byte-level BPE ("gpt2" model) with pre "qwen2", "llama-bpe",
 *     "gpt-2" and "smollm": a GGUF built here in memory from Whisper's tokenizer.json
 *     (GPT-2's vocabulary), against llama.cpp's ids for the same GGUF
 *     recorded by tests/reference/make_tok_cases.py
 *     (tests/reference/llm/tokenizer_bpe_whisper.json);
 *   - special-token parsing, EOG ids, the BOS flag, corrupt and truncated
 *     vocabularies, allocation failures and encode speed.
 *
 * Environment: INFERD_MODELS (models folder), INFERD_SOURCE_ROOT (repo).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <jansson.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_gguf.h"
#include "engine/tok/eng_tok.h"

#define MAX_IDS 65536

/* ---- a GGUF writer (v3, no tensors) ---- */

struct gw {
	uint8_t *p;    /* bytes */
	size_t n, cap; /* used, allocated */
	uint64_t n_kv; /* KV pairs written */
};

static void gw_put(struct gw *w, const void *src, size_t n)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2 + 64;
		w->p = realloc(w->p, w->cap);
		assert_non_null(w->p);
	}
	memcpy(w->p + w->n, src, n);
	w->n += n;
}

static void gw_u32(struct gw *w, uint32_t v) { gw_put(w, &v, 4); }
static void gw_u64(struct gw *w, uint64_t v) { gw_put(w, &v, 8); }

static void gw_str(struct gw *w, const char *s, size_t n)
{
	gw_u64(w, n);
	gw_put(w, s, n);
}

static void gw_begin(struct gw *w)
{
	memset(w, 0, sizeof(*w));
	gw_put(w, "GGUF", 4);
	gw_u32(w, 3);
	gw_u64(w, 0); /* tensors */
	gw_u64(w, 0); /* KVs, patched by gw_end */
}

static void gw_end(struct gw *w)
{
	memcpy(w->p + 16, &w->n_kv, 8);
}

static void gw_key(struct gw *w, const char *key, uint32_t type)
{
	gw_str(w, key, strlen(key));
	gw_u32(w, type);
	w->n_kv++;
}

static void kv_str(struct gw *w, const char *key, const char *v)
{
	gw_key(w, key, ENG_GGUF_VTYPE_STRING);
	gw_str(w, v, strlen(v));
}

static void kv_u32(struct gw *w, const char *key, uint32_t v)
{
	gw_key(w, key, ENG_GGUF_VTYPE_UINT32);
	gw_u32(w, v);
}

static void kv_bool(struct gw *w, const char *key, bool v)
{
	uint8_t b = v;
	gw_key(w, key, ENG_GGUF_VTYPE_BOOL);
	gw_put(w, &b, 1);
}

static void kv_arr_str(struct gw *w, const char *key, const char *const *s, size_t n)
{
	gw_key(w, key, ENG_GGUF_VTYPE_ARRAY);
	gw_u32(w, ENG_GGUF_VTYPE_STRING);
	gw_u64(w, n);
	for (size_t i = 0; i < n; i++)
		gw_str(w, s[i], strlen(s[i]));
}

/* kv_arr_num - an array of 4-byte numbers (f32 / i32), from bits. */
static void kv_arr_num(struct gw *w, const char *key, uint32_t type, const void *v, size_t n)
{
	gw_key(w, key, ENG_GGUF_VTYPE_ARRAY);
	gw_u32(w, type);
	gw_u64(w, n);
	gw_put(w, v, 4 * n);
}

/* ---- fixture ---- */

struct fixture {
	struct eng_gguf *g;   /* gemma-3-270m */
	struct eng_tok *tok;  /* its tokenizer */
	json_t *ref;          /* tokenizer_gemma3.json */
	json_t *bpe_ref;      /* tokenizer_bpe_whisper.json */
	json_t *whisper;      /* models/whisper-tiny.en/tokenizer.json */
};

static json_t *load_json(const char *dir, const char *rel)
{
	char path[4096];
	json_error_t je;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
	if (!j)
		fprintf(stderr, "%s: %s\n", path, je.text);
	return j;
}

static int group_setup(void **state)
{
	static struct fixture f;
	char path[4096], err[512];

	const char *models = getenv("INFERD_MODELS"), *root = getenv("INFERD_SOURCE_ROOT");
	if (!models || !root) {
		fprintf(stderr, "set INFERD_MODELS and INFERD_SOURCE_ROOT\n");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/gemma-3-270m-q4_k_m.gguf", models);
	if (eng_gguf_open(path, &f.g, err, sizeof(err)) ||
	    eng_tok_from_gguf(f.g, &f.tok, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	f.ref = load_json(root, "tests/reference/llm/tokenizer_gemma3.json");
	f.bpe_ref = load_json(root, "tests/reference/llm/tokenizer_bpe_whisper.json");
	f.whisper = load_json(models, "whisper-tiny.en/tokenizer.json");
	if (!f.ref || !f.bpe_ref || !f.whisper)
		return -1;
	*state = &f;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;
	if (!f)
		return 0;
	eng_tok_destroy(f->tok);
	eng_gguf_close(f->g);
	json_decref(f->ref);
	json_decref(f->bpe_ref);
	json_decref(f->whisper);
	return 0;
}

/* ---- helpers ---- */

static bool ids_equal(const int32_t *ids, size_t n, const json_t *want)
{
	if (n != json_array_size(want))
		return false;
	for (size_t k = 0; k < n; k++)
		if (ids[k] != json_integer_value(json_array_get(want, k)))
			return false;
	return true;
}

/* hex_eq - s[0, n) equals the bytes a hex string spells. */
static bool hex_eq(const char *s, size_t n, const char *hex)
{
	if (strlen(hex) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1 || (uint8_t)s[i] != v)
			return false;
	}
	return true;
}

static size_t encode(const struct eng_tok *t, const char *s, size_t len, bool bos, bool special,
		     int32_t *ids)
{
	size_t n;
	assert_int_equal(eng_tok_encode(t, s, len, bos, special, ids, MAX_IDS, &n), 0);
	return n;
}

/* detok - eng_tok_detokenize into a new string (*len bytes). */
static char *detok(const struct eng_tok *t, const int32_t *ids, size_t n, bool rm, bool unparse,
		   size_t *len)
{
	size_t need;
	assert_int_equal(eng_tok_detokenize(t, ids, n, rm, unparse, NULL, 0, &need), -ST_TOOBIG);
	char *out = malloc(need);
	assert_non_null(out);
	assert_int_equal(eng_tok_detokenize(t, ids, n, rm, unparse, out, need, len), 0);
	return out;
}

/* ---- gemma 3 (SPM) against llama.cpp ---- */

/* check_case - ids, pieces and detok of one reference case; true if all match. */
static bool check_case(const struct eng_tok *t, const json_t *c)
{
	static int32_t ids[MAX_IDS];
	const json_t *jt = json_object_get(c, "text");
	const char *name = json_string_value(json_object_get(c, "name"));
	size_t n = encode(t, json_string_value(jt), json_string_length(jt), false, false, ids), len;
	bool ok = ids_equal(ids, n, json_object_get(c, "ids"));
	if (!ok)
		fprintf(stderr, "  %s: ids differ (%zu vs %zu)\n", name, n,
			json_array_size(json_object_get(c, "ids")));
	char *d = detok(t, ids, n, false, false, &len);
	if (!hex_eq(d, len, json_string_value(json_object_get(c, "detok_hex")))) {
		fprintf(stderr, "  %s: detokenized text differs\n", name);
		ok = false;
	}
	free(d);
	const json_t *ph = json_object_get(c, "pieces_hex");
	for (size_t k = 0; ok && k < n && k < json_array_size(ph); k++) {
		char buf[256];
		size_t l = eng_tok_piece(t, ids[k], false, buf, sizeof(buf));
		ok = hex_eq(buf, l, json_string_value(json_array_get(ph, k)));
		if (!ok)
			fprintf(stderr, "  %s: piece %zu (id %d) differs\n", name, k, ids[k]);
	}
	return ok;
}

/* check_special_case - the parse_special ids and their rendered text. */
static bool check_special_case(const struct eng_tok *t, const json_t *c)
{
	static int32_t ids[MAX_IDS];
	const json_t *jt = json_object_get(c, "text"), *want = json_object_get(c, "ids_special");
	size_t n = encode(t, json_string_value(jt), json_string_length(jt), false, true, ids), len;
	bool ok = ids_equal(ids, n, want);
	char *d = detok(t, ids, n, false, true, &len);
	const char *wd = json_string_value(json_object_get(c, "detok_special"));
	ok = ok && wd && len == strlen(wd) && memcmp(d, wd, len) == 0;
	free(d);
	if (!ok)
		fprintf(stderr, "  %s: special=true differs\n",
			json_string_value(json_object_get(c, "name")));
	return ok;
}

static void test_gemma_reference(void **state)
{
	struct fixture *f = *state;
	size_t i, matched = 0, n_special = 0, matched_special = 0;
	json_t *c;

	json_array_foreach(json_object_get(f->ref, "cases"), i, c) {
		matched += check_case(f->tok, c);
		if (json_object_get(c, "ids_special")) {
			n_special++;
			matched_special += check_special_case(f->tok, c);
		}
	}
	fprintf(stderr, "gemma3: %zu of %zu texts match llama.cpp (ids, pieces, detok); "
			"special=true: %zu of %zu\n", matched, i, matched_special, n_special);
	assert_int_equal(matched, i);
	assert_int_equal(matched_special, n_special);
	assert_true(i >= 60);
}

/* roundtrip - detokenize(encode(s)) == s for gemma 3 (no space prefix). */
static void roundtrip(const struct eng_tok *t, const char *s, size_t len)
{
	static int32_t ids[MAX_IDS];
	size_t n = encode(t, s, len, false, false, ids), out_len;
	for (size_t k = 0; k < n; k++)
		if (ids[k] == eng_tok_unk(t))
			return; /* not invertible */
	char *d = detok(t, ids, n, false, false, &out_len);
	assert_int_equal(out_len, len);
	assert_memory_equal(d, s, len);
	free(d);
}

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	size_t i;
	json_t *c;
	static const char *const extra[] = {
		("a\xff" "b\xc3(\xe2\x82"), "\x80\x80 x \xf4\x90\x80\x80", "\xed\xa0\x80 surrogate",
		"tail \xf0\x9f\x98", "<start_of_turn>not parsed<end_of_turn>",
	};

	json_array_foreach(json_object_get(f->ref, "cases"), i, c) {
		const json_t *jt = json_object_get(c, "text");
		roundtrip(f->tok, json_string_value(jt), json_string_length(jt));
	}
	for (size_t k = 0; k < sizeof(extra) / sizeof(extra[0]); k++)
		roundtrip(f->tok, extra[k], strlen(extra[k]));
}

static void test_special_and_eog(void **state)
{
	struct fixture *f = *state;
	const struct eng_tok *t = f->tok;
	int32_t ids[64];
	int32_t sot = eng_tok_find(t, "<start_of_turn>"), eot = eng_tok_find(t, "<end_of_turn>");
	int32_t eos = eng_tok_find(t, "<eos>"), nl = eng_tok_find(t, "\n");
	const char *s = "<start_of_turn>user\nHi<end_of_turn>\n";

	assert_true(sot > 0 && eot > 0 && eos == 1 && nl > 0);
	assert_int_equal(eng_tok_find(t, "no such token text"), -1);
	size_t n = encode(t, s, strlen(s), false, true, ids);
	assert_int_equal(ids[0], sot);
	assert_int_equal(ids[n - 2], eot);
	assert_int_equal(ids[n - 1], nl); /* "\n" is user-defined in gemma 3 */
	n = encode(t, s, strlen(s), false, false, ids);
	for (size_t k = 0; k < n; k++)
		assert_false(eng_tok_is_control(t, ids[k]));
	assert_true(eng_tok_is_control(t, sot));
	assert_true(eng_tok_is_eog(t, eos));
	assert_true(eng_tok_is_eog(t, eot));
	assert_false(eng_tok_is_eog(t, sot));
	assert_false(eng_tok_is_eog(t, eng_tok_bos(t)));
	assert_false(eng_tok_is_eog(t, -1));
	assert_false(eng_tok_is_eog(t, (int32_t)eng_tok_n_vocab(t)));
	assert_int_equal(eng_tok_eos(t), eos);
	assert_int_equal(eng_tok_eot(t), eot);
	/* llama.cpp (llama-cpp-python 0.3.36, llama_vocab_is_eog) lists exactly
	 * <eos>, <end_of_turn> and "</s>" (user-defined in gemma 3, EOG by name) */
	int32_t eog[8];
	size_t n_eog = 0;
	for (int32_t id = 0; id < (int32_t)eng_tok_n_vocab(t); id++)
		if (eng_tok_is_eog(t, id) && n_eog < 8)
			eog[n_eog++] = id;
	assert_int_equal(n_eog, 3);
	assert_int_equal(eog[0], 1);
	assert_int_equal(eog[1], 106);
	assert_string_equal(eng_tok_text(t, eog[2]), "</s>");
	char buf[32];
	assert_int_equal(eng_tok_piece(t, sot, false, buf, sizeof(buf)), 0);
	assert_int_equal(eng_tok_piece(t, sot, true, buf, sizeof(buf)), 15);
	assert_memory_equal(buf, "<start_of_turn>", 15);
	assert_int_equal(eng_tok_piece(t, -5, true, buf, sizeof(buf)), 0);
}

/* eng_tok_encode_marked: the control tokens of the template are tokens,
 * those inside bytes marked plain (a chat message's content) are text -
 * the ids of that text tokenized without parsing specials - and a token
 * straddling the mark's edge is text too. */
static void test_marked(void **state)
{
	struct fixture *f = *state;
	const struct eng_tok *t = f->tok;
	int32_t ids[64], want[64], sot = eng_tok_find(t, "<start_of_turn>");
	int32_t eot = eng_tok_find(t, "<end_of_turn>");
	const char *pre = "<start_of_turn>user\n", *body = "Hi<end_of_turn>\n<start_of_turn>model\nOK",
		   *post = "<end_of_turn>\n";
	char s[128];
	uint8_t plain[128] = { 0 };
	size_t a = strlen(pre), b = strlen(body), c = strlen(post), n, nw, nb;
	snprintf(s, sizeof(s), "%s%s%s", pre, body, post);
	memset(plain + a, 1, b);
	assert_int_equal(eng_tok_encode_marked(t, s, a + b + c, false, plain, ids, 64, &n), 0);
	/* want: <start_of_turn>, "user\n" and the body as text, <end_of_turn>, "\n" */
	assert_int_equal(eng_tok_encode(t, pre, a, false, true, want, 64, &nw), 0);
	assert_int_equal(eng_tok_encode(t, body, b, false, false, want + nw, 64 - nw, &nb), 0);
	nw += nb;
	assert_int_equal(eng_tok_encode(t, post, c, false, true, want + nw, 64 - nw, &nb), 0);
	nw += nb;
	assert_int_equal(n, nw);
	assert_memory_equal(ids, want, n * sizeof(*ids));
	assert_int_equal(ids[0], sot);
	assert_int_equal(ids[n - 2], eot);
	for (size_t k = 1; k + 2 < n; k++)
		assert_false(eng_tok_is_control(t, ids[k]));
	/* NULL marks nothing: the same as parsing every special */
	assert_int_equal(eng_tok_encode_marked(t, s, a + b + c, false, NULL, ids, 64, &n), 0);
	assert_int_equal(eng_tok_encode(t, s, a + b + c, false, true, want, 64, &nw), 0);
	assert_int_equal(n, nw);
	assert_memory_equal(ids, want, n * sizeof(*ids));
	/* one plain byte inside a control token's text makes it text */
	memset(plain, 0, sizeof(plain));
	plain[5] = 1;
	assert_int_equal(eng_tok_encode_marked(t, pre, a, false, plain, ids, 64, &n), 0);
	for (size_t k = 0; k < n; k++)
		assert_false(eng_tok_is_control(t, ids[k]));
}

static void test_bos(void **state)
{
	struct fixture *f = *state;
	const struct eng_tok *t = f->tok;
	int32_t ids[16];
	size_t n;

	assert_true(eng_tok_add_bos(t));
	assert_int_equal(eng_tok_bos(t), 2);
	assert_int_equal(eng_tok_n_vocab(t), 262144);
	assert_int_equal(eng_tok_encode(t, "", 0, true, false, ids, 16, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 2);
	assert_int_equal(eng_tok_encode(t, NULL, 0, false, false, ids, 16, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(eng_tok_encode(t, "Hello", 5, true, false, ids, 16, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 2);
	/* remove_special drops the BOS */
	size_t len;
	char *d = detok(t, ids, n, true, true, &len);
	assert_string_equal(d, "Hello");
	free(d);
	d = detok(t, ids, n, false, true, &len);
	assert_string_equal(d, "<bos>Hello");
	free(d);
}

static void test_toobig(void **state)
{
	struct fixture *f = *state;
	int32_t ids[3];
	size_t n, full;
	const char *s = "The quick brown fox jumps over the lazy dog.";

	assert_int_equal(eng_tok_encode(f->tok, s, strlen(s), true, false, NULL, 0, &full),
			 -ST_TOOBIG);
	assert_true(full > 3);
	assert_int_equal(eng_tok_encode(f->tok, s, strlen(s), true, false, ids, 3, &n), -ST_TOOBIG);
	assert_int_equal(n, full);
	assert_int_equal(ids[0], 2);
	assert_int_equal(eng_tok_encode(f->tok, NULL, 3, false, false, ids, 3, &n), -ST_INVAL);
	assert_int_equal(eng_tok_encode(NULL, s, 3, false, false, ids, 3, &n), -ST_INVAL);
	char small[4];
	assert_int_equal(eng_tok_detokenize(f->tok, ids, 3, false, false, small, sizeof(small), &n),
			 -ST_TOOBIG);
	assert_true(n > sizeof(small));
	/* A text far longer than max_ids tokens can cover is refused before
	 * encoding (a 64 MiB prompt must not take a minute and gigabytes):
	 * *n_ids is then a lower bound, above max_ids. */
	size_t big = 64u << 20;
	char *text = malloc(big);
	assert_non_null(text);
	for (size_t i = 0; i < big; i++)
		text[i] = "hello world "[i % 12];
	int32_t many[4096];
	clock_t c0 = clock();
	assert_int_equal(eng_tok_encode(f->tok, text, big, true, true, many, 4096, &n), -ST_TOOBIG);
	double cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
	assert_true(n > 4096);
	assert_true(cpu_s < 0.5);
	/* the same text cut to fit is encoded for real, the count exact */
	assert_int_equal(eng_tok_encode(f->tok, text, 4000, true, true, many, 4096, &n), 0);
	assert_true(n > 500 && n < 4096);
	free(text);
}

/* ---- byte-level BPE: Whisper's (GPT-2's) vocabulary as a GGUF ---- */

/* whisper_gguf - tokenizer.json as a "gpt2" GGUF with pre: tokens by id
 * (added tokens CONTROL), merges, bos = eos = <|endoftext|>. */
static void whisper_gguf(const json_t *tj, const char *pre, struct gw *w)
{
	const json_t *model = json_object_get(tj, "model"), *added = json_object_get(tj, "added_tokens");
	const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
	size_t n = 0, i;
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)vocab, key, v) /* ids 0 .. max, added ones may repeat */
		if ((size_t)json_integer_value(v) >= n)
			n = (size_t)json_integer_value(v) + 1;
	json_array_foreach(added, i, v)
		if ((size_t)json_integer_value(json_object_get(v, "id")) >= n)
			n = (size_t)json_integer_value(json_object_get(v, "id")) + 1;
	const char **toks = calloc(n, sizeof(*toks));
	int32_t *types = calloc(n, sizeof(*types));
	const char **ms = calloc(json_array_size(merges), sizeof(*ms));
	assert_true(toks && types && ms);
	json_object_foreach((json_t *)vocab, key, v) {
		toks[json_integer_value(v)] = key;
		types[json_integer_value(v)] = 1;
	}
	json_array_foreach(added, i, v) {
		json_int_t id = json_integer_value(json_object_get(v, "id"));
		toks[id] = json_string_value(json_object_get(v, "content"));
		types[id] = 3;
	}
	for (size_t k = 0; k < n; k++)
		assert_non_null(toks[k]);
	json_array_foreach(merges, i, v)
		ms[i] = json_string_value(v);
	gw_begin(w);
	kv_str(w, "tokenizer.ggml.model", "gpt2");
	kv_str(w, "tokenizer.ggml.pre", pre);
	kv_arr_str(w, "tokenizer.ggml.tokens", toks, n);
	kv_arr_num(w, "tokenizer.ggml.token_type", ENG_GGUF_VTYPE_INT32, types, n);
	kv_arr_str(w, "tokenizer.ggml.merges", ms, json_array_size(merges));
	kv_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)json_integer_value(json_object_get(vocab, "<|endoftext|>")));
	kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)json_integer_value(json_object_get(vocab, "<|endoftext|>")));
	kv_bool(w, "tokenizer.ggml.add_bos_token", false);
	gw_end(w);
	free(toks);
	free(types);
	free(ms);
}

static struct eng_tok *whisper_tok(const json_t *tj, const char *pre, struct gw *w,
				   struct eng_gguf **g)
{
	char err[256];
	struct eng_tok *t;

	whisper_gguf(tj, pre, w);
	assert_int_equal(eng_gguf_open_buffer(w->p, w->n, pre, g, err, sizeof(err)), 0);
	int rc = eng_tok_from_gguf(*g, &t, err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(rc, 0);
	return t;
}

/* bpe_cases - one pre-tokenizer's cases; returns matches of 2 * cases. */
static size_t bpe_cases(const struct eng_tok *t, const json_t *cases, size_t *total)
{
	static int32_t ids[MAX_IDS];
	size_t i, ok = 0;
	json_t *c;

	json_array_foreach(cases, i, c) {
		const json_t *jt = json_object_get(c, "text");
		const char *s = json_string_value(jt);
		size_t len = json_string_length(jt);
		for (int sp = 0; sp < 2; sp++) {
			size_t n = encode(t, s, len, false, sp, ids);
			bool same = ids_equal(ids, n, json_object_get(c, sp ? "ids_special" : "ids"));
			if (!same)
				fprintf(stderr, "  %s special=%d: ids differ\n",
					json_string_value(json_object_get(c, "name")), sp);
			ok += same;
			(*total)++;
		}
	}
	return ok;
}

static void test_bpe_reference(void **state)
{
	struct fixture *f = *state;
	const char *pre;
	json_t *pr;

	fprintf(stderr, "bpe reference: %s\n",
		json_string_value(json_object_get(f->bpe_ref, "source")));
	json_object_foreach(json_object_get(f->bpe_ref, "pre"), pre, pr) {
		struct gw w;
		struct eng_gguf *g;
		struct eng_tok *t = whisper_tok(f->whisper, pre, &w, &g);
		size_t total = 0, ok = bpe_cases(t, json_object_get(pr, "cases"), &total);
		fprintf(stderr, "bpe pre %-10s: %zu of %zu encodings match llama.cpp\n", pre, ok, total);
		assert_int_equal(ok, total);
		assert_true(total >= 60);
		eng_tok_destroy(t);
		eng_gguf_close(g);
		free(w.p);
	}
}

/* ---- a tiny SPM vocabulary, intact and damaged ---- */

#define TINY_N (7 + 256)

/* tiny_gguf - "<unk>" "<s>" "</s>" "a" "ab" "▁ab" "▁", byte tokens;
 * damage selects one fault (0: none). */
static void tiny_gguf(struct gw *w, int damage)
{
	static char bytes[256][8];
	const char *toks[TINY_N + 1] = { "<unk>", "<s>", "</s>", "a", "b", ("\xE2\x96\x81" "ab"),
					  "\xE2\x96\x81" };
	float scores[TINY_N];
	int32_t types[TINY_N];

	for (int i = 0; i < 256; i++) {
		snprintf(bytes[i], sizeof(bytes[i]), "<0x%02X>", i);
		toks[7 + i] = bytes[i];
	}
	for (int i = 0; i < TINY_N; i++)
		scores[i] = i == 5 ? -2.0f : -1.0f, types[i] = i < 3 ? 3 : i >= 7 ? 6 : 1;
	toks[4] = damage == 4 ? "a" : "ab"; /* damage 4: a duplicate */
	gw_begin(w);
	kv_str(w, "tokenizer.ggml.model", damage == 1 ? "bert" : "llama");
	if (damage == 2)
		kv_arr_num(w, "tokenizer.ggml.tokens", ENG_GGUF_VTYPE_INT32, types, TINY_N);
	else
		kv_arr_str(w, "tokenizer.ggml.tokens", toks, TINY_N);
	kv_arr_num(w, "tokenizer.ggml.scores", ENG_GGUF_VTYPE_FLOAT32, scores,
		   damage == 3 ? TINY_N - 1 : TINY_N);
	kv_arr_num(w, "tokenizer.ggml.token_type",
		   damage == 5 ? ENG_GGUF_VTYPE_FLOAT32 : ENG_GGUF_VTYPE_INT32, types, TINY_N);
	if (damage == 6)
		kv_str(w, "tokenizer.ggml.bos_token_id", "1");
	gw_end(w);
}

static int tiny_load(const struct gw *w, struct eng_tok **t, char *err, size_t errlen)
{
	struct eng_gguf *g;
	int rc = eng_gguf_open_buffer(w->p, w->n, "tiny", &g, err, errlen);

	*t = NULL;
	if (rc)
		return rc;
	rc = eng_tok_from_gguf(g, t, err, errlen);
	eng_gguf_close(g);
	return rc;
}

static void test_tiny(void **state)
{
	(void)state;
	struct gw w;
	struct eng_tok *t;
	char err[256];
	int32_t ids[16];
	size_t n;

	tiny_gguf(&w, 0);
	assert_int_equal(tiny_load(&w, &t, err, sizeof(err)), 0);
	/* " ab ab" -> "▁ab▁ab": "ab" (-1) merges first, then "▁ab" (-2) */
	assert_int_equal(eng_tok_encode(t, "ab ab", 5, true, false, ids, 16, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 5);
	assert_int_equal(ids[2], 5);
	/* "c" is no token: "▁" then the byte fallback */
	assert_int_equal(eng_tok_encode(t, "c", 1, false, false, ids, 16, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 6);
	assert_int_equal(ids[1], 7 + 'c');
	size_t len;
	char *d = detok(t, ids, n, false, false, &len);
	assert_string_equal(d, "c"); /* the prefix space is stripped again */
	free(d);
	/* "</s>" is control: parsed only with parse_special */
	assert_int_equal(eng_tok_encode(t, "</s>", 4, false, true, ids, 16, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 2);
	assert_true(eng_tok_is_eog(t, 2));
	eng_tok_destroy(t);
	free(w.p);
}

static void test_corrupt(void **state)
{
	(void)state;
	static const int want[] = { 0, -ST_UNSUPPORTED, -ST_CORRUPT, -ST_CORRUPT, -ST_CORRUPT,
				    -ST_CORRUPT, -ST_CORRUPT };
	struct eng_tok *t;
	char err[256];

	for (int k = 1; k < 7; k++) {
		struct gw w;
		tiny_gguf(&w, k);
		int rc = tiny_load(&w, &t, err, sizeof(err));
		fprintf(stderr, "damage %d: %s (%s)\n", k, st_str(rc), err);
		assert_int_equal(rc, want[k]);
		assert_null(t);
		free(w.p);
	}
	assert_int_equal(eng_tok_from_gguf(NULL, &t, err, sizeof(err)), -ST_INVAL);
	eng_tok_destroy(NULL);
	assert_int_equal(eng_tok_n_vocab(NULL), 0);
}

/* test_truncated - every prefix and many byte flips of the tiny GGUF
 * either fail cleanly or load; none crashes (run under ASan). */
static void test_truncated(void **state)
{
	(void)state;
	struct gw w;
	struct eng_tok *t;
	char err[256];
	size_t loaded = 0, failed = 0;
	int32_t ids[64];
	size_t n;

	tiny_gguf(&w, 0);
	for (size_t cut = 0; cut < w.n; cut++) {
		uint8_t *copy = malloc(cut + 1);
		memcpy(copy, w.p, cut);
		struct gw c = { .p = copy, .n = cut };
		int rc = tiny_load(&c, &t, err, sizeof(err));
		assert_true(rc < 0);
		failed++;
		free(copy);
	}
	uint8_t *copy = malloc(w.n);
	srand(7);
	for (int k = 0; k < 3000; k++) {
		memcpy(copy, w.p, w.n);
		for (int j = 0; j < 1 + k % 3; j++)
			copy[(size_t)rand() % w.n] ^= (uint8_t)(1u << (rand() % 8));
		struct gw c = { .p = copy, .n = w.n };
		if (tiny_load(&c, &t, err, sizeof(err)) == 0) {
			assert_int_equal(eng_tok_encode(t, "ab c</s>", 8, true, true, ids, 64, &n), 0);
			eng_tok_destroy(t);
			loaded++;
		} else {
			failed++;
		}
	}
	fprintf(stderr, "damaged tiny GGUFs: %zu rejected, %zu loaded and encoded\n", failed, loaded);
	free(copy);
	free(w.p);
}

/* test_fuzz_seeds - the GGUF fuzz corpus has no vocabulary: clean errors. */
static void test_fuzz_seeds(void **state)
{
	(void)state;
	static const char *const seeds[] = { "all-types-v2.gguf", "all-types-v3.gguf" };
	char path[4096], err[256];

	for (size_t i = 0; i < 2; i++) {
		struct eng_gguf *g;
		struct eng_tok *t;
		snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/gguf/%s",
			 getenv("INFERD_SOURCE_ROOT"), seeds[i]);
		if (eng_gguf_open(path, &g, err, sizeof(err)))
			continue;
		assert_true(eng_tok_from_gguf(g, &t, err, sizeof(err)) < 0);
		assert_null(t);
		eng_gguf_close(g);
	}
}

static void test_mem_fail(void **state)
{
	(void)state;
	struct gw w;
	struct eng_tok *t = NULL;
	char err[256];
	long k;
	int rc = -1;

	tiny_gguf(&w, 0);
	for (k = 0; k < 1000 && rc; k++) {
		struct eng_gguf *g;
		assert_int_equal(eng_gguf_open_buffer(w.p, w.n, "tiny", &g, err, sizeof(err)), 0);
		mem_fail_after(k);
		rc = eng_tok_from_gguf(g, &t, err, sizeof(err));
		mem_fail_after(-1);
		eng_gguf_close(g);
		if (rc) {
			assert_int_equal(rc, -ST_NOMEM);
			assert_null(t);
		}
	}
	assert_int_equal(rc, 0);
	fprintf(stderr, "mem_fail: load succeeds from %ld allocations\n", k - 1);
	int32_t ids[64];
	size_t n;
	for (k = 0; k < 10; k++) {
		mem_fail_after(k);
		rc = eng_tok_encode(t, "ab ab c</s>", 11, true, true, ids, 64, &n);
		mem_fail_after(-1);
		assert_true(rc == 0 || rc == -ST_NOMEM);
	}
	eng_tok_destroy(t);
	free(w.p);
}

/* ---- speed ---- */

/* long_text - the reference texts repeated to about bytes bytes (new). */
static char *long_text(const json_t *cases, size_t bytes, size_t *len)
{
	char *s = malloc(bytes + 4096);
	size_t at = 0, i;
	json_t *c;

	assert_non_null(s);
	while (at < bytes) {
		json_array_foreach(cases, i, c) {
			const json_t *jt = json_object_get(c, "text");
			size_t l = json_string_length(jt);
			if (at + l + 1 > bytes + 4096)
				break;
			memcpy(s + at, json_string_value(jt), l);
			at += l;
			s[at++] = ' ';
		}
	}
	*len = at;
	return s;
}

static void time_encode(const char *what, const struct eng_tok *t, const char *s, size_t len)
{
	static int32_t ids[MAX_IDS * 2];
	struct timespec t0, t1;
	size_t n, total = 0, reps = 5;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t r = 0; r < reps; r++) {
		assert_int_equal(eng_tok_encode(t, s, len, true, true, ids, MAX_IDS * 2, &n), 0);
		total += n;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	fprintf(stderr, "%s: %zu tokens per prompt (%zu bytes), %.2f M tokens/s, %.1f ms per prompt\n",
		what, n, len, (double)total / sec / 1e6, 1e3 * sec / (double)reps);
}

static void test_speed(void **state)
{
	struct fixture *f = *state;
	size_t len;
	char *s = long_text(json_object_get(f->ref, "cases"), 120000, &len);
	struct gw w;
	struct eng_gguf *g;

	time_encode("gemma3 SPM", f->tok, s, len);
	struct eng_tok *t = whisper_tok(f->whisper, "qwen2", &w, &g);
	time_encode("whisper-vocab BPE qwen2", t, s, len);
	eng_tok_destroy(t);
	eng_gguf_close(g);
	free(w.p);
	char *one = malloc(100000);
	memset(one, 'x', 100000); /* one long SPM word: the O(n log n) merge */
	time_encode("gemma3 SPM 'xxxx...'", f->tok, one, 100000);
	free(one);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemma_reference), cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_special_and_eog), cmocka_unit_test(test_marked),
		cmocka_unit_test(test_bos),
		cmocka_unit_test(test_toobig),		cmocka_unit_test(test_bpe_reference),
		cmocka_unit_test(test_tiny),		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_truncated),	cmocka_unit_test(test_fuzz_seeds),
		cmocka_unit_test(test_mem_fail),	cmocka_unit_test(test_speed),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
