/* kernels/ref/ops.c - scalar reference row kernels (the kn_ops contract in
 * kernels/kn.h), written as plain loops in the llama2.c manner.
 *
 * These are the ground truth the SIMD variants are tested against and the
 * table --kernels=ref selects. They favour clarity over speed; results
 * are deterministic (strict left-to-right float accumulation).
 */
#include <math.h>
#include <string.h>

#include "kernels/kn_int.h"

/* IEEE 754 binary16 -> binary32, exactly, for every one of the 65536
 * inputs: zeros keep their sign, subnormals (exp 0) are mant * 2^-24,
 * exp 31 is +-inf or NaN. NaNs come out quiet with their payload
 * shifted up 13 bits, which is what x86 F16C (vcvtph2ps) does, so the
 * SIMD variants match bit for bit. */
static float ref_f16_one(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;
	uint32_t bits;

	if (exp == 0) {
		float v = ldexpf((float)mant, -24); /* exact: mant < 2^10 */
		return sign ? -v : v;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant ? (mant | 0x200u) << 13 : 0);
	else
		bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static void ref_f16_to_f32(const uint16_t *restrict x, float *restrict y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = ref_f16_one(x[i]);
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

static void ref_gemv_f16(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			 float *restrict y, size_t n_rows, size_t k)
{
	for (size_t r = 0; r < n_rows; r++) {
		float sum = 0.0f;
		for (size_t i = 0; i < k; i++)
			sum += ref_f16_one(W[r * ldw + i]) * x[i];
		y[r] = sum;
	}
}

const struct kn_ops kn__ops_ref = {
	.isa = KN_ISA_REF,
	.name = "ref",
	.f16_to_f32 = ref_f16_to_f32,
	.layer_norm = ref_layer_norm,
	.gelu = ref_gelu,
	.softmax = ref_softmax,
	.add = ref_add,
	.scale_add = ref_scale_add,
	.dot = ref_dot,
	.gemv_f16 = ref_gemv_f16,
};
