/* kernels/x86/i8_avx2.c - the int8 products of kn_i8.h with AVX2: the
 * activation quantizer, and two products:
 *   "avx2": vpmaddubsw on |w| (u8) times x * sign(w) (s8), widened by
 *   vpmaddwd with ones. Codes in [-127, 127] bound each int16 pair sum by
 *   2 * 127 * 127 = 32258, so vpmaddubsw never saturates;
 *   "avx2-x7": activations quantized to [-63, 63], vpmaddubsw on x + 64
 *   (u8, [1, 127]) times w (s8), the same bound, less 64 * sum w after;
 * and gemm_u8 for both: codes in [0, 127] read as u8 directly.
 * Either way the int32 sums are exact: the same acc as ref/i8.c, and the
 * same epilogue (vmulps of the scales, then vfmadd), so the same bits.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kn_i8_int.h"

static float ki_hmax(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

/* 8 codes of x[0..8) / s, clamped to [-qm, qm], rounded to nearest even
 * (MXCSR). */
static __m256i ki_codes(const float *x, __m256 s, __m256 qm)
{
	__m256 v = _mm256_div_ps(_mm256_loadu_ps(x), s);
	v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), qm)), qm);
	return _mm256_cvtps_epi32(v);
}

static void ki_quantize_row(const float *x, size_t K, float qmax, int8_t *q, float *scale)
{
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	__m256 vmax = _mm256_setzero_ps();
	size_t k = 0;
	for (; k + 8 <= K; k += 8)
		vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
	float amax = ki_hmax(vmax);
	for (; k < K; k++)
		amax = fmaxf(amax, fabsf(x[k]));
	float s = amax / qmax;
	*scale = s;
	if (!(s > 0.0f)) {
		memset(q, 0, K);
		return;
	}
	const __m256 vs = _mm256_set1_ps(s), qm = _mm256_set1_ps(qmax);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (k = 0; k + 32 <= K; k += 32) {
		__m256i ab = _mm256_packs_epi32(ki_codes(x + k, vs, qm), ki_codes(x + k + 8, vs, qm));
		__m256i cd =
			_mm256_packs_epi32(ki_codes(x + k + 16, vs, qm), ki_codes(x + k + 24, vs, qm));
		__m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), perm);
		_mm256_storeu_si256((__m256i *)(q + k), b);
	}
	for (; k < K; k++) {
		float v = fminf(fmaxf(x[k] / s, -qmax), qmax);
		q[k] = (int8_t)nearbyintf(v);
	}
}

static void ki_quantize_rows(const float *restrict x, size_t ldx, size_t M, size_t K,
			     int8_t *restrict q, size_t ldq, float *restrict scale, float qmax)
{
	size_t kp = kn_i8_kpad(K);
	for (size_t m = 0; m < M; m++) {
		ki_quantize_row(x + m * ldx, K, qmax, q + m * ldq, scale + m);
		for (size_t k = K; k < kp; k++)
			q[m * ldq + k] = 0;
	}
}

void kn__i8_quantize_rows_avx2(const float *restrict x, size_t ldx, size_t M, size_t K,
			       int8_t *restrict q, size_t ldq, float *restrict scale)
{
	ki_quantize_rows(x, ldx, M, K, q, ldq, scale, (float)KN_I8_QMAX);
}

/* The avx2-x7 quantizer: codes in [-KI_X7_MAX, KI_X7_MAX]. */
#define KI_X7_MAX 63
static void ki_quantize_rows_x7(const float *restrict x, size_t ldx, size_t M, size_t K,
				int8_t *restrict q, size_t ldq, float *restrict scale)
{
	ki_quantize_rows(x, ldx, M, K, q, ldq, scale, (float)KI_X7_MAX);
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

/* How a product reads its activation codes. */
enum ki_mode {
	KI_SIGN, /* signed codes, the sign trick */
	KI_X7,	 /* codes in [-63, 63], offset by 64 to u8, 64 sum w taken off */
	KI_U8,	 /* codes in [0, 127] (gemm_u8): u8 as they are */
};

/* The unsigned form of ki_tile: xq + off (u8; off 64 for KI_X7, 0 for
 * KI_U8) times w (s8), no sign trick.
 * Four rows run as inline assembly: compiled from intrinsics, GCC kept two
 * of the eight accumulators on the stack (a store-to-load chain per group
 * that halved the rate); here they, the weights, the constants and the
 * temporaries are the 15 ymm registers listed. */
static inline __attribute__((always_inline)) void
ki_tile_u8(int MR, int8_t off8, size_t groups, const int8_t *xq, size_t ldq, const int8_t *wb,
	   __m256i acc[4][2])
{
	const __m256i ones = _mm256_set1_epi16(1), off = _mm256_set1_epi8(off8);
	if (MR == 4 && groups > 0) {
		const int8_t *x0 = xq, *x3 = xq + 3 * ldq;
		__m256i a0 = acc[0][0], a1 = acc[0][1], a2 = acc[1][0], a3 = acc[1][1];
		__m256i a4 = acc[2][0], a5 = acc[2][1], a6 = acc[3][0], a7 = acc[3][1];
		size_t g = groups;
		__asm__ volatile(
#define KI_X7_ROW(src, lo, hi)                                      \
	"vpbroadcastd " src ", %%ymm12\n\t"                          \
	"vpaddb %[off], %%ymm12, %%ymm12\n\t"                        \
	"vpmaddubsw %%ymm8, %%ymm12, %%ymm13\n\t"                     \
	"vpmaddubsw %%ymm9, %%ymm12, %%ymm14\n\t"                     \
	"vpmaddwd %[ones], %%ymm13, %%ymm13\n\t"                     \
	"vpmaddwd %[ones], %%ymm14, %%ymm14\n\t"                     \
	"vpaddd %%ymm13, %[" lo "], %[" lo "]\n\t"                  \
	"vpaddd %%ymm14, %[" hi "], %[" hi "]\n\t"
			"1:\n\t"
			"vmovdqu (%[w]), %%ymm8\n\t"
			"vmovdqu 32(%[w]), %%ymm9\n\t"
			KI_X7_ROW("(%[x0])", "a0", "a1")
			KI_X7_ROW("(%[x0],%[ld])", "a2", "a3")
			KI_X7_ROW("(%[x0],%[ld],2)", "a4", "a5")
			KI_X7_ROW("(%[x3])", "a6", "a7")
#undef KI_X7_ROW
			"add $4, %[x0]\n\t"
			"add $4, %[x3]\n\t"
			"add $64, %[w]\n\t"
			"dec %[g]\n\t"
			"jnz 1b\n\t"
			/* early-clobber (&): an accumulator is written while ones,
			 * off and ld are still read, so none may share its register
			 * (GCC did share a zero accumulator with off = 0) */
			: [a0] "+&x"(a0), [a1] "+&x"(a1), [a2] "+&x"(a2), [a3] "+&x"(a3),
			  [a4] "+&x"(a4), [a5] "+&x"(a5), [a6] "+&x"(a6), [a7] "+&x"(a7),
			  [x0] "+&r"(x0), [x3] "+&r"(x3), [w] "+&r"(wb), [g] "+&r"(g)
			: [ld] "r"(ldq), [ones] "x"(ones), [off] "x"(off)
			: "xmm8", "xmm9", "xmm12", "xmm13", "xmm14", "cc", "memory");
		acc[0][0] = a0, acc[0][1] = a1, acc[1][0] = a2, acc[1][1] = a3;
		acc[2][0] = a4, acc[2][1] = a5, acc[3][0] = a6, acc[3][1] = a7;
		return;
	}
	for (size_t g = 0; g < groups; g++) {
		__m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + g * 64));
		__m256i w1 = _mm256_loadu_si256((const __m256i *)(wb + g * 64 + 32));
		for (int r = 0; r < MR; r++) {
			__m256i bx = _mm256_add_epi8(ki_bcast4(xq + (size_t)r * ldq + g * 4), off);
			__m256i p0 = _mm256_maddubs_epi16(bx, w0);
			__m256i p1 = _mm256_maddubs_epi16(bx, w1);
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

/* One MR x 16 block of y in the product of mode md. */
static inline __attribute__((always_inline)) void
ki_block(int MR, enum ki_mode md, size_t m, size_t nb, size_t n1, const int8_t *xq, size_t ldq,
	 const float *xs, const struct kn_i8w *w, const float *bias, float *y, size_t ldy)
{
	size_t groups = kn_i8_kpad(w->K) / KN_I8_KG, n = nb * KN_I8_NB;
	__m256i acc[4][2];
	for (int r = 0; r < MR; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_si256();
	if (md == KI_U8) {
		ki_tile_u8(MR, 0, groups, xq + m * ldq, ldq, w->packed + nb * groups * 64, acc);
	} else if (md == KI_X7) {
		ki_tile_u8(MR, KI_X7_MAX + 1, groups, xq + m * ldq, ldq,
			   w->packed + nb * groups * 64, acc);
		/* comp = 128 sum w, so comp / 2 = (KI_X7_MAX + 1) sum w exactly */
		for (int h = 0; h < 2; h++) {
			__m256i c = _mm256_srai_epi32(
				_mm256_loadu_si256((const __m256i *)(w->comp + n + 8 * (size_t)h)), 1);
			for (int r = 0; r < MR; r++)
				acc[r][h] = _mm256_sub_epi32(acc[r][h], c);
		}
	} else {
		ki_tile(MR, groups, xq + m * ldq, ldq, w->packed + nb * groups * 64, acc);
	}
	for (int r = 0; r < MR; r++) {
		float *yr = y + (m + (size_t)r) * ldy;
		for (int h = 0; h < 2; h++) {
			size_t c = n + 8 * (size_t)h;
			if (c < n1)
				ki_store8(acc[r][h], xs[m + (size_t)r], w->scale, bias, c, n1 - c, yr);
		}
	}
}

#ifndef KI_CHUNK
#define KI_CHUNK 16
#endif
static inline __attribute__((always_inline)) void
ki_gemm_any(enum ki_mode md, size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
	    const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
	    float *restrict y, size_t ldy)
{
	size_t nb1 = (n1 + KN_I8_NB - 1) / KN_I8_NB;
	for (size_t c0 = n0 / KN_I8_NB; c0 < nb1; c0 += KI_CHUNK) {
		size_t c1 = c0 + KI_CHUNK < nb1 ? c0 + KI_CHUNK : nb1, m = 0;
		for (; m + 4 <= M; m += 4)
			for (size_t nb = c0; nb < c1; nb++)
				ki_block(4, md, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
		for (; m < M; m++)
			for (size_t nb = c0; nb < c1; nb++)
				ki_block(1, md, m, nb, n1, xq, ldq, xs, w, bias, y, ldy);
	}
}

static void ki_gemm(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		    const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
		    float *restrict y, size_t ldy)
{
	ki_gemm_any(KI_SIGN, M, n0, n1, xq, ldq, xs, w, bias, y, ldy);
}

static void ki_gemm_x7(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		       const float *restrict xs, const struct kn_i8w *w,
		       const float *restrict bias, float *restrict y, size_t ldy)
{
	ki_gemm_any(KI_X7, M, n0, n1, xq, ldq, xs, w, bias, y, ldy);
}

static void ki_gemm_u8(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		       const float *restrict xs, const struct kn_i8w *w,
		       const float *restrict bias, float *restrict y, size_t ldy)
{
	ki_gemm_any(KI_U8, M, n0, n1, xq, ldq, xs, w, bias, y, ldy);
}

const struct kn_i8_ops kn__i8_avx2 = {
	.kind = KN_I8_AVX2,
	.name = "avx2",
	.x_max = KN_I8_QMAX,
	.quantize_rows = kn__i8_quantize_rows_avx2,
	.gemm = ki_gemm,
	.gemm_u8 = ki_gemm_u8,
};

const struct kn_i8_ops kn__i8_avx2_x7 = {
	.kind = KN_I8_AVX2_X7,
	.name = "avx2-x7",
	.x_max = KI_X7_MAX,
	.quantize_rows = ki_quantize_rows_x7,
	.gemm = ki_gemm_x7,
	.gemm_u8 = ki_gemm_u8,
};
