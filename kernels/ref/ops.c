/* kernels/ref/ops.c - scalar reference row kernels (the kn_ops contract in
 * kernels/kn.h), written as plain loops in the llama2.c manner.
 *
 * These are the ground truth the SIMD variants are tested against and the
 * table --kernels=ref selects. They favour clarity over speed; results
 * are deterministic (strict left-to-right float accumulation).
 */
#include <math.h>
#include <string.h>

#include "kernels/kn_half.h"
#include "kernels/kn_int.h"

static void ref_f16_to_f32(const uint16_t *restrict x, float *restrict y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = kn_f16_to_f32(x[i]);
}

/* Two passes (mean, then variance of the centred values) for accuracy. */
static void ref_layer_norm(const float *x, const float *gamma, const float *beta, float *y,
			   size_t n, float eps)
{
	if (n == 0)
		return;
	float mean = 0.0f;
	for (size_t i = 0; i < n; i++)
		mean += x[i];
	mean /= (float)n;
	float var = 0.0f;
	for (size_t i = 0; i < n; i++) {
		float d = x[i] - mean;
		var += d * d;
	}
	var /= (float)n;
	float rstd = 1.0f / sqrtf(var + eps);
	for (size_t i = 0; i < n; i++)
		y[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

static void ref_gelu(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * KN__SQRT1_2));
}

static void ref_softmax(float *x, size_t n)
{
	if (n == 0)
		return;
	float max = x[0];
	for (size_t i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	float sum = 0.0f;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (size_t i = 0; i < n; i++)
		x[i] /= sum;
}

static float ref_softmax_lse(float *x, size_t n)
{
	float max = x[0];
	for (size_t i = 1; i < n; i++)
		max = x[i] > max ? x[i] : max;
	float sum = 0.0f;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	for (size_t i = 0; i < n; i++)
		x[i] *= inv;
	return max + logf(sum);
}

static double ref_logsumexp(const float *x, size_t n)
{
	float m = -INFINITY;
	for (size_t i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	if (m == -INFINITY)
		return -INFINITY;
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += exp((double)(x[i] - m));
	return m + log(s);
}

static void ref_add(float *restrict y, const float *restrict x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] += x[i];
}

static void ref_scale_add(float *restrict y, float a, const float *restrict b, size_t n)
{
	if (!b) {
		for (size_t i = 0; i < n; i++)
			y[i] *= a;
		return;
	}
	for (size_t i = 0; i < n; i++)
		y[i] = y[i] * a + b[i];
}

static float ref_dot(const float *x, const float *y, size_t n)
{
	float sum = 0.0f;
	for (size_t i = 0; i < n; i++)
		sum += x[i] * y[i];
	return sum;
}

static void ref_dot_rows(const float *x, const float *B, size_t ldb, size_t n, size_t k,
			 float alpha, float *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] = alpha * ref_dot(x, B + i * ldb, k);
}

static void ref_dot_rows_g(const float *x, size_t ldx, size_t g, const float *B, size_t ldb,
			   size_t n, size_t k, float alpha, float *y, size_t ldy)
{
	for (size_t h = 0; h < g; h++)
		ref_dot_rows(x + h * ldx, B, ldb, n, k, alpha, y + h * ldy);
}

static void ref_gemv_t_g(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			 size_t n, size_t k, float *y, size_t ldy)
{
	for (size_t h = 0; h < g; h++)
		for (size_t j = 0; j < k; j++) {
			float sum = 0.0f;
			for (size_t i = 0; i < n; i++)
				sum = fmaf(p[h * ldp + i], B[i * ldb + j], sum);
			y[h * ldy + j] = sum;
		}
}

static void ref_gemv_f16(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			 float *restrict y, size_t n_rows, size_t k)
{
	for (size_t r = 0; r < n_rows; r++) {
		float sum = 0.0f;
		for (size_t i = 0; i < k; i++)
			sum += kn_f16_to_f32(W[r * ldw + i]) * x[i];
		y[r] = sum;
	}
}

/* Sum of squares in double (as ggml_rms_norm's ggml_float sum), so the
 * reference stays accurate for long rows; the scaling is in float. */
static void ref_rms_norm(const float *x, const float *w, float *y, size_t n, float eps)
{
	if (n == 0)
		return;
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += (double)x[i] * x[i];
	float scale = 1.0f / sqrtf((float)(sum / (double)n) + eps);
	for (size_t i = 0; i < n; i++)
		y[i] = w ? x[i] * scale * w[i] : x[i] * scale;
}

/* The formula of kn.h as written. For |x| past ~1e13 x^3 overflows to
 * +-inf and tanhf gives +-1, so the result is x or -0, as it should be. */
static void ref_gelu_tanh_mul(float *restrict gate, const float *restrict up, size_t n)
{
	const float c = 0.79788456080286536f; /* sqrt(2/pi) */
	for (size_t i = 0; i < n; i++) {
		float x = gate[i];
		float t = tanhf(c * (x + 0.044715f * x * x * x));
		gate[i] = 0.5f * x * (1.0f + t) * up[i];
	}
}

static void ref_silu_mul(float *restrict gate, const float *restrict up, size_t n)
{
	for (size_t i = 0; i < n; i++)
		gate[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

/* y[c] = sum_r x[r] * widen(W[r][c]), rows in order. */
static void ref_geglu_table_mul(float *restrict gate, const float *restrict up,
				const float *restrict table, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = gate[i];
		float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[kn_f32_to_f16(x)];
		gate[i] = g * up[i];
	}
}

static size_t ref_argmax(const float *x, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static void ref_gemv_t16(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			 float *restrict y, size_t n_rows, size_t n, float (*widen)(uint16_t))
{
	for (size_t c = 0; c < n; c++)
		y[c] = 0.0f;
	for (size_t r = 0; r < n_rows; r++)
		for (size_t c = 0; c < n; c++)
			y[c] += x[r] * widen(W[r * ldw + c]);
}

static void ref_gemv_t_bf16(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			    float *restrict y, size_t n_rows, size_t n)
{
	ref_gemv_t16(W, ldw, x, y, n_rows, n, kn_bf16_to_f32);
}

static void ref_gemv_t_f16(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			   float *restrict y, size_t n_rows, size_t n)
{
	ref_gemv_t16(W, ldw, x, y, n_rows, n, kn_f16_to_f32);
}

static void ref_dot_rows_g_f16(const float *x, size_t ldx, size_t g, const uint16_t *W,
			       size_t ldw, size_t n_rows, size_t k, float *y, size_t ldy)
{
	for (size_t h = 0; h < g; h++)
		ref_gemv_f16(W, ldw, x + h * ldx, y + h * ldy, n_rows, k);
}

static void ref_softmax_bf16(float *x, size_t n, float scale, uint16_t *y, size_t n_pad)
{
	ref_scale_add(x, scale, NULL, n);
	ref_softmax(x, n);
	for (size_t i = 0; i < n_pad; i++)
		y[i] = i < n ? kn_f32_to_bf16(x[i]) : 0;
}

static void ref_softmax_i8(float *x, size_t n, int8_t *q, size_t n_pad, float *scale)
{
	float max = x[0], sum = 0.0f;
	for (size_t i = 1; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (size_t i = 0; i < n_pad; i++)
		q[i] = i < n ? (int8_t)nearbyintf(127.0f * x[i]) : 0;
	*scale = 1.0f / (127.0f * sum);
}

const struct kn_ops kn__ops_ref = {
	.isa = KN_ISA_REF,
	.name = "ref",
	.f16_to_f32 = ref_f16_to_f32,
	.layer_norm = ref_layer_norm,
	.gelu = ref_gelu,
	.softmax = ref_softmax,
	.softmax_lse = ref_softmax_lse,
	.add = ref_add,
	.scale_add = ref_scale_add,
	.dot = ref_dot,
	.dot_rows = ref_dot_rows,
	.dot_rows_g = ref_dot_rows_g,
	.gemv_t_g = ref_gemv_t_g,
	.gemv_f16 = ref_gemv_f16,
	.rms_norm = ref_rms_norm,
	.gelu_tanh_mul = ref_gelu_tanh_mul,
	.silu_mul = ref_silu_mul,
	.geglu_table_mul = ref_geglu_table_mul,
	.argmax = ref_argmax,
	.logsumexp = ref_logsumexp,
	.softmax_bf16 = ref_softmax_bf16,
	.softmax_i8 = ref_softmax_i8,
	.gemv_t_bf16 = ref_gemv_t_bf16,
	.gemv_t_f16 = ref_gemv_t_f16,
	.dot_rows_g_f16 = ref_dot_rows_g_f16,
};
