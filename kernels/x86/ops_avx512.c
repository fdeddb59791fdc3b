/* kernels/x86/ops_avx512.c - the kn_ops row kernels for AVX-512F (16
 * floats per vector; BW/VL are allowed by the build flags, unused so far).
 * Compiled alone with -mavx512f -mavx512bw -mavx512vl (kernels/meson.build),
 * reached only through kn__ops_avx512 after kn_init.c has checked the CPU.
 * Every vector loop uses unaligned loads/stores and ends with a scalar
 * tail. exp and erf follow the approximations documented in
 * kernels/kn_int.h (the same constants as the AVX2 file; 2^n is applied
 * with vscalefps instead of exponent-bit assembly).
 */
#include <immintrin.h>
#include <math.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"
#include "kernels/x86/bf16_avx512.h"

#define W 16 /* floats per __m512 */

#define SET1 _mm512_set1_ps

/* e^x, Cephes range reduction + degree-5 polynomial (kn_int.h). */
static __m512 exp16(__m512 x)
{
	__mmask16 under = _mm512_cmp_ps_mask(x, SET1(KN__EXP_LO), _CMP_LT_OQ);
	x = _mm512_min_ps(SET1(KN__EXP_HI), x);
	x = _mm512_max_ps(SET1(KN__EXP_LO), x);
	__m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, SET1(KN__LOG2E)),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(fx, SET1(KN__LN2_HI), x);
	r = _mm512_fnmadd_ps(fx, SET1(KN__LN2_LO), r);
	__m512 p = SET1(KN__EXP_P0);
	p = _mm512_fmadd_ps(p, r, SET1(KN__EXP_P1));
	p = _mm512_fmadd_ps(p, r, SET1(KN__EXP_P2));
	p = _mm512_fmadd_ps(p, r, SET1(KN__EXP_P3));
	p = _mm512_fmadd_ps(p, r, SET1(KN__EXP_P4));
	p = _mm512_fmadd_ps(p, r, SET1(KN__EXP_P5));
	__m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, SET1(1.0f)));
	y = _mm512_scalef_ps(y, fx);
	return _mm512_maskz_mov_ps((__mmask16)~under, y);
}

/* erf(x), two-piece fit of kn_int.h, blended per lane. */
static __m512 erf16(__m512 x)
{
	__m512i sign_bit = _mm512_set1_epi32((int)0x80000000u);
	__m512i sign = _mm512_and_si512(_mm512_castps_si512(x), sign_bit);
	__m512 a = _mm512_min_ps(_mm512_abs_ps(x), SET1(KN__ERF_CLAMP));
	__m512 u = _mm512_mul_ps(a, a);
	__m512 pa = SET1(KN__ERF_A6);
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A5));
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A4));
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A3));
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A2));
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A1));
	pa = _mm512_fmadd_ps(pa, u, SET1(KN__ERF_A0));
	__m512 small = _mm512_mul_ps(a, pa);
	__m512 pb = SET1(KN__ERF_B9);
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B8));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B7));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B6));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B5));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B4));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B3));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B2));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B1));
	pb = _mm512_fmadd_ps(pb, a, SET1(KN__ERF_B0));
	__m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), u));
	__m512 big = _mm512_fnmadd_ps(e, pb, SET1(1.0f));
	__mmask16 is_small = _mm512_cmp_ps_mask(a, SET1(KN__ERF_SPLIT), _CMP_LE_OQ);
	__m512 r = _mm512_mask_blend_ps(is_small, big, small);
	return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

/* x / (1 + e^-t) = x * sigmoid(t), for SiLU (t = x) and tanh-GELU (t = 2y);
 * see xsigmoid8 in ops_avx2.c for the identity and the large-|t| rule
 * (lanes where exp16 would clamp, -t > KN__EXP_HI, give 0). */
static __m512 xsigmoid16(__m512 x, __m512 t)
{
	__m512 nt = _mm512_sub_ps(_mm512_setzero_ps(), t);
	__mmask16 huge = _mm512_cmp_ps_mask(nt, SET1(KN__EXP_HI), _CMP_GT_OQ);
	__m512 r = _mm512_div_ps(x, _mm512_add_ps(SET1(1.0f), exp16(nt)));
	return _mm512_maskz_mov_ps((__mmask16)~huge, r);
}

static void avx512_f16_to_f32(const uint16_t *restrict x, float *restrict y, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(x + i));
		_mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
	}
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

static void avx512_layer_norm(const float *x, const float *gamma, const float *beta, float *y,
			      size_t n, float eps)
{
	if (n == 0)
		return;
	size_t i = 0;
	__m512 acc = _mm512_setzero_ps();
	for (; i + W <= n; i += W)
		acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + i));
	float sum = _mm512_reduce_add_ps(acc);
	for (; i < n; i++)
		sum += x[i];
	float mean = sum / (float)n;

	__m512 vmean = SET1(mean);
	acc = _mm512_setzero_ps();
	for (i = 0; i + W <= n; i += W) {
		__m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vmean);
		acc = _mm512_fmadd_ps(d, d, acc);
	}
	float var = _mm512_reduce_add_ps(acc);
	for (; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	float rstd = 1.0f / sqrtf(var / (float)n + eps);

	__m512 vrstd = SET1(rstd);
	for (i = 0; i + W <= n; i += W) {
		__m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmean), vrstd);
		__m512 r =
			_mm512_fmadd_ps(d, _mm512_loadu_ps(gamma + i), _mm512_loadu_ps(beta + i));
		_mm512_storeu_ps(y + i, r);
	}
	for (; i < n; i++)
		y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

static void avx512_gelu(float *x, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m512 v = _mm512_loadu_ps(x + i);
		__m512 e = erf16(_mm512_mul_ps(v, SET1(KN__SQRT1_2)));
		__m512 h = _mm512_mul_ps(v, SET1(0.5f));
		_mm512_storeu_ps(x + i, _mm512_fmadd_ps(h, e, h));
	}
	for (; i < n; i++)
		x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * KN__SQRT1_2));
}

/* max of x[0..n), n >= 1 (softmax's and logsumexp's first pass). */
static float avx512_row_max(const float *x, size_t n)
{
	size_t i = 0;
	float max = x[0];
	if (n >= W) {
		__m512 vmax = _mm512_loadu_ps(x);
		for (i = W; i + W <= n; i += W)
			vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
		max = _mm512_reduce_max_ps(vmax);
	}
	for (; i < n; i++)
		max = x[i] > max ? x[i] : max;
	return max;
}

/* x[i] = e^(x[i] - max) in place; returns their float sum (vector lanes,
 * then the tail in order). */
static float avx512_exp_sum(float *x, size_t n, float max)
{
	__m512 vmax = SET1(max), acc = _mm512_setzero_ps();
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
		_mm512_storeu_ps(x + i, e);
		acc = _mm512_add_ps(acc, e);
	}
	float sum = _mm512_reduce_add_ps(acc);
	for (; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	return sum;
}

static void avx512_softmax(float *x, size_t n)
{
	if (n == 0)
		return;
	float inv = 1.0f / avx512_exp_sum(x, n, avx512_row_max(x, n));
	__m512 vinv = SET1(inv);
	size_t i = 0;
	for (; i + W <= n; i += W)
		_mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
	for (; i < n; i++)
		x[i] *= inv;
}

/* Three passes (max, exps, scale), the tail of each a masked vector. */
static float avx512_softmax_lse(float *x, size_t n)
{
	size_t i = 0, r = n % W;
	__mmask16 tail = (__mmask16)((1u << r) - 1u);
	__m512 vmax = SET1(-INFINITY), acc = _mm512_setzero_ps();
	for (; i + W <= n; i += W)
		vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
	if (r)
		vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, x + i));
	float max = _mm512_reduce_max_ps(vmax);
	__m512 m = SET1(max);
	for (i = 0; i + W <= n; i += W) {
		__m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
		_mm512_storeu_ps(x + i, e);
		acc = _mm512_add_ps(acc, e);
	}
	if (r) {
		__m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), m));
		_mm512_mask_storeu_ps(x + i, tail, e);
		acc = _mm512_mask_add_ps(acc, tail, acc, e);
	}
	float sum = _mm512_reduce_add_ps(acc);
	__m512 inv = SET1(1.0f / sum);
	for (i = 0; i + W <= n; i += W)
		_mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
	if (r)
		_mm512_mask_storeu_ps(x + i, tail,
				      _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + i), inv));
	return max + logf(sum);
}

static void avx512_softmax_i8(float *x, size_t n, int8_t *q, size_t n_pad, float *scale)
{
	float sum = avx512_exp_sum(x, n, avx512_row_max(x, n));
	const __m512 v127 = SET1(127.0f);
	size_t i = 0;
	for (; i + W <= n; i += W) /* nearest even (MXCSR), then vpmovdb */
		_mm_storeu_si128((__m128i *)(q + i),
				 _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(
					 _mm512_mul_ps(_mm512_loadu_ps(x + i), v127))));
	for (; i < n_pad; i++)
		q[i] = i < n ? (int8_t)nearbyintf(127.0f * x[i]) : 0;
	*scale = 1.0f / (127.0f * sum);
}

/* 64 columns per pass: two 512-bit loads of 32 bfloat16 each, split
 * without a conversion into the even columns (shifted up 16) and the odd
 * ones (masked), 4 FMA chains per row, two rows at a time into two sets;
 * the sets are added and the even/odd halves interleaved back at the end. */
static void avx512_gemv_t_bf16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			       float *restrict y, size_t n_rows, size_t n)
{
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
						 15, 31);
	for (size_t c0 = 0; c0 < n; c0 += 4 * W) {
		__mmask32 m[2];
		for (int h = 0; h < 2; h++) {
			size_t lo = c0 + 32 * (size_t)h, nv = lo >= n ? 0 : n - lo;
			m[h] = nv >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << nv) - 1);
		}
		__m512 a[2][4];
		for (int v = 0; v < 4; v++)
			a[0][v] = a[1][v] = _mm512_setzero_ps();
		size_t r = 0;
		for (; r < n_rows; r += 2) {
			int sets = r + 1 < n_rows ? 2 : 1;
			for (int t = 0; t < sets; t++) {
				const uint16_t *w = Wt + (r + (size_t)t) * ldw + c0;
				__m512 xv = SET1(x[r + (size_t)t]);
#pragma GCC unroll 2
				for (int h = 0; h < 2; h++) {
					__m512i u = _mm512_maskz_loadu_epi16(m[h], w + 32 * h);
					__m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
					__m512 od = _mm512_castsi512_ps(_mm512_and_si512(u, hi));
					a[t][2 * h] = _mm512_fmadd_ps(xv, ev, a[t][2 * h]);
					a[t][2 * h + 1] = _mm512_fmadd_ps(xv, od, a[t][2 * h + 1]);
				}
			}
		}
		for (int h = 0; h < 2; h++) {
			__m512 ev = _mm512_add_ps(a[0][2 * h], a[1][2 * h]);
			__m512 od = _mm512_add_ps(a[0][2 * h + 1], a[1][2 * h + 1]);
			size_t lo = c0 + 32 * (size_t)h;
			__mmask32 mh = m[h];
			_mm512_mask_storeu_ps(y + lo, (__mmask16)(mh & 0xffff),
					      _mm512_permutex2var_ps(ev, lo_idx, od));
			_mm512_mask_storeu_ps(y + lo + 16, (__mmask16)(mh >> 16),
					      _mm512_permutex2var_ps(ev, hi_idx, od));
		}
	}
}

/* 64 columns per pass in 4 vectors of 16 binary16 (masked past n),
 * widened by vcvtph2ps, two rows at a time into two sets of
 * accumulators. */
static void avx512_gemv_t_f16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			      float *restrict y, size_t n_rows, size_t n)
{
	for (size_t c0 = 0; c0 < n; c0 += 4 * W) {
		__mmask16 m[4];
		for (int v = 0; v < 4; v++) {
			size_t lo = c0 + W * (size_t)v, nv = lo >= n ? 0 : n - lo;
			m[v] = nv >= W ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1);
		}
		__m512 a[2][4];
		for (int v = 0; v < 4; v++)
			a[0][v] = a[1][v] = _mm512_setzero_ps();
		for (size_t r = 0; r < n_rows; r += 2) {
			int sets = r + 1 < n_rows ? 2 : 1;
			for (int t = 0; t < sets; t++) {
				const uint16_t *w = Wt + (r + (size_t)t) * ldw + c0;
				__m512 xv = SET1(x[r + (size_t)t]);
#pragma GCC unroll 4
				for (int v = 0; v < 4; v++)
					a[t][v] = _mm512_fmadd_ps(
						xv, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m[v], w + W * v)),
						a[t][v]);
			}
		}
		for (int v = 0; v < 4; v++)
			_mm512_mask_storeu_ps(y + c0 + W * (size_t)v, m[v],
					      _mm512_add_ps(a[0][v], a[1][v]));
	}
}

/* scale_add(x, scale), softmax(x) and the bfloat16 rounding in three
 * passes instead of five, each step the same instructions as there. */
static void avx512_softmax_bf16(float *x, size_t n, float scale, uint16_t *y, size_t n_pad)
{
	const __m512 vs = SET1(scale);
	size_t i = 0;
	float max;
	if (n >= W) {
		__m512 t = _mm512_mul_ps(_mm512_loadu_ps(x), vs), vmax = t;
		_mm512_storeu_ps(x, t);
		for (i = W; i + W <= n; i += W) {
			t = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
			_mm512_storeu_ps(x + i, t);
			vmax = _mm512_max_ps(vmax, t);
		}
		max = _mm512_reduce_max_ps(vmax);
	} else {
		x[0] *= scale;
		max = x[0];
		i = 1;
	}
	for (; i < n; i++) {
		x[i] *= scale;
		max = x[i] > max ? x[i] : max;
	}
	float inv = 1.0f / avx512_exp_sum(x, n, max);
	__m512 vinv = SET1(inv);
	for (i = 0; i + W <= n; i += W) {
		__m512i p = _mm512_castps_si512(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
		_mm256_storeu_si256((__m256i *)(y + i), kn__bf16x16(p));
	}
	for (; i < n; i++)
		y[i] = kn_f32_to_bf16(x[i] * inv);
	for (; i < n_pad; i++)
		y[i] = 0;
}

static double avx512_logsumexp(const float *x, size_t n)
{
	size_t i;
	float m = n ? avx512_row_max(x, n) : -INFINITY;
	if (m == -INFINITY)
		return -INFINITY;
	__m512 vm = SET1(m);
	double s = 0;
	for (i = 0; i + W <= n;) {
		__m512 acc = _mm512_setzero_ps();
		for (size_t end = i + KN__LSE_BLOCK; i + W <= n && i < end; i += W)
			acc = _mm512_add_ps(acc, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm)));
		s += (double)_mm512_reduce_add_ps(acc);
	}
	for (; i < n; i++)
		s += exp((double)(x[i] - m));
	return m + log(s);
}

static void avx512_add(float *restrict y, const float *restrict x, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W)
		_mm512_storeu_ps(y + i,
				 _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] += x[i];
}

static void avx512_scale_add(float *restrict y, float a, const float *restrict b, size_t n)
{
	__m512 va = SET1(a);
	size_t i = 0;
	if (!b) {
		for (; i + W <= n; i += W)
			_mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), va));
		for (; i < n; i++)
			y[i] *= a;
		return;
	}
	for (; i + W <= n; i += W) {
		__m512 r = _mm512_fmadd_ps(_mm512_loadu_ps(y + i), va, _mm512_loadu_ps(b + i));
		_mm512_storeu_ps(y + i, r);
	}
	for (; i < n; i++)
		y[i] = y[i] * a + b[i];
}

/* Four independent accumulators hide the FMA latency. */
static float avx512_dot(const float *x, const float *y, size_t n)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
	__m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
	size_t i = 0;
	for (; i + 4 * W <= n; i += 4 * W) {
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + W), _mm512_loadu_ps(y + i + W), a1);
		a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 2 * W), _mm512_loadu_ps(y + i + 2 * W),
				     a2);
		a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 3 * W), _mm512_loadu_ps(y + i + 3 * W),
				     a3);
	}
	for (; i + W <= n; i += W)
		a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
	float sum =
		_mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
	for (; i < n; i++)
		sum += x[i] * y[i];
	return sum;
}

#define DR_DOT avx512_dot
#include "kernels/x86/dot_rows_avx2.h"

/* Four rows per pass share each load of x; each row's 16 halves widen
 * with vcvtph2ps (F16C's 512-bit form) straight into the FMA. */
static void avx512_gemv_f16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			    float *restrict y, size_t n_rows, size_t k)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4) {
		const uint16_t *w0 = Wt + r * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
		__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
		__m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
		size_t i = 0;
		for (; i + W <= k; i += W) {
			__m512 xv = _mm512_loadu_ps(x + i);
			a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w0 + i))), xv, a0);
			a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w1 + i))), xv, a1);
			a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w2 + i))), xv, a2);
			a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w3 + i))), xv, a3);
		}
		float s0 = _mm512_reduce_add_ps(a0), s1 = _mm512_reduce_add_ps(a1);
		float s2 = _mm512_reduce_add_ps(a2), s3 = _mm512_reduce_add_ps(a3);
		for (; i < k; i++) {
			s0 += _cvtsh_ss(w0[i]) * x[i];
			s1 += _cvtsh_ss(w1[i]) * x[i];
			s2 += _cvtsh_ss(w2[i]) * x[i];
			s3 += _cvtsh_ss(w3[i]) * x[i];
		}
		y[r] = s0;
		y[r + 1] = s1;
		y[r + 2] = s2;
		y[r + 3] = s3;
	}
	for (; r < n_rows; r++) {
		const uint16_t *w0 = Wt + r * ldw;
		__m512 a0 = _mm512_setzero_ps();
		size_t i = 0;
		for (; i + W <= k; i += W)
			a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w0 + i))),
					     _mm512_loadu_ps(x + i), a0);
		float s0 = _mm512_reduce_add_ps(a0);
		for (; i < k; i++)
			s0 += _cvtsh_ss(w0[i]) * x[i];
		y[r] = s0;
	}
}

#define DF_VEC __m512
#define DF_ZERO _mm512_setzero_ps
#define DF_LOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define DF_LOADF _mm512_loadu_ps
#define DF_FMA _mm512_fmadd_ps
#define DF_SUM _mm512_reduce_add_ps
#define DF_GEMV avx512_gemv_f16
#define DF_G 4
#include "kernels/x86/dot_rows_f16.h"

static void avx512_rms_norm(const float *x, const float *w, float *y, size_t n, float eps)
{
	if (n == 0)
		return;
	size_t i = 0;
	__m512 acc = _mm512_setzero_ps();
	for (; i + W <= n; i += W) {
		__m512 v = _mm512_loadu_ps(x + i);
		acc = _mm512_fmadd_ps(v, v, acc);
	}
	float sum = _mm512_reduce_add_ps(acc);
	for (; i < n; i++)
		sum += x[i] * x[i];
	float scale = 1.0f / sqrtf(sum / (float)n + eps);

	__m512 vs = SET1(scale);
	if (!w) {
		for (i = 0; i + W <= n; i += W)
			_mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
		for (; i < n; i++)
			y[i] = x[i] * scale;
		return;
	}
	for (i = 0; i + W <= n; i += W) {
		__m512 r = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
		_mm512_storeu_ps(y + i, _mm512_mul_ps(r, _mm512_loadu_ps(w + i)));
	}
	for (; i < n; i++)
		y[i] = x[i] * scale * w[i];
}

/* t = 2 sqrt(2/pi) x (1 + 0.044715 x^2); gate = x sigmoid(t) up. */
static void avx512_gelu_tanh_mul(float *restrict gate, const float *restrict up, size_t n)
{
	const float c = 0.79788456080286536f; /* sqrt(2/pi) */
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m512 x = _mm512_loadu_ps(gate + i);
		__m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(x, x), SET1(0.044715f), SET1(1.0f));
		__m512 t = _mm512_mul_ps(_mm512_mul_ps(x, SET1(2.0f * c)), inner);
		__m512 g = xsigmoid16(x, t);
		_mm512_storeu_ps(gate + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
	}
	for (; i < n; i++) {
		float x = gate[i];
		gate[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * up[i];
	}
}

/* 16 at a time, as the AVX2 variant: vcvtps2ph, vgatherdps, masked
 * clamps; the tail under a mask. */
static void avx512_geglu_table_mul(float *restrict gate, const float *restrict up,
				   const float *restrict table, size_t n)
{
	const __m512 lo = SET1(-10.0f), hi = SET1(10.0f);
	for (size_t i = 0; i < n; i += W) {
		__mmask16 m = n - i >= W ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		__m512 x = _mm512_maskz_loadu_ps(m, gate + i);
		__m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
		__m512 g = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, table, 4);
		g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
		g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), _mm512_setzero_ps());
		_mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)));
	}
}

/* As the AVX2 variant, 16 lanes. */
static size_t avx512_argmax(const float *x, size_t n)
{
	if (n < 2 * W || isnan(x[0]))
		return kn__ops_ref.argmax(x, n);
	__m512 best = _mm512_loadu_ps(x); /* NaN lanes start at -inf, so later values count */
	best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(best, best, _CMP_UNORD_Q), SET1(-INFINITY));
	__m512i bi = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), idx = bi;
	const __m512i step = _mm512_set1_epi32(W);
	size_t i = W;
	for (; i + W <= n; i += W) {
		idx = _mm512_add_epi32(idx, step);
		__m512 v = _mm512_loadu_ps(x + i);
		__mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
		best = _mm512_mask_mov_ps(best, gt, v);
		bi = _mm512_mask_mov_epi32(bi, gt, idx);
	}
	float bv[W];
	int32_t bx[W];
	_mm512_storeu_ps(bv, best);
	_mm512_storeu_si512(bx, bi);
	return kn__argmax_finish(bv, bx, W, x, i, n);
}

static void avx512_silu_mul(float *restrict gate, const float *restrict up, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m512 x = _mm512_loadu_ps(gate + i);
		__m512 g = xsigmoid16(x, x);
		_mm512_storeu_ps(gate + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
	}
	for (; i < n; i++)
		gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

const struct kn_ops kn__ops_avx512 = {
	.isa = KN_ISA_AVX512,
	.name = "avx512",
	.f16_to_f32 = avx512_f16_to_f32,
	.layer_norm = avx512_layer_norm,
	.gelu = avx512_gelu,
	.softmax = avx512_softmax,
	.softmax_lse = avx512_softmax_lse,
	.add = avx512_add,
	.scale_add = avx512_scale_add,
	.dot = avx512_dot,
	.dot_rows = dr_dot_rows,
	.dot_rows_g = dr_dot_rows_g,
	.gemv_t_g = dr_gemv_t_g,
	.gemv_f16 = avx512_gemv_f16,
	.rms_norm = avx512_rms_norm,
	.gelu_tanh_mul = avx512_gelu_tanh_mul,
	.silu_mul = avx512_silu_mul,
	.geglu_table_mul = avx512_geglu_table_mul,
	.argmax = avx512_argmax,
	.logsumexp = avx512_logsumexp,
	.softmax_bf16 = avx512_softmax_bf16,
	.softmax_i8 = avx512_softmax_i8,
	.gemv_t_bf16 = avx512_gemv_t_bf16,
	.gemv_t_f16 = avx512_gemv_t_f16,
	.dot_rows_g_f16 = df_dot_rows_g_f16,
};
