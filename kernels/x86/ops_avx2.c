/* kernels/x86/ops_avx2.c - the kn_ops row kernels for AVX2 + FMA + F16C
 * (8 floats per vector). Compiled alone with -mavx2 -mfma -mf16c
 * (kernels/meson.build), reached only through kn__ops_avx2 after kn_init.c
 * has checked the CPU. Every vector loop uses unaligned loads/stores and
 * ends with a scalar tail, so any n and any pointer alignment work.
 * exp and erf follow the approximations documented in kernels/kn_int.h.
 */
#include <immintrin.h>
#include <math.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

#define W 8 /* floats per __m256 */

static float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static float hmax8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* e^x, Cephes range reduction + degree-5 polynomial (kn_int.h). NaN in,
 * NaN out (min/max keep their second operand's NaN). */
static __m256 exp8(__m256 x)
{
	__m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(KN__EXP_LO), _CMP_LT_OQ);
	x = _mm256_min_ps(_mm256_set1_ps(KN__EXP_HI), x);
	x = _mm256_max_ps(_mm256_set1_ps(KN__EXP_LO), x);
	__m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(KN__LOG2E)),
				    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(KN__LN2_HI), x);
	r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(KN__LN2_LO), r);
	__m256 p = _mm256_set1_ps(KN__EXP_P0);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN__EXP_P1));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN__EXP_P2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN__EXP_P3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN__EXP_P4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KN__EXP_P5));
	__m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	__m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127));
	y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
	return _mm256_andnot_ps(under, y);
}

/* erf(x), two-piece fit of kn_int.h, blended per lane. */
static __m256 erf8(__m256 x)
{
	__m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
	__m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x),
				 _mm256_set1_ps(KN__ERF_CLAMP));
	__m256 u = _mm256_mul_ps(a, a);
	__m256 pa = _mm256_set1_ps(KN__ERF_A6);
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A5));
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A4));
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A3));
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A2));
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A1));
	pa = _mm256_fmadd_ps(pa, u, _mm256_set1_ps(KN__ERF_A0));
	__m256 small = _mm256_mul_ps(a, pa);
	__m256 pb = _mm256_set1_ps(KN__ERF_B9);
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B8));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B7));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B6));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B5));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B4));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B3));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B2));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B1));
	pb = _mm256_fmadd_ps(pb, a, _mm256_set1_ps(KN__ERF_B0));
	__m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), u));
	__m256 big = _mm256_fnmadd_ps(e, pb, _mm256_set1_ps(1.0f));
	__m256 is_small = _mm256_cmp_ps(a, _mm256_set1_ps(KN__ERF_SPLIT), _CMP_LE_OQ);
	return _mm256_or_ps(_mm256_blendv_ps(big, small, is_small), sign);
}

/* x / (1 + e^-t), i.e. x * sigmoid(t), for SiLU (t = x) and tanh-GELU
 * (t = 2y, since 0.5 (1 + tanh(y)) = 1 / (1 + e^-2y): the tanh identity
 * without the cancellation of 1 - 2 / (e^2y + 1) near y = 0 or -1 near
 * y << 0). Large |t|: t >> 0 makes e^-t flush to 0 (result x); where
 * -t > KN__EXP_HI exp8 clamps, and x / (1 + 2^127) would be wrong for |x|
 * near FLT_MAX, so those lanes give 0 (the exact |result| there is below
 * |x| e^-88, under 1e-30 for every x whose t is that negative). */
static __m256 xsigmoid8(__m256 x, __m256 t)
{
	__m256 nt = _mm256_sub_ps(_mm256_setzero_ps(), t);
	__m256 huge = _mm256_cmp_ps(nt, _mm256_set1_ps(KN__EXP_HI), _CMP_GT_OQ);
	__m256 r = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(nt)));
	return _mm256_andnot_ps(huge, r);
}

static void avx2_f16_to_f32(const uint16_t *restrict x, float *restrict y, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m128i h = _mm_loadu_si128((const __m128i *)(x + i));
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
	}
	for (; i < n; i++)
		y[i] = _cvtsh_ss(x[i]);
}

static void avx2_layer_norm(const float *x, const float *gamma, const float *beta, float *y,
			    size_t n, float eps)
{
	if (n == 0)
		return;
	size_t i = 0;
	__m256 acc = _mm256_setzero_ps();
	for (; i + W <= n; i += W)
		acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
	float sum = hsum8(acc);
	for (; i < n; i++)
		sum += x[i];
	float mean = sum / (float)n;

	__m256 vmean = _mm256_set1_ps(mean);
	acc = _mm256_setzero_ps();
	for (i = 0; i + W <= n; i += W) {
		__m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
		acc = _mm256_fmadd_ps(d, d, acc);
	}
	float var = hsum8(acc);
	for (; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	float rstd = 1.0f / sqrtf(var / (float)n + eps);

	__m256 vrstd = _mm256_set1_ps(rstd);
	for (i = 0; i + W <= n; i += W) {
		__m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), vrstd);
		__m256 r =
			_mm256_fmadd_ps(d, _mm256_loadu_ps(gamma + i), _mm256_loadu_ps(beta + i));
		_mm256_storeu_ps(y + i, r);
	}
	for (; i < n; i++)
		y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

static void avx2_gelu(float *x, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 e = erf8(_mm256_mul_ps(v, _mm256_set1_ps(KN__SQRT1_2)));
		__m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
		_mm256_storeu_ps(x + i, _mm256_fmadd_ps(h, e, h));
	}
	for (; i < n; i++)
		x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * KN__SQRT1_2));
}

/* max of x[0..n), n >= 1 (softmax's and logsumexp's first pass). */
static float avx2_row_max(const float *x, size_t n)
{
	size_t i = 0;
	float max = x[0];
	if (n >= W) {
		__m256 vmax = _mm256_loadu_ps(x);
		for (i = W; i + W <= n; i += W)
			vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
		max = hmax8(vmax);
	}
	for (; i < n; i++)
		max = x[i] > max ? x[i] : max;
	return max;
}

/* x[i] = e^(x[i] - max) in place; returns their float sum (vector lanes,
 * then the tail in order). */
static float avx2_exp_sum(float *x, size_t n, float max)
{
	__m256 vmax = _mm256_set1_ps(max), acc = _mm256_setzero_ps();
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
		_mm256_storeu_ps(x + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	float sum = hsum8(acc);
	for (; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	return sum;
}

static void avx2_softmax(float *x, size_t n)
{
	if (n == 0)
		return;
	size_t i;
	float inv = 1.0f / avx2_exp_sum(x, n, avx2_row_max(x, n));
	__m256 vinv = _mm256_set1_ps(inv);
	for (i = 0; i + W <= n; i += W)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
	for (; i < n; i++)
		x[i] *= inv;
}

/* Three passes (max, exps, scale), the tail of each a masked vector. */
static float avx2_softmax_lse(float *x, size_t n)
{
	size_t i = 0, r = n % W;
	__m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
					  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	__m256 keep = _mm256_castsi256_ps(tail), ninf = _mm256_set1_ps(-INFINITY);
	__m256 vmax = ninf, acc = _mm256_setzero_ps();
	for (; i + W <= n; i += W)
		vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
	if (r)
		vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, tail),
							     keep));
	float max = hmax8(vmax);
	__m256 m = _mm256_set1_ps(max);
	for (i = 0; i + W <= n; i += W) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
		_mm256_storeu_ps(x + i, e);
		acc = _mm256_add_ps(acc, e);
	}
	if (r) {
		__m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, tail), m));
		_mm256_maskstore_ps(x + i, tail, e);
		acc = _mm256_add_ps(acc, _mm256_and_ps(e, keep));
	}
	float sum = hsum8(acc);
	__m256 inv = _mm256_set1_ps(1.0f / sum);
	for (i = 0; i + W <= n; i += W)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
	if (r)
		_mm256_maskstore_ps(x + i, tail,
				    _mm256_mul_ps(_mm256_maskload_ps(x + i, tail), inv));
	return max + logf(sum);
}

static double avx2_logsumexp(const float *x, size_t n)
{
	size_t i;
	float m = n ? avx2_row_max(x, n) : -INFINITY;
	if (m == -INFINITY)
		return -INFINITY;
	__m256 vm = _mm256_set1_ps(m);
	double s = 0;
	for (i = 0; i + W <= n;) {
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
		size_t end = i + KN__LSE_BLOCK;
		for (; i + 2 * W <= n && i < end; i += 2 * W) {
			a0 = _mm256_add_ps(a0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
			a1 = _mm256_add_ps(a1, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + W), vm)));
		}
		if (i + W <= n && i < end) {
			a0 = _mm256_add_ps(a0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
			i += W;
		}
		s += (double)hsum8(_mm256_add_ps(a0, a1));
	}
	for (; i < n; i++)
		s += exp((double)(x[i] - m));
	return m + log(s);
}

static void avx2_add(float *restrict y, const float *restrict x, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W)
		_mm256_storeu_ps(y + i,
				 _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
	for (; i < n; i++)
		y[i] += x[i];
}

static void avx2_scale_add(float *restrict y, float a, const float *restrict b, size_t n)
{
	__m256 va = _mm256_set1_ps(a);
	size_t i = 0;
	if (!b) {
		for (; i + W <= n; i += W)
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
		for (; i < n; i++)
			y[i] *= a;
		return;
	}
	for (; i + W <= n; i += W) {
		__m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(y + i), va, _mm256_loadu_ps(b + i));
		_mm256_storeu_ps(y + i, r);
	}
	for (; i < n; i++)
		y[i] = y[i] * a + b[i];
}

/* Four independent accumulators hide the FMA latency. */
static float avx2_dot(const float *x, const float *y, size_t n)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
	size_t i = 0;
	for (; i + 4 * W <= n; i += 4 * W) {
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + W), _mm256_loadu_ps(y + i + W), a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 2 * W), _mm256_loadu_ps(y + i + 2 * W),
				     a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 3 * W), _mm256_loadu_ps(y + i + 3 * W),
				     a3);
	}
	for (; i + W <= n; i += W)
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
	float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (; i < n; i++)
		sum += x[i] * y[i];
	return sum;
}

#define DR_DOT avx2_dot
#include "kernels/x86/dot_rows_avx2.h"

/* Four rows per pass share each load of x; 8 halves per row widen with
 * F16C's vcvtph2ps. */
static void avx2_gemv_f16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			  float *restrict y, size_t n_rows, size_t k)
{
	size_t r = 0;
	for (; r + 4 <= n_rows; r += 4) {
		const uint16_t *w0 = Wt + r * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
		__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
		__m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
		size_t i = 0;
		for (; i + W <= k; i += W) {
			__m256 xv = _mm256_loadu_ps(x + i);
			a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w0 + i))), xv, a0);
			a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w1 + i))), xv, a1);
			a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w2 + i))), xv, a2);
			a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w3 + i))), xv, a3);
		}
		float s0 = hsum8(a0), s1 = hsum8(a1), s2 = hsum8(a2), s3 = hsum8(a3);
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
		__m256 a0 = _mm256_setzero_ps();
		size_t i = 0;
		for (; i + W <= k; i += W)
			a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w0 + i))),
					     _mm256_loadu_ps(x + i), a0);
		float s0 = hsum8(a0);
		for (; i < k; i++)
			s0 += _cvtsh_ss(w0[i]) * x[i];
		y[r] = s0;
	}
}

static void avx2_rms_norm(const float *x, const float *w, float *y, size_t n, float eps)
{
	if (n == 0)
		return;
	size_t i = 0;
	__m256 acc = _mm256_setzero_ps();
	for (; i + W <= n; i += W) {
		__m256 v = _mm256_loadu_ps(x + i);
		acc = _mm256_fmadd_ps(v, v, acc);
	}
	float sum = hsum8(acc);
	for (; i < n; i++)
		sum += x[i] * x[i];
	float scale = 1.0f / sqrtf(sum / (float)n + eps);

	__m256 vs = _mm256_set1_ps(scale);
	if (!w) {
		for (i = 0; i + W <= n; i += W)
			_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
		for (; i < n; i++)
			y[i] = x[i] * scale;
		return;
	}
	for (i = 0; i + W <= n; i += W) {
		__m256 r = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
		_mm256_storeu_ps(y + i, _mm256_mul_ps(r, _mm256_loadu_ps(w + i)));
	}
	for (; i < n; i++)
		y[i] = x[i] * scale * w[i];
}

/* t = 2 sqrt(2/pi) x (1 + 0.044715 x^2); gate = x sigmoid(t) up. */
static void avx2_gelu_tanh_mul(float *restrict gate, const float *restrict up, size_t n)
{
	const float c = 0.79788456080286536f; /* sqrt(2/pi) */
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256 x = _mm256_loadu_ps(gate + i);
		__m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(0.044715f),
					       _mm256_set1_ps(1.0f));
		__m256 t = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(2.0f * c)), inner);
		__m256 g = xsigmoid8(x, t);
		_mm256_storeu_ps(gate + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++) {
		float x = gate[i];
		gate[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * up[i];
	}
}

static void avx2_silu_mul(float *restrict gate, const float *restrict up, size_t n)
{
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256 x = _mm256_loadu_ps(gate + i);
		__m256 g = xsigmoid8(x, x);
		_mm256_storeu_ps(gate + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++)
		gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* 8 at a time: vcvtps2ph (round to nearest even) for the indices, one
 * vgatherdps from the table, the two clamps as blends. */
static void avx2_geglu_table_mul(float *restrict gate, const float *restrict up,
				 const float *restrict table, size_t n)
{
	const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
	size_t i = 0;
	for (; i + W <= n; i += W) {
		__m256 x = _mm256_loadu_ps(gate + i);
		__m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
		__m256 g = _mm256_i32gather_ps(table, idx, 4);
		g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
		g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
		_mm256_storeu_ps(gate + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
	}
	for (; i < n; i++) {
		float x = gate[i];
		float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[kn_f32_to_f16(x)];
		gate[i] = g * up[i];
	}
}

/* Per lane the first index of its largest (strictly greater replaces, so
 * a NaN never does; a lane starting on a NaN starts at -inf), then the
 * lanes: the largest, the lowest index among equals (lane 0 starts on
 * x[0], so it wins every tie at -inf). x[0] NaN: 0, as the scan. */
static size_t avx2_argmax(const float *x, size_t n)
{
	if (n < 2 * W || isnan(x[0]))
		return kn__ops_ref.argmax(x, n);
	__m256 best = _mm256_loadu_ps(x); /* NaN lanes start at -inf, so later values count */
	best = _mm256_blendv_ps(best, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(best, best, _CMP_UNORD_Q));
	__m256i bi = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), idx = bi;
	const __m256i step = _mm256_set1_epi32(W);
	size_t i = W;
	for (; i + W <= n; i += W) {
		idx = _mm256_add_epi32(idx, step);
		__m256 v = _mm256_loadu_ps(x + i);
		__m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
		best = _mm256_blendv_ps(best, v, gt);
		bi = _mm256_blendv_epi8(bi, idx, _mm256_castps_si256(gt));
	}
	float bv[W];
	int32_t bx[W];
	_mm256_storeu_ps(bv, best);
	_mm256_storeu_si256((__m256i *)bx, bi);
	return kn__argmax_finish(bv, bx, W, x, i, n);
}

/* 8 bfloat16 (f16 false) or binary16 (true, F16C's vcvtph2ps) at p
 * widened to float32. */
static inline __m256 h16x8(const uint16_t *p, bool f16)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);
	if (f16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 32 columns per pass in 4 vectors, two rows at a time into two sets of
 * accumulators; the columns past the last multiple of 8 in scalar.
 * Inlined into each format's wrapper, f16 a constant there. */
static inline void avx2_gemv_t16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
				 float *restrict y, size_t n_rows, size_t n, bool f16)
{
	size_t n8 = n / W * W, c0 = 0;
	for (; c0 < n8; c0 += 4 * W) {
		int nv = (int)((n8 - c0) / W < 4 ? (n8 - c0) / W : 4);
		__m256 a[2][4];
		for (int v = 0; v < 4; v++)
			a[0][v] = a[1][v] = _mm256_setzero_ps();
		size_t r = 0;
		for (; r + 2 <= n_rows; r += 2) {
			const uint16_t *w0 = Wt + r * ldw + c0, *w1 = w0 + ldw;
			__m256 x0 = _mm256_set1_ps(x[r]), x1 = _mm256_set1_ps(x[r + 1]);
			for (int v = 0; v < nv; v++) {
				a[0][v] = _mm256_fmadd_ps(x0, h16x8(w0 + W * v, f16), a[0][v]);
				a[1][v] = _mm256_fmadd_ps(x1, h16x8(w1 + W * v, f16), a[1][v]);
			}
		}
		if (r < n_rows)
			for (int v = 0; v < nv; v++)
				a[0][v] = _mm256_fmadd_ps(_mm256_set1_ps(x[r]),
							  h16x8(Wt + r * ldw + c0 + W * v, f16), a[0][v]);
		for (int v = 0; v < nv; v++)
			_mm256_storeu_ps(y + c0 + W * (size_t)v, _mm256_add_ps(a[0][v], a[1][v]));
	}
	for (size_t c = n8; c < n; c++) {
		float s = 0.0f;
		for (size_t r = 0; r < n_rows; r++)
			s += x[r] * (f16 ? kn_f16_to_f32(Wt[r * ldw + c])
					 : kn_bf16_to_f32(Wt[r * ldw + c]));
		y[c] = s;
	}
}

static void avx2_gemv_t_bf16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			     float *restrict y, size_t n_rows, size_t n)
{
	avx2_gemv_t16(Wt, ldw, x, y, n_rows, n, false);
}

static void avx2_gemv_t_f16(const uint16_t *restrict Wt, size_t ldw, const float *restrict x,
			    float *restrict y, size_t n_rows, size_t n)
{
	avx2_gemv_t16(Wt, ldw, x, y, n_rows, n, true);
}

#define DF_VEC __m256
#define DF_ZERO _mm256_setzero_ps
#define DF_LOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define DF_LOADF _mm256_loadu_ps
#define DF_FMA _mm256_fmadd_ps
#define DF_SUM hsum8
#define DF_GEMV avx2_gemv_f16
#define DF_G 2
#include "kernels/x86/dot_rows_f16.h"

static void avx2_softmax_bf16(float *x, size_t n, float scale, uint16_t *y, size_t n_pad)
{
	avx2_scale_add(x, scale, NULL, n);
	avx2_softmax(x, n);
	for (size_t i = 0; i < n_pad; i++)
		y[i] = i < n ? kn_f32_to_bf16(x[i]) : 0;
}

static void avx2_softmax_i8(float *x, size_t n, int8_t *q, size_t n_pad, float *scale)
{
	float sum = avx2_exp_sum(x, n, avx2_row_max(x, n));
	size_t i;
	/* codes: 127 e rounded to nearest even (MXCSR), packed with the
	 * in-lane packs undone by one dword permute */
	const __m256 v127 = _mm256_set1_ps(127.0f);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (i = 0; i + 4 * W <= n; i += 4 * W) {
		__m256i c[4];
		for (int j = 0; j < 4; j++)
			c[j] = _mm256_cvtps_epi32(
				_mm256_mul_ps(_mm256_loadu_ps(x + i + (size_t)j * W), v127));
		__m256i ab = _mm256_packs_epi32(c[0], c[1]), cd = _mm256_packs_epi32(c[2], c[3]);
		_mm256_storeu_si256((__m256i *)(q + i),
				    _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), perm));
	}
	for (; i < n_pad; i++)
		q[i] = i < n ? (int8_t)nearbyintf(127.0f * x[i]) : 0;
	*scale = 1.0f / (127.0f * sum);
}

const struct kn_ops kn__ops_avx2 = {
	.isa = KN_ISA_AVX2,
	.name = "avx2",
	.f16_to_f32 = avx2_f16_to_f32,
	.layer_norm = avx2_layer_norm,
	.gelu = avx2_gelu,
	.softmax = avx2_softmax,
	.softmax_lse = avx2_softmax_lse,
	.add = avx2_add,
	.scale_add = avx2_scale_add,
	.dot = avx2_dot,
	.dot_rows = dr_dot_rows,
	.dot_rows_g = dr_dot_rows_g,
	.gemv_t_g = dr_gemv_t_g,
	.gemv_f16 = avx2_gemv_f16,
	.rms_norm = avx2_rms_norm,
	.gelu_tanh_mul = avx2_gelu_tanh_mul,
	.silu_mul = avx2_silu_mul,
	.geglu_table_mul = avx2_geglu_table_mul,
	.argmax = avx2_argmax,
	.logsumexp = avx2_logsumexp,
	.softmax_bf16 = avx2_softmax_bf16,
	.softmax_i8 = avx2_softmax_i8,
	.gemv_t_bf16 = avx2_gemv_t_bf16,
	.gemv_t_f16 = avx2_gemv_t_f16,
	.dot_rows_g_f16 = df_dot_rows_g_f16,
};
