/* kernels/ref/qpack.c - the scalar reference of the packed weight layouts
 * (kn_quant.h struct kn_qpack): Q8_0 in groups of 16 rows. It defines the
 * layout and the arithmetic every ISA's packed kernels reproduce bit for
 * bit (tests/unit/kernels/test_qpack.c).
 */
#include <math.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

static void qp_pack_q8_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
			 void *restrict dst)
{
	const uint8_t *w = W;
	uint8_t *out = dst;
	size_t nb = k / KN__QK;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		for (size_t b = 0; b < nb; b++) {
			uint8_t *o = out + g * KN__QP_ROWS * rb + b * KN__QP_Q8_0_BLOCK;
			for (size_t r = 0; r < KN__QP_ROWS; r++) {
				const uint8_t *blk = w + (g * KN__QP_ROWS + r) * rb + b * KN__Q8_0_BYTES;
				memcpy(o + 2 * r, blk, 2);
				for (size_t c = 0; c < KN__QK / 4; c++)
					for (size_t i = 0; i < 4; i++)
						o[32 + 64 * c + 4 * r + i] = (uint8_t)(blk[2 + 4 * c + i] ^ 0x80);
			}
		}
}

static size_t qp_xq_bytes(size_t k)
{
	return k / KN__QK * KN__QP_X_BLOCK;
}

static void qp_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_0_x(&kn__qops_ref[KN_Q_Q8_0], x, xq, k);
}

/* y[r] for the 16 rows of the group at gw against one x partner row. */
static void qp_group(const uint8_t *gw, const uint8_t *xq, size_t nb, float *y)
{
	const int8_t *xc = (const int8_t *)xq;
	const float *xd = (const float *)(xc + nb * KN__QK);
	for (size_t r = 0; r < KN__QP_ROWS; r++) {
		float acc = 0.0f;
		for (size_t b = 0; b < nb; b++) {
			const uint8_t *o = gw + b * KN__QP_Q8_0_BLOCK;
			uint16_t h;
			int32_t isum = 0;
			memcpy(&h, o + 2 * r, 2);
			for (size_t c = 0; c < KN__QK / 4; c++)
				for (size_t i = 0; i < 4; i++)
					isum += ((int32_t)o[32 + 64 * c + 4 * r + i] - 128) *
						xc[b * KN__QK + 4 * c + i];
			acc = fmaf((float)isum, kn_f16_to_f32(h) * xd[b], acc);
		}
		y[r] = acc;
	}
}

static void qp_gemv_xq(const void *restrict W, size_t rb, const void *restrict xq,
		       float *restrict y, size_t n_rows, size_t k)
{
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		qp_group((const uint8_t *)W + g * KN__QP_ROWS * rb, xq, k / KN__QK,
			 y + g * KN__QP_ROWS);
}

static void qp_gemm_xq(const void *restrict W, size_t rb, const void *restrict xq,
		       size_t xq_stride, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
		       size_t k)
{
	for (size_t j = 0; j < n_x; j++)
		qp_gemv_xq(W, rb, (const char *)xq + j * xq_stride, y + j * ldy, n_rows, k);
}

static const struct kn_qops qp_q8_0_ops = {
	.type = KN_Q_Q8_0,
	.geom = &kn__qtypes[KN_Q_Q8_0],
	.xq_bytes = qp_xq_bytes,
	.quantize_x = qp_quantize_x,
	.gemv_xq = qp_gemv_xq,
	.gemm_xq = qp_gemm_xq,
};

const struct kn_qpack kn__qpack_ref[KN_Q_MAX] = {
	[KN_Q_Q8_0] = { &qp_q8_0_ops, KN__QP_ROWS, qp_pack_q8_0 },
};
