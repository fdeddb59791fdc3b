/* tests/unit/kernels/test_quant_xq.c - the integer path of the
 * quantized-weight kernels (kernels/kn_quant.h quantize_x, gemv_xq,
 * gemm_xq) and round_x, split from test_quant.c (which tests dequant and
 * the float gemv; the shared helpers are kn_test_quant.h):
 *
 *  5. The integer path (quantize_x / gemv_xq):
 *     a. quantize_x of every variant == the reference, memcmp (tolerance:
 *        exact), on random rows whose blocks span magnitudes 1e-9 .. 1e7
 *        (fp16 scales subnormal and infinite included), all-zero blocks,
 *        rounding ties (roundf's half away from zero for Q8_0, nearest
 *        even for Q8_K) and equal |x| of both signs (the first wins); the
 *        reference itself against literal codes.
 *     b. gemv_xq with unit scales and small codes, where every float
 *        operation is exact: every variant == the reference == the exact
 *        integer result, bit for bit (the integer sums are exact).
 *     c. gemv_xq of every variant on random blocks and x, the sizes,
 *        strides and offsets of test_quant.c's gemv test: against the
 *        double dot of the dequantized weights with the dequantized xq,
 *        relative to sum |w x_q|, tolerance XQ_TOL = 4e-6 (float combine
 *        order); and against gemv on the float x, relative to sum |w x|,
 *        tolerance XQ_VS_F32_TOL = 1e-2 (x's quantization error: 8-bit
 *        codes; the measured worst is printed).
 *     d. gemm_xq == gemv_xq row by row, bit for bit, in every ISA.
 *  6. round_x (F16 / BF16 weights): the reference against literal
 *     roundings (ties to even, overflow to infinity, subnormal halves,
 *     NaN stays NaN), every variant == the reference bit for bit on
 *     random bit patterns (NaNs and infinities included) and lengths
 *     0..40 (vector body and scalar tail); other types have none.
 *
 * Buffers are allocated to their exact size so ASan catches any overread.
 * With KN_BENCH=1 a separate group prints the GB/s of weights gemv and
 * gemv_xq stream per type and ISA on a 4096 x 2048 matrix.
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
#include <time.h>

#include "kernels/kn_int.h" /* kn__set_avx512vnni: run both AVX-512 forms */
#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_quant.h"

/* gemv_xq against the exact product with the quantized x, relative to
 * sum |w x_q|; and against gemv on the float x, relative to sum |w x|. */
#define XQ_TOL	      4e-6
#define XQ_VS_F32_TOL 1e-2

/* ---- 5. the integer path ------------------------------------------------ */

static const char *isa_names[] = {"ref", "avx2", "avx512"};

/* gemv_xq variants: each ISA, and AVX-512 in both of its forms (VNNI when
 * the CPU has it, and the AVX-512BW form forced with kn__set_avx512vnni;
 * callers restore it with kn__set_avx512vnni(true)). NULL: not on this
 * CPU. */
enum { XQ_VARIANTS = 4 };
static const char *xq_names[XQ_VARIANTS] = {"ref", "avx2", "avx512-bw", "avx512-vnni"};

static const struct kn_qops *xq_variant(int v, int type)
{
	if (v < 2)
		return kn_qops_for((enum kn_isa)v, type);
	if (!kn__set_avx512vnni(v == 3) && v == 3)
		return NULL;
	return kn_qops_for(KN_ISA_AVX512, type);
}

/* x of k floats for quantize_x: each 32-element stretch gets its own
 * magnitude 10^[-9, 7] (some stretches zero, some with rounding ties at
 * unit scale and equal |x| of both signs). */
static void fill_x_varied(float *x, size_t k)
{
	for (size_t b = 0; b < k / 32; b++) {
		float *v = x + 32 * b;
		unsigned kind = (unsigned)(rng_u64() % 8);
		float mag = powf(10.0f, rng_uniform(-9.0f, 7.0f));
		for (int j = 0; j < 32; j++)
			v[j] = kind == 0 ? 0.0f : rng_uniform(-mag, mag);
		if (kind == 1) { /* amax 127 -> unit scale: ties at x.5 */
			for (int j = 0; j < 32; j++)
				v[j] = (float)((int)(rng_u64() % 255) - 127) + 0.5f * (float)(rng_u64() & 1);
			v[rng_u64() % 32] = (rng_u64() & 1) ? 127.0f : -127.0f;
		}
		if (kind == 2) { /* equal |x| of both signs */
			v[3] = -mag;
			v[9] = mag;
		}
	}
}

/* The partner of type: Q8_0 (32-element blocks), Q8_1 (Q4_1's: Q8_0
 * with s = fp16(d sum q) after d) or Q8_K. */
static int xq_is_k(const struct kn_qops *q)
{
	return q->geom->block_elems == 256;
}

static int xq_is_q8_1(const struct kn_qops *q)
{
	return q->type == KN_Q_Q4_1 || q->type == KN_Q_Q5_1;
}

/* Dequantized xq (d q) into xf. */
static void xq_dequant(const struct kn_qops *q, const uint8_t *xq, float *xf, size_t k)
{
	if (!xq_is_k(q)) {
		const struct kn_qops *h = kn_qops_for(KN_ISA_REF, KN_Q_F16);
		size_t bytes = xq_is_q8_1(q) ? 36 : 34, at = xq_is_q8_1(q) ? 4 : 2;
		for (size_t b = 0; b < k / 32; b++) {
			float d;
			h->dequant(xq + bytes * b, &d, 1);
			for (int j = 0; j < 32; j++)
				xf[32 * b + j] = d * (float)(int8_t)xq[bytes * b + at + j];
		}
		return;
	}
	for (size_t b = 0; b < k / 256; b++) {
		float d;
		memcpy(&d, xq + 292 * b, sizeof(d));
		for (int j = 0; j < 256; j++)
			xf[256 * b + j] = d * (float)(int8_t)xq[292 * b + 4 + j];
	}
}

static void test_quantize_x_ref(void **state)
{
	(void)state;
	const struct kn_qops *q0 = kn_qops_for(KN_ISA_REF, KN_Q_Q4_0);
	const struct kn_qops *qk = kn_qops_for(KN_ISA_REF, KN_Q_Q4_K);
	assert_int_equal(q0->xq_bytes(64), 68);
	assert_int_equal(qk->xq_bytes(512), 584);
	/* Q8_0: amax 127 -> d = 1 (fp16 0x3c00), roundf: 2.5 -> 3, -2.5 -> -3,
	 * 0.5 -> 1; amax 1 -> d = 1/127 rounded to fp16 (0x2008), codes
	 * x * (1 / (1/127.f)) rounded. */
	float x[256] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.5f};
	for (int j = 32; j < 64; j++)
		x[j] = (float)(j - 32) / 31.0f;
	uint8_t o[2 * 34];
	q0->quantize_x(x, o, 64);
	assert_int_equal(o[0] | o[1] << 8, 0x3c00);
	int8_t want0[7] = {127, 3, -3, 1, -1, 1, -127};
	for (int j = 0; j < 7; j++)
		assert_int_equal((int8_t)o[2 + j], want0[j]);
	assert_int_equal(o[34] | o[35] << 8, 0x2008);
	assert_int_equal((int8_t)o[36 + 31], 127);
	assert_int_equal((int8_t)o[36 + 16], (int8_t)roundf(16.0f / 31.0f * (1.0f / (1.0f / 127.0f))));
	/* Q8_K: max is the first largest |x| with its sign: -127 -> iscale
	 * 1, codes nearest-even (2.5 -> 2, -2.5 -> -2, 3.5 -> 4); d = 1. */
	memset(x, 0, sizeof(x));
	x[0] = 2.5f, x[1] = -2.5f, x[2] = 3.5f, x[5] = -127.0f, x[6] = 127.0f, x[17] = 1.0f;
	uint8_t ok[292];
	qk->quantize_x(x, ok, 256);
	float d;
	memcpy(&d, ok, sizeof(d));
	assert_true(d == 1.0f);
	int8_t wantk[7] = {2, -2, 4, 0, 0, -127, 127};
	for (int j = 0; j < 7; j++)
		assert_int_equal((int8_t)ok[4 + j], wantk[j]);
	int16_t bs0, bs1;
	memcpy(&bs0, ok + 260, 2);
	memcpy(&bs1, ok + 262, 2);
	assert_int_equal(bs0, 2 - 2 + 4 - 127 + 127);
	assert_int_equal(bs1, 1);
	/* x[5] = 127 first: max = 127, iscale = -1, codes negated */
	x[5] = 127.0f, x[6] = -127.0f;
	qk->quantize_x(x, ok, 256);
	memcpy(&d, ok, sizeof(d));
	assert_true(d == -1.0f);
	assert_int_equal((int8_t)ok[4 + 2], -4);
	assert_int_equal((int8_t)ok[4 + 5], -127);
	/* all zero: d = 0, codes and bsums 0 */
	memset(x, 0, sizeof(x));
	memset(ok, 0xa5, sizeof(ok));
	qk->quantize_x(x, ok, 256);
	for (size_t j = 0; j < sizeof(ok); j++)
		assert_int_equal(ok[j], 0);
}

static void test_quantize_x_vs_ref(void **state)
{
	(void)state;
	static const size_t kk[] = {32, 64, 96, 224, 256, 512, 768, 2048, 4096};
	for (int isa = 1; isa < KN_ISA_COUNT; isa++)
		for (size_t t = 0; t < N_TYPES; t++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, all_types[t]);
			if (!q)
				continue;
			if (!ref->quantize_x) {
				assert_null(q->quantize_x);
				assert_null(q->gemv_xq);
				assert_null(q->xq_bytes);
				continue;
			}
			int bad = 0;
			for (size_t i = 0; i < sizeof(kk) / sizeof(kk[0]); i++)
				for (int rep = 0; rep < 20; rep++) {
					size_t k = kk[i];
					if (k % (size_t)q->geom->block_elems)
						continue;
					size_t nb = ref->xq_bytes(k);
					assert_int_equal(q->xq_bytes(k), nb);
					float *xb = malloc((k + 1) * sizeof(float)), *x = xb + 1;
					uint8_t *a = malloc(nb + 1), *b = malloc(nb);
					assert_true(xb && a && b);
					fill_x_varied(x, k);
					ref->quantize_x(x, b, k);
					q->quantize_x(x, a + 1, k);
					bad += memcmp(a + 1, b, nb) != 0;
					free(xb);
					free(a);
					free(b);
				}
			printf("[ kn ] quantize_x %-5s %-6s vs ref: %s\n", q->geom->name, isa_names[isa],
			       bad ? "DIFFERS" : "bit-exact");
			assert_int_equal(bad, 0);
		}
}

static float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static void test_round_x(void **state)
{
	(void)state;
	const struct kn_qops *h = kn_qops_for(KN_ISA_REF, KN_Q_F16);
	const struct kn_qops *b = kn_qops_for(KN_ISA_REF, KN_Q_BF16);
	assert_non_null(h->round_x);
	assert_non_null(b->round_x);
	/* binary16: 11 significant bits. */
	const float hx[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, 0x1p-25f,
			    3 * 0x1p-25f, -2.5f, 0x1p-24f * 1.5f};
	const float hy[] = {1.0f, 1.0f + 0x1p-9f, 65504.0f, INFINITY, 0.0f,
			    0x1p-23f, -2.5f, 0x1p-23f};
	float y[8];
	h->round_x(hx, y, 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(f32_bits(y[i]), f32_bits(hy[i]));
	/* bfloat16: 8 significant bits. */
	const float bx[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -1.0f - 0x1p-9f, 3.0e38f,
			    bits_f(0x7f800001u), bits_f(0x7f7fffffu), 0x1p-130f, 1.0f};
	const uint32_t by[] = {0x3f800000u, 0x3f820000u, 0xbf800000u, 0x7f620000u,
			       0x7fc00000u, 0x7f800000u, 0x00080000u, 0x3f800000u};
	b->round_x(bx, y, 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(f32_bits(y[i]), by[i]);
	for (size_t t = 0; t < N_TYPES; t++) {
		const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, all_types[t]);
		if (all_types[t] != KN_Q_F16 && all_types[t] != KN_Q_BF16)
			assert_null(ref->round_x);
		for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			if (!q)
				continue;
			if (!ref->round_x) {
				assert_null(q->round_x);
				continue;
			}
			uint32_t s = 12345u;
			int bad = 0;
			for (size_t k = 0; k <= 40; k++)
				for (int rep = 0; rep < 50; rep++) {
					float *x = malloc((k + 1) * sizeof(float));
					float *a = malloc((k + 1) * sizeof(float));
					float *r = malloc((k + 1) * sizeof(float));
					assert_true(x && a && r);
					for (size_t i = 0; i < k; i++) {
						s = s * 1664525u + 1013904223u;
						/* every 7th a full random pattern, else a
						 * plausible activation */
						x[i] = i % 7 == 3 ? bits_f(s)
								  : (float)((int32_t)s) * 0x1p-28f;
					}
					ref->round_x(x, r, k);
					q->round_x(x, a, k);
					bad += k && memcmp(a, r, k * sizeof(float)) != 0;
					free(x);
					free(a);
					free(r);
				}
			printf("[ kn ] round_x %-5s %-6s vs ref: %s\n", q->geom->name, isa_names[isa],
			       bad ? "DIFFERS" : "bit-exact");
			assert_int_equal(bad, 0);
		}
	}
}

/* gemm_xq (several x rows at once), where an ISA has it, equals that
 * ISA's gemv_xq row by row bit for bit: row counts 0..9 and 64 (passes of
 * four and tails), 1..6 x rows (groups of four and a remainder), widths of
 * one and of an odd number of blocks (32 / 96; 256 / 768 for the K-quants)
 * and Gemma's 640, padded row strides. Types without
 * it leave the field NULL in every ISA that lacks it (the reference has
 * none). */
static void test_gemm_xq(void **state)
{
	(void)state;
	static const size_t rows[] = { 0, 1, 3, 4, 5, 9, 64 }, ks[] = { 32, 96, 256, 640, 768 };
	int tested = 0;
	/* every ISA, and AVX-512 once more in its AVX-512BW form */
	for (int pass = 0; pass < KN_ISA_COUNT + 1; pass++)
		for (size_t t = 0; t < N_TYPES; t++) {
			int isa = pass < KN_ISA_COUNT ? pass : KN_ISA_AVX512;
			kn__set_avx512vnni(pass < KN_ISA_COUNT);
			const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, all_types[t]);
			if (!q || !q->gemm_xq) {
				if (q && isa == KN_ISA_REF)
					assert_null(q->gemm_xq);
				continue;
			}
			int widths = 0;
			for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
				size_t k = ks[ki];
				if (k % (size_t)q->geom->block_elems)
					continue;
				widths++;
				size_t rb = kn_qtype_row_bytes(q->type, k) + 5, nxb = q->xq_bytes(k);
				for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++)
					for (size_t nx = 1; nx <= 6; nx++) {
						size_t n = rows[ri];
						uint8_t *W = malloc(n * rb + 1);
						uint8_t *xq = malloc(nx * nxb);
						float *x = malloc(k * sizeof(float));
						float *a = malloc((nx * n + 1) * sizeof(float));
						float *b = malloc((nx * n + 1) * sizeof(float));
						assert_true(W && xq && x && a && b);
						for (size_t r = 0; r < n; r++)
							fill_blocks(W + r * rb, q->type,
								    k / (size_t)q->geom->block_elems, 0);
						for (size_t j = 0; j < nx; j++) {
							fill_x_varied(x, k);
							q->quantize_x(x, xq + j * nxb, k);
							q->gemv_xq(W, rb, xq + j * nxb, b + j * n, n, k);
						}
						q->gemm_xq(W, rb, xq, nxb, nx, a, n, n, k);
						if (n)
							assert_memory_equal(a, b, nx * n * sizeof(float));
						free(W);
						free(xq);
						free(x);
						free(a);
						free(b);
					}
			}
			assert_true(widths >= 2);
			printf("[ kn ] gemm_xq %-5s %-6s%s == gemv_xq row by row: bit-exact\n", q->geom->name,
			       isa_names[isa], pass < KN_ISA_COUNT ? "" : " (bw)");
			tested++;
		}
	kn__set_avx512vnni(true);
	if (kn_qops_for(KN_ISA_AVX512, KN_Q_Q8_0))
		assert_true(tested >= 3);
}

/* gemv_xq where every float operation is exact: unit fp16 scales (and
 * mins) in the weights, x codes in [-3, 3] with unit scale, at most 64
 * (_0) or 4 (K-quants) blocks, so every partial sum is an integer below
 * 2^24. Every variant must give the exact integer result. */
static void test_gemv_xq_exact(void **state)
{
	(void)state;
	for (size_t t = 0; t < N_TYPES; t++) {
		const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, all_types[t]);
		if (!ref->gemv_xq)
			continue;
		size_t kmax = xq_is_k(ref) ? 4 * 256 : 64 * 32;
		for (size_t k = (size_t)ref->geom->block_elems; k <= kmax; k *= 2) {
			size_t n_rows = 9, row = kn_qtype_row_bytes(ref->type, k), rb = row + 3;
			uint8_t *w = malloc(n_rows * rb), *xq = malloc(ref->xq_bytes(k));
			float *wf = malloc(k * sizeof(float)), *xf = malloc(k * sizeof(float));
			float y[9], yr[9];
			assert_true(w && xq && wf && xf);
			for (size_t r = 0; r < n_rows; r++) {
				uint8_t *p = w + r * rb;
				size_t nbk = k / (size_t)ref->geom->block_elems;
				fill_blocks(p, ref->type, nbk, 1);
				for (size_t b = 0; b < nbk; b++)
					for (const int *f = half_fields(ref->type); *f >= 0; f++)
						put16(p + b * (size_t)ref->geom->block_bytes + (size_t)*f, 0x3c00);
			}
			if (xq_is_q8_1(ref)) {
				/* s = d sum q exactly (|sum| <= 96 is an fp16 integer) */
				const struct kn_qops *h = kn_qops_for(KN_ISA_REF, KN_Q_F16);
				for (size_t b = 0; b < k / 32; b++) {
					int sum = 0;
					put16(xq + 36 * b, 0x3c00);
					for (int j = 0; j < 32; j++) {
						int c = (int)(rng_u64() % 7) - 3;
						xq[36 * b + 4 + j] = (uint8_t)(int8_t)c;
						sum += c;
					}
					uint16_t hs = 0;
					for (uint32_t v = 0; v < 0x10000u; v++) { /* fp16 of sum, exact */
						float f;
						h->dequant(&(uint16_t){(uint16_t)v}, &f, 1);
						if (f == (float)sum) {
							hs = (uint16_t)v;
							break;
						}
					}
					put16(xq + 36 * b + 2, hs);
				}
			} else if (!xq_is_k(ref)) {
				for (size_t b = 0; b < k / 32; b++) {
					put16(xq + 34 * b, 0x3c00);
					for (int j = 0; j < 32; j++)
						xq[34 * b + 2 + j] = (uint8_t)(int8_t)((int)(rng_u64() % 7) - 3);
				}
			} else {
				for (size_t b = 0; b < k / 256; b++) {
					float one = 1.0f;
					memcpy(xq + 292 * b, &one, sizeof(one));
					for (int g = 0; g < 16; g++) {
						int16_t sum = 0;
						for (int j = 0; j < 16; j++) {
							int8_t c = (int8_t)((int)(rng_u64() % 7) - 3);
							xq[292 * b + 4 + 16 * g + j] = (uint8_t)c;
							sum = (int16_t)(sum + c);
						}
						memcpy(xq + 292 * b + 260 + 2 * g, &sum, 2);
					}
				}
			}
			xq_dequant(ref, xq, xf, k);
			ref->gemv_xq(w, rb, xq, yr, n_rows, k);
			for (size_t r = 0; r < n_rows; r++) {
				ref->dequant(w + r * rb, wf, k);
				double exact = 0.0;
				for (size_t i = 0; i < k; i++)
					exact += (double)wf[i] * xf[i];
				assert_true(fabs(exact) < 16777216.0);
				if ((double)yr[r] != exact) {
					printf("%s k %zu row %zu: ref %.9g exact %.9g\n", ref->geom->name, k, r,
					       yr[r], exact);
					fail();
				}
			}
			for (int v = 1; v < XQ_VARIANTS; v++) {
				const struct kn_qops *q = xq_variant(v, ref->type);
				if (!q)
					continue;
				q->gemv_xq(w, rb, xq, y, n_rows, k);
				for (size_t r = 0; r < n_rows; r++)
					if (f32_bits(y[r]) != f32_bits(yr[r])) {
						printf("%s %s k %zu row %zu: %.9g want %.9g\n", q->geom->name,
						       xq_names[v], k, r, y[r], yr[r]);
						fail();
					}
			}
			kn__set_avx512vnni(true);
			free(w);
			free(xq);
			free(wf);
			free(xf);
		}
		printf("[ kn ] gemv_xq %-5s exact-arithmetic case: all variants == ref == exact\n",
		       ref->geom->name);
	}
}

/* The Q4_1 / Q5_1 x Q8_1 product in double from the block fields: per
 * block d_w d_x sum q q_x + m_w s_x (ggml's formula, without its
 * roundings). */
static double q_1_exact(int type, const uint8_t *w, const uint8_t *xq, size_t k)
{
	const struct kn_qops *h = kn_qops_for(KN_ISA_REF, KN_Q_F16);
	size_t bytes = type == KN_Q_Q5_1 ? 24 : 20, qs = type == KN_Q_Q5_1 ? 8 : 4;
	double sum = 0.0;
	for (size_t b = 0; b < k / 32; b++) {
		const uint8_t *wb = w + bytes * b, *xb = xq + 36 * b;
		float d, m, dx, sx;
		h->dequant(wb, &d, 1);
		h->dequant(wb + 2, &m, 1);
		h->dequant(xb, &dx, 1);
		h->dequant(xb + 2, &sx, 1);
		uint32_t qh = type == KN_Q_Q5_1 ? (uint32_t)wb[4] | (uint32_t)wb[5] << 8 |
						  (uint32_t)wb[6] << 16 | (uint32_t)wb[7] << 24
					    : 0;
		long isum = 0;
		for (int j = 0; j < 16; j++) {
			int lo = (wb[qs + j] & 0xf) | (int)((qh >> j) & 1) << 4;
			int hi = (wb[qs + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
			isum += lo * (int8_t)xb[4 + j] + hi * (int8_t)xb[4 + 16 + j];
		}
		sum += (double)d * dx * (double)isum + (double)m * sx;
	}
	return sum;
}

/* One gemv_xq case (gemv_case's shapes); *e_xq: worst |y - y_exact(x_q)| /
 * sum |w x_q|, *e_f32: worst |y - gemv(x)| / sum |w x|. */
static void gemv_xq_case(const struct kn_qops *q, size_t n_rows, size_t k, size_t pad, size_t off,
			 double *e_xq, double *e_f32)
{
	const struct kn_qops *ref = kn_qops_for(KN_ISA_REF, q->type);
	size_t row = kn_qtype_row_bytes(q->type, k), rb = row + pad;
	size_t total = n_rows ? (n_rows - 1) * rb + row : 0, nxq = q->xq_bytes(k);
	uint8_t *wb = malloc(total + off ? total + off : 1), *xqb = malloc(nxq + off);
	float *xb = malloc((k + off) * sizeof(float)), *x = xb + off;
	float *y = malloc((n_rows ? n_rows : 1) * sizeof(float));
	float *yf = malloc((n_rows ? n_rows : 1) * sizeof(float));
	float *wf = malloc(k * sizeof(float)), *xf = malloc(k * sizeof(float));
	assert_true(wb && xqb && xb && y && yf && wf && xf);
	for (size_t r = 0; r < n_rows; r++)
		fill_blocks(wb + off + r * rb, q->type, k / (size_t)q->geom->block_elems, 1);
	for (size_t i = 0; i < k; i++)
		x[i] = rng_uniform(-1.0f, 1.0f);
	q->quantize_x(x, xqb + off, k);
	xq_dequant(q, xqb + off, xf, k);
	q->gemv_xq(wb + off, rb, xqb + off, y, n_rows, k);
	ref->gemv(wb + off, rb, x, yf, n_rows, k);
	for (size_t r = 0; r < n_rows; r++) {
		ref->dequant(wb + off + r * rb, wf, k);
		double exact = 0.0, mag = 0.0, magf = 0.0;
		for (size_t i = 0; i < k; i++) {
			exact += (double)wf[i] * xf[i];
			mag += fabs((double)wf[i] * xf[i]);
			magf += fabs((double)wf[i] * x[i]);
		}
		if (xq_is_q8_1(q)) /* its m meets x's stored s, not sum d q */
			exact = q_1_exact(q->type, wb + off + r * rb, xqb + off, k);
		double e = fabs(y[r] - exact) / (mag + 1e-300);
		double ef = fabs((double)y[r] - yf[r]) / (magf + 1e-300);
		if (!(e <= *e_xq))
			*e_xq = isnan(e) ? INFINITY : e;
		if (!(ef <= *e_f32))
			*e_f32 = isnan(ef) ? INFINITY : ef;
	}
	free(wb);
	free(xqb);
	free(xb);
	free(y);
	free(yf);
	free(wf);
	free(xf);
}

static void test_gemv_xq(void **state)
{
	(void)state;
	static const size_t rows[] = {0, 1, 2, 3, 4, 5, 7, 9, 17};
	for (int isa = 0; isa < XQ_VARIANTS; isa++)
		for (size_t t = 0; t < N_TYPES; t++) {
			const struct kn_qops *q = xq_variant(isa, all_types[t]);
			if (!q || !q->gemv_xq)
				continue;
			size_t k[16], nk = gemv_widths(q, k);
			double e_xq = 0.0, e_f32 = 0.0;
			for (size_t ki = 0; ki < nk; ki++)
				for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++)
					for (size_t v = 0; v < 2; v++)
						gemv_xq_case(q, rows[ri], k[ki], v ? 5 : 0, v, &e_xq,
							     &e_f32);
			kn__set_avx512vnni(true);
			printf("[ kn ] gemv_xq %-5s %-11s vs exact(x_q) %.3g (tol %.0e), vs gemv(x) %.3g "
			       "(tol %.0e)\n",
			       q->geom->name, xq_names[isa], e_xq, XQ_TOL, e_f32, XQ_VS_F32_TOL);
			assert_true(e_xq <= XQ_TOL);
			assert_true(e_f32 <= XQ_VS_F32_TOL);
		}
}

/* ---- micro-benchmark (KN_BENCH=1) --------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* gemv on a 4096 x 2048 matrix; enough copies are cycled that the total
 * exceeds the last-level cache (>= 256 MiB), so weights come from DRAM.
 * Prints the best GB/s of weight bytes over the timed calls. */
static void bench_type(int type, float *x, float *y)
{
	enum { ROWS = 4096, K = 2048 };
	size_t bytes = kn_qtype_row_bytes(type, K) * ROWS;
	size_t copies = (256u << 20) / bytes + 1;
	uint8_t *w = malloc(bytes * copies);
	assert_non_null(w);
	for (size_t c = 0; c < copies; c++)
		fill_blocks(w + c * bytes, type, bytes / (size_t)kn_qtype_get(type)->block_bytes, 1);
	printf("[bench] %-5s %5.1f MB", kn_qtype_get(type)->name, (double)bytes / 1e6);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, type);
		if (!q) {
			printf("  %6s    n/a", isa == 1 ? "avx2" : "avx512");
			continue;
		}
		double best = INFINITY, t_all = now_s();
		for (size_t it = 0; it < 3 * copies || now_s() - t_all < 0.3; it++) {
			double t0 = now_s();
			q->gemv(w + (it % copies) * bytes, bytes / ROWS, x, y, ROWS, K);
			double dt = now_s() - t0;
			best = dt < best ? dt : best;
		}
		printf("  %6s %6.2f GB/s", isa == 0 ? "ref" : isa == 1 ? "avx2" : "avx512",
		       (double)bytes / best / 1e9);
	}
	printf("\n");
	if (kn_qops_for(KN_ISA_REF, type)->gemv_xq) {
		/* the integer path: x quantized once per call, as the engine does
		 * (quantize_x is inside the timing) */
		uint8_t *xq = malloc(kn_qops_for(KN_ISA_REF, type)->xq_bytes(K));
		assert_non_null(xq);
		printf("[bench] %-5s    gemv_xq", kn_qtype_get(type)->name);
		for (int isa = 0; isa < XQ_VARIANTS; isa++) {
			const struct kn_qops *q = xq_variant(isa, type);
			if (!q) {
				printf("  %6s    n/a", xq_names[isa]);
				continue;
			}
			double best = INFINITY, t_all = now_s();
			for (size_t it = 0; it < 3 * copies || now_s() - t_all < 0.3; it++) {
				double t0 = now_s();
				q->quantize_x(x, xq, K);
				q->gemv_xq(w + (it % copies) * bytes, bytes / ROWS, xq, y, ROWS, K);
				double dt = now_s() - t0;
				best = dt < best ? dt : best;
			}
			printf("  %6s %6.2f GB/s", xq_names[isa], (double)bytes / best / 1e9);
		}
		kn__set_avx512vnni(true);
		printf("\n");
		free(xq);
	}
	free(w);
}

static void test_bench(void **state)
{
	(void)state;
	float *x = malloc(2048 * sizeof(float)), *y = malloc(4096 * sizeof(float));
	assert_true(x && y);
	for (size_t i = 0; i < 2048; i++)
		x[i] = rng_uniform(-1.0f, 1.0f);
	for (size_t t = 0; t < N_TYPES; t++)
		bench_type(all_types[t], x, y);
	free(x);
	free(y);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantize_x_ref), cmocka_unit_test(test_quantize_x_vs_ref),
		cmocka_unit_test(test_gemv_xq_exact),  cmocka_unit_test(test_gemv_xq),
		cmocka_unit_test(test_round_x),	       cmocka_unit_test(test_gemm_xq),
	};
	const struct CMUnitTest bench[] = {cmocka_unit_test(test_bench)};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	const char *env = getenv("KN_BENCH");
	if (env && !strcmp(env, "1"))
		failed += cmocka_run_group_tests(bench, NULL, NULL);
	return failed;
}
