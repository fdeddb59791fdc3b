/* tests/unit/kernels/test_quant_ref.c - the reference dequantization
 * (kernels/ref/quant.c) against an implementation that is not ours: the
 * gguf package's numpy dequantizers (llama.cpp's Python GGUF library),
 * through tests/reference/make_quant_reference.py, which wrote random
 * blocks of each type (tests/reference/quant/<T>.blocks) and gguf's values
 * for them (<T>.f32). Every value must be equal bit for bit, in every ISA
 * (test_quant.c holds the SIMD variants to the reference on many more
 * inputs; this pins the reference itself to ggml's layouts and codebook).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_file.h"

static const int types[] = {KN_Q_Q4_0, KN_Q_Q4_1, KN_Q_Q5_0, KN_Q_Q5_1, KN_Q_Q8_0,   KN_Q_Q2_K,
			    KN_Q_Q3_K, KN_Q_Q4_K, KN_Q_Q5_K, KN_Q_Q6_K, KN_Q_IQ4_NL, KN_Q_IQ4_XS};

static const char *const isa_names[KN_ISA_COUNT] = {"ref", "avx2", "avx512"};

static void check_type(int type)
{
	const struct kn_qtype_info *g = kn_qtype_get(type);
	char rel[128];
	size_t nb = 0, nv = 0;
	snprintf(rel, sizeof(rel), "tests/reference/quant/%s.blocks", g->name);
	uint8_t *blocks = kn_test_read_file(rel, &nb);
	snprintf(rel, sizeof(rel), "tests/reference/quant/%s.f32", g->name);
	float *want = kn_test_read_file(rel, &nv);
	assert_non_null(blocks);
	assert_non_null(want);
	size_t n_blocks = nb / g->block_bytes, n = n_blocks * g->block_elems;
	assert_true(n_blocks > 0);
	assert_int_equal(nb % g->block_bytes, 0);
	assert_int_equal(nv, n * sizeof(float));
	float *got = mem_alloc(n * sizeof(float));
	assert_non_null(got);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, type);
		if (!q) {
			assert_true(isa != KN_ISA_REF);
			continue;
		}
		memset(got, 0, n * sizeof(float));
		q->dequant(blocks, got, n);
		size_t bad = 0;
		for (size_t i = 0; i < n; i++)
			if (memcmp(&got[i], &want[i], sizeof(float)))
				bad++;
		printf("[ kn ] dequant %-6s %-6s vs gguf.quants (%zu blocks): %zu of %zu differ\n",
		       g->name, isa_names[isa], n_blocks, bad, n);
		assert_int_equal(bad, 0);
	}
	mem_free(got);
	mem_free(blocks);
	mem_free(want);
}

static void test_dequant_vs_gguf(void **state)
{
	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		check_type(types[t]);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_dequant_vs_gguf) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
