/* kn_blas.h - matrix products, row-major: our AVX2 / AVX-512 kernels
 * (kn__sgemm in kn_int.h) for two or more rows when kn_init chose that
 * ISA's table, OpenBLAS (cblas) otherwise and for one row.
 *
 * C[M,N] = alpha * A[M,K] * op(B) + beta * C, with op(B) = B[K,N] (trans_b
 * false) or B[N,K]^T (trans_b true, the layout of nn.Linear weights
 * [out, in]). Leading dimensions in elements. Thread: any; OpenBLAS's own
 * thread count is set by kn_blas_set_threads (kn_init sets 1).
 */
#ifndef KN_BLAS_H
#define KN_BLAS_H

#include <stdbool.h>
#include <stddef.h>

void kn_gemm(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
	     size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* kn_gemm_rows - kn_gemm without its one-row shortcuts (a dot per output,
 * sgemv): every row of C gets the bits kn_gemm gives it among two or more
 * rows, whatever M is, for callers whose rows must not depend on how many
 * are computed together (a prompt's attention cut between forward chunks:
 * kernels/kn_attn.c). */
void kn_gemm_rows(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		  size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* kn_linear - y[M,N] = x[M,K] * W[N,K]^T + bias[N] (bias may be NULL):
 * the nn.Linear product with weights stored [out, in]. */
void kn_linear(size_t M, size_t N, size_t K, const float *x, const float *W,
	       const float *bias, float *y);

/* kn_blas_core - the kernel set OpenBLAS chose for this CPU when it was
 * loaded (openblas_get_corename: "Haswell", "Zen", "SkylakeX", ...;
 * "Prescott", its SSE3 fallback, for a CPU it does not know; the
 * OPENBLAS_CORETYPE environment variable overrides). Borrowed static
 * string. Thread: any. */
const char *kn_blas_core(void);

/* kn_blas_set_threads - OpenBLAS threads for calls from now on. */
void kn_blas_set_threads(int n);

#endif /* KN_BLAS_H */
