/* kernels/ref/sgemm.c - the scalar reference of kn__sgemm (kn_int.h): the
 * order of operations that the AVX-512 kernel follows, written plainly,
 * one element at a time. Tests compare the two bit for bit; nothing in the
 * daemon calls it (kn_gemm goes to OpenBLAS where there is no SIMD
 * kernel). */
#include <math.h>

#include "kernels/kn_int.h"

void kn__sgemm_ref(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		   size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
		   float *pack)
{
	(void)pack;
	for (size_t k0 = 0; k0 < K; k0 += KN__SGEMM_KC) {
		size_t k1 = K - k0 < KN__SGEMM_KC ? K : k0 + KN__SGEMM_KC;
		for (size_t i = 0; i < M; i++) {
			for (size_t j = 0; j < N; j++) {
				float acc = 0.0f;
				for (size_t k = k0; k < k1; k++) {
					float b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
					acc = fmaf(A[i * lda + k], b, acc);
				}
				float *c = C + i * ldc + j;
				if (k0 == 0 && beta == 0.0f)
					*c = alpha * acc;
				else
					*c = fmaf(alpha, acc, k0 == 0 ? beta * *c : *c);
			}
		}
	}
}
