/* kernels/kn_qpack.c - what every ISA's packed kernels (kn_quant.h struct
 * kn_qpack; kernels/ref/qpack.c, kernels/x86/qpack_avx2.c,
 * kernels/x86/qpack_avx512.c) share: the x partner (the ISA's own Q8_0
 * quantize_x, whose codes and d are the same in every ISA, rearranged) and
 * the scalar packers (byte layouts, run once at load: plain C is
 * fast enough).
 */
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

size_t kn__qpack_xq_bytes(size_t k)
{
	return k / KN__QK * KN__QP_X_BLOCK;
}

size_t kn__qpack_xq_bytes_k(size_t k)
{
	return k / KN__QK_K * KN__Q8_K_BYTES;
}

/* x quantized by q's quantize_x (blocks of `xb` bytes: fp16 d at 0,
 * Q8_1's fp16 s at 2 when `one`, codes at xb - 32), laid out codes, float
 * d, and per block the codes' int32 sum (Q8_0) or s widened to float
 * (Q8_1). */
static void qp_x(const struct kn_qops *q, size_t xb, int one, const float *restrict x,
		 void *restrict xq, size_t k)
{
	enum { CHUNK = 64 }; /* blocks quantized at a time */
	uint8_t tmp[CHUNK * KN__Q8_1X_BYTES];
	size_t nb = k / KN__QK;
	uint8_t *codes = xq, *d = codes + nb * KN__QK, *sums = d + 4 * nb; /* any alignment */
	for (size_t b0 = 0; b0 < nb; b0 += CHUNK) {
		size_t n = nb - b0 < CHUNK ? nb - b0 : CHUNK;
		q->quantize_x(x + b0 * KN__QK, tmp, n * KN__QK);
		for (size_t i = 0; i < n; i++) {
			const uint8_t *blk = tmp + i * xb, *qs = blk + xb - KN__QK;
			uint16_t h;
			int32_t s = 0;
			memcpy(&h, blk, 2);
			memcpy(codes + (b0 + i) * KN__QK, qs, KN__QK);
			float f = kn_f16_to_f32(h);
			memcpy(d + 4 * (b0 + i), &f, 4);
			if (one) {
				memcpy(&h, blk + 2, 2);
				f = kn_f16_to_f32(h);
				memcpy(sums + 4 * (b0 + i), &f, 4);
				continue;
			}
			for (int j = 0; j < KN__QK; j++)
				s += (int8_t)qs[j];
			memcpy(sums + 4 * (b0 + i), &s, 4);
		}
	}
}

void kn__qpack_q8_0_x(const struct kn_qops *q8, const float *restrict x, void *restrict xq,
		      size_t k)
{
	qp_x(q8, KN__Q8_0X_BYTES, 0, x, xq, k);
}

void kn__qpack_q8_1_x(const struct kn_qops *q4_1, const float *restrict x, void *restrict xq,
		      size_t k)
{
	qp_x(q4_1, KN__Q8_1X_BYTES, 1, x, xq, k);
}

void kn__qpack_each(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst, size_t packed_block, kn__qpack_row_fn put)
{
	const uint8_t *w = W;
	uint8_t *out = dst;
	size_t bb = packed_block / KN__QP_ROWS, nb = rb / bb; /* plain block bytes, blocks */
	(void)k;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		for (size_t b = 0; b < nb; b++)
			for (size_t r = 0; r < KN__QP_ROWS; r++)
				put(out + g * KN__QP_ROWS * rb + b * packed_block, r,
				    w + (g * KN__QP_ROWS + r) * rb + b * bb);
}

static void qp_put_q8_0(uint8_t *o, size_t r, const uint8_t *blk)
{
	memcpy(o + 2 * r, blk, 2);
	for (size_t c = 0; c < KN__QK / 4; c++)
		for (size_t i = 0; i < 4; i++)
			o[32 + 64 * c + 4 * r + i] = (uint8_t)(blk[2 + 4 * c + i] ^ 0x80);
}

void kn__qpack_q8_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst)
{
	kn__qpack_each(W, rb, n_rows, k, dst, KN__QP_Q8_0_BLOCK, qp_put_q8_0);
}

/* n 4-byte pieces of src into lane r of the 64-byte chunks at o. */
static void qp_chunks(uint8_t *o, size_t r, const uint8_t *src, size_t n)
{
	for (size_t c = 0; c < n; c++)
		memcpy(o + 64 * c + 4 * r, src + 4 * c, 4);
}

static void qp_put_q5_0(uint8_t *o, size_t r, const uint8_t *blk)
{
	memcpy(o + 2 * r, blk, 2);          /* d */
	memcpy(o + 32 + 4 * r, blk + 2, 4); /* qh */
	qp_chunks(o + 96, r, blk + 6, 4);   /* qs */
}

void kn__qpack_q5_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst)
{
	kn__qpack_each(W, rb, n_rows, k, dst, KN__QP_Q5_0_BLOCK, qp_put_q5_0);
}

static void qp_put_q4_1(uint8_t *o, size_t r, const uint8_t *blk)
{
	memcpy(o + 2 * r, blk, 2);          /* d */
	memcpy(o + 32 + 2 * r, blk + 2, 2); /* m */
	qp_chunks(o + 64, r, blk + 4, 4);   /* qs */
}

void kn__qpack_q4_1(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst)
{
	kn__qpack_each(W, rb, n_rows, k, dst, KN__QP_Q4_1_BLOCK, qp_put_q4_1);
}

static void qp_put_q4_k(uint8_t *o, size_t r, const uint8_t *blk)
{
	memcpy(o + 2 * r, blk, 2);          /* d */
	memcpy(o + 32 + 2 * r, blk + 2, 2); /* dmin */
	qp_chunks(o + 64, r, blk + 4, 3);   /* scales: the three words */
	qp_chunks(o + 256, r, blk + 16, 32); /* qs: quarter p's chunks at 256 + 512 p */
}

void kn__qpack_q4_k(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst)
{
	kn__qpack_each(W, rb, n_rows, k, dst, KN__QP_Q4_K_BLOCK, qp_put_q4_k);
}
