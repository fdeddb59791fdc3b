/* kernels/blas/blas.c - kn_gemm / kn_linear, the contract in
 * kernels/kn_blas.h: our AVX-512 or AVX2 kernel (x86/sgemm_avx512.c,
 * x86/sgemm_avx2.c) when the chosen kn_ops table is that ISA's (one row
 * against B's rows, trans_b: one kn_ops dot per output instead), else
 * OpenBLAS's cblas_sgemm / cblas_sgemv (row-major). The two kernels give
 * the same bits (kn__sgemm in kn_int.h).
 *
 * The SIMD kernels need a packing buffer per thread: allocated on the
 * thread's first product, kept in a pthread key, freed at thread exit (if
 * it cannot be allocated the product goes to OpenBLAS). Every row of two
 * or more goes to the same kernel, so a row's result never depends on the
 * rows batched with it (see kn__sgemm in kn_int.h) - except a single row
 * times B^T, which takes the dots (as it took sgemv before them).
 *
 * Degenerate shapes are handled here rather than passed on: OpenBLAS's
 * argument checker (xerbla) prints to stderr for M or N = 0 with ld = 0,
 * and K = 0 must still give C = beta * C.
 */
#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_blas.h"
#include "kernels/kn_int.h"

static pthread_once_t kn_pack_once = PTHREAD_ONCE_INIT;
static pthread_key_t kn_pack_key;
static bool kn_pack_key_ok;

static void kn_pack_key_make(void)
{
	kn_pack_key_ok = pthread_key_create(&kn_pack_key, free) == 0;
}

/* This thread's packing buffer for kn__sgemm_avx2/avx512, or NULL. */
static float *kn_pack_buf(void)
{
	pthread_once(&kn_pack_once, kn_pack_key_make);
	if (!kn_pack_key_ok)
		return NULL;
	float *p = pthread_getspecific(kn_pack_key);
	if (p)
		return p;
	p = malloc(KN__SGEMM_PACK * sizeof(float));
	if (p && pthread_setspecific(kn_pack_key, p) != 0) {
		free(p);
		p = NULL;
	}
	return p;
}

/* C[j] = alpha * dot(a, B row j) (+ beta * C[j]; beta 0 reads no C). */
static void kn_gemv_rows(size_t N, size_t K, float alpha, const float *a, const float *B,
			 size_t ldb, float beta, float *C)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t j = 0; j < N; j++) {
		float d = alpha * ops->dot(a, B + j * ldb, K);
		C[j] = beta == 0.0f ? d : d + beta * C[j];
	}
}

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

/* kn_gemm, and kn_gemm_rows with one_row false. */
static void kn_gemm_any(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
			size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
			bool one_row)
{
	if (M == 0 || N == 0)
		return;
	if (K == 0) {
		kn_gemm_scale_only(M, N, beta, C, ldc);
		return;
	}
	assert(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
	assert(lda >= K && ldb >= (trans_b ? K : N) && ldc >= N && ldc <= INT_MAX);
	enum kn_isa isa = kn_ops()->isa;
	bool simd = isa == KN_ISA_AVX512 || isa == KN_ISA_AVX2;
	if (one_row && M == 1 && trans_b && simd) {
		/* One row against rows of B (a decode step's q k^T, a float32
		 * linear): one kn_ops dot per output - about twice OpenBLAS's
		 * sgemv at head_dim 64, and no packing. */
		kn_gemv_rows(N, K, alpha, A, B, ldb, beta, C);
		return;
	}
	float *pack;
	if (simd && (pack = kn_pack_buf())) {
		/* (a few rows times B [K, N], a decode step's p v, included: the
		 * kernels read B in place for up to KN__SGEMM_DIRECT_M rows) */
		if (isa == KN_ISA_AVX512)
			kn__sgemm_avx512(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
					 pack);
		else
			kn__sgemm_avx2(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pack);
		return;
	}
	if (one_row && M == 1) { /* a matrix-vector product: sgemm would pack all of B */
		cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans,
			    trans_b ? (int)N : (int)K, trans_b ? (int)K : (int)N, alpha, B, (int)ldb,
			    A, 1, beta, C, 1);
		return;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)M,
		    (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

void kn_gemm(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A, size_t lda,
	     const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	kn_gemm_any(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, true);
}

void kn_gemm_rows(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		  size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
	kn_gemm_any(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
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

const char *kn_blas_core(void)
{
	return openblas_get_corename();
}

void kn_blas_set_threads(int n)
{
	openblas_set_num_threads(n < 1 ? 1 : n);
}
