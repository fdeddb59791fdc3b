/* kernels/ref/qpack.c - the scalar reference of the packed weight layouts
 * (kn_quant.h struct kn_qpack): Q8_0, Q5_0, Q4_1 and Q4_K in groups of 16
 * rows.
 * With the scalar packers of kn_qpack.c it defines the layouts and the
 * arithmetic every ISA's packed kernels reproduce bit for bit
 * (tests/unit/kernels/test_qpack.c).
 */
#include <math.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

static void qp_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_0_x(&kn__qops_ref[KN_Q_Q8_0], x, xq, k);
}

static void qp_quantize_xk(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qops_ref[KN_Q_Q4_K].quantize_x(x, xq, k);
}

static void qp_quantize_x1(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_1_x(&kn__qops_ref[KN_Q_Q4_1], x, xq, k);
}

/* Code e (0..31) of row r's block at o (a packed group's block), as the
 * signed value it stands for. */
static int qp_code_q8_0(const uint8_t *o, size_t r, size_t e)
{
	return (int)o[32 + 64 * (e / 4) + 4 * r + e % 4] - 128;
}

static int qp_code_q5_0(const uint8_t *o, size_t r, size_t e)
{
	uint32_t qh;
	memcpy(&qh, o + 32 + 4 * r, 4);
	uint8_t qs = o[96 + 64 * ((e % 16) / 4) + 4 * r + e % 4];
	int lo = e < 16 ? qs & 15 : qs >> 4;
	return (lo | (int)((qh >> e) & 1) << 4) - 16;
}

static int qp_code_q4_1(const uint8_t *o, size_t r, size_t e)
{
	uint8_t qs = o[64 + 64 * ((e % 16) / 4) + 4 * r + e % 4];
	return e < 16 ? qs & 15 : qs >> 4;
}

/* y[r] for the 16 rows of the group at gw (blocks of `bb` bytes) against
 * one x partner row. `min`: the blocks carry each row's fp16 m at 32
 * (Q4_1), added as m_w times x's s (its Q8_1 partner's fp16 d times the
 * sum of its codes, as ggml's Q4_1 product takes it). */
static void qp_group(const uint8_t *gw, size_t bb, int (*code)(const uint8_t *, size_t, size_t),
		     int min, const uint8_t *xq, size_t nb, float *y)
{
	const int8_t *xc = (const int8_t *)xq;
	for (size_t r = 0; r < KN__QP_ROWS; r++) {
		float acc = 0.0f;
		for (size_t b = 0; b < nb; b++) {
			const uint8_t *o = gw + b * bb;
			uint16_t h, hm;
			float xd;
			int32_t isum = 0;
			memcpy(&h, o + 2 * r, 2);
			memcpy(&xd, xq + nb * KN__QK + 4 * b, 4);
			for (size_t e = 0; e < KN__QK; e++)
				isum += code(o, r, e) * xc[b * KN__QK + e];
			acc = fmaf((float)isum, kn_f16_to_f32(h) * xd, acc);
			if (min) {
				float xs;
				memcpy(&hm, o + 32 + 2 * r, 2);
				memcpy(&xs, xq + nb * (KN__QK + 4) + 4 * b, 4);
				acc = fmaf(kn_f16_to_f32(hm), xs, acc);
			}
		}
		y[r] = acc;
	}
}

/* Packed Q4_K: y[r] for the 16 rows of the group at gw against one Q8_K
 * x row (float d @0, codes @4, int16 sums of 16 codes @260). Row r's
 * scales are the plain block's three words at 64, 128, 192 (+ 4r), read as
 * ggml's get_scale_min_k4 reads them; sub-block s's codes are the low (s
 * even) or high nibbles of chunks 256 + 512 (s / 2) + 64 c (+ 4r). */
static void qp_group_q4_k(const uint8_t *gw, const uint8_t *xq, size_t nb, float *y)
{
	for (size_t r = 0; r < KN__QP_ROWS; r++) {
		float acc = 0.0f;
		for (size_t b = 0; b < nb; b++) {
			const uint8_t *o = gw + b * KN__QP_Q4_K_BLOCK, *xb = xq + b * KN__Q8_K_BYTES;
			const int8_t *xc = (const int8_t *)(xb + 4);
			uint8_t sc12[12];
			uint16_t h, hm;
			float xd;
			for (size_t i = 0; i < 3; i++)
				memcpy(sc12 + 4 * i, o + 64 + 64 * i + 4 * r, 4);
			memcpy(&h, o + 2 * r, 2);
			memcpy(&hm, o + 32 + 2 * r, 2);
			memcpy(&xd, xb, 4);
			int32_t isum = 0, msum = 0;
			for (int sb = 0; sb < 8; sb++) {
				int sc, m;
				kn__scale_min_k4(sb, sc12, &sc, &m);
				int32_t dot = 0;
				for (int l = 0; l < 32; l++) {
					uint8_t q = o[256 + 512 * (sb / 2) + 64 * (l / 4) + 4 * r + l % 4];
					dot += ((sb & 1) ? q >> 4 : q & 15) * xc[32 * sb + l];
				}
				int16_t s0, s1;
				memcpy(&s0, xb + 260 + 4 * sb, 2);
				memcpy(&s1, xb + 262 + 4 * sb, 2);
				isum += sc * dot;
				msum += m * (s0 + s1);
			}
			acc = fmaf((float)isum, kn_f16_to_f32(h) * xd, acc);
			acc = fmaf(-(float)msum, kn_f16_to_f32(hm) * xd, acc);
		}
		y[r] = acc;
	}
}

static void qp_gemv_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    float *restrict y, size_t n_rows, size_t k)
{
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		qp_group_q4_k((const uint8_t *)W + g * KN__QP_ROWS * rb, xq, k / KN__QK_K,
			      y + g * KN__QP_ROWS);
}

static void qp_gemm_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    size_t xq_stride, size_t n_x, float *restrict y, size_t ldy,
			    size_t n_rows, size_t k)
{
	for (size_t j = 0; j < n_x; j++)
		qp_gemv_xq_q4_k(W, rb, (const char *)xq + j * xq_stride, y + j * ldy, n_rows, k);
}

#define QP_PRODUCTS(T, BLOCK, MIN)                                                                 \
	static void qp_gemv_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   float *restrict y, size_t n_rows, size_t k)                    \
	{                                                                                         \
		for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)                                 \
			qp_group((const uint8_t *)W + g * KN__QP_ROWS * rb, BLOCK, qp_code_##T, MIN, xq, \
				 k / KN__QK, y + g * KN__QP_ROWS);                                \
	}                                                                                         \
	static void qp_gemm_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   size_t xq_stride, size_t n_x, float *restrict y, size_t ldy,   \
				   size_t n_rows, size_t k)                                       \
	{                                                                                         \
		for (size_t j = 0; j < n_x; j++)                                                  \
			qp_gemv_xq_##T(W, rb, (const char *)xq + j * xq_stride, y + j * ldy,      \
				       n_rows, k);                                                \
	}

QP_PRODUCTS(q8_0, KN__QP_Q8_0_BLOCK, 0)
QP_PRODUCTS(q5_0, KN__QP_Q5_0_BLOCK, 0)
QP_PRODUCTS(q4_1, KN__QP_Q4_1_BLOCK, 1)

#define QP_OPS(TYPE, T, QX)                                                                      \
	{ .type = TYPE, .geom = &kn__qtypes[TYPE], .xq_bytes = kn__qpack_xq_bytes,                      \
	  .quantize_x = QX, .gemv_xq = qp_gemv_xq_##T, .gemm_xq = qp_gemm_xq_##T }

static const struct kn_qops qp_q8_0_ops = QP_OPS(KN_Q_Q8_0, q8_0, qp_quantize_x);
static const struct kn_qops qp_q5_0_ops = QP_OPS(KN_Q_Q5_0, q5_0, qp_quantize_x);
static const struct kn_qops qp_q4_1_ops = QP_OPS(KN_Q_Q4_1, q4_1, qp_quantize_x1);
/* Q4_K's partner is its plain one, Q8_K */
static const struct kn_qops qp_q4_k_ops = {
	.type = KN_Q_Q4_K, .geom = &kn__qtypes[KN_Q_Q4_K], .xq_bytes = kn__qpack_xq_bytes_k,
	.quantize_x = qp_quantize_xk, .gemv_xq = qp_gemv_xq_q4_k, .gemm_xq = qp_gemm_xq_q4_k
};

const struct kn_qpack kn__qpack_ref[KN_Q_MAX] = {
	[KN_Q_Q8_0] = { &qp_q8_0_ops, KN__QP_ROWS, kn__qpack_q8_0 },
	[KN_Q_Q5_0] = { &qp_q5_0_ops, KN__QP_ROWS, kn__qpack_q5_0 },
	[KN_Q_Q4_1] = { &qp_q4_1_ops, KN__QP_ROWS, kn__qpack_q4_1 },
	[KN_Q_Q4_K] = { &qp_q4_k_ops, KN__QP_ROWS, kn__qpack_q4_k },
};
