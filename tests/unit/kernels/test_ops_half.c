/* tests/unit/kernels/test_ops_half.c - kn_ops f16_to_f32 on every variant
 * the CPU runs against the scalar reference (kernels/ref/ops.c), bit for
 * bit on all 65536 halves and on random halves at the edge sizes with
 * unaligned pointers; the reference against hand-worked values; and
 * kn_half.h's scalar roundings (f32 -> f16, bf16) on the IEEE edges.
 */
#include <string.h>

#include "tests/unit/kernels/kn_test_ops.h"
#include "kernels/kn_half.h"

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* ---- f16_to_f32 --------------------------------------------------------- */

static void test_f16_ref_values(void **state)
{
	(void)state;
	static const struct {
		uint16_t h;
		float f;
	} cases[] = {
		{0x0000, 0.0f},	      {0x3c00, 1.0f},
		{0xc000, -2.0f},      {0x3555, 0.333251953125f},
		{0x0001, 0x1p-24f},   {0x8001, -0x1p-24f},
		{0x03ff, 0x3ffp-24f}, {0x0400, 0x1p-14f},
		{0x7bff, 65504.0f},   {0xfbff, -65504.0f},
		{0x7c00, INFINITY},   {0xfc00, -INFINITY},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		float y;
		kn_ops_for(KN_ISA_REF)->f16_to_f32(&cases[i].h, &y, 1);
		assert_int_equal(f32_bits(y), f32_bits(cases[i].f));
	}
	uint16_t h[4] = {0x8000, 0x7e00, 0xfe01, 0x7c01}; /* -0, qNaN, -qNaN, sNaN */
	float y[4];
	kn_ops_for(KN_ISA_REF)->f16_to_f32(h, y, 4);
	assert_int_equal(f32_bits(y[0]), 0x80000000u);
	assert_true(isnan(y[1]) && isnan(y[2]) && isnan(y[3]) && signbit(y[2]));
	assert_int_equal(f32_bits(y[3]), 0x7fc02000u); /* quietened, payload kept */
}

/* kn_half.h's f32 -> f16 / bf16 roundings on the edges the IEEE rules
 * name (round to nearest even, overflow at 65520, subnormals, NaN), and
 * the round trip of every finite half. */
static void test_half_roundings(void **state)
{
	(void)state;
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{1.0f, 0x3c00},		 {-2.0f, 0xc000},	  {65504.0f, 0x7bff},
		{65519.0f, 0x7bff},	 {65520.0f, 0x7c00},	  {-INFINITY, 0xfc00},
		{0x1p-24f, 0x0001},	 {0x1p-25f, 0x0000},	  {0x3p-25f, 0x0002},
		{0x1p-14f, 0x0400},	 {-0.0f, 0x8000},	  {1.0f + 0x1p-11f, 0x3c00},
		{1.0f + 0x3p-11f, 0x3c02}, {0x1.ffcp-15f, 0x0400},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(kn_f32_to_f16(cases[i].f), cases[i].h);
	assert_int_equal(kn_f32_to_f16(NAN) & 0x7e00u, 0x7e00u); /* quiet NaN */
	for (uint32_t h = 0; h < 65536; h++)
		if ((h & 0x7c00u) != 0x7c00u || !(h & 0x3ffu)) /* all but NaNs */
			assert_int_equal(kn_f32_to_f16(kn_f16_to_f32((uint16_t)h)), h);
	assert_int_equal(kn_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(kn_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie: even */
	assert_int_equal(kn_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82); /* tie: up to even */
	assert_int_equal(kn_f32_to_bf16(NAN) & 0x7fc0u, 0x7fc0u);
	assert_true(kn_bf16_to_f32(0x3f80) == 1.0f);
	assert_true(kn_bf16_round(1.0f + 0x1p-9f) == 1.0f);
}

/* All 65536 halves, bit for bit against the reference, at both offsets. */
static void test_f16_exhaustive(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	uint16_t *hb = malloc((65536 + 1) * sizeof(*hb));
	float *want = malloc(65536 * sizeof(*want));
	float *yb, *y = buf_new(65536, 1, &yb);
	assert_non_null(hb);
	assert_non_null(want);
	for (uint32_t i = 0; i < 65536; i++)
		hb[i + 1] = (uint16_t)i;
	ref->f16_to_f32(hb + 1, want, 65536);
	for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		if (!ops)
			continue;
		ops->f16_to_f32(hb + 1, y, 65536);
		assert_memory_equal(y, want, 65536 * sizeof(*y));
		printf("[ kn ] f16_to_f32 %-6s 65536/65536 bit-exact\n", ops->name);
	}
	free(hb);
	free(want);
	free(yb);
}

static double case_f16(const struct kn_ops *ops, size_t n, size_t off)
{
	uint16_t *hb = malloc((n + off + 1) * sizeof(*hb)), *h = hb + off;
	float *yb, *y = buf_new(n, off, &yb);
	float *wb, *want = buf_new(n, 0, &wb);
	assert_non_null(hb);
	for (size_t i = 0; i < n; i++)
		h[i] = (uint16_t)rng_u64();
	ops->f16_to_f32(h, y, n);
	kn_ops_for(KN_ISA_REF)->f16_to_f32(h, want, n);
	double bad = n ? memcmp(y, want, n * sizeof(*y)) != 0 : 0; /* tolerance: exact */
	free(hb);
	free(yb);
	free(wb);
	return bad ? 2.0 : 0.0;
}

static void test_f16_sizes(void **state)
{
	(void)state;
	for_each_case("f16_to_f32", case_f16);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_ref_values),
		cmocka_unit_test(test_f16_exhaustive),
		cmocka_unit_test(test_f16_sizes),
		cmocka_unit_test(test_half_roundings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
