/* test_gguf.c - the GGUF reader (engine/format/eng_gguf.h) on the real default
 * model, on corrupted views of it, and on the small all-types seed files
 * that tests/fuzz/make-seeds.py writes.
 *
 * Expected values for the real file come from an independent reading with
 * the standard-library script beside this file:
 *   python3 tests/unit/engine/format/gguf_expected.py models/gemma-3-270m-q4_k_m.gguf
 * Corruptions work on a MAP_PRIVATE copy-on-write mapping and truncations
 * on prefixes of one read-only mapping, so the 253 MB file is never copied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_gguf.h"

#define GEMMA "gemma-3-270m-q4_k_m.gguf"
/* From gguf_expected.py on the file above. */
#define GEMMA_SIZE 253113024ull
#define GEMMA_DATA_OFF 6525120ull
#define GEMMA_TENSOR_BYTES 246587904ull

struct mapped {
	char path[4096]; /* file path */
	uint8_t *p;      /* mapping */
	size_t size;     /* bytes */
};

static void map_path(struct mapped *m, const char *path, bool writable)
{
	snprintf(m->path, sizeof(m->path), "%s", path);
	int fd = open(m->path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	m->size = (size_t)st.st_size;
	m->p = mmap(NULL, m->size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m->p != MAP_FAILED);
	close(fd);
}

static void map_env(struct mapped *m, const char *env, const char *rel, bool writable)
{
	char path[4096];
	const char *dir = getenv(env);
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	map_path(m, path, writable);
}

static void unmap(struct mapped *m)
{
	munmap(m->p, m->size);
}

/* ---- the real file ------------------------------------------------------- */

static void test_real_header(void **state)
{
	(void)state;
	char path[4096], err[512];
	struct eng_gguf *g;
	snprintf(path, sizeof(path), "%s/" GEMMA, getenv("INFERD_MODELS"));
	assert_int_equal(eng_gguf_open(path, &g, err, sizeof(err)), 0);
	assert_int_equal(eng_gguf_version(g), 3);
	assert_int_equal(eng_gguf_n_kv(g), 33);
	assert_int_equal(eng_gguf_n_tensors(g), 236);
	assert_int_equal(eng_gguf_alignment(g), 32);
	assert_int_equal(eng_gguf_file_size(g), GEMMA_SIZE);
	assert_int_equal(eng_gguf_data_offset(g), GEMMA_DATA_OFF);
	assert_int_equal(eng_gguf_tensor_bytes(g), GEMMA_TENSOR_BYTES);
	/* The data section holds exactly the tensors. */
	assert_int_equal(GEMMA_DATA_OFF + GEMMA_TENSOR_BYTES, GEMMA_SIZE);
	assert_string_equal(eng_gguf_kv_key(g, 0), "general.architecture");
	assert_int_equal(eng_gguf_kv_type(g, 0), ENG_GGUF_VTYPE_STRING);
	assert_null(eng_gguf_kv_key(g, 33));
	assert_int_equal(eng_gguf_kv_type(g, 33), -1);
	eng_gguf_close(g);
	eng_gguf_close(NULL);
}

static void test_real_metadata(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_gguf *g;
	const char *s;
	size_t len;
	uint32_t u32;
	int32_t i32;
	float f;
	bool b;

	map_env(&m, "INFERD_MODELS", GEMMA, false);
	assert_int_equal(eng_gguf_open_buffer(m.p, m.size, m.path, &g, err, sizeof(err)), 0);
	assert_int_equal(eng_gguf_get_str(g, "general.architecture", &s, &len), 0);
	assert_string_equal(s, "gemma3");
	assert_int_equal(len, 6);
	assert_int_equal(eng_gguf_get_str(g, "general.name", &s, NULL), 0);
	assert_string_equal(s, "Gemma 3 270m");
	assert_int_equal(eng_gguf_get_u32(g, "gemma3.context_length", &u32), 0);
	assert_int_equal(u32, 32768);
	assert_int_equal(eng_gguf_get_u32(g, "gemma3.embedding_length", &u32), 0);
	assert_int_equal(u32, 640);
	assert_int_equal(eng_gguf_get_u32(g, "gemma3.block_count", &u32), 0);
	assert_int_equal(u32, 18);
	assert_int_equal(eng_gguf_get_i32(g, "gemma3.attention.head_count_kv", &i32), 0);
	assert_int_equal(i32, 1);
	assert_int_equal(eng_gguf_get_u32(g, "general.file_type", &u32), 0);
	assert_int_equal(u32, 15);
	assert_int_equal(eng_gguf_get_f32(g, "gemma3.rope.freq_base", &f), 0);
	assert_true(f == 1000000.0f);
	assert_int_equal(eng_gguf_get_f32(g, "gemma3.attention.layer_norm_rms_epsilon", &f), 0);
	assert_true(f > 0.99e-6f && f < 1.01e-6f);
	assert_int_equal(eng_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b), 0);
	assert_true(b);
	assert_int_equal(eng_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b), 0);
	assert_false(b);
	/* Type mismatches and absent keys. */
	assert_int_equal(eng_gguf_get_u32(g, "general.architecture", &u32), -ST_INVAL);
	assert_int_equal(eng_gguf_get_str(g, "gemma3.context_length", &s, NULL), -ST_INVAL);
	assert_int_equal(eng_gguf_get_bool(g, "gemma3.context_length", &b), -ST_INVAL);
	assert_int_equal(eng_gguf_get_f32(g, "gemma3.context_length", &f), -ST_INVAL);
	assert_int_equal(eng_gguf_get_u32(g, "no.such.key", &u32), -ST_NOTFOUND);
	assert_int_equal(eng_gguf_find_kv(g, "no.such.key"), -1);
	assert_int_equal(eng_gguf_find_kv(g, "general.file_type"), 32);
	eng_gguf_close(g);
	unmap(&m);
}

static void test_real_arrays(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_gguf *g;
	struct eng_gguf_val arr, e;
	enum eng_gguf_vtype et;
	uint64_t n, len, cursor = 0, count = 0;
	const char *s;
	double d;
	int64_t i64;

	map_env(&m, "INFERD_MODELS", GEMMA, false);
	assert_int_equal(eng_gguf_open_buffer(m.p, m.size, m.path, &g, err, sizeof(err)), 0);
	assert_int_equal(eng_gguf_get_arr(g, "tokenizer.ggml.tokens", &arr), 0);
	assert_int_equal(eng_gguf_arr_info(&arr, &et, &n), 0);
	assert_int_equal(et, ENG_GGUF_VTYPE_STRING);
	assert_int_equal(n, 262144);
	while (eng_gguf_arr_next(&arr, &cursor, &e))
		count++;
	assert_int_equal(count, 262144);
	assert_int_equal(eng_gguf_arr_at(&arr, 1, &e), 0);
	assert_int_equal(eng_gguf_val_str(&e, &s, &len), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(s, "<eos>", 5);
	assert_int_equal(eng_gguf_arr_at(&arr, 262144, &e), -ST_NOTFOUND);
	assert_int_equal(eng_gguf_get_arr(g, "tokenizer.ggml.scores", &arr), 0);
	assert_int_equal(eng_gguf_arr_at(&arr, 0, &e), 0);
	assert_int_equal(eng_gguf_val_f64(&e, &d), 0);
	assert_true(d == -1000.0);
	assert_int_equal(eng_gguf_get_arr(g, "tokenizer.ggml.token_type", &arr), 0);
	assert_int_equal(eng_gguf_arr_info(&arr, &et, &n), 0);
	assert_int_equal(et, ENG_GGUF_VTYPE_INT32);
	assert_int_equal(eng_gguf_arr_at(&arr, 2, &e), 0);
	assert_int_equal(eng_gguf_val_i64(&e, &i64), 0);
	assert_int_equal(i64, 3);
	assert_int_equal(eng_gguf_get_arr(g, "general.name", &arr), -ST_INVAL);
	eng_gguf_close(g);
	unmap(&m);
}

static void test_real_tensors(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_gguf *g;

	map_env(&m, "INFERD_MODELS", GEMMA, false);
	assert_int_equal(eng_gguf_open_buffer(m.p, m.size, m.path, &g, err, sizeof(err)), 0);
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(g, "token_embd.weight");
	assert_non_null(t);
	assert_ptr_equal(t, eng_gguf_tensor_at(g, 1));
	assert_int_equal(t->type, ENG_GGML_TYPE_Q8_0);
	assert_string_equal(eng_ggml_type_name(t->type), "Q8_0");
	assert_int_equal(t->n_dims, 2);
	assert_int_equal(t->dims[0], 640);
	assert_int_equal(t->dims[1], 262144);
	assert_int_equal(t->dims[2], 1);
	assert_int_equal(t->offset, 2560);
	assert_int_equal(t->size_bytes, 178257920);
	assert_ptr_equal(t->data, m.p + GEMMA_DATA_OFF + 2560);
	t = eng_gguf_tensor_find(g, "blk.0.attn_output.weight");
	assert_non_null(t);
	assert_int_equal(t->type, ENG_GGML_TYPE_Q4_K);
	assert_int_equal(t->dims[0], 1024);
	assert_int_equal(t->dims[1], 640);
	assert_int_equal(t->size_bytes, 368640);
	t = eng_gguf_tensor_find(g, "blk.0.ffn_down.weight");
	assert_int_equal(t->type, ENG_GGML_TYPE_Q6_K);
	assert_int_equal(t->size_bytes, 1075200);
	t = eng_gguf_tensor_at(g, 235);
	assert_string_equal(t->name, "blk.17.post_ffw_norm.weight");
	assert_int_equal(t->type, ENG_GGML_TYPE_F32);
	assert_int_equal(t->offset + t->size_bytes + GEMMA_DATA_OFF, GEMMA_SIZE);
	assert_null(eng_gguf_tensor_find(g, "no.such.tensor"));
	assert_null(eng_gguf_tensor_at(g, 236));
	eng_gguf_close(g);
	unmap(&m);
}

static void test_type_tables(void **state)
{
	(void)state;
	uint32_t blck, bytes;
	assert_true(eng_ggml_type_size(ENG_GGML_TYPE_Q4_K, &blck, &bytes));
	assert_int_equal(blck, 256);
	assert_int_equal(bytes, 144);
	assert_true(eng_ggml_type_size(ENG_GGML_TYPE_Q8_0, &blck, &bytes));
	assert_int_equal(bytes, 34);
	assert_true(eng_ggml_type_size(ENG_GGML_TYPE_BF16, &blck, &bytes));
	assert_int_equal(bytes, 2);
	assert_true(eng_ggml_type_size(ENG_GGML_TYPE_MXFP4, &blck, &bytes));
	assert_int_equal(blck, 32);
	assert_false(eng_ggml_type_size(4, &blck, &bytes)); /* retired Q4_2 */
	assert_false(eng_ggml_type_size(40, &blck, &bytes));
	assert_false(eng_ggml_type_size(-1, &blck, &bytes));
	assert_null(eng_ggml_type_name(31));
	assert_string_equal(eng_gguf_vtype_name(ENG_GGUF_VTYPE_STRING), "string");
	assert_null(eng_gguf_vtype_name(13));
	assert_int_equal(eng_gguf_vtype_size(ENG_GGUF_VTYPE_UINT64), 8);
	assert_int_equal(eng_gguf_vtype_size(ENG_GGUF_VTYPE_ARRAY), 0);
}

/* ---- truncations and corruptions ----------------------------------------- */

/* expect_fail - open the first size bytes; must fail with a one-line error
 * naming the label. Returns the status. */
static int expect_fail(const void *p, size_t size, int want_rc, const char *want_text)
{
	char err[1024];
	struct eng_gguf *g = (struct eng_gguf *)1;
	int rc = eng_gguf_open_buffer(p, size, "x.gguf", &g, err, sizeof(err));
	if (rc == 0 || (want_rc && rc != want_rc) || (want_text && !strstr(err, want_text)))
		print_error("size %zu: rc %d (%s), err '%s', want %d '%s'\n", size, rc, st_str(rc),
			    rc ? err : "", want_rc, want_text ? want_text : "");
	assert_true(rc < 0);
	assert_null(g);
	assert_true(strncmp(err, "x.gguf: ", 8) == 0);
	assert_null(strchr(err, '\n'));
	if (want_rc)
		assert_int_equal(rc, want_rc);
	if (want_text)
		assert_non_null(strstr(err, want_text));
	return rc;
}

static void test_truncations(void **state)
{
	(void)state;
	struct mapped m;
	map_env(&m, "INFERD_MODELS", GEMMA, false);
	for (size_t k = 0; k < 4096; k++)
		expect_fail(m.p, k, -ST_CORRUPT, NULL);
	/* A geometric series through the metadata (tokens start near 1 KB),
	 * the tensor infos, the padding and the data section. */
	for (double k = 4096; k < (double)m.size; k *= k < GEMMA_DATA_OFF ? 1.07 : 1.5)
		expect_fail(m.p, (size_t)k, -ST_CORRUPT, NULL);
	for (size_t k = GEMMA_DATA_OFF - 40; k <= GEMMA_DATA_OFF + 8; k++)
		expect_fail(m.p, k, -ST_CORRUPT, NULL);
	expect_fail(m.p, m.size - 1, -ST_CORRUPT, "runs past the end of the file");
	expect_fail(NULL, 0, -ST_CORRUPT, "truncated at byte 0");
	unmap(&m);
}

/* tensor_info - file offset of the info record of the tensor named name. */
static size_t tensor_info(const struct mapped *m, const char *name)
{
	uint8_t pat[80];
	uint64_t len = strlen(name);
	memcpy(pat, &len, 8);
	memcpy(pat + 8, name, len);
	const uint8_t *hit = memmem(m->p, GEMMA_DATA_OFF, pat, 8 + len);
	assert_non_null(hit);
	return (size_t)(hit - m->p);
}

/* poke - write n bytes of v at off, open, expect the failure, restore. */
static void poke(struct mapped *m, size_t off, uint64_t v, size_t n, int want_rc, const char *want)
{
	uint8_t saved[8];
	memcpy(saved, m->p + off, n);
	memcpy(m->p + off, &v, n);
	expect_fail(m->p, m->size, want_rc, want);
	memcpy(m->p + off, saved, n);
}

static void test_corrupt_header(void **state)
{
	(void)state;
	struct mapped m;
	map_env(&m, "INFERD_MODELS", GEMMA, true);
	poke(&m, 0, 0x46554748, 4, -ST_CORRUPT, "not a GGUF file");
	poke(&m, 4, 1, 4, -ST_UNSUPPORTED, "GGUF version 1 is not supported");
	poke(&m, 4, 4, 4, -ST_UNSUPPORTED, "GGUF version 4 is not supported");
	poke(&m, 4, 0x03000000, 4, -ST_UNSUPPORTED, "big-endian");
	poke(&m, 8, UINT64_MAX, 8, -ST_CORRUPT, "tensor count 18446744073709551615 cannot fit");
	poke(&m, 16, 1ull << 40, 8, -ST_CORRUPT, "metadata count 1099511627776 cannot fit");
	poke(&m, 16, 34, 8, -ST_CORRUPT, NULL); /* one KV too many: reads tensor infos as a key */
	poke(&m, 24, 1ull << 62, 8, -ST_CORRUPT, "length 4611686018427387904 of the key of metadata pair 0");
	poke(&m, 52, 13, 4, -ST_CORRUPT, "key 'general.architecture' (index 0): unknown value type 13");
	poke(&m, 56, 1ull << 60, 8, -ST_CORRUPT, "key 'general.architecture': string length");
	/* tokenizer.ggml.tokens: its array length, 8 bytes after the element type. */
	const uint8_t *tok = memmem(m.p, 4096, "tokenizer.ggml.tokens", 21);
	assert_non_null(tok);
	size_t at = (size_t)(tok - m.p) + 21 + 4 + 4;
	poke(&m, at, 1ull << 61, 8, -ST_CORRUPT, "array of 2305843009213693952 string");
	poke(&m, at - 4, 77, 4, -ST_CORRUPT, "unknown array element type 77");
	unmap(&m);
}

static void test_corrupt_tensors(void **state)
{
	(void)state;
	struct mapped m;
	map_env(&m, "INFERD_MODELS", GEMMA, true);
	size_t t0 = tensor_info(&m, "output_norm.weight") + 8 + 18;  /* its n_dims */
	size_t t1 = tensor_info(&m, "token_embd.weight") + 8 + 17;   /* n_dims, 2 dims */
	size_t tl = tensor_info(&m, "blk.17.post_ffw_norm.weight") + 8 + 27;
	poke(&m, t0, 5, 4, -ST_UNSUPPORTED, "tensor 'output_norm.weight' (index 0): n_dims 5 exceeds");
	poke(&m, t0 + 4 + 8, 4, 4, -ST_UNSUPPORTED, "tensor 'output_norm.weight' (index 0): unknown ggml type 4");
	poke(&m, t0 + 4 + 8, 1000, 4, -ST_UNSUPPORTED, "unknown ggml type 1000");
	poke(&m, t1 + 4 + 8, 1ull << 62, 8, -ST_CORRUPT, "tensor 'token_embd.weight' (index 1): dims overflow");
	poke(&m, t1 + 4, 1ull << 63, 8, -ST_CORRUPT, "dims overflow");
	poke(&m, t1 + 4, 641, 8, -ST_CORRUPT, "is not a multiple of the Q8_0 block size 32");
	poke(&m, t1 + 4 + 16 + 4, 2561, 8, -ST_CORRUPT, "data offset 2561 is not a multiple of the alignment 32");
	poke(&m, t1 + 4 + 16 + 4, 0, 8, -ST_CORRUPT, "overlaps tensor");
	poke(&m, tl + 4 + 8 + 4, 1ull << 40, 8, -ST_CORRUPT,
	     "tensor 'blk.17.post_ffw_norm.weight' (index 235): data offset 1099511627776 + 2560 bytes runs past");
	poke(&m, tl + 4 + 8 + 4, UINT64_MAX - 31, 8, -ST_CORRUPT, "runs past the end of the file");
	poke(&m, tl + 4, 1ull << 33, 8, -ST_CORRUPT, "runs past the end of the file");
	/* Rename blk.1.attn_k.weight to blk.0.attn_k.weight: a duplicate name. */
	size_t n1 = tensor_info(&m, "blk.1.attn_k.weight") + 8 + 4;
	poke(&m, n1, '0', 1, -ST_CORRUPT, "duplicate tensor name 'blk.0.attn_k.weight'");
	unmap(&m);
}

/* A tiny deterministic PRNG (xorshift64) so failures reproduce. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_random_mutations(void **state)
{
	(void)state;
	struct mapped m;
	char err[1024];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t saved[16];
	size_t where[16];
	map_env(&m, "INFERD_MODELS", GEMMA, true);
	size_t infos = tensor_info(&m, "output_norm.weight");
	for (int it = 0; it < 60; it++) {
		int n = 1 + (int)(rnd(&seed) % 8);
		for (int k = 0; k < n; k++) {
			/* half in the first 4 KB, half in the tensor infos */
			where[k] = rnd(&seed) & 1 ? rnd(&seed) % 4096
						  : infos + rnd(&seed) % (GEMMA_DATA_OFF - infos);
			saved[k] = m.p[where[k]];
			m.p[where[k]] = (uint8_t)rnd(&seed);
		}
		struct eng_gguf *g;
		int rc = eng_gguf_open_buffer(m.p, m.size, "x.gguf", &g, err, sizeof(err));
		assert_true(rc <= 0);
		if (rc)
			assert_true(strncmp(err, "x.gguf: ", 8) == 0);
		eng_gguf_close(g);
		for (int k = n - 1; k >= 0; k--)
			m.p[where[k]] = saved[k];
	}
	unmap(&m);
}

static void test_missing_file(void **state)
{
	(void)state;
	char err[512];
	struct eng_gguf *g;
	assert_int_equal(eng_gguf_open("/nonexistent/m.gguf", &g, err, sizeof(err)), -ST_NOTFOUND);
	assert_null(g);
	assert_string_equal(err, "/nonexistent/m.gguf: No such file or directory");
	assert_int_equal(eng_gguf_open("/", &g, err, sizeof(err)), -ST_IO);
	assert_string_equal(err, "/: not a regular file");
}

/* ---- the all-types seed files -------------------------------------------- */

static void check_all_types(const char *rel, uint32_t version)
{
	struct mapped m;
	char err[512];
	struct eng_gguf *g;
	uint64_t u64, len;
	int64_t i64;
	uint32_t u32;
	int32_t i32;
	double d;
	const char *s;
	size_t slen;
	struct eng_gguf_val arr, e, e2;
	enum eng_gguf_vtype et;

	map_env(&m, "INFERD_SOURCE_ROOT", rel, false);
	assert_int_equal(eng_gguf_open_buffer(m.p, m.size, rel, &g, err, sizeof(err)), 0);
	assert_int_equal(eng_gguf_version(g), version);
	assert_int_equal(eng_gguf_alignment(g), 64);
	assert_int_equal(eng_gguf_n_kv(g), 19);
	assert_int_equal(eng_gguf_get_u32(g, "t.u8", &u32), 0);
	assert_int_equal(u32, 200);
	assert_int_equal(eng_gguf_get_i32(g, "t.i8", &i32), 0);
	assert_int_equal(i32, -5);
	assert_int_equal(eng_gguf_get_u32(g, "t.i8", &u32), -ST_INVAL); /* negative */
	assert_int_equal(eng_gguf_get_u32(g, "t.u16", &u32), 0);
	assert_int_equal(u32, 60000);
	assert_int_equal(eng_gguf_get_i32(g, "t.i16", &i32), 0);
	assert_int_equal(i32, -30000);
	assert_int_equal(eng_gguf_get_u32(g, "t.u32", &u32), 0);
	assert_int_equal(u32, 4000000000u);
	assert_int_equal(eng_gguf_get_i32(g, "t.u32", &i32), -ST_INVAL); /* too big */
	assert_int_equal(eng_gguf_get_i32(g, "t.i32", &i32), 0);
	assert_int_equal(i32, -2000000000);
	assert_int_equal(eng_gguf_get_f64(g, "t.f32", &d), 0);
	assert_true(d == 0.5);
	assert_int_equal(eng_gguf_get_str(g, "t.str", &s, &slen), 0);
	assert_string_equal(s, "h\xc3\xa9llo");
	assert_int_equal(slen, 6);
	assert_int_equal(eng_gguf_get_u64(g, "t.u64", &u64), 0);
	assert_true(u64 == (1ull << 63) + 5);
	assert_int_equal(eng_gguf_get_i64(g, "t.u64", &i64), -ST_INVAL);
	assert_int_equal(eng_gguf_get_u32(g, "t.u64", &u32), -ST_INVAL);
	assert_int_equal(eng_gguf_get_i64(g, "t.i64", &i64), 0);
	assert_true(i64 == -(1ll << 40));
	assert_int_equal(eng_gguf_get_f64(g, "t.f64", &d), 0);
	assert_true(d == 2.25);
	/* Nested array of strings: [["x","yz"], [], ["w"]]. */
	assert_int_equal(eng_gguf_get_arr(g, "t.arr_arr_str", &arr), 0);
	assert_int_equal(eng_gguf_arr_info(&arr, &et, &u64), 0);
	assert_int_equal(et, ENG_GGUF_VTYPE_ARRAY);
	assert_int_equal(u64, 3);
	assert_int_equal(eng_gguf_arr_at(&arr, 2, &e), 0);
	assert_int_equal(eng_gguf_arr_at(&e, 0, &e2), 0);
	assert_int_equal(eng_gguf_val_str(&e2, &s, &len), 0);
	assert_true(len == 1 && s[0] == 'w');
	assert_int_equal(eng_gguf_arr_at(&arr, 0, &e), 0);
	assert_int_equal(eng_gguf_arr_at(&e, 1, &e2), 0);
	assert_int_equal(eng_gguf_val_str(&e2, &s, &len), 0);
	assert_true(len == 2 && !memcmp(s, "yz", 2));
	assert_int_equal(eng_gguf_get_arr(g, "t.arr_empty", &arr), 0);
	assert_int_equal(eng_gguf_arr_at(&arr, 0, &e), -ST_NOTFOUND);
	/* Tensors: a F32 [4,2] at 0, b Q8_0 [32] at 64; data section at 768. */
	assert_int_equal(eng_gguf_data_offset(g), 768);
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(g, "b");
	assert_int_equal(t->offset, 64);
	assert_int_equal(t->size_bytes, 34);
	assert_int_equal(((const uint8_t *)t->data)[33], 33);
	t = eng_gguf_tensor_find(g, "a");
	float f;
	memcpy(&f, (const uint8_t *)t->data + 4 * 7, 4);
	assert_true(f == 7.0f);
	eng_gguf_close(g);
	unmap(&m);
}

/* The structure-aware hostile seeds of tests/fuzz/make-seeds.py (issue 17):
 * valid headers around size fields that overflow. Each is refused at open
 * with the reason it was written for (a substring of the error line). */
static void test_hostile_seeds(void **state)
{
	(void)state;
	static const struct {
		const char *file, *reason;
	} cases[] = {
		{ "hostile-dims-wrap.gguf", "dims overflow" },
		{ "hostile-dims-wrap3.gguf", "dims overflow" },
		{ "hostile-dim-2e63.gguf", "dims overflow" },
		{ "hostile-q8-partial-block.gguf", "not a multiple of the Q8_0 block size" },
		{ "hostile-q8-bytes-wrap.gguf", "dims overflow" },
		{ "hostile-offset-wrap.gguf", "runs past the end" },
		{ "hostile-ndims.gguf", "n_dims 5 exceeds" },
		{ "hostile-type-overlap.gguf", "unknown ggml type 99" },
		{ "hostile-dup-names.gguf", "duplicate tensor name" },
		{ "hostile-align0.gguf", "power of two" },
		{ "hostile-align3.gguf", "power of two" },
		{ "hostile-n-tensors.gguf", "tensor count" },
		{ "hostile-n-kv.gguf", "metadata count" },
		{ "hostile-key-2g.gguf", "exceeds 65535" },
		{ "hostile-key-2e63.gguf", "exceeds 65535" },
		{ "hostile-str-4g.gguf", "runs past the end" },
		{ "hostile-arr-u64-wrap.gguf", "cannot fit" },
		{ "hostile-arr-str-2e63.gguf", "cannot fit" },
		{ "hostile-arr-nested.gguf", "nested deeper" },
		{ "hostile-vtype.gguf", "unknown value type 77" },
		{ "hostile-tname.gguf", "exceeds 65535" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char rel[256], err[512] = "";
		struct mapped m;
		struct eng_gguf *g = NULL;
		snprintf(rel, sizeof(rel), "tests/fuzz/corpus/gguf/%s", cases[i].file);
		map_env(&m, "INFERD_SOURCE_ROOT", rel, false);
		assert_int_not_equal(eng_gguf_open_buffer(m.p, m.size, rel, &g, err, sizeof(err)), 0);
		assert_null(g);
		if (!strstr(err, cases[i].reason))
			fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].file, err, cases[i].reason);
		unmap(&m);
	}
}

static void test_seed_v3(void **state)
{
	(void)state;
	check_all_types("tests/fuzz/corpus/gguf/all-types-v3.gguf", 3);
}

static void test_seed_v2(void **state)
{
	(void)state;
	check_all_types("tests/fuzz/corpus/gguf/all-types-v2.gguf", 2);
}

/* Every allocation failure on the way must give -ST_NOMEM, never a leak. */
static void test_alloc_failures(void **state)
{
	(void)state;
	struct mapped m;
	char err[512];
	struct eng_gguf *g;
	map_env(&m, "INFERD_SOURCE_ROOT", "tests/fuzz/corpus/gguf/all-types-v3.gguf", false);
	int rc = -1;
	for (long k = 0; rc != 0 && k < 1000; k++) {
		mem_fail_after(k);
		rc = eng_gguf_open_buffer(m.p, m.size, "seed", &g, err, sizeof(err));
		mem_fail_after(-1);
		assert_true(rc == 0 || rc == -ST_NOMEM);
		eng_gguf_close(g);
	}
	assert_int_equal(rc, 0);
	unmap(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_header),
		cmocka_unit_test(test_real_metadata),
		cmocka_unit_test(test_real_arrays),
		cmocka_unit_test(test_real_tensors),
		cmocka_unit_test(test_type_tables),
		cmocka_unit_test(test_truncations),
		cmocka_unit_test(test_corrupt_header),
		cmocka_unit_test(test_corrupt_tensors),
		cmocka_unit_test(test_random_mutations),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_seed_v3),
		cmocka_unit_test(test_seed_v2),
		cmocka_unit_test(test_hostile_seeds),
		cmocka_unit_test(test_alloc_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
