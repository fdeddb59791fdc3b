/* test_bpe.c - the byte-level BPE tokenizer (engine/tok/eng_bpe.h) on the real
 * Whisper tiny.en tokenizer.json, against ids recorded from HF `tokenizers`
 * by tests/reference/make_bpe_reference.py; plus invalid UTF-8, a small
 * tokenizer built from arrays, corrupt files and allocation failures.
 *
 * Environment: INFERD_MODELS (models folder), INFERD_SOURCE_ROOT (repo).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <jansson.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/tok/eng_bpe.h"

#define MAX_IDS 8192

/* Shared by the tests of the group: the real tokenizer and the reference. */
struct fixture {
	struct eng_bpe *bpe; /* loaded from tokenizer.json */
	json_t *ref;         /* tests/reference/bpe/whisper_tiny_en.json */
	char tok_path[4096]; /* tokenizer.json path */
};

static int group_setup(void **state)
{
	static struct fixture f;
	char path[4096], err[512];
	json_error_t je;

	const char *models = getenv("INFERD_MODELS"), *root = getenv("INFERD_SOURCE_ROOT");
	if (!models || !root) {
		fprintf(stderr, "set INFERD_MODELS and INFERD_SOURCE_ROOT\n");
		return -1;
	}
	snprintf(f.tok_path, sizeof(f.tok_path), "%s/whisper-tiny.en/tokenizer.json", models);
	snprintf(path, sizeof(path), "%s/tests/reference/bpe/whisper_tiny_en.json", root);
	f.ref = json_load_file(path, JSON_ALLOW_NUL, &je);
	if (!f.ref) {
		fprintf(stderr, "%s: %s\n", path, je.text);
		return -1;
	}
	if (eng_bpe_load_hf(f.tok_path, &f.bpe, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	*state = &f;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;
	if (!f)
		return 0;
	eng_bpe_destroy(f->bpe);
	json_decref(f->ref);
	return 0;
}

/* roundtrip - decode(encode(s)) == s, byte for byte. */
static void roundtrip(const struct eng_bpe *b, const char *s, size_t len)
{
	static int32_t ids[MAX_IDS * 4];
	size_t n, out_len;
	char *out = malloc(len + 1);

	assert_non_null(out);
	assert_int_equal(eng_bpe_encode(b, s, len, ids, MAX_IDS * 4, &n), 0);
	assert_int_equal(eng_bpe_decode(b, ids, n, false, out, len + 1, &out_len), 0);
	assert_int_equal(out_len, len);
	assert_memory_equal(out, s, len);
	free(out);
}

static void test_reference(void **state)
{
	struct fixture *f = *state;
	static int32_t ids[MAX_IDS];
	size_t i, n, matched = 0;
	json_t *c;

	assert_int_equal(eng_bpe_n_vocab(f->bpe), json_integer_value(json_object_get(f->ref, "n_vocab")));
	json_array_foreach(json_object_get(f->ref, "cases"), i, c) {
		const char *text = json_string_value(json_object_get(c, "text"));
		size_t len = json_string_length(json_object_get(c, "text"));
		json_t *want = json_object_get(c, "ids");
		assert_int_equal(eng_bpe_encode(f->bpe, text, len, ids, MAX_IDS, &n), 0);
		bool same = n == json_array_size(want);
		for (size_t k = 0; same && k < n; k++)
			same = ids[k] == json_integer_value(json_array_get(want, k));
		if (!same)
			fprintf(stderr, "case %s: ids differ (%zu vs %zu)\n",
				json_string_value(json_object_get(c, "name")), n, json_array_size(want));
		matched += same;
		roundtrip(f->bpe, text, len);
	}
	fprintf(stderr, "reference: %zu of %zu strings match HF tokenizers\n", matched, i);
	assert_int_equal(matched, i);
	assert_true(i >= 60);
}

static void test_toobig(void **state)
{
	struct fixture *f = *state;
	int32_t ids[4];
	size_t n;
	const char *s = " She had your dark suit in greasy wash water all year.";

	assert_int_equal(eng_bpe_encode(f->bpe, s, strlen(s), ids, 4, &n), -ST_TOOBIG);
	assert_int_equal(n, 13);
	assert_int_equal(ids[0], 1375); /* " She", as the reference records */
	assert_int_equal(eng_bpe_encode(f->bpe, s, strlen(s), NULL, 0, &n), -ST_TOOBIG);
	assert_int_equal(n, 13);
	assert_int_equal(eng_bpe_encode(f->bpe, NULL, 0, NULL, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(eng_bpe_encode(f->bpe, NULL, 3, ids, 4, &n), -ST_INVAL);
}

static void test_special(void **state)
{
	struct fixture *f = *state;
	const char *key;
	json_t *v;

	json_object_foreach(json_object_get(f->ref, "special"), key, v) {
		int32_t want = json_is_null(v) ? -1 : (int32_t)json_integer_value(v);
		assert_int_equal(eng_bpe_token_id(f->bpe, key), want);
		if (want >= 0)
			assert_string_equal(eng_bpe_token_str(f->bpe, want), key);
	}
	assert_int_equal(eng_bpe_token_id(f->bpe, "<|endoftext|>"), 50256);
	assert_int_equal(eng_bpe_token_id(f->bpe, "<|startoftranscript|>"), 50257);
	assert_true(eng_bpe_is_special(f->bpe, 50256));
	assert_true(eng_bpe_is_special(f->bpe, 50362));
	assert_false(eng_bpe_is_special(f->bpe, 262));
	assert_false(eng_bpe_is_special(f->bpe, -1));
	assert_false(eng_bpe_is_special(f->bpe, 50363));
	assert_null(eng_bpe_token_str(f->bpe, 50363));
	assert_null(eng_bpe_token_str(f->bpe, -1));
	assert_int_equal(eng_bpe_token_id(f->bpe, "no such token"), -1);
	assert_int_equal(eng_bpe_token_id(f->bpe, ""), -1);
}

static void test_decode(void **state)
{
	struct fixture *f = *state;
	json_t *d = json_object_get(f->ref, "decode");
	json_t *jids = json_object_get(d, "ids");
	int32_t ids[64];
	char out[512];
	size_t n = json_array_size(jids), len;

	for (size_t i = 0; i < n; i++)
		ids[i] = (int32_t)json_integer_value(json_array_get(jids, i));
	assert_int_equal(eng_bpe_decode(f->bpe, ids, n, false, out, sizeof(out), &len), 0);
	assert_string_equal(out, json_string_value(json_object_get(d, "text")));
	assert_int_equal(len, strlen(out));
	assert_int_equal(eng_bpe_decode(f->bpe, ids, n, true, out, sizeof(out), &len), 0);
	assert_string_equal(out, json_string_value(json_object_get(d, "text_skip")));
	size_t need = len + 1;
	assert_int_equal(eng_bpe_decode(f->bpe, ids, n, true, NULL, 0, &len), -ST_TOOBIG);
	assert_int_equal(len, need);
	assert_int_equal(eng_bpe_decode(f->bpe, ids, n, true, out, need - 1, &len), -ST_TOOBIG);
	assert_int_equal(eng_bpe_decode(f->bpe, ids, n, true, out, need, &len), 0);
	assert_int_equal(eng_bpe_decode(f->bpe, ids, 0, true, out, 1, &len), 0);
	assert_int_equal(len, 0);
	assert_string_equal(out, "");
	ids[0] = 50363;
	assert_int_equal(eng_bpe_decode(f->bpe, ids, 1, false, out, sizeof(out), &len), -ST_INVAL);
}

/* bytes_of - token_bytes of the token named s, expected to be n bytes want. */
static void bytes_of(const struct eng_bpe *b, const char *s, const char *want, size_t n)
{
	char out[64];
	int32_t id = eng_bpe_token_id(b, s);

	assert_true(id >= 0);
	assert_int_equal(eng_bpe_token_bytes(b, id, out, sizeof(out)), n);
	assert_memory_equal(out, want, n);
}

static void test_token_bytes(void **state)
{
	struct fixture *f = *state;
	char out[4];

	bytes_of(f->bpe, "\xc4\xa0", " ", 1);        /* "Ġ": the space byte */
	bytes_of(f->bpe, "\xc4\x8a", "\n", 1);       /* "Ċ": newline */
	bytes_of(f->bpe, "\xc4\x80", "\0", 1);       /* "Ā": byte 0x00 */
	bytes_of(f->bpe, "\xc3\xa2", "\xe2", 1);     /* "â": a lone UTF-8 lead byte */
	bytes_of(f->bpe, "\xc2\xa8", "\xa8", 1);     /* "¨": a continuation byte */
	bytes_of(f->bpe, "\xc5\x83", "\xad", 1);     /* "Ń": 0xAD, the last extra code point */
	bytes_of(f->bpe, "\xc4\xa0the", " the", 4);
	bytes_of(f->bpe, "<|endoftext|>", "<|endoftext|>", 13);
	/* snprintf-like: the full length even when cap is smaller */
	assert_int_equal(eng_bpe_token_bytes(f->bpe, 262, out, 2), 4);
	assert_memory_equal(out, " t", 2);
	assert_int_equal(eng_bpe_token_bytes(f->bpe, 262, NULL, 0), 4);
	assert_int_equal(eng_bpe_token_bytes(f->bpe, 99999, out, sizeof(out)), 0);
	for (int v = 0; v < 256; v++) { /* every byte has a one-byte token */
		char c = (char)v;
		int32_t id;
		size_t n;
		assert_int_equal(eng_bpe_encode(f->bpe, &c, 1, &id, 1, &n), 0);
		assert_int_equal(eng_bpe_token_bytes(f->bpe, id, out, sizeof(out)), 1);
		assert_int_equal((uint8_t)out[0], v);
	}
}

static void test_invalid_utf8(void **state)
{
	struct fixture *f = *state;
	static const char *cases[] = {
		"\xff\xfe hello \xc3", "caf\xc3\xa9\xc3", "\xe2\x82", "\xed\xa0\x80 surrogate",
		"\xc0\xaf overlong", "\xf4\x90\x80\x80 big", "a\x80\x80\x80 b", "it\xe2\x80\x99s",
	};
	char buf[300];
	unsigned seed = 12345;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		roundtrip(f->bpe, cases[i], strlen(cases[i]));
	for (int it = 0; it < 2000; it++) { /* random bytes, biased to high ones */
		size_t len = (size_t)(rand_r(&seed) % (int)sizeof(buf));
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)(rand_r(&seed) % 3 ? rand_r(&seed) & 0xFF : " a'1\n"[rand_r(&seed) % 5]);
		roundtrip(f->bpe, buf, len);
	}
}

static void test_long_and_speed(void **state)
{
	struct fixture *f = *state;
	json_t *c = json_array_get(json_object_get(f->ref, "cases"),
				   json_array_size(json_object_get(f->ref, "cases")) - 1);
	const char *s = json_string_value(json_object_get(c, "text"));
	size_t len = strlen(s), reps = 200, total = 0, n;
	char *word = malloc(100000);
	static int32_t ids[MAX_IDS];

	assert_non_null(word);
	memset(word, 'x', 100000); /* one 100 kB word: the heap path */
	roundtrip(f->bpe, word, 100000);
	free(word);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t r = 0; r < reps; r++) {
		assert_int_equal(eng_bpe_encode(f->bpe, s, len, ids, MAX_IDS, &n), 0);
		total += n;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	fprintf(stderr, "encode: %zu tokens in %.3f s = %.2f M tokens/s (%.1f MB/s)\n", total, sec,
		(double)total / sec / 1e6, (double)(len * reps) / sec / 1e6);
}

/* ---- a small tokenizer built from arrays ---- */

/* byte_tokens - the 256 byte-level token strings, plus extra ones. */
static size_t byte_tokens(char store[][8], const char **toks)
{
	size_t n = 0;
	for (unsigned v = 0; v < 512 && n < 256; v++) {
		unsigned cp = v;
		bool printable = (v >= 0x21 && v <= 0x7E) || (v >= 0xA1 && v <= 0xAC) ||
				 (v >= 0xAE && v <= 0xFF);
		if (v < 256 && !printable)
			continue;
		if (cp < 0x80) {
			store[n][0] = (char)cp, store[n][1] = 0;
		} else {
			store[n][0] = (char)(0xC0 | (cp >> 6));
			store[n][1] = (char)(0x80 | (cp & 0x3F)), store[n][2] = 0;
		}
		toks[n] = store[n];
		n++;
	}
	return n;
}

static void test_create(void **state)
{
	(void)state;
	static char store[260][8];
	const char *toks[262];
	size_t n = byte_tokens(store, toks);
	const char *merges[] = { "a b", "ab c", "\xc4\xa0 ab" };
	int32_t special[] = { 9999 };
	struct eng_bpe *b;
	char err[256];
	int32_t ids[16];
	size_t k;

	assert_int_equal(n, 256);
	toks[n++] = "ab", toks[n++] = "abc", toks[n++] = "\xc4\xa0" "ab";
	toks[n++] = "<ctl>";
	assert_int_equal(eng_bpe_create(toks, n, merges, 3, special, 1, ENG_BPE_PRETOK_GPT2, &b, err,
					sizeof(err)), -ST_CORRUPT); /* no id 9999 */
	special[0] = 259;
	int rc = eng_bpe_create(toks, n, merges, 3, special, 1, ENG_BPE_PRETOK_GPT2, &b, err, sizeof(err));
	if (rc)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(rc, 0);
	assert_int_equal(eng_bpe_encode(b, "abc ab abd", 10, ids, 16, &k), 0);
	assert_int_equal(k, 4);
	assert_int_equal(ids[0], 257); /* abc */
	assert_int_equal(ids[1], 258); /* Ġab */
	assert_int_equal(ids[2], 258); /* Ġab */
	assert_int_equal(ids[3], eng_bpe_token_id(b, "d"));
	assert_true(eng_bpe_is_special(b, 259));
	assert_int_equal(eng_bpe_encode(b, "<ctl>", 5, ids, 16, &k), 0);
	assert_int_equal(k, 5); /* never matched inside text */
	eng_bpe_destroy(b);
	eng_bpe_destroy(NULL);
	const char *bad[] = { "a x", "ab  c", "abc" };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(eng_bpe_create(toks, n, &bad[i], 1, NULL, 0, ENG_BPE_PRETOK_GPT2, &b, err,
						sizeof(err)), -ST_CORRUPT);
		assert_null(b);
	}
	/* byte tokens missing (the first 200 are the 188 printable bytes and
	 * bytes 0-11): a byte without a token is dropped, as llama.cpp does */
	assert_int_equal(eng_bpe_create(toks, 200, NULL, 0, NULL, 0, ENG_BPE_PRETOK_GPT2, &b, err,
					sizeof(err)), 0);
	assert_int_equal(eng_bpe_encode(b, "a\x1f" "b\x05", 4, ids, 16, &k), 0);
	assert_int_equal(k, 3);
	assert_int_equal(ids[0], eng_bpe_token_id(b, "a"));
	assert_int_equal(ids[1], eng_bpe_token_id(b, "b"));
	assert_int_equal(ids[2], eng_bpe_token_id(b, "\xc4\x85")); /* byte 5: U+0105 */
	assert_int_equal(eng_bpe_encode(b, "\x1f", 1, ids, 16, &k), 0);
	assert_int_equal(k, 0);
	eng_bpe_destroy(b);
	const char *none[] = { "<x>", "<y>" }; /* not a byte-level vocabulary at all */
	assert_int_equal(eng_bpe_create(none, 2, NULL, 0, NULL, 0, ENG_BPE_PRETOK_GPT2, &b, err,
					sizeof(err)), -ST_CORRUPT);
	assert_non_null(strstr(err, "no byte-level tokens"));
	assert_int_equal(eng_bpe_create(toks, 0, NULL, 0, NULL, 0, ENG_BPE_PRETOK_GPT2, &b, err,
					sizeof(err)), -ST_TOOBIG);
	assert_int_equal(eng_bpe_create(NULL, 1, NULL, 0, NULL, 0, ENG_BPE_PRETOK_GPT2, &b, err,
					sizeof(err)), -ST_INVAL);
}

/* ---- files ---- */

/* load_text - load_hf on a temporary file holding len bytes of s. */
static int load_text(const char *s, size_t len, char *err, size_t errlen)
{
	char path[] = "/tmp/test_bpe_XXXXXX";
	int fd = mkstemp(path);
	struct eng_bpe *b;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, len), (ssize_t)len);
	close(fd);
	int rc = eng_bpe_load_hf(path, &b, err, errlen);
	unlink(path);
	if (!rc)
		eng_bpe_destroy(b);
	else
		assert_null(b);
	assert_true(rc == 0 || strstr(err, path) != NULL);
	return rc;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	*len = (size_t)ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *p = malloc(*len + 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, *len, fp), *len);
	fclose(fp);
	return p;
}

static void test_corrupt(void **state)
{
	struct fixture *f = *state;
	size_t len;
	char *s = read_all(f->tok_path, &len), err[512];
	struct eng_bpe *b;
	static const struct { const char *json; int rc; } small[] = {
		{ "", -ST_CORRUPT }, { "[]", -ST_CORRUPT }, { "{}", -ST_CORRUPT },
		{ "{\"model\": {\"type\": \"WordPiece\"}}", -ST_UNSUPPORTED },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", -ST_UNSUPPORTED },
		{ "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
		  "\"vocab\": {\"a\": 1}, \"merges\": []}}", -ST_CORRUPT },
		{ "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
		  "\"vocab\": {\"a\": -1}, \"merges\": []}}", -ST_CORRUPT },
		{ "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
		  "\"vocab\": {\"a\": 99999999}, \"merges\": []}}", -ST_TOOBIG },
		{ "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", "
		  "\"vocab\": {\"a\": 0}, \"merges\": [7]}}", -ST_CORRUPT },
	};

	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
		assert_int_equal(load_text(small[i].json, strlen(small[i].json), err, sizeof(err)),
				 small[i].rc);
	for (size_t cut = 1; cut < len; cut += len / 23) /* truncated */
		assert_int_equal(load_text(s, cut, err, sizeof(err)), -ST_CORRUPT);
	char *p = strstr(s, "\"merges\": [") + 11; /* an unknown merge: "Ġ t" -> "QQ t" */
	p = strchr(p, '"') + 1;
	p[0] = 'Q', p[1] = 'Q';
	assert_int_equal(load_text(s, len, err, sizeof(err)), -ST_CORRUPT);
	assert_non_null(strstr(err, "merge 0"));
	free(s);
	assert_int_equal(eng_bpe_load_hf("/nonexistent/tokenizer.json", &b, err, sizeof(err)),
			 -ST_NOTFOUND);
	assert_non_null(strstr(err, "/nonexistent/tokenizer.json"));
}

static void test_mem_fail(void **state)
{
	struct fixture *f = *state;
	struct eng_bpe *b;
	char err[512];
	long k;
	int rc = -1;

	for (k = 0; k < 1000 && rc; k++) {
		mem_fail_after(k);
		rc = eng_bpe_load_hf(f->tok_path, &b, err, sizeof(err));
		mem_fail_after(-1);
		if (rc) {
			assert_int_equal(rc, -ST_NOMEM);
			assert_null(b);
		}
	}
	assert_int_equal(rc, 0);
	fprintf(stderr, "mem_fail: load succeeds from %ld allocations\n", k - 1);
	char word[200];
	memset(word, 'q', sizeof(word)); /* longer than the inline scratch */
	int32_t ids[256];
	size_t n;
	mem_fail_after(0);
	rc = eng_bpe_encode(b, word, sizeof(word), ids, 256, &n);
	mem_fail_after(-1);
	assert_int_equal(rc, -ST_NOMEM);
	assert_int_equal(eng_bpe_encode(b, word, sizeof(word), ids, 256, &n), 0);
	eng_bpe_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference),   cmocka_unit_test(test_toobig),
		cmocka_unit_test(test_special),     cmocka_unit_test(test_decode),
		cmocka_unit_test(test_token_bytes), cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_long_and_speed), cmocka_unit_test(test_create),
		cmocka_unit_test(test_corrupt),     cmocka_unit_test(test_mem_fail),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
