/* test_quant_widen.c - to_q8_0 (kn_quant.h): Q4_0 / Q5_0 / IQ4_NL blocks widened to
 * Q8_0 blocks, in every ISA that has it.
 *
 *  - the widened bytes equal the scalar reference's (kernels/ref/quant.c)
 *    bit for bit;
 *  - the format's meaning: Q8_0 dequant of the widened blocks equals the
 *    type's own dequant bit for bit;
 *  - what the engine relies on (devices/dev_par.c widens weight
 *    tiles for many x rows): Q8_0 gemv_xq and gemm_xq on the widened rows
 *    equal the type's gemv_xq on the original rows bit for bit, in the same
 *    ISA, on 1..6 x rows, widths of 1, 3 and 20 blocks.
 * Only Q4_0, Q5_0 and IQ4_NL have it; every other type leaves it NULL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_rng.h"

static uint64_t rng = 0x5eed;

static uint32_t rng_u32(void)
{
	return (uint32_t)((kn_test_uniform(&rng) + 1.0f) * 2147483647.0f);
}

/* n random blocks of type (bytes bb), their fp16 d finite. */
static void fill(uint8_t *p, size_t n, size_t bb)
{
	for (size_t i = 0; i < n * bb; i++)
		p[i] = (uint8_t)rng_u32();
	for (size_t b = 0; b < n; b++) {
		uint16_t h = (uint16_t)rng_u32();
		if ((h & 0x7c00) == 0x7c00)
			h &= (uint16_t)~0x4000;
		memcpy(p + b * bb, &h, sizeof(h));
	}
}

static const char *isa_name(int isa)
{
	return isa == KN_ISA_REF ? "ref" : isa == KN_ISA_AVX2 ? "avx2" : "avx512";
}

static void check_type(int isa, int type)
{
	const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, type);
	const struct kn_qops *q8 = kn_qops_for((enum kn_isa)isa, KN_Q_Q8_0);
	const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, type);
	static const size_t ks[] = { 32, 96, 640 };
	size_t bb = q->geom->block_bytes;
	for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
		size_t k = ks[ki], nb = k / 32, n = 9;
		size_t rb = nb * bb, rb8 = nb * 34, xb = q->xq_bytes(k);
		uint8_t *W = malloc(n * rb), *W8 = malloc(n * rb8), *R8 = malloc(n * rb8);
		float *a = malloc(k * sizeof(float)), *b = malloc(k * sizeof(float));
		float *x = malloc(k * sizeof(float)), *y = malloc(6 * n * sizeof(float));
		float *y8 = malloc(6 * n * sizeof(float));
		uint8_t *xq = malloc(6 * xb);
		assert_true(W && W8 && R8 && a && b && x && y && y8 && xq);
		fill(W, n * nb, bb);
		q->to_q8_0(W, W8, n * nb);
		ref->to_q8_0(W, R8, n * nb);
		assert_memory_equal(W8, R8, n * rb8);
		for (size_t r = 0; r < n; r++) {
			q->dequant(W + r * rb, a, k);
			q8->dequant(W8 + r * rb8, b, k);
			assert_memory_equal(a, b, k * sizeof(float));
		}
		for (size_t j = 0; j < 6; j++) {
			for (size_t i = 0; i < k; i++)
				x[i] = kn_test_uniform(&rng) * (float)(1 + j);
			q->quantize_x(x, xq + j * xb, k);
			q->gemv_xq(W, rb, xq + j * xb, y + j * n, n, k);
			q8->gemv_xq(W8, rb8, xq + j * xb, y8 + j * n, n, k);
		}
		assert_memory_equal(y, y8, 6 * n * sizeof(float));
		for (size_t nx = 1; q8->gemm_xq && nx <= 6; nx++) {
			memset(y8, 0, 6 * n * sizeof(float));
			q8->gemm_xq(W8, rb8, xq, xb, nx, y8, n, n, k);
			assert_memory_equal(y, y8, nx * n * sizeof(float));
		}
		free(W), free(W8), free(R8), free(a), free(b), free(x), free(y), free(y8), free(xq);
	}
	printf("[ kn ] to_q8_0 %s %-6s == ref bytes; Q8_0 dequant, gemv_xq%s == %s's: bit-exact\n",
	       q->geom->name, isa_name(isa), q8->gemm_xq ? ", gemm_xq" : "", q->geom->name);
}

static void test_to_q8_0(void **state)
{
	(void)state;
	int tested = 0;
	for (int isa = 0; isa < KN_ISA_COUNT; isa++)
		for (int type = 0; type < KN_Q_MAX; type++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, type);
			if (!q)
				continue;
			if (type != KN_Q_Q4_0 && type != KN_Q_Q5_0 && type != KN_Q_IQ4_NL) {
				assert_null(q->to_q8_0);
				continue;
			}
			if (!q->to_q8_0)
				continue;
			check_type(isa, type);
			tested++;
		}
	assert_true(tested >= 3); /* the reference's three at least */
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_to_q8_0) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
