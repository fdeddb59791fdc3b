/* tests/unit/kernels/test_qpack.c - the packed weight layouts (kn_quant.h
 * struct kn_qpack): Q8_0, Q5_0, Q4_1 and Q4_K in groups of 16 rows, each test
 * for every type and every variant this CPU runs (the reference, AVX2,
 * AVX512-VNNI).
 *
 *  1. The reference pack against the layout kn_quant.h states, byte by
 *     byte (each row's fp16 d; Q8_0: codes 4c..4c+3 plus 128 at chunk c,
 *     lane r; Q5_0: qh at lane r, qs bytes 4c..4c+3 at chunk c, lane r;
 *     Q4_1: m at lane r, qs as Q5_0's);
 *     every ISA's pack == the reference's, memcmp.
 *  2. quantize_x of every variant == the reference's, memcmp; its codes
 *     and d are KN_Q_Q8_0's quantize_x (the plain partner), its sums the
 *     codes' sums.
 *  3. gemv_xq with unit scales and small codes, where every float
 *     operation is exact: every variant == the exact integer result.
 *  4. gemv_xq of every variant == the reference, bit for bit (the same
 *     operations in the same order), and gemm_xq == gemv_xq row by row,
 *     bit for bit, for 1..18, 27 and 36 x rows (passes of 16 and
 *     remainders; rows past the call's untouched), on
 *     random blocks (finite fp16 scales, subnormal included) and x of
 *     magnitudes 1e-9 .. 1e5 (x's fp16 d stays finite).
 *  5. The reference against the plain type's gemv_xq on the same matrix and
 *     x, relative to sum |w x_q| (tolerance 4e-6: the float combine order
 *     differs), and against the double dot of the dequantized weights with
 *     the dequantized x.
 *
 * Buffers are allocated to their exact size so ASan catches any overread.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"
#include "kernels/kn_quant.h"
#include "tests/unit/kernels/kn_test_quant.h"

#define QP_TOL 4e-6

/* 2080 and 4128: x quantized in chunks of 64 blocks (kn_qpack.c), the
 * last one partial */
static const size_t widths[] = {32, 64, 96, 256, 640, 2048, 2080, 4128, 4352};
static const int types[] = {KN_Q_Q8_0, KN_Q_Q5_0, KN_Q_Q4_1, KN_Q_Q4_K};
#define N_QP_TYPES (sizeof(types) / sizeof(*types))
static const size_t row_counts[] = {16, 32, 48};

/* A packed layout's variants on this CPU: [0] the reference, [1] AVX2,
 * [2] AVX-512 (NULL where the CPU lacks the ISA; AVX-512's needs VNNI). */
#define N_VARIANTS 3
static const struct kn_qpack *variant(int v, int type)
{
	static const enum kn_isa isa[N_VARIANTS] = {KN_ISA_REF, KN_ISA_AVX2, KN_ISA_AVX512};
	return kn_qpack_for(isa[v], type);
}

static size_t plain_rb(int type, size_t k)
{
	return kn_qtype_row_bytes(type, k);
}

/* Elements per block: 32, or 256 for Q4_K (whose widths skip the rest). */
static size_t blk_elems(int type)
{
	return (size_t)kn_qtype_get(type)->block_elems;
}

/* x partner code i (int8) and its block's d: the packed 32-element
 * layout (codes, then float d per 32) or Q8_K (per 256: float d, codes). */
static int xq_code(int type, const uint8_t *xq, size_t i)
{
	if (type == KN_Q_Q4_K)
		return (int8_t)xq[i / 256 * KN__Q8_K_BYTES + 4 + i % 256];
	return (int8_t)xq[i];
}

static double xq_d(int type, const uint8_t *xq, size_t k, size_t i)
{
	float d;
	if (type == KN_Q_Q4_K)
		memcpy(&d, xq + i / 256 * KN__Q8_K_BYTES, 4);
	else
		memcpy(&d, xq + k + 4 * (i / 32), 4);
	return d;
}

/* The bytes the layout puts at (row r, block b) of a group's block o,
 * against the plain block blk. */
static void check_block(int type, const uint8_t *o, size_t r, const uint8_t *blk)
{
	assert_memory_equal(o + 2 * r, blk, 2);
	if (type == KN_Q_Q8_0) {
		for (size_t i = 0; i < 32; i++)
			assert_int_equal(o[32 + 64 * (i / 4) + 4 * r + i % 4], (uint8_t)(blk[2 + i] + 128));
		return;
	}
	if (type == KN_Q_Q4_K) {
		assert_memory_equal(o + 32 + 2 * r, blk + 2, 2);
		for (size_t i = 0; i < 3; i++)
			assert_memory_equal(o + 64 + 64 * i + 4 * r, blk + 4 + 4 * i, 4);
		for (size_t i = 0; i < 128; i++)
			assert_int_equal(o[256 + 512 * (i / 32) + 64 * (i % 32 / 4) + 4 * r + i % 4],
					 blk[16 + i]);
		return;
	}
	if (type == KN_Q_Q4_1) {
		assert_memory_equal(o + 32 + 2 * r, blk + 2, 2);
		for (size_t i = 0; i < 16; i++)
			assert_int_equal(o[64 + 64 * (i / 4) + 4 * r + i % 4], blk[4 + i]);
		return;
	}
	assert_memory_equal(o + 32 + 4 * r, blk + 2, 4);
	for (size_t i = 0; i < 16; i++)
		assert_int_equal(o[96 + 64 * (i / 4) + 4 * r + i % 4], blk[6 + i]);
}

/* x of magnitudes 10^bottom .. 10^top (top <= 5: x's fp16 d stays finite) */
static void fill_x_range(float *x, size_t k, float bottom, float top)
{
	for (size_t b = 0; b < k / 32; b++) {
		float mag = powf(10.0f, rng_uniform(bottom, top));
		for (int j = 0; j < 32; j++)
			x[32 * b + j] = (b % 7 == 3) ? 0.0f : rng_uniform(-mag, mag);
	}
}

static void fill_x_to(float *x, size_t k, float top)
{
	fill_x_range(x, k, -9.0f, top);
}


static void test_pack(void **state)
{
	(void)state;
	for (size_t ti = 0; ti < N_QP_TYPES; ti++)
	for (size_t wi = 0; wi < sizeof(widths) / sizeof(*widths); wi++)
		for (size_t ri = 0; ri < sizeof(row_counts) / sizeof(*row_counts); ri++) {
			int type = types[ti];
			const struct kn_qpack *ref = variant(0, type);
			assert_non_null(ref);
			assert_int_equal(ref->rows, 16);
			if (widths[wi] % blk_elems(type))
				continue; /* not a width of this type */
			size_t k = widths[wi], n = row_counts[ri], nb = k / blk_elems(type);
			size_t rb = plain_rb(type, k);
			size_t bb = rb / nb, gb = 16 * bb; /* plain block, packed group block */
			uint8_t *w = malloc(n * rb), *p = malloc(n * rb), *p2 = malloc(n * rb);
			assert_true(w && p && p2);
			fill_blocks(w, type, n * nb, 0);
			ref->pack(w, rb, n, k, p);
			for (size_t r = 0; r < n; r++)
				for (size_t b = 0; b < nb; b++)
					check_block(type, p + (r / 16) * 16 * rb + b * gb, r % 16,
						    w + r * rb + b * bb);
			for (int vi = 1; vi < N_VARIANTS; vi++) {
				const struct kn_qpack *v = variant(vi, type);
				if (!v)
					continue;
				memset(p2, 0xa5, n * rb);
				v->pack(w, rb, n, k, p2);
				assert_memory_equal(p, p2, n * rb);
			}
			free(w);
			free(p);
			free(p2);
		}
}

/* Q4_K's partner is its plain one (Q8_K), in every variant. */
static void check_xq_k(size_t k)
{
	const struct kn_qops *plain = kn_qops_for(KN_ISA_REF, KN_Q_Q4_K);
	size_t nb = plain->xq_bytes(k);
	float *x = malloc(k * sizeof(float));
	uint8_t *xp = malloc(nb), *xq = malloc(nb);
	assert_true(x && xp && xq);
	fill_x_to(x, k, 5.0f);
	plain->quantize_x(x, xp, k);
	for (int vi = 0; vi < N_VARIANTS; vi++) {
		const struct kn_qpack *v = variant(vi, KN_Q_Q4_K);
		if (!v)
			continue;
		assert_int_equal(v->ops->xq_bytes(k), nb);
		memset(xq, 0x5a, nb);
		v->ops->quantize_x(x, xq, k);
		assert_memory_equal(xq, xp, nb);
	}
	free(x);
	free(xp);
	free(xq);
}

/* Each type's x partner against its plain partner: Q8_0 and Q5_0 the
 * Q8_0 quantization (codes, d widened, the codes' int32 sum), Q4_1 ggml's
 * Q8_1 (codes, d and s widened), Q4_K Q8_K itself; every variant's == the
 * reference's. */
static void test_quantize_x(void **state)
{
	(void)state;
	for (size_t wi = 0; wi < sizeof(widths) / sizeof(*widths); wi++)
	for (size_t ti = 0; ti < N_QP_TYPES; ti++) {
		if (types[ti] == KN_Q_Q4_K) {
			if (widths[wi] % 256 == 0)
				check_xq_k(widths[wi]);
			continue;
		}
		int one = types[ti] == KN_Q_Q4_1;
		size_t k = widths[wi], nb = k / 32, pb = one ? 36 : 34;
		const struct kn_qops *plain = kn_qops_for(KN_ISA_REF, one ? KN_Q_Q4_1 : KN_Q_Q8_0);
		const struct kn_qops *ref = variant(0, types[ti])->ops;
		assert_int_equal(ref->xq_bytes(k), nb * 40);
		assert_int_equal(plain->xq_bytes(k), nb * pb);
		float *x = malloc(k * sizeof(float));
		uint8_t *xq = malloc(nb * 40), *xq2 = malloc(nb * 40), *xp = malloc(nb * pb);
		assert_true(x && xq && xq2 && xp);
		fill_x_to(x, k, one ? 3.0f : 5.0f);
		ref->quantize_x(x, xq, k);
		plain->quantize_x(x, xp, k);
		for (size_t b = 0; b < nb; b++) {
			const uint8_t *blk = xp + pb * b;
			uint16_t h, hs;
			float d, fs;
			int32_t s = 0, sum;
			memcpy(&h, blk, 2);
			memcpy(&hs, blk + 2, 2);
			memcpy(&d, xq + nb * 32 + 4 * b, 4);
			memcpy(&sum, xq + nb * 36 + 4 * b, 4);
			memcpy(&fs, xq + nb * 36 + 4 * b, 4);
			assert_memory_equal(xq + 32 * b, blk + pb - 32, 32);
			assert_int_equal(f32_bits(d), f32_bits(kn_f16_to_f32(h)));
			for (int j = 0; j < 32; j++)
				s += (int8_t)blk[pb - 32 + j];
			if (one)
				assert_int_equal(f32_bits(fs), f32_bits(kn_f16_to_f32(hs)));
			else
				assert_int_equal(sum, s);
		}
		for (int vi = 1; vi < N_VARIANTS; vi++) {
			const struct kn_qpack *v = variant(vi, types[ti]);
			if (!v)
				continue;
			memset(xq2, 0x5a, nb * 40);
			v->ops->quantize_x(x, xq2, k);
			assert_memory_equal(xq, xq2, nb * 40);
		}
		free(x);
		free(xq);
		free(xq2);
		free(xp);
	}
}

static void test_gemv_exact(void **state)
{
	(void)state;
	for (size_t ti = 0; ti < N_QP_TYPES; ti++) {
		int type = types[ti], kq = type == KN_Q_Q4_K;
		size_t k = kq ? 512 : 640, n = 32, nb = k / blk_elems(type);
		const struct kn_qops *plain = kn_qops_for(KN_ISA_REF, type);
		size_t rb = plain_rb(type, k), bb = rb / nb;
		uint8_t *w = malloc(n * rb), *p = malloc(n * rb);
		uint8_t *xq = malloc(variant(0, type)->ops->xq_bytes(k));
		float *x = malloc(k * sizeof(float)), *y = malloc(n * sizeof(float));
		float *wf = malloc(k * sizeof(float));
		double *want = malloc(n * sizeof(double));
		assert_true(w && p && xq && x && y && wf && want);
		/* x: integers up to 127 with one 127 per block: d = 1 exactly
		 * (Q4_K: up to 4, its scales times 15 keep the sums under 2^24) */
		for (size_t i = 0; i < k; i++)
			x[i] = (i % 32 == 5) ? 127.0f
			       : kq  ? (float)((int)(rng_u64() % 9) - 4)
				     : (float)((int)(rng_u64() % 255) - 127);
		/* weights: d = 1, small codes (Q8_0) or any codes (Q5_0, Q4_1;
		 * Q4_1's m = -3) */
		fill_blocks(w, type, n * nb, 0);
		for (size_t r = 0; r < n; r++)
			for (size_t b = 0; b < nb; b++) {
				uint8_t *blk = w + r * rb + b * bb;
				put16(blk, 0x3c00);
				if (kq)
					put16(blk + 2, 0x3c00); /* dmin 1 */
				if (type == KN_Q_Q4_1)
					put16(blk + 2, 0xc200);
				for (int i = 0; type == KN_Q_Q8_0 && i < 32; i++)
					blk[2 + i] = (uint8_t)(int8_t)((int)(rng_u64() % 9) - 4);
			}
		for (size_t r = 0; r < n; r++) {
			double s = 0;
			plain->dequant(w + r * rb, wf, k);
			for (size_t i = 0; i < k; i++)
				s += (double)wf[i] * (double)x[i];
			want[r] = s;
		}
		for (int vi = 0; vi < N_VARIANTS; vi++) {
			const struct kn_qpack *v = variant(vi, type);
			if (!v)
				continue;
			v->pack(w, rb, n, k, p);
			v->ops->quantize_x(x, xq, k);
			v->ops->gemv_xq(p, rb, xq, y, n, k);
			for (size_t r = 0; r < n; r++)
				assert_true((double)y[r] == want[r]);
		}
		free(w);
		free(p);
		free(xq);
		free(x);
		free(y);
		free(wf);
		free(want);
	}
}

/* Every variant's gemv_xq == the reference's; gemm_xq == gemv_xq per row. */
static void test_gemv_gemm(void **state)
{
	(void)state;
	enum { NX = 37 };
	for (size_t ti = 0; ti < N_QP_TYPES; ti++)
	for (size_t wi = 0; wi < sizeof(widths) / sizeof(*widths); wi++)
		for (size_t ri = 0; ri < sizeof(row_counts) / sizeof(*row_counts); ri++) {
			int type = types[ti];
			if (widths[wi] % blk_elems(type))
				continue; /* not a width of this type */
			size_t k = widths[wi], n = row_counts[ri], nb = k / blk_elems(type);
			size_t rb = plain_rb(type, k), xb = variant(0, type)->ops->xq_bytes(k);
			uint8_t *w = malloc(n * rb), *p = malloc(n * rb), *xq = malloc(NX * xb);
			float *x = malloc(k * sizeof(float)), *y0 = malloc(NX * n * sizeof(float));
			float *y1 = malloc(n * sizeof(float)), *ym = malloc(NX * n * sizeof(float));
			assert_true(w && p && xq && x && y0 && y1 && ym);
			fill_blocks(w, type, n * nb, 0);
			const struct kn_qpack *ref = variant(0, type);
			ref->pack(w, rb, n, k, p);
			for (size_t j = 0; j < NX; j++) {
				fill_x_to(x, k, type == KN_Q_Q4_1 ? 3.0f : 5.0f); /* Q4_1: s finite */
				ref->ops->quantize_x(x, xq + j * xb, k);
				ref->ops->gemv_xq(p, rb, xq + j * xb, y0 + j * n, n, k);
			}
			for (int vi = 0; vi < N_VARIANTS; vi++) {
				const struct kn_qpack *v = variant(vi, type);
				if (!v)
					continue;
				for (size_t j = 0; j < NX; j++) {
					v->ops->gemv_xq(p, rb, xq + j * xb, y1, n, k);
					assert_memory_equal(y1, y0 + j * n, n * sizeof(float));
				}
				for (size_t m = 1; m <= NX; m += (m < 18 ? 1 : 9)) {
					memset(ym, 0xa5, NX * n * sizeof(float));
					v->ops->gemm_xq(p, rb, xq, xb, m, ym, n, n, k);
					assert_memory_equal(ym, y0, m * n * sizeof(float));
					for (size_t i = m * n; i < NX * n; i++)
						assert_int_equal(f32_bits(ym[i]), 0xa5a5a5a5u);
				}
			}
			free(w);
			free(p);
			free(xq);
			free(x);
			free(y0);
			free(y1);
			free(ym);
		}
}

/* The packed reference against the plain type's product and the exact one.
 * Q4_1's partner (ggml's Q8_1) keeps s = d times the codes' sum in fp16,
 * which overflows past 65504: its x stays under 1e3 (d under 8), and over
 * 1e-2, where d and s are normal fp16 numbers (subnormal ones round by an
 * absolute step). Against the exact product it is allowed 2^-10 of each
 * block's |m s| more: s's rounding (2^-11) and d's (s is made from the
 * unrounded d). */
static void test_vs_plain(void **state)
{
	(void)state;
	for (size_t ti = 0; ti < N_QP_TYPES; ti++) {
		int type = types[ti];
		const struct kn_qops *plain = kn_qops_for(KN_ISA_REF, type);
		const struct kn_qpack *ref = variant(0, type);
		double worst = 0;
		for (size_t wi = 0; wi < sizeof(widths) / sizeof(*widths); wi++) {
			if (widths[wi] % blk_elems(type))
				continue; /* not a width of this type */
			size_t k = widths[wi], n = 32, nb = k / blk_elems(type), rb = plain_rb(type, k);
			uint8_t *w = malloc(n * rb), *p = malloc(n * rb);
			uint8_t *xq = malloc(ref->ops->xq_bytes(k)), *xp = malloc(plain->xq_bytes(k));
			float *x = malloc(k * sizeof(float)), *y = malloc(n * sizeof(float));
			float *yp = malloc(n * sizeof(float)), *wf = malloc(k * sizeof(float));
			assert_true(w && p && xq && xp && x && y && yp && wf);
			fill_blocks(w, type, n * nb, 0);
			if (type == KN_Q_Q4_1)
				fill_x_range(x, k, -2.0f, 3.0f);
			else
				fill_x_to(x, k, 5.0f);
			ref->pack(w, rb, n, k, p);
			ref->ops->quantize_x(x, xq, k);
			plain->quantize_x(x, xp, k);
			ref->ops->gemv_xq(p, rb, xq, y, n, k);
			plain->gemv_xq(w, rb, xp, yp, n, k);
			for (size_t r = 0; r < n; r++) {
				double exact = 0, mag = 0;
				plain->dequant(w + r * rb, wf, k);
				for (size_t i = 0; i < k; i++) {
					double t = (double)wf[i] * (xq_d(type, xq, k, i) * xq_code(type, xq, i));
					exact += t;
					mag += fabs(t);
				}
				double e1 = fabs((double)y[r] - exact), e2 = fabs((double)y[r] - yp[r]);
				if (mag > 0 && e1 / mag > worst)
					worst = e1 / mag;
				double es = 0; /* Q4_1: 2^-10 of each block's |m s| */
				for (size_t b = 0; type == KN_Q_Q4_1 && b < nb; b++) {
					uint16_t hm;
					float sx;
					memcpy(&hm, w + r * rb + b * 20 + 2, 2);
					memcpy(&sx, xq + k + 4 * nb + 4 * b, 4);
					es += 0x1p-10 * fabs((double)kn_f16_to_f32(hm) * sx);
				}
				assert_true(e1 <= QP_TOL * mag + es);
				assert_true(e2 <= 2 * QP_TOL * mag);
			}
			free(w);
			free(p);
			free(xq);
			free(xp);
			free(x);
			free(y);
			free(yp);
			free(wf);
		}
		printf("packed %s against the exact product: worst %.2e of sum |w x_q|\n",
		       plain->geom->name, worst);
	}
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pack),	   cmocka_unit_test(test_quantize_x),
		cmocka_unit_test(test_gemv_exact), cmocka_unit_test(test_gemv_gemm),
		cmocka_unit_test(test_vs_plain),
	};
	printf("packed layouts on AVX2: %s; on AVX-512: %s\n",
	       variant(1, KN_Q_Q8_0) ? "tested" : "not on this CPU",
	       variant(2, KN_Q_Q8_0) ? "tested" : "not on this CPU (no VNNI)");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
