/* kernels/ref/i8.c - the scalar reference of the int8 products (kn_i8.h):
 * the per-row quantizer and the product read straight from the packed
 * layout, written as plain loops. Every SIMD variant matches these bit for
 * bit (the integer sums are exact; the epilogue is the same one fmaf).
 */
#include <math.h>

#include "kernels/kn_i8.h"
#include "kernels/kn_i8_int.h"

void kn_i8_quantize_row(const float *x, size_t K, int qmax, int8_t *q, float *scale)
{
	float amax = 0.0f, fq = (float)qmax;
	for (size_t k = 0; k < K; k++)
		amax = fmaxf(amax, fabsf(x[k]));
	float s = amax / fq;
	*scale = s;
	for (size_t k = 0; k < K; k++) {
		float v = s > 0.0f ? x[k] / s : 0.0f;
		v = fminf(fmaxf(v, -fq), fq);
		q[k] = (int8_t)nearbyintf(v);
	}
}

void kn__i8_quantize_rows_ref(const float *restrict x, size_t ldx, size_t M, size_t K,
			      int8_t *restrict q, size_t ldq, float *restrict scale, int qmax)
{
	size_t kp = kn_i8_kpad(K);
	for (size_t m = 0; m < M; m++) {
		kn_i8_quantize_row(x + m * ldx, K, qmax, q + m * ldq, scale + m);
		for (size_t k = K; k < kp; k++)
			q[m * ldq + k] = 0;
	}
}

static void kn_i8_quantize_rows_ref(const float *restrict x, size_t ldx, size_t M, size_t K,
				    int8_t *restrict q, size_t ldq, float *restrict scale)
{
	kn__i8_quantize_rows_ref(x, ldx, M, K, q, ldq, scale, KN_I8_QMAX);
}

/* The packed code of weight (n, k) (kn_i8.h's layout). */
static int32_t kn_i8_w_at(const struct kn_i8w *w, size_t n, size_t k)
{
	size_t groups = kn_i8_kpad(w->K) / KN_I8_KG;
	size_t off = ((n / KN_I8_NB) * groups + k / KN_I8_KG) * (KN_I8_NB * KN_I8_KG) +
		     (n % KN_I8_NB) * KN_I8_KG + k % KN_I8_KG;
	return w->packed[off];
}

void kn__i8_gemm_ref(size_t M, size_t n0, size_t n1, const int8_t *restrict xq,
			   size_t ldq, const float *restrict xs, const struct kn_i8w *w,
			   const float *restrict bias, float *restrict y, size_t ldy)
{
	for (size_t m = 0; m < M; m++)
		for (size_t n = n0; n < n1; n++) {
			int32_t acc = 0;
			for (size_t k = 0; k < w->K; k++)
				acc += (int32_t)xq[m * ldq + k] * kn_i8_w_at(w, n, k);
			y[m * ldy + n] = kn__i8_epilogue(acc, xs[m], w->scale[n],
							 bias ? bias[n] : 0.0f);
		}
}

const struct kn_i8_ops kn__i8_ref = {
	.kind = KN_I8_REF,
	.name = "ref",
	.quantize_rows = kn_i8_quantize_rows_ref,
	.x_max = KN_I8_QMAX,
	.gemm = kn__i8_gemm_ref,
	.gemm_u8 = kn__i8_gemm_ref,
};
