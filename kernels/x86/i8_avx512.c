/* kernels/x86/i8_avx512.c - the int8 products of kn_i8.h with AVX-512,
 * one zmm per 16-column block:
 *   VNNI: vpdpbusd on u8 (x + 128) times s8 w, minus the column
 *         compensation 128 * sum_k w (CTranslate2's u8 x s8 form);
 *   BW:   vpmaddubsw on |w| (u8) times x negated where w < 0 (s8; AVX-512
 *         has no vpsignb, so a masked subtract), then vpmaddwd with ones;
 *         |codes| <= 127 keeps every int16 pair sum <= 32258 (exact).
 * Both reach ref/i8.c's exact int32 sums and end with its epilogue
 * (vmulps of the scales, then vfmadd), so they agree with it bit for bit.
 * The activations are quantized by the AVX2 quantizer.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_i8_int.h"

static inline __m512i kz_bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm512_set1_epi32(v);
}

/* VNNI: acc[r][j] += (x + 128) . w over MR rows and NBR blocks from wb
 * (blocks bstride bytes apart). */
static inline __attribute__((always_inline)) void
kz_tile_vnni(int MR, int NBR, size_t groups, const int8_t *xq, size_t ldq, const int8_t *wb,
	     size_t bstride, __m512i acc[4][4])
{
	const __m512i off = _mm512_set1_epi8((char)0x80);
	for (size_t g = 0; g < groups; g++) {
		__m512i bx[4];
		for (int r = 0; r < MR; r++)
			bx[r] = _mm512_xor_si512(kz_bcast4(xq + (size_t)r * ldq + g * 4), off);
		for (int j = 0; j < NBR; j++) {
			__m512i wv = _mm512_loadu_si512(wb + (size_t)j * bstride + g * 64);
			for (int r = 0; r < MR; r++)
				acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], bx[r], wv);
		}
	}
}

/* BW: acc[r][j] += x . w by the sign trick. */
static inline __attribute__((always_inline)) void
kz_tile_bw(int MR, int NBR, size_t groups, const int8_t *xq, size_t ldq, const int8_t *wb,
	   size_t bstride, __m512i acc[4][4])
{
	const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
	for (size_t g = 0; g < groups; g++) {
		__m512i bx[4];
		for (int r = 0; r < MR; r++)
			bx[r] = kz_bcast4(xq + (size_t)r * ldq + g * 4);
		for (int j = 0; j < NBR; j++) {
			__m512i wv = _mm512_loadu_si512(wb + (size_t)j * bstride + g * 64);
			__m512i aw = _mm512_abs_epi8(wv);
			__mmask64 neg = _mm512_movepi8_mask(wv);
			for (int r = 0; r < MR; r++) {
				__m512i sx = _mm512_mask_sub_epi8(bx[r], neg, zero, bx[r]);
				__m512i p = _mm512_maddubs_epi16(aw, sx);
				acc[r][j] = _mm512_add_epi32(acc[r][j], _mm512_madd_epi16(p, ones));
			}
		}
	}
}

/* y[n .. n + 16) (the first nv valid) = fmaf((float)(acc - comp), xs * ws, b). */
static inline void kz_store16(__m512i acc, bool vnni, float xs, const struct kn_i8w *w,
			      const float *bias, size_t n, size_t nv, float *y)
{
	__mmask16 k = nv >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1);
	if (vnni)
		acc = _mm512_sub_epi32(acc, _mm512_loadu_si512(w->comp + n));
	__m512 s = _mm512_mul_ps(_mm512_set1_ps(xs), _mm512_loadu_ps(w->scale + n));
	__m512 b = bias ? _mm512_maskz_loadu_ps(k, bias + n) : _mm512_setzero_ps();
	_mm512_mask_storeu_ps(y + n, k, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), s, b));
}

static inline __attribute__((always_inline)) void
kz_block(bool vnni, int MR, int NBR, size_t m, size_t nb, size_t n1, const int8_t *xq,
	 size_t ldq, const float *xs, const struct kn_i8w *w, const float *bias, float *y,
	 size_t ldy)
{
	size_t groups = kn_i8_kpad(w->K) / KN_I8_KG, bstride = groups * 64;
	__m512i acc[4][4];
	for (int r = 0; r < MR; r++)
		for (int j = 0; j < NBR; j++)
			acc[r][j] = _mm512_setzero_si512();
	const int8_t *wb = w->packed + nb * bstride;
	if (vnni)
		kz_tile_vnni(MR, NBR, groups, xq + m * ldq, ldq, wb, bstride, acc);
	else
		kz_tile_bw(MR, NBR, groups, xq + m * ldq, ldq, wb, bstride, acc);
	for (int r = 0; r < MR; r++)
		for (int j = 0; j < NBR; j++) {
			size_t c = (nb + (size_t)j) * KN_I8_NB;
			if (c < n1)
				kz_store16(acc[r][j], vnni, xs[m + (size_t)r], w, bias, c, n1 - c,
					   y + (m + (size_t)r) * ldy);
		}
}

/* Blocks in fours (a 64-column panel stays in cache while the rows pass
 * over it), rows in fours, then the tails one at a time. */
static inline __attribute__((always_inline)) void
kz_gemm(bool vnni, size_t M, size_t n0, size_t n1, const int8_t *xq, size_t ldq,
	const float *xs, const struct kn_i8w *w, const float *bias, float *y, size_t ldy)
{
	size_t nb = n0 / KN_I8_NB, nb1 = (n1 + KN_I8_NB - 1) / KN_I8_NB;
	for (; nb + 4 <= nb1; nb += 4) {
		size_t m = 0;
		for (; m + 4 <= M; m += 4)
			kz_block(vnni, 4, 4, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
		for (; m < M; m++)
			kz_block(vnni, 1, 4, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
	}
	for (; nb < nb1; nb++) {
		size_t m = 0;
		for (; m + 4 <= M; m += 4)
			kz_block(vnni, 4, 1, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
		for (; m < M; m++)
			kz_block(vnni, 1, 1, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
	}
}

static void kz_gemm_vnni(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
			 const float *restrict xs, const struct kn_i8w *w,
			 const float *restrict bias, float *restrict y, size_t ldy)
{
	kz_gemm(true, M, n0, n1, xq, ldq, xs, w, bias, y, ldy);
}

static void kz_gemm_bw(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		       const float *restrict xs, const struct kn_i8w *w,
		       const float *restrict bias, float *restrict y, size_t ldy)
{
	kz_gemm(false, M, n0, n1, xq, ldq, xs, w, bias, y, ldy);
}

const struct kn_i8_ops kn__i8_avx512vnni = {
	.kind = KN_I8_AVX512VNNI,
	.name = "avx512vnni",
	.x_max = KN_I8_QMAX,
	.quantize_rows = kn__i8_quantize_rows_avx2,
	.gemm = kz_gemm_vnni,
	.gemm_u8 = kz_gemm_vnni,
};

const struct kn_i8_ops kn__i8_avx512bw = {
	.kind = KN_I8_AVX512BW,
	.name = "avx512bw",
	.x_max = KN_I8_QMAX,
	.quantize_rows = kn__i8_quantize_rows_avx2,
	.gemm = kz_gemm_bw,
	.gemm_u8 = kz_gemm_bw,
};
