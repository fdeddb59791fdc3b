/* kernels/x86/qpack_avx512.c - the packed weight layouts (kn_quant.h
 * struct kn_qpack) on AVX512-VNNI: Q8_0, Q5_0, Q4_1 and Q4_K in groups of
 * 16 rows. Compiled with libkn_avx512's flags (kernels/meson.build, VNNI
 * included) and reached only through kn_qpack_for, which checks the
 * CPU's VNNI.
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
 * block. Q4_K keeps the same lanes: each sub-block's dot, 8 vpdpbusd,
 * times the row's 6-bit scale (vpmulld) joins the block's integer sum.
 *
 * pack transposes 16 rows x 8 four-byte chunks of a block with unpacks
 * and a two-source permute, the same bytes as kernels/ref/qpack.c's.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_int.h"

#define QP_NX 16 /* x rows per pass over a group's blocks */
/* Bytes ahead that each block asks the L2 for, in the products of several
 * x rows only (a prompt's: a block's arithmetic is long there, and the
 * next block's first touch would wait on memory; Gemma 3's 590-token
 * prompt, 5 alternated runs, 1125 against 1296 tok/s). One x row (a
 * decode step's gemv) streams on the hardware prefetchers alone: its
 * packed groups are one forward stream, and asking for each block 4 KiB
 * ahead read slower on Zen 4 (two threads over 100 MB with a barrier
 * every 3 MB, medians of 40 alternated passes: Q4_1 24.5 against 27.2
 * GB/s, Q8_0 24.2 against 26.7, Q5_0 23.9 against 26.1, where plain
 * 256-bit reads gave 28.1-28.9; 8 KiB ahead into L1, the first form, was
 * slower still). */
#define QP_PF 4096

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

static void qp_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_0_x(&kn__qops_avx512[KN_Q_Q8_0], x, xq, k);
}

static void qp_quantize_x1(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qpack_q8_1_x(&kn__qops_avx512[KN_Q_Q4_1], x, xq, k);
}

/* The 4 bytes at p in every lane (a broadcast load, which vpdpbusd takes
 * as its memory operand). */
static inline __m512i qp_bcast4(const uint8_t *p)
{
	return _mm512_broadcastd_epi32(_mm_loadu_si32(p));
}

#define QP_INLINE static inline __attribute__((always_inline))

/* Block b's 8 code vectors (w[c]: codes 4c .. 4c + 3 of the 16 rows, as
 * unsigned bytes that stand for themselves minus the type's offset) and
 * the rows' d, for a group's block at o. */
QP_INLINE __m512 qp_block_q8_0(const uint8_t *o, __m512i w[8])
{
	for (int c = 0; c < 8; c++)
		w[c] = _mm512_loadu_si512(o + 32 + 64 * c);
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
}

/* Q5_0: the nibbles' chunk c gives codes 4c.. (low) and 16 + 4c.. (high);
 * bit e of each row's qh is code e's fifth bit, spread to the bytes of
 * code group e / 4 by a 16-entry table lookup (vpermd) of 4 bits. */
QP_INLINE __m512 qp_block_q5_0(const uint8_t *o, __m512i w[8])
{
	const __m512i m4 = _mm512_set1_epi8(15);
	const __m512i spread = _mm512_set_epi32(
		0x10101010, 0x10101000, 0x10100010, 0x10100000, 0x10001010, 0x10001000,
		0x10000010, 0x10000000, 0x00101010, 0x00101000, 0x00100010, 0x00100000,
		0x00001010, 0x00001000, 0x00000010, 0x00000000);
	__m512i qh = _mm512_loadu_si512(o + 32);
	for (int c = 0; c < 4; c++) {
		__m512i q = _mm512_loadu_si512(o + 96 + 64 * c);
		__m512i hlo = _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * c), spread);
		__m512i hhi = _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 16 + 4 * c), spread);
		w[c] = _mm512_or_si512(_mm512_and_si512(q, m4), hlo);
		w[c + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), hhi);
	}
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
}

/* Q4_1: Q5_0's nibbles without the fifth bits (codes 0..15 stand for
 * themselves; the rows' m are at 32, qs at 64). */
QP_INLINE __m512 qp_block_q4_1(const uint8_t *o, __m512i w[8])
{
	const __m512i m4 = _mm512_set1_epi8(15);
	for (int c = 0; c < 4; c++) {
		__m512i q = _mm512_loadu_si512(o + 64 + 64 * c);
		w[c] = _mm512_and_si512(q, m4);
		w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
	}
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
}

typedef __m512 (*qp_block_fn)(const uint8_t *o, __m512i w[8]);

/* The 16 rows of the group at gw (blocks of bb bytes, codes offset by
 * off; `min`: each row's fp16 m at 32, Q4_1's) against nx (1..QP_NX) x
 * partner rows (row j at xq + j * xs; its results at y + j * ldy). */
QP_INLINE void qp_group(const uint8_t *gw, size_t bb, qp_block_fn blk, int off, int min,
			const uint8_t *xq, size_t xs, int nx, float *y, size_t ldy, size_t nb)
{
	__m512 acc[QP_NX];
	for (int j = 0; j < nx; j++)
		acc[j] = _mm512_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		const uint8_t *o = gw + b * bb;
		for (size_t l = 0; nx > 1 && l < bb; l += 64)
			_mm_prefetch((const char *)o + QP_PF + l, _MM_HINT_T1);
		__m512i w[8];
		__m512 dw = blk(o, w);
		__m512 mw = min ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 32)))
				: _mm512_setzero_ps();
		for (int j = 0; j < nx; j++) {
			const uint8_t *xj = xq + (size_t)j * xs;
			const uint8_t *xc = xj + b * KN__QK;
			float xd;
			int32_t xsum; /* x's code sum; with `min`, its s (a float) */
			memcpy(&xd, xj + nb * KN__QK + 4 * b, 4);
			memcpy(&xsum, xj + nb * (KN__QK + 4) + 4 * b, 4);
			/* the codes stand for themselves minus off: start there */
			__m512i s = _mm512_set1_epi32(min ? 0 : xsum * -off);
			for (int c = 0; c < 8; c++)
				s = _mm512_dpbusd_epi32(s, w[c], qp_bcast4(xc + 4 * c));
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd)), acc[j]);
			if (min)
				acc[j] = _mm512_fmadd_ps(mw, _mm512_castsi512_ps(_mm512_set1_epi32(xsum)),
							 acc[j]);
		}
	}
	for (int j = 0; j < nx; j++)
		_mm512_storeu_ps(y + (size_t)j * ldy, acc[j]);
}

QP_INLINE void qp_gemm(const void *restrict W, size_t rb, const void *restrict xq,
		       size_t xq_stride, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
		       size_t k, size_t bb, qp_block_fn blk, int off, int min)
{
	const uint8_t *w = W, *x = xq;
	size_t nb = k / KN__QK;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++)
		for (size_t j = 0; j < n_x; j += QP_NX) {
			int nx = n_x - j < QP_NX ? (int)(n_x - j) : QP_NX;
			qp_group(w + g * KN__QP_ROWS * rb, bb, blk, off, min, x + j * xq_stride,
				 xq_stride, nx, y + j * ldy + g * KN__QP_ROWS, ldy, nb);
		}
}

#define QP_PRODUCTS(T, BLOCK, OFF, MIN)                                                           \
	static void qp_gemm_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   size_t xq_stride, size_t n_x, float *restrict y, size_t ldy,   \
				   size_t n_rows, size_t k)                                       \
	{                                                                                         \
		qp_gemm(W, rb, xq, xq_stride, n_x, y, ldy, n_rows, k, BLOCK, qp_block_##T, OFF,   \
			MIN);                                                                     \
	}                                                                                         \
	static void qp_gemv_xq_##T(const void *restrict W, size_t rb, const void *restrict xq,    \
				   float *restrict y, size_t n_rows, size_t k)                    \
	{                                                                                         \
		qp_gemm(W, rb, xq, 0, 1, y, 0, n_rows, k, BLOCK, qp_block_##T, OFF, MIN);         \
	}

QP_PRODUCTS(q8_0, KN__QP_Q8_0_BLOCK, 128, 0)
QP_PRODUCTS(q5_0, KN__QP_Q5_0_BLOCK, 16, 0)
QP_PRODUCTS(q4_1, KN__QP_Q4_1_BLOCK, 0, 1)

/* ---- Q4_K: 256-element blocks, 8 sub-blocks with 6-bit scales and mins -- */

/* Byte j of every dword lane of v, zero-extended: row r's byte j. */
QP_INLINE __m512i qk_byte(__m512i v, int j)
{
	return _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(255));
}

/* The 16 rows' scales (sc[s]) and mins (m[s]) of sub-blocks s = 0..7, one
 * lane a row, from the three scale words at 64, 128 and 192 (row r's 4
 * bytes at 4 r of each): ggml's get_scale_min_k4 on 16 rows at once. */
QP_INLINE void qk_scales(const uint8_t *o, __m512i sc[8], __m512i m[8])
{
	const __m512i m6 = _mm512_set1_epi8(63), m4 = _mm512_set1_epi8(15);
	const __m512i m2 = _mm512_set1_epi8(3);
	__m512i a = _mm512_loadu_si512(o + 64), b = _mm512_loadu_si512(o + 128);
	__m512i c = _mm512_loadu_si512(o + 192);
	__m512i sc03 = _mm512_and_si512(a, m6), m03 = _mm512_and_si512(b, m6);
	__m512i sc47 = _mm512_or_si512(
		_mm512_and_si512(c, m4),
		_mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a, 6), m2), 4));
	__m512i m47 = _mm512_or_si512(
		_mm512_and_si512(_mm512_srli_epi32(c, 4), m4),
		_mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(b, 6), m2), 4));
	for (int j = 0; j < 4; j++) {
		sc[j] = qk_byte(sc03, j);
		sc[j + 4] = qk_byte(sc47, j);
		m[j] = qk_byte(m03, j);
		m[j + 4] = qk_byte(m47, j);
	}
}

/* NX (1..QK_NX) x rows (Q8_K: float d at 0, codes at 4, int16 sums of 16
 * codes at 260; row j at xq + j * xs) against the 16 rows of the group at
 * gw over nb blocks; row j's results at y + j * ldy. Per block and
 * sub-block pair, the 8 code chunks are loaded once, split into low
 * (even sub-block) and high nibbles, and each x row meets them in 16
 * vpdpbusd (codes 0..15 times x's int8: a sub-block's dot is exact in
 * int32); then the integer sums sum(scale * dot) and sum(min * (the x
 * sums of the sub-block)), and the reference's two FMAs (kernels/ref/
 * qpack.c qp_group_q4_k: the same operations, the same bits). */
#define QK_NX 4
QP_INLINE void qk_group(const uint8_t *gw, const uint8_t *xq, size_t xs, int NX, float *y,
			size_t ldy, size_t nb)
{
	const __m512i m4 = _mm512_set1_epi8(15);
	__m512 acc[QK_NX];
	for (int j = 0; j < NX; j++)
		acc[j] = _mm512_setzero_ps();
	for (size_t b = 0; b < nb; b++) {
		const uint8_t *o = gw + b * KN__QP_Q4_K_BLOCK;
		__m512i sc[8], m[8], isum[QK_NX];
		qk_scales(o, sc, m);
		for (int j = 0; j < NX; j++)
			isum[j] = _mm512_setzero_si512();
		for (int p = 0; p < 4; p++) {
			__m512i lo[8], hi[8];
			for (int c = 0; c < 8; c++) {
				__m512i q = _mm512_loadu_si512(o + 256 + 512 * p + 64 * c);
				lo[c] = _mm512_and_si512(q, m4);
				hi[c] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
			}
			for (int j = 0; j < NX; j++) {
				const uint8_t *xc = xq + (size_t)j * xs + b * KN__Q8_K_BYTES + 4;
				__m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
				for (int c = 0; c < 8; c++) {
					d0 = _mm512_dpbusd_epi32(d0, lo[c],
								 qp_bcast4(xc + 64 * p + 4 * c));
					d1 = _mm512_dpbusd_epi32(d1, hi[c],
								 qp_bcast4(xc + 64 * p + 32 + 4 * c));
				}
				isum[j] = _mm512_add_epi32(isum[j],
							   _mm512_mullo_epi32(d0, sc[2 * p]));
				isum[j] = _mm512_add_epi32(isum[j],
							   _mm512_mullo_epi32(d1, sc[2 * p + 1]));
			}
		}
		__m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)o));
		__m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(o + 32)));
		for (int j = 0; j < NX; j++) {
			const uint8_t *xb = xq + (size_t)j * xs + b * KN__Q8_K_BYTES;
			float xd;
			int16_t bs[16];
			memcpy(&xd, xb, 4);
			memcpy(bs, xb + 260, sizeof(bs));
			__m512i msum = _mm512_setzero_si512();
			for (int s = 0; s < 8; s++)
				msum = _mm512_add_epi32(
					msum, _mm512_mullo_epi32(m[s], _mm512_set1_epi32(bs[2 * s] +
											 bs[2 * s + 1])));
			__m512 vxd = _mm512_set1_ps(xd);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(d, vxd),
						 acc[j]);
			acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dm, vxd),
						  acc[j]);
		}
	}
	for (int j = 0; j < NX; j++)
		_mm512_storeu_ps(y + (size_t)j * ldy, acc[j]);
}

/* Each group against the x rows QK_NX at a time, the group's blocks read
 * again (from cache) for every pass after the first. */
static void qk_gemm_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    size_t xs, size_t n_x, float *restrict y, size_t ldy, size_t n_rows,
			    size_t k)
{
	const uint8_t *w = W, *x = xq;
	size_t nb = k / KN__QK_K;
	for (size_t g = 0; g < n_rows / KN__QP_ROWS; g++) {
		const uint8_t *gw = w + g * KN__QP_ROWS * rb;
		float *yg = y + g * KN__QP_ROWS;
		for (size_t j = 0; j < n_x; j += QK_NX) {
			const uint8_t *xj = x + j * xs;
			float *yj = yg + j * ldy;
			switch (n_x - j < QK_NX ? n_x - j : QK_NX) {
			case 4: qk_group(gw, xj, xs, 4, yj, ldy, nb); break;
			case 3: qk_group(gw, xj, xs, 3, yj, ldy, nb); break;
			case 2: qk_group(gw, xj, xs, 2, yj, ldy, nb); break;
			default: qk_group(gw, xj, xs, 1, yj, ldy, nb);
			}
		}
	}
}

static void qk_gemv_xq_q4_k(const void *restrict W, size_t rb, const void *restrict xq,
			    float *restrict y, size_t n_rows, size_t k)
{
	qk_gemm_xq_q4_k(W, rb, xq, 0, 1, y, 0, n_rows, k);
}

static void qk_quantize_x(const float *restrict x, void *restrict xq, size_t k)
{
	kn__qops_avx512[KN_Q_Q4_K].quantize_x(x, xq, k);
}

#define QP_OPS(TYPE, T, QX)                                                                      \
	{ .type = TYPE, .geom = &kn__qtypes[TYPE], .xq_bytes = kn__qpack_xq_bytes,                      \
	  .quantize_x = QX, .gemv_xq = qp_gemv_xq_##T, .gemm_xq = qp_gemm_xq_##T }

static const struct kn_qops qp_q8_0_ops = QP_OPS(KN_Q_Q8_0, q8_0, qp_quantize_x);
static const struct kn_qops qp_q5_0_ops = QP_OPS(KN_Q_Q5_0, q5_0, qp_quantize_x);
static const struct kn_qops qp_q4_1_ops = QP_OPS(KN_Q_Q4_1, q4_1, qp_quantize_x1);
static const struct kn_qops qk_q4_k_ops = {
	.type = KN_Q_Q4_K, .geom = &kn__qtypes[KN_Q_Q4_K], .xq_bytes = kn__qpack_xq_bytes_k,
	.quantize_x = qk_quantize_x, .gemv_xq = qk_gemv_xq_q4_k, .gemm_xq = qk_gemm_xq_q4_k
};

const struct kn_qpack kn__qpack_avx512[KN_Q_MAX] = {
	[KN_Q_Q8_0] = { &qp_q8_0_ops, KN__QP_ROWS, qp_pack_q8_0 },
	[KN_Q_Q5_0] = { &qp_q5_0_ops, KN__QP_ROWS, kn__qpack_q5_0 },
	[KN_Q_Q4_1] = { &qp_q4_1_ops, KN__QP_ROWS, kn__qpack_q4_1 },
	[KN_Q_Q4_K] = { &qk_q4_k_ops, KN__QP_ROWS, kn__qpack_q4_k },
};
