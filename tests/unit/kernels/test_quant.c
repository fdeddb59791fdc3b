/* tests/unit/kernels/test_quant.c - the quantized-weight kernels
 * (kernels/kn_quant.h): the scalar reference against hand-built blocks,
 * every SIMD variant against the reference, and gemv against a double
 * product.
 *
 *  1. Reference dequant: blocks are encoded here, byte by byte, from
 *     chosen integer codes, scales and mins (an encoder written from the
 *     layout, independent of the decoder), and every output float must be
 *     exactly the one ggml's arithmetic gives; a few are also spelled out
 *     as literals.
 *  2. Dequant of every variant is compared bit for bit (memcmp; tolerance:
 *     exact) with the reference on random blocks (random bytes, fp16 scale
 *     fields forced finite; the flat types get every bit pattern, NaNs
 *     included), with unaligned source and destination.
 *  3. gemv of every variant (the reference too) against a double dot over
 *     the reference-dequantized weights on n_rows = 0..17 and k = 1, 2, 3
 *     blocks plus realistic widths, tight and padded row strides, aligned
 *     and unaligned W / x. Score: |y - y_double| / sum |w x|, tolerance
 *     GEMV_TOL = 4e-6 (float32 sums of up to 2048 terms; the measured worst,
 *     printed, is about 6e-7 for the sequential reference, 1e-7 for SIMD).
 *  4. kn_qtype_row_bytes and the lookup functions, unknown types included.
 *
 * The integer path (quantize_x, gemv_xq, gemm_xq) and round_x are tested
 * in test_quant_xq.c; both files share kn_test_quant.h.
 *
 * Buffers are allocated to their exact size so ASan catches any overread.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_quant.h"

/* float32 accumulation error allowed, relative to sum |w x|. */
#define GEMV_TOL 4e-6

#include "tests/unit/kernels/kn_test_quant.h"

/* ---- 1. reference dequant on hand-built blocks -------------------------- */

/* The 12 bytes of q4_K/q5_K scales from eight 6-bit (scale, min) pairs:
 * pairs 0-3 in the low 6 bits of bytes j and j + 4, pairs 4-7 split into
 * a nibble each in byte j + 4 and their top 2 bits in the top bits of
 * bytes j - 4 (scale) and j (min). */
static void pack_scales(uint8_t *out, const int *sc, const int *m)
{
	memset(out, 0, 12);
	for (int j = 0; j < 4; j++) {
		out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		out[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		out[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (m[j + 4] & 0xf) << 4);
	}
}

static void expect_exact(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (f32_bits(got[i]) != f32_bits(want[i])) {
			printf("element %zu: got %.9g want %.9g\n", i, got[i], want[i]);
			fail();
		}
}

static void test_ref_flat(void **state)
{
	(void)state;
	const struct kn_qops *f16 = kn_qops_for(KN_ISA_REF, KN_Q_F16);
	const struct kn_qops *bf = kn_qops_for(KN_ISA_REF, KN_Q_BF16);
	const struct kn_qops *f32 = kn_qops_for(KN_ISA_REF, KN_Q_F32);
	uint8_t h[10] = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x55, 0x35};
	float want_h[5] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, 0.333251953125f}, y[5];
	f16->dequant(h, y, 5);
	expect_exact(y, want_h, 5);
	uint8_t b[6] = {0x80, 0x3f, 0x40, 0xc0, 0x49, 0x40};
	float want_b[3] = {1.0f, -3.0f, 3.140625f};
	bf->dequant(b, y, 3);
	expect_exact(y, want_b, 3);
	float v[3] = {1.5f, -0.0f, 1e-30f};
	f32->dequant(v, y, 3);
	expect_exact(y, v, 3);
}

/* q4_0: d = 0.5, codes q[i] = (5 i + 3) mod 16; w = (q - 8) d. q5_0:
 * d = 0.25, codes (7 i + 1) mod 32; w = (q - 16) d. q8_0: d = 2, codes
 * 8 i - 128; w = q d. */
static void test_ref_q_0(void **state)
{
	(void)state;
	uint8_t b4[18] = {0x00, 0x38}, b5[22] = {0x00, 0x34}, b8[34] = {0x00, 0x40};
	float w4[32], w5[32], w8[32], y[32];
	for (int i = 0; i < 32; i++) {
		int q4 = (5 * i + 3) % 16, q5 = (7 * i + 1) % 32, q8 = 8 * i - 128;
		b4[2 + i % 16] |= (uint8_t)(q4 << (i < 16 ? 0 : 4));
		b5[6 + i % 16] |= (uint8_t)((q5 & 15) << (i < 16 ? 0 : 4));
		b5[2 + i / 8] |= (uint8_t)((q5 >> 4) << (i % 8)); /* bit i of qh */
		b8[2 + i] = (uint8_t)(int8_t)q8;
		w4[i] = (float)(q4 - 8) * 0.5f;
		w5[i] = (float)(q5 - 16) * 0.25f;
		w8[i] = (float)q8 * 2.0f;
	}
	kn_qops_for(KN_ISA_REF, KN_Q_Q4_0)->dequant(b4, y, 32);
	expect_exact(y, w4, 32);
	assert_true(y[0] == -2.5f && y[1] == 0.0f && y[16] == -2.5f && y[31] == 3.0f);
	kn_qops_for(KN_ISA_REF, KN_Q_Q5_0)->dequant(b5, y, 32);
	expect_exact(y, w5, 32);
	assert_true(y[0] == -3.75f && y[5] == -3.0f && y[20] == -0.75f && y[31] == 2.5f);
	kn_qops_for(KN_ISA_REF, KN_Q_Q8_0)->dequant(b8, y, 32);
	expect_exact(y, w8, 32);
	assert_true(y[0] == -256.0f && y[16] == 0.0f && y[31] == 240.0f);
	/* q4_1: d = 0.5, m = -1 (fp16 0xbc00), the q4_0 codes; w = q d + m */
	uint8_t b41[20] = {0x00, 0x38, 0x00, 0xbc};
	float w41[32];
	for (int i = 0; i < 32; i++) {
		int q4 = (5 * i + 3) % 16;
		b41[4 + i % 16] |= (uint8_t)(q4 << (i < 16 ? 0 : 4));
		w41[i] = (float)q4 * 0.5f - 1.0f;
	}
	kn_qops_for(KN_ISA_REF, KN_Q_Q4_1)->dequant(b41, y, 32);
	expect_exact(y, w41, 32);
	assert_true(y[0] == 0.5f && y[1] == 3.0f && y[31] == 6.0f);
	/* q5_1: d = 0.25, m = 2, the q5_0 codes (no offset); w = q d + m */
	uint8_t b51[24] = {0x00, 0x34, 0x00, 0x40};
	float w51[32];
	for (int i = 0; i < 32; i++) {
		int q5 = (7 * i + 1) % 32;
		b51[8 + i % 16] |= (uint8_t)((q5 & 15) << (i < 16 ? 0 : 4));
		b51[4 + i / 8] |= (uint8_t)((q5 >> 4) << (i % 8));
		w51[i] = (float)q5 * 0.25f + 2.0f;
	}
	kn_qops_for(KN_ISA_REF, KN_Q_Q5_1)->dequant(b51, y, 32);
	expect_exact(y, w51, 32);
	assert_true(y[0] == 2.25f && y[5] == 3.0f && y[31] == 8.5f);
}

/* q4_K (hi5 false) / q5_K (true): d = 1, dmin = 0.5, eight chosen 6-bit
 * scales and mins, codes (7 i + 3) mod 16 or 32. w = (d sc) q - dmin m. */
static void check_ref_k45(int type, bool hi5)
{
	static const int sc[8] = {1, 2, 3, 63, 17, 32, 48, 5};
	static const int m[8] = {0, 1, 63, 7, 33, 16, 2, 60};
	uint8_t blk[176] = {0x00, 0x3c, 0x00, 0x38};
	uint8_t *qh = blk + 16, *qs = blk + (hi5 ? 48 : 16);
	float want[256], y[256];
	pack_scales(blk + 4, sc, m);
	for (int i = 0; i < 256; i++) {
		int s = i / 32, l = i % 32, q = (7 * i + 3) % (hi5 ? 32 : 16);
		qs[32 * (s / 2) + l] |= (uint8_t)((q & 15) << (s % 2 ? 4 : 0));
		if (hi5)
			qh[l] |= (uint8_t)((q >> 4) << s);
		want[i] = (1.0f * (float)sc[s]) * (float)q - 0.5f * (float)m[s];
	}
	kn_qops_for(KN_ISA_REF, type)->dequant(blk, y, 256);
	expect_exact(y, want, 256);
	/* spelled out: i = 0 (s 0: sc 1, m 0, q 3); i = 255 (s 7: sc 5, m 60,
	 * q 1788 mod 16 = 12 or mod 32 = 28) */
	assert_true(y[0] == 3.0f);
	assert_true(y[255] == (hi5 ? 110.0f : 30.0f));
}

static void test_ref_k45(void **state)
{
	(void)state;
	check_ref_k45(KN_Q_Q4_K, false);
	check_ref_k45(KN_Q_Q5_K, true);
}

/* q6_K: d = 0.25, sixteen int8 scales (element i uses scale i / 16), codes
 * (11 i + 5) mod 64. Element 128 h + 32 t + l: low nibble in ql[64 h +
 * 32 (t & 1) + l] (high nibble for t >= 2), 2 high bits at 2 t of
 * qh[32 h + l]. w = (d sc) (q - 32). */
static void test_ref_q6_k(void **state)
{
	(void)state;
	static const int8_t sc[16] = {1, -2, 3, -4, 5, 127, -128, 8, 9, 10, -11, 12, 13, 14, 15, 16};
	uint8_t blk[210] = {0};
	float want[256], y[256];
	memcpy(blk + 192, sc, 16);
	put16(blk + 208, 0x3400);
	for (int i = 0; i < 256; i++) {
		int h = i / 128, t = (i % 128) / 32, l = i % 32, q = (11 * i + 5) % 64;
		blk[64 * h + 32 * (t & 1) + l] |= (uint8_t)((q & 15) << (t >= 2 ? 4 : 0));
		blk[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * t));
		want[i] = (0.25f * (float)sc[i / 16]) * (float)(q - 32);
	}
	kn_qops_for(KN_ISA_REF, KN_Q_Q6_K)->dequant(blk, y, 256);
	expect_exact(y, want, 256);
	/* i = 0: q 5, sc 1 -> -6.75; i = 80: q 885 mod 64 = 53, sc[5] = 127 */
	assert_true(y[0] == -6.75f && y[80] == 31.75f * 21.0f);
}

/* ---- 2. SIMD dequant == reference, bit for bit ------------------------ */

static double dequant_case(const struct kn_qops *q, const struct kn_qops *ref, size_t n_blocks)
{
	size_t bytes = n_blocks * (size_t)q->geom->block_bytes, n = n_blocks * (size_t)q->geom->block_elems;
	uint8_t *src = malloc(bytes + 1);
	float *got = malloc((n + 1) * sizeof(float)), *want = malloc((n + 1) * sizeof(float));
	assert_true(src && got && want);
	fill_blocks(src + 1, q->type, n_blocks, 0); /* src + 1: unaligned */
	ref->dequant(src + 1, want, n);
	q->dequant(src + 1, got + 1, n);
	int bad = n && memcmp(got + 1, want, n * sizeof(float)) != 0;
	free(src);
	free(got);
	free(want);
	return bad;
}

static void test_dequant_vs_ref(void **state)
{
	(void)state;
	static const size_t nb[] = {0, 1, 2, 3, 7, 15, 16, 17, 33, 100, 1500};
	for (int isa = 1; isa < KN_ISA_COUNT; isa++)
		for (size_t t = 0; t < N_TYPES; t++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, all_types[t]);
			if (!q)
				continue;
			int bad = 0;
			for (size_t i = 0; i < sizeof(nb) / sizeof(nb[0]); i++)
				for (int rep = 0; rep < 4; rep++)
					bad += dequant_case(q, ref, q->geom->block_elems > 1 && nb[i] > 40 ? 40 : nb[i]) != 0;
			printf("[ kn ] dequant %-5s %-6s vs ref: %s\n", q->geom->name,
			       isa == KN_ISA_AVX2 ? "avx2" : "avx512", bad ? "DIFFERS" : "bit-exact");
			assert_int_equal(bad, 0);
		}
}

/* ---- 3. gemv against a double product ---------------------------------- */

/* One gemv on n_rows x k with row stride rb (>= the row's bytes) and byte
 * offset off on W and float offset off on x; returns the worst
 * |y - y_double| / sum |w x|. */
static double gemv_case(const struct kn_qops *q, size_t n_rows, size_t k, size_t pad, size_t off)
{
	const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, q->type);
	size_t row = kn_qtype_row_bytes(q->type, k), rb = row + pad;
	size_t total = n_rows ? (n_rows - 1) * rb + row : 0;
	uint8_t *wb = malloc(total + off ? total + off : 1);
	float *xb = malloc((k + off) * sizeof(float)), *x = xb + off;
	float *y = malloc((n_rows ? n_rows : 1) * sizeof(float)), *wf = malloc(k * sizeof(float));
	assert_true(wb && xb && y && wf);
	for (size_t r = 0; r < n_rows; r++)
		fill_blocks(wb + off + r * rb, q->type, k / (size_t)q->geom->block_elems, 1);
	for (size_t i = 0; i < k; i++)
		x[i] = rng_uniform(-1.0f, 1.0f);
	q->gemv(wb + off, rb, x, y, n_rows, k);
	double worst = 0.0;
	for (size_t r = 0; r < n_rows; r++) {
		ref->dequant(wb + off + r * rb, wf, k);
		double exact = 0.0, mag = 0.0;
		for (size_t i = 0; i < k; i++) {
			exact += (double)wf[i] * x[i];
			mag += fabs((double)wf[i] * x[i]);
		}
		double e = fabs(y[r] - exact) / (mag + 1e-300);
		if (!(e <= worst)) /* NaN counts as worst */
			worst = isnan(e) ? INFINITY : e;
	}
	free(wb);
	free(xb);
	free(y);
	free(wf);
	return worst;
}

static void test_gemv(void **state)
{
	(void)state;
	static const size_t rows[] = {0, 1, 2, 3, 4, 5, 7, 9, 17};
	static const char *isa_name[] = {"ref", "avx2", "avx512"};
	for (int isa = 0; isa < KN_ISA_COUNT; isa++)
		for (size_t t = 0; t < N_TYPES; t++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			if (!q)
				continue;
			size_t k[16], nk = gemv_widths(q, k);
			double worst = 0.0;
			for (size_t ki = 0; ki < nk; ki++)
				for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++)
					for (size_t v = 0; v < 2; v++) {
						double e = gemv_case(q, rows[ri], k[ki], v ? 5 : 0, v);
						worst = e > worst ? e : worst;
					}
			printf("[ kn ] gemv %-5s %-6s max |y - y_double| / sum|wx| = %.3g (tol %.0e)\n",
			       q->geom->name, isa_name[isa], worst, GEMV_TOL);
			assert_true(worst <= GEMV_TOL);
		}
}

/* ---- 4. sizes and lookups ------------------------------------------------ */

static void test_row_bytes(void **state)
{
	(void)state;
	assert_int_equal(kn_qtype_row_bytes(KN_Q_F32, 3), 12);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_F16, 3), 6);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_BF16, 640), 1280);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_0, 64), 36);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q5_0, 640), 20 * 22);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q8_0, 640), 20 * 34);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_K, 2048), 8 * 144);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q5_K, 256), 176);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q6_K, 1024), 4 * 210);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_0, 0), 0);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_0, 33), 0);  /* not a whole block */
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_K, 640), 0); /* 640 % 256 */
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q4_1, 64), 40);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q5_1, 64), 48);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q2_K, 512), 2 * 84);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_Q3_K, 256), 110);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_IQ4_NL, 64), 36);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_IQ4_XS, 512), 2 * 136);
	assert_int_equal(kn_qtype_row_bytes(16, 256), 0);	 /* IQ2_XXS: not implemented */
	assert_int_equal(kn_qtype_row_bytes(-1, 32), 0);
	assert_int_equal(kn_qtype_row_bytes(KN_Q_MAX, 32), 0);
	assert_int_equal(kn_qtype_row_bytes(1000, 32), 0);
}

static void test_lookup(void **state)
{
	(void)state;
	assert_null(kn_qops_get(16)); /* IQ2_XXS */
	assert_null(kn_qops_get(-1));
	assert_null(kn_qops_get(KN_Q_MAX));
	assert_null(kn_qops_for(KN_ISA_COUNT, KN_Q_Q4_0));
	assert_null(kn_qops_for((enum kn_isa)-1, KN_Q_Q4_0));
	assert_null(kn_qops_for(KN_ISA_REF, 15)); /* q8_K */
	for (size_t t = 0; t < N_TYPES; t++) {
		const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, all_types[t]);
		assert_non_null(ref);
		assert_int_equal(ref->type, all_types[t]);
		assert_ptr_equal(ref->geom, kn_qtype_get(all_types[t]));
		for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			assert_true(q || !kn_ops_for((enum kn_isa)isa));
			if (!q)
				continue;
			assert_int_equal(q->type, ref->type);
			/* one geometry table for every ISA */
			assert_ptr_equal(q->geom, ref->geom);
		}
	}
	/* kn_qops_get follows kn_init's choice */
	kn_init(KN_ISA_REF);
	assert_ptr_equal(kn_qops_get(KN_Q_Q8_0), kn_qops_for(KN_ISA_REF, KN_Q_Q8_0));
	const struct kn_ops *best = kn_init(KN_ISA_COUNT);
	assert_ptr_equal(kn_qops_get(KN_Q_Q8_0), kn_qops_for(best->isa, KN_Q_Q8_0));
	assert_string_equal(kn_qops_get(KN_Q_Q4_K)->geom->name, "Q4_K");
	/* the table covers types without kernels; retired numbers are NULL */
	assert_int_equal(kn_qtype_get(3)->block_bytes, 20); /* Q4_1: d, m, qs[16] */
	assert_null(kn_qtype_get(4));
	assert_null(kn_qtype_get(KN_Q_MAX));
	assert_null(kn_qtype_get(-1));
}


int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ref_flat),       cmocka_unit_test(test_ref_q_0),
		cmocka_unit_test(test_ref_k45),	       cmocka_unit_test(test_ref_q6_k),
		cmocka_unit_test(test_dequant_vs_ref), cmocka_unit_test(test_gemv),
		cmocka_unit_test(test_row_bytes),      cmocka_unit_test(test_lookup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
