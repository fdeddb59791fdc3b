/* kernels/blas/blas.c - kn_gemm / kn_linear over OpenBLAS's cblas_sgemm
 * (row-major), the contract in kernels/kn_blas.h.
 *
 * Degenerate shapes are handled here rather than passed on: OpenBLAS's
 * argument checker (xerbla) prints to stderr for M or N = 0 with ld = 0,
 * and K = 0 must still give C = beta * C.
 */
#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "kernels/kn_blas.h"

/* C[M,N] = beta * C when there is nothing to multiply (K = 0). BLAS reads
 * no C when beta is 0, so neither do we (C may hold NaN garbage). */
static void kn_gemm_scale_only(size_t M, size_t N, float beta, float *C, size_t ldc)
{
	for (size_t i = 0; i < M; i++) {
		float *c = C + i * ldc;
		for (size_t j = 0; j < N; j++)
			c[j] = beta == 0.0f ? 0.0f : beta * c[j];
	}
}

void kn_gemm(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
	     const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	if (M == 0 || N == 0)
		return;
	if (K == 0) {
		kn_gemm_scale_only(M, N, beta, C, ldc);
		return;
	}
	assert(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
	assert(lda >= K && ldb >= (trans_b ? K : N) && ldc >= N && ldc <= INT_MAX);
	if (M == 1) {
		/* One row (a decode step): a matrix-vector product. sgemm would
		 * pack all of B on every call, which costs more than the product. */
		if (trans_b)
			cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, alpha, B, (int)ldb, A,
				    1, beta, C, 1);
		else
			cblas_sgemv(CblasRowMajor, CblasTrans, (int)K, (int)N, alpha, B, (int)ldb, A, 1,
				    beta, C, 1);
		return;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M,
		    (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

void kn_linear(size_t M, size_t N, size_t K, const float *x, const float *W, const float *bias,
	       float *y)
{
	if (!bias) {
		kn_gemm(true, M, N, K, 1.0f, x, K, W, K, 0.0f, y, N);
		return;
	}
	for (size_t i = 0; i < M; i++)
		memcpy(y + i * N, bias, N * sizeof(*y));
	kn_gemm(true, M, N, K, 1.0f, x, K, W, K, 1.0f, y, N);
}

void kn_blas_set_threads(int n)
{
	openblas_set_num_threads(n < 1 ? 1 : n);
}
