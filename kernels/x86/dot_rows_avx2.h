/* kernels/x86/dot_rows_avx2.h - kn_ops dot_rows (kn.h) on ymm: one row x
 * against n rows of B, 8 rows at a time. Not a public header: included
 * once by x86/ops_avx2.c and once by x86/ops_avx512.c (the same code, each
 * compiled with its library's flags; ymm is what head_dim 64 fills).
 *
 * Each of the 8 rows gets its own accumulator over k in steps of 8 (one
 * FMA per step, x's 8 floats loaded once for the 8 rows), and the 8
 * accumulators are reduced together: two rounds of vhaddps and one
 * cross-lane add leave row r's sum in lane r, so 8 sums cost 7 shuffling
 * adds where a dot each would cost 8 horizontal sums (and 8 calls). The
 * last k % 8 elements are masked loads, the last n % 8 rows the kn_ops
 * dot of the file that includes this (DR_DOT).
 */
#ifndef KN_X86_DOT_ROWS_AVX2_H
#define KN_X86_DOT_ROWS_AVX2_H

#include <immintrin.h>
#include <stddef.h>

static inline __m256 dr_sum8(const __m256 a[8])
{
	__m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
	__m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
	__m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
	return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
			     _mm256_permute2f128_ps(u0, u1, 0x31));
}

static void dr_dot_rows(const float *x, const float *B, size_t ldb, size_t n, size_t k,
			float alpha, float *y)
{
	size_t k8 = k & ~(size_t)7, i = 0;
	int tail = (int)(k - k8);
	const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail),
						_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	const __m256 va = _mm256_set1_ps(alpha);
	for (; i + 8 <= n; i += 8) {
		const float *b = B + i * ldb;
		__m256 acc[8];
		for (int r = 0; r < 8; r++)
			acc[r] = _mm256_setzero_ps();
		for (size_t d = 0; d < k8; d += 8) {
			__m256 xv = _mm256_loadu_ps(x + d);
#pragma GCC unroll 8
			for (int r = 0; r < 8; r++)
				acc[r] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(b + (size_t)r * ldb + d),
							 acc[r]);
		}
		if (tail) {
			__m256 xv = _mm256_maskload_ps(x + k8, mask);
			for (int r = 0; r < 8; r++)
				acc[r] = _mm256_fmadd_ps(
					xv, _mm256_maskload_ps(b + (size_t)r * ldb + k8, mask), acc[r]);
		}
		_mm256_storeu_ps(y + i, _mm256_mul_ps(va, dr_sum8(acc)));
	}
	for (; i < n; i++)
		y[i] = alpha * DR_DOT(x, B + i * ldb, k);
}

#endif /* KN_X86_DOT_ROWS_AVX2_H */
