/* kernels/ref/bf16.c - the scalar reference of the bfloat16 product
 * (kn_bf16_int.h): inputs rounded to bfloat16 as the kernel rounds them,
 * products exact, sums in double in k order, one rounding to float32 at
 * the end (plus the bias in float32). */
#include <string.h>

#include "kernels/kn_bf16.h"
#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"

static double kn_bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return (double)f;
}

void kn__bf16_linear_ref(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			 const uint16_t *Wp, const float *bias, float *y, size_t ldy)
{
	for (size_t m = 0; m < M; m++)
		for (size_t n = 0; n < N; n++) {
			double acc = 0;
			for (size_t k = 0; k < K; k++)
				acc += kn_bf16_value(kn_f32_to_bf16(x[m * ldx + k])) *
				       kn_bf16_value(kn__bf16_packed_at(Wp, K, n, k));
			y[m * ldy + n] = (float)acc + (bias ? bias[n] : 0.0f);
		}
}
