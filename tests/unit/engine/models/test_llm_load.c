/* test_llm_load.c - eng_llm_load's refusals on small GGUF files built in
 * memory: the first problem is the one reported, with its status, and
 * nothing after it is looked at (the loader is a sticky-error reader). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "common/st.h"
#include "engine/format/eng_gguf.h"
#include "engine/models/eng_llm.h"

/* A GGUF v3 file written key by key, then (optionally) one F32 tensor
 * whose data (zeros) follows the aligned header. */
struct gb {
	uint8_t buf[16384];
	size_t len;
	uint64_t n_kv, n_tensors, data_bytes;
};

static void put(struct gb *b, const void *p, size_t n)
{
	assert_true(b->len + n <= sizeof(b->buf));
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void put_str(struct gb *b, const char *s)
{
	uint64_t n = strlen(s);
	put(b, &n, sizeof(n));
	put(b, s, n);
}

static void gb_init(struct gb *b)
{
	uint32_t version = 3;
	uint64_t n_tensors = 0, n_kv = 0; /* patched by gb_done */
	b->len = 0;
	b->n_kv = 0;
	b->n_tensors = 0;
	b->data_bytes = 0;
	put(b, "GGUF", 4);
	put(b, &version, sizeof(version));
	put(b, &n_tensors, sizeof(n_tensors));
	put(b, &n_kv, sizeof(n_kv));
}

static void kv_str(struct gb *b, const char *key, const char *val)
{
	uint32_t type = 8; /* GGUF_TYPE_STRING */
	put_str(b, key);
	put(b, &type, sizeof(type));
	put_str(b, val);
	b->n_kv++;
}

static void kv_u32(struct gb *b, const char *key, uint32_t val)
{
	uint32_t type = 4; /* GGUF_TYPE_UINT32 */
	put_str(b, key);
	put(b, &type, sizeof(type));
	put(b, &val, sizeof(val));
	b->n_kv++;
}

/* An F32 tensor of dims [d0, d1] (GGUF order: d0 the row length) at the
 * data section's start; after every key. */
static void tensor_f32(struct gb *b, const char *name, uint64_t d0, uint64_t d1)
{
	uint32_t n_dims = 2, type = 0;
	uint64_t dims[2] = { d0, d1 }, offset = 0;
	put_str(b, name);
	put(b, &n_dims, sizeof(n_dims));
	put(b, dims, sizeof(dims));
	put(b, &type, sizeof(type));
	put(b, &offset, sizeof(offset));
	b->n_tensors++;
	b->data_bytes = d0 * d1 * 4;
}

/* expect - load the file and check the status and the whole message. */
static void expect(struct gb *b, int want_rc, const char *want_err)
{
	memcpy(b->buf + 8, &b->n_tensors, sizeof(b->n_tensors));
	memcpy(b->buf + 16, &b->n_kv, sizeof(b->n_kv));
	while (b->len % 32) /* the data section starts aligned */
		b->buf[b->len++] = 0;
	assert_true(b->len + b->data_bytes <= sizeof(b->buf));
	memset(b->buf + b->len, 0, b->data_bytes);
	b->len += b->data_bytes;
	struct eng_gguf *g = NULL;
	struct eng_llm *m = NULL;
	char err[256] = "";
	assert_int_equal(eng_gguf_open_buffer(b->buf, b->len, "t.gguf", &g, err, sizeof(err)), 0);
	assert_int_equal(eng_llm_load(g, &m, err, sizeof(err)), want_rc);
	assert_null(m);
	assert_string_equal(err, want_err);
	eng_gguf_close(g);
}

static void llama_keys(struct gb *b, uint32_t n_head, uint32_t n_head_kv)
{
	kv_str(b, "general.architecture", "llama");
	kv_u32(b, "llama.embedding_length", 64);
	kv_u32(b, "llama.block_count", 2);
	kv_u32(b, "llama.feed_forward_length", 128);
	kv_u32(b, "llama.attention.head_count", n_head);
	kv_u32(b, "llama.attention.head_count_kv", n_head_kv);
}

static void test_refusals(void **state)
{
	(void)state;
	struct gb b;

	gb_init(&b);
	kv_u32(&b, "llama.embedding_length", 64);
	expect(&b, -ST_CORRUPT, "general.architecture: missing");

	gb_init(&b);
	kv_str(&b, "general.architecture", "mamba");
	expect(&b, -ST_UNSUPPORTED,
	       "architecture 'mamba' is not supported (gemma2, gemma3, granite, llama, olmo2, phi3, "
	       "qwen2, qwen3 are)");

	gb_init(&b); /* the first missing key is reported, not the later ones */
	kv_str(&b, "general.architecture", "llama");
	kv_u32(&b, "llama.embedding_length", 64);
	expect(&b, -ST_CORRUPT, "llama.block_count: missing or out of range");

	gb_init(&b);
	kv_str(&b, "general.architecture", "llama");
	kv_u32(&b, "llama.embedding_length", 0);
	expect(&b, -ST_CORRUPT, "llama.embedding_length: missing or out of range");

	gb_init(&b); /* head_count missing: its dependants are not evaluated */
	kv_str(&b, "general.architecture", "llama");
	kv_u32(&b, "llama.embedding_length", 64);
	kv_u32(&b, "llama.block_count", 2);
	kv_u32(&b, "llama.feed_forward_length", 128);
	expect(&b, -ST_CORRUPT, "llama.attention.head_count: missing or out of range");

	gb_init(&b);
	llama_keys(&b, 4, 3);
	expect(&b, -ST_UNSUPPORTED, "llama: unsupported head layout");

	gb_init(&b);
	llama_keys(&b, 4, 2);
	expect(&b, -ST_CORRUPT, "tensor 'token_embd.weight' is missing");

	gb_init(&b); /* 64 wide over 5 heads, no key_length: both named */
	llama_keys(&b, 5, 5);
	expect(&b, -ST_CORRUPT,
	       "llama.attention.head_count 5 does not divide llama.embedding_length 64 (and no "
	       "llama.attention.key_length gives the head size)");

	gb_init(&b); /* an embedding 48 wide in a 64-wide model: both shapes named */
	llama_keys(&b, 4, 2);
	tensor_f32(&b, "token_embd.weight", 48, 16);
	expect(&b, -ST_CORRUPT,
	       "tensor 'token_embd.weight' is 16 x 48 (rows x columns), but the metadata "
	       "(llama.*: widths, head counts and sizes) makes it 16 x 64");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
