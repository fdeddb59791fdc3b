/* kernels/x86/i8_avx2.c - the int8 products of kn_i8.h with AVX2: the
 * activation quantizer, and the product by vpmaddubsw on |w| (u8) times
 * x * sign(w) (s8), widened by vpmaddwd with ones. Codes in [-127, 127]
 * bound each int16 pair sum by 2 * 127 * 127 = 32258, so vpmaddubsw never
 * saturates and the int32 sums are exact: the same acc as ref/i8.c, and
 * the same epilogue (vmulps of the scales, then vfmadd), so the same bits.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kn_i8_int.h"

static float ki_hmax(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

/* 8 codes of x[0..8) / s, clamped, rounded to nearest even (MXCSR). */
static __m256i ki_codes(const float *x, __m256 s)
{
	__m256 v = _mm256_div_ps(_mm256_loadu_ps(x), s);
	v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
	return _mm256_cvtps_epi32(v);
}

static void ki_quantize_row(const float *x, size_t K, int8_t *q, float *scale)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 vmax = _mm256_setzero_ps();
	size_t k = 0;
	for (; k + 8 <= K; k += 8)
		vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
	float amax = ki_hmax(vmax);
	for (; k < K; k++)
		amax = fmaxf(amax, fabsf(x[k]));
	float s = amax / 127.0f;
	*scale = s;
	if (!(s > 0.0f)) {
		memset(q, 0, K);
		return;
	}
	const __m256 vs = _mm256_set1_ps(s);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (k = 0; k + 32 <= K; k += 32) {
		__m256i ab = _mm256_packs_epi32(ki_codes(x + k, vs), ki_codes(x + k + 8, vs));
		__m256i cd = _mm256_packs_epi32(ki_codes(x + k + 16, vs), ki_codes(x + k + 24, vs));
		__m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), perm);
		_mm256_storeu_si256((__m256i *)(q + k), b);
	}
	for (; k < K; k++) {
		float v = fminf(fmaxf(x[k] / s, -127.0f), 127.0f);
		q[k] = (int8_t)nearbyintf(v);
	}
}

void kn__i8_quantize_rows_avx2(const float *restrict x, size_t ldx, size_t M, size_t K,
			       int8_t *restrict q, size_t ldq, float *restrict scale)
{
	size_t kp = kn_i8_kpad(K);
	for (size_t m = 0; m < M; m++) {
		ki_quantize_row(x + m * ldx, K, q + m * ldq, scale + m);
		for (size_t k = K; k < kp; k++)
			q[m * ldq + k] = 0;
	}
}

static inline __m256i ki_bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v);
}

/* acc[r][h] += the products of MR rows with one 16-column block (two
 * halves of 8 columns) over `groups` groups of 4 k. */
static inline __attribute__((always_inline)) void
ki_tile(int MR, size_t groups, const int8_t *xq, size_t ldq, const int8_t *wb,
	__m256i acc[4][2])
{
	const __m256i ones = _mm256_set1_epi16(1);
	for (size_t g = 0; g < groups; g++) {
		__m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + g * 64));
		__m256i w1 = _mm256_loadu_si256((const __m256i *)(wb + g * 64 + 32));
		__m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
		for (int r = 0; r < MR; r++) {
			__m256i bx = ki_bcast4(xq + (size_t)r * ldq + g * 4);
			__m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(bx, w0));
			__m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(bx, w1));
			acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(p0, ones));
			acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(p1, ones));
		}
	}
}

/* y = fmaf((float)acc, xs * ws, b) for 8 columns from n (nv of them valid). */
static void ki_store8(__m256i acc, float xs, const float *ws, const float *bias, size_t n,
		      size_t nv, float *y)
{
	float bt[8] = { 0 }, out[8];
	if (bias)
		memcpy(bt, bias + n, (nv < 8 ? nv : 8) * sizeof(float));
	__m256 s = _mm256_mul_ps(_mm256_set1_ps(xs), _mm256_loadu_ps(ws + n));
	__m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), s, _mm256_loadu_ps(bt));
	if (nv >= 8) {
		_mm256_storeu_ps(y + n, v);
		return;
	}
	_mm256_storeu_ps(out, v);
	memcpy(y + n, out, nv * sizeof(float));
}

static inline __attribute__((always_inline)) void
ki_block(int MR, size_t m, size_t nb, size_t n1, const int8_t *xq, size_t ldq, const float *xs,
	 const struct kn_i8w *w, const float *bias, float *y, size_t ldy)
{
	size_t groups = kn_i8_kpad(w->K) / KN_I8_KG, n = nb * KN_I8_NB;
	__m256i acc[4][2];
	for (int r = 0; r < MR; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_si256();
	ki_tile(MR, groups, xq + m * ldq, ldq, w->packed + nb * groups * 64, acc);
	for (int r = 0; r < MR; r++) {
		float *yr = y + (m + (size_t)r) * ldy;
		for (int h = 0; h < 2; h++) {
			size_t c = n + 8 * (size_t)h;
			if (c < n1)
				ki_store8(acc[r][h], xs[m + (size_t)r], w->scale, bias, c, n1 - c, yr);
		}
	}
}

static void ki_gemm(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		    const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
		    float *restrict y, size_t ldy)
{
	for (size_t nb = n0 / KN_I8_NB; nb * KN_I8_NB < n1; nb++) {
		size_t m = 0;
		for (; m + 4 <= M; m += 4)
			ki_block(4, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
		for (; m < M; m++)
			ki_block(1, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
	}
}

const struct kn_i8_ops kn__i8_avx2 = {
	.kind = KN_I8_AVX2,
	.name = "avx2",
	.quantize_rows = kn__i8_quantize_rows_avx2,
	.gemm = ki_gemm,
};
