/* kernels/x86/i8_avxvnni.c - the int8 product of kn_i8.h with AVX-VNNI
 * (the VEX-encoded ymm vpdpbusd of Alder Lake / Sapphire Rapids / Zen 5):
 * u8 (x + 128) times s8 w summed by fours into int32, minus the column
 * compensation 128 * sum_k w stored with the packed weights. vpdpbusd
 * does not saturate, so acc is exact and the results are ref/i8.c's bit
 * for bit (same epilogue: vmulps of the scales, then vfmadd).
 * The activations are quantized by the AVX2 quantizer.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_i8_int.h"

static inline __m256i kv_bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v ^ (int32_t)0x80808080u); /* x + 128 as u8 */
}

/* acc[r][h] += (x + 128) . w of MR rows with one 16-column block. */
static inline __attribute__((always_inline)) void
kv_tile(int MR, size_t groups, const int8_t *xq, size_t ldq, const int8_t *wb,
	__m256i acc[4][2])
{
	for (size_t g = 0; g < groups; g++) {
		__m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + g * 64));
		__m256i w1 = _mm256_loadu_si256((const __m256i *)(wb + g * 64 + 32));
		for (int r = 0; r < MR; r++) {
			__m256i bx = kv_bcast4(xq + (size_t)r * ldq + g * 4);
			acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], bx, w0);
			acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], bx, w1);
		}
	}
}

/* y = fmaf((float)(acc - comp), xs * ws, b) for 8 columns from n (nv valid). */
static void kv_store8(__m256i acc, float xs, const struct kn_i8w *w, const float *bias,
		      size_t n, size_t nv, float *y)
{
	float bt[8] = { 0 }, out[8];
	if (bias)
		memcpy(bt, bias + n, (nv < 8 ? nv : 8) * sizeof(float));
	acc = _mm256_sub_epi32(acc, _mm256_loadu_si256((const __m256i *)(w->comp + n)));
	__m256 s = _mm256_mul_ps(_mm256_set1_ps(xs), _mm256_loadu_ps(w->scale + n));
	__m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), s, _mm256_loadu_ps(bt));
	if (nv >= 8) {
		_mm256_storeu_ps(y + n, v);
		return;
	}
	_mm256_storeu_ps(out, v);
	memcpy(y + n, out, nv * sizeof(float));
}

static inline __attribute__((always_inline)) void
kv_block(int MR, size_t m, size_t nb, size_t n1, const int8_t *xq, size_t ldq, const float *xs,
	 const struct kn_i8w *w, const float *bias, float *y, size_t ldy)
{
	size_t groups = kn_i8_kpad(w->K) / KN_I8_KG, n = nb * KN_I8_NB;
	__m256i acc[4][2];
	for (int r = 0; r < MR; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_si256();
	kv_tile(MR, groups, xq + m * ldq, ldq, w->packed + nb * groups * 64, acc);
	for (int r = 0; r < MR; r++) {
		float *yr = y + (m + (size_t)r) * ldy;
		for (int h = 0; h < 2; h++) {
			size_t c = n + 8 * (size_t)h;
			if (c < n1)
				kv_store8(acc[r][h], xs[m + (size_t)r], w, bias, c, n1 - c, yr);
		}
	}
}

static void kv_gemm(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		    const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
		    float *restrict y, size_t ldy)
{
	/* four column blocks per sweep over the rows, as x86/i8_avx2.c's
	 * KI_CHUNK (one block per sweep left the wide products at two thirds
	 * of the rate there) */
	size_t nb1 = (n1 + KN_I8_NB - 1) / KN_I8_NB;
	for (size_t c0 = n0 / KN_I8_NB; c0 < nb1; c0 += 4) {
		size_t c1 = c0 + 4 < nb1 ? c0 + 4 : nb1, m = 0;
		for (; m + 4 <= M; m += 4)
			for (size_t nb = c0; nb < c1; nb++)
				kv_block(4, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
		for (; m < M; m++)
			for (size_t nb = c0; nb < c1; nb++)
				kv_block(1, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
	}
}

const struct kn_i8_ops kn__i8_avxvnni = {
	.kind = KN_I8_AVXVNNI,
	.name = "avxvnni",
	.x_max = KN_I8_QMAX,
	.quantize_rows = kn__i8_quantize_rows_avx2,
	.gemm = kv_gemm,
	.gemm_u8 = kv_gemm,
};
