/* kernels/x86/qpack_avx512.c - the packed weight layouts (kn_quant.h
 * struct kn_qpack) on AVX512-VNNI: Q8_0 in groups of 16 rows. Compiled
 * with libkn_avx512's flags (kernels/meson.build, VNNI included) and
 * reached only through kn_qpack_for, which checks the CPU's VNNI.
 *
 * The product keeps one zmm lane per weight row: a block's 8 code chunks
 * (64 bytes each, 4 codes of each of the 16 rows) are loaded once, and
 * each x row meets them in 8 vpdpbusd, its 4 codes of the chunk broadcast
 * from memory; the lane then holds the row's exact block dot (plus 128
 * times the x codes' sum, which the accumulator starts without), one int
 * -> float and one FMA with the 16 rows' d times x's d finish the block.
 * Per block and x row: 8 dots, a convert, a multiply and an FMA for 512
 * products, against 16 dots and 48 float operations in the plain layout
 * (x86/quant_avx512_mm.h), where lanes hold partial sums of a block that
 * each need their own scaling. Up to QP_NX x rows share each load of a
 * block.
 *
 * pack transposes 16 rows x 8 four-byte chunks of a block with unpacks
 * and a two-source permute, the same bytes as kernels/ref/qpack.c's.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_int.h"

#define QP_NX 16 /* x rows per pass over a group's blocks */
#ifndef QP_PF
#define QP_PF 8192 /* bytes ahead that each block asks the caches for */
#endif

static void qp_pack_q8_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
			 void *restrict dst)
{
	const __m512i i_lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
	const __m512i i_hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	const __m512i x80 = _mm512_set1_epi8((char)0x80);
	const uint8_t *w = W;
	uint8_t *out = dst;
	size_t nb = k / KN__QK;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++) {
		const uint8_t *gw = w + g * KN__QP_ROWS * rb;
		for (size_t b = 0; b < nb; b++) {
			uint8_t *o = out + g * KN__QP_ROWS * rb + b * KN__QP_Q8_0_BLOCK;
			__m512i z[8], t[8], u[8];
			/* z[r]: row r's 32 codes (8 chunks), then row r + 8's */
			for (int r = 0; r < 8; r++) {
				const uint8_t *p0 = gw + (size_t)r * rb + b * KN__Q8_0_BYTES;
				const uint8_t *p1 = p0 + 8 * rb;
				__m256i lo = _mm256_loadu_si256((const __m256i *)(p0 + 2));
				__m256i hi = _mm256_loadu_si256((const __m256i *)(p1 + 2));
				z[r] = _mm512_xor_si512(
					_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), x80);
				memcpy(o + 2 * r, p0, 2);
				memcpy(o + 2 * (r + 8), p1, 2);
			}
			/* per 128-bit lane: rows (2p, 2p + 1) interleaved by chunk */
			for (int p = 0; p < 4; p++) {
				t[2 * p] = _mm512_unpacklo_epi32(z[2 * p], z[2 * p + 1]);
				t[2 * p + 1] = _mm512_unpackhi_epi32(z[2 * p], z[2 * p + 1]);
			}
			/* u[4h + c]: chunks c and c + 4 of rows 4h..4h+3 and 8+4h..; */
			for (int h = 0; h < 2; h++) {
				const __m512i *s = t + 4 * h;
				u[4 * h + 0] = _mm512_unpacklo_epi64(s[0], s[2]);
				u[4 * h + 1] = _mm512_unpackhi_epi64(s[0], s[2]);
				u[4 * h + 2] = _mm512_unpacklo_epi64(s[1], s[3]);
				u[4 * h + 3] = _mm512_unpackhi_epi64(s[1], s[3]);
			}
			/* chunk c: rows 0-3, 4-7, 8-11, 12-15 */
			for (int c = 0; c < 4; c++) {
				_mm512_storeu_si512(o + 32 + 64 * c,
						    _mm512_permutex2var_epi64(u[c], i_lo, u[4 + c]));
				_mm512_storeu_si512(o + 32 + 64 * (c + 4),
						    _mm512_permutex2var_epi64(u[c], i_hi, u[4 + c]));
			}
		}
	}
}

static size_t qp_xq_bytes(size_t k)
{
	return k / KN__QK * KN__QP_X_BLOCK;
}

static void qp_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_0_x(&kn__qops_avx512[KN_Q_Q8_0], x, xq, k);
}

/* The 4 bytes at p in every lane (a broadcast load, which vpdpbusd takes
 * as its memory operand). */
static inline __m512i qp_bcast4(const uint8_t *p)
{
	return _mm512_broadcastd_epi32(_mm_loadu_si32(p));
}

/* The 16 rows of the group at gw against nx (1..QP_NX) x partner rows
 * (row j at xq + j * xs; its results at y + j * ldy). */
static void qp_group(const uint8_t *gw, const uint8_t *xq, size_t xs, int nx, float *y,
		     size_t ldy, size_t nb)
{
	__m512 acc[QP_NX];
	for (int j = 0; j < nx; j++)
		acc[j] = _mm512_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		const uint8_t *o = gw + b * KN__QP_Q8_0_BLOCK;
		const __m512i *c = (const __m512i *)(o + 32);
		for (int l = 0; l < KN__QP_Q8_0_BLOCK; l += 64)
			_mm_prefetch((const char *)o + QP_PF + l, _MM_HINT_T0);
		__m512i w0 = _mm512_loadu_si512(c + 0), w1 = _mm512_loadu_si512(c + 1);
		__m512i w2 = _mm512_loadu_si512(c + 2), w3 = _mm512_loadu_si512(c + 3);
		__m512i w4 = _mm512_loadu_si512(c + 4), w5 = _mm512_loadu_si512(c + 5);
		__m512i w6 = _mm512_loadu_si512(c + 6), w7 = _mm512_loadu_si512(c + 7);
		__m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
		for (int j = 0; j < nx; j++) {
			const uint8_t *xj = xq + (size_t)j * xs;
			const uint8_t *xc = xj + b * KN__QK;
			float xd;
			int32_t xsum;
			memcpy(&xd, xj + nb * KN__QK + 4 * b, 4);
			memcpy(&xsum, xj + nb * (KN__QK + 4) + 4 * b, 4);
			/* the codes were stored plus 128: start at -128 * sum x */
			__m512i s = _mm512_set1_epi32(-128 * xsum);
			s = _mm512_dpbusd_epi32(s, w0, qp_bcast4(xc + 0));
			s = _mm512_dpbusd_epi32(s, w1, qp_bcast4(xc + 4));
			s = _mm512_dpbusd_epi32(s, w2, qp_bcast4(xc + 8));
			s = _mm512_dpbusd_epi32(s, w3, qp_bcast4(xc + 12));
			s = _mm512_dpbusd_epi32(s, w4, qp_bcast4(xc + 16));
			s = _mm512_dpbusd_epi32(s, w5, qp_bcast4(xc + 20));
			s = _mm512_dpbusd_epi32(s, w6, qp_bcast4(xc + 24));
			s = _mm512_dpbusd_epi32(s, w7, qp_bcast4(xc + 28));
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc[j]);
		}
	}
	for (int j = 0; j < nx; j++)
		_mm512_storeu_ps(y + (size_t)j * ldy, acc[j]);
}

static void qp_gemm_xq(const void *restrict W, size_t rb, const void *restrict xq,
		       size_t xq_stride, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
		       size_t k)
{
	const uint8_t *w = W, *x = xq;
	size_t nb = k / KN__QK;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		for (size_t j = 0; j < n_x; j += QP_NX) {
			int nx = n_x - j < QP_NX ? (int)(n_x - j) : QP_NX;
			qp_group(w + g * KN__QP_ROWS * rb, x + j * xq_stride, xq_stride, nx,
				 y + j * ldy + g * KN__QP_ROWS, ldy, nb);
		}
}

static void qp_gemv_xq(const void *restrict W, size_t rb, const void *restrict xq,
		       float *restrict y, size_t n_rows, size_t k)
{
	qp_gemm_xq(W, rb, xq, 0, 1, y, 0, n_rows, k);
}

static const struct kn_qops qp_q8_0_ops = {
	.type = KN_Q_Q8_0,
	.geom = &kn__qtypes[KN_Q_Q8_0],
	.xq_bytes = qp_xq_bytes,
	.quantize_x = qp_quantize_x,
	.gemv_xq = qp_gemv_xq,
	.gemm_xq = qp_gemm_xq,
};

const struct kn_qpack kn__qpack_avx512[KN_Q_MAX] = {
	[KN_Q_Q8_0] = { &qp_q8_0_ops, KN__QP_ROWS, qp_pack_q8_0 },
};
