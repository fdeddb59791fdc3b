/* kernels/kn_qpack.c - what every ISA's packed kernels (kn_quant.h struct
 * kn_qpack; kernels/ref/qpack.c, kernels/x86/qpack_avx512.c) share: the x
 * partner (the ISA's own Q8_0 quantize_x, whose codes and d are the same
 * in every ISA, rearranged) and the Q5_0 packer (a byte layout, run once
 * at load: plain C is fast enough).
 */
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

size_t kn__qpack_xq_bytes(size_t k)
{
	return k / KN__QK * KN__QP_X_BLOCK;
}

void kn__qpack_q8_0_x(const struct kn_qops *q8, const float *restrict x, void *restrict xq,
		      size_t k)
{
	enum { CHUNK = 64 }; /* blocks quantized at a time */
	uint8_t tmp[CHUNK * KN__Q8_0X_BYTES];
	size_t nb = k / KN__QK;
	uint8_t *codes = xq, *d = codes + nb * KN__QK, *sums = d + 4 * nb; /* any alignment */
	for (size_t b0 = 0; b0 < nb; b0 += CHUNK) {
		size_t n = nb - b0 < CHUNK ? nb - b0 : CHUNK;
		q8->quantize_x(x + b0 * KN__QK, tmp, n * KN__QK);
		for (size_t i = 0; i < n; i++) {
			const uint8_t *blk = tmp + i * KN__Q8_0X_BYTES;
			uint16_t h;
			int32_t s = 0;
			memcpy(&h, blk, 2);
			memcpy(codes + (b0 + i) * KN__QK, blk + 2, KN__QK);
			for (int j = 0; j < KN__QK; j++)
				s += (int8_t)blk[2 + j];
			float f = kn_f16_to_f32(h);
			memcpy(d + 4 * (b0 + i), &f, 4);
			memcpy(sums + 4 * (b0 + i), &s, 4);
		}
	}
}

void kn__qpack_each(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst, size_t packed_block, kn__qpack_row_fn put)
{
	const uint8_t *w = W;
	uint8_t *out = dst;
	size_t nb = k / KN__QK, bb = rb / nb;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		for (size_t b = 0; b < nb; b++)
			for (size_t r = 0; r < KN__QP_ROWS; r++)
				put(out + g * KN__QP_ROWS * rb + b * packed_block, r,
				    w + (g * KN__QP_ROWS + r) * rb + b * bb);
}

static void qp_put_q5_0(uint8_t *o, size_t r, const uint8_t *blk)
{
	memcpy(o + 2 * r, blk, 2);          /* d */
	memcpy(o + 32 + 4 * r, blk + 2, 4); /* qh */
	for (size_t c = 0; c < 4; c++)      /* qs */
		memcpy(o + 96 + 64 * c + 4 * r, blk + 6 + 4 * c, 4);
}

void kn__qpack_q5_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst)
{
	kn__qpack_each(W, rb, n_rows, k, dst, KN__QP_Q5_0_BLOCK, qp_put_q5_0);
}
