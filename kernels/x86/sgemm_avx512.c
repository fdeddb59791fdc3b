/* kernels/x86/sgemm_avx512.c - float32 matrix product for AVX-512F, the
 * contract of kn__sgemm in kernels/kn_int.h.
 *
 * Goto's layered blocking (K. Goto and R. van de Geijn, "Anatomy of
 * high-performance matrix multiplication", ACM TOMS 34(3), 2008; the BLIS
 * loop order): columns in blocks of NC, K in blocks of KC; each KC x NC
 * block of op(B) is packed once into panels of NR = 32 columns ([k][32],
 * zero-padded), then rows of A go through in blocks of MC (kept in L2)
 * while one panel stays in L1, MR = 12 rows at a time. A is read in place
 * (each broadcast is an embedded-broadcast operand of the FMA), so a big
 * A with few columns of B (attention's probabilities times V) costs no
 * packing.
 *
 * Every C element is the same chain of operations whatever M, N, the
 * tile it falls in or the thread that computes it: per KC block,
 * acc = fma(a[k], b[k], acc) for k in order from acc = 0, then
 * C = alpha * acc + beta * C (first block; beta 0 reads no C) or
 * C = alpha * acc + C (later blocks), each a single fma. ref/sgemm.c
 * computes exactly that, so the two agree bit for bit, and a row's result
 * never depends on the rows batched with it.
 */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kn_int.h"

#define MR 12
#define NR 32
#define MC 96
#define KC KN__SGEMM_KC
#define NC KN__SGEMM_NC

/* Pack op(B)[k0:k0+kc, j0:j0+nc] into ceil(nc/NR) panels of kc x NR,
 * columns past nc zeroed. */
static void pack_b(bool trans_b, const float *B, size_t ldb, size_t k0, size_t kc, size_t j0,
		   size_t nc, float *bp)
{
	for (size_t jp = 0; jp < nc; jp += NR) {
		size_t nr = nc - jp < NR ? nc - jp : NR;
		float *p = bp + jp * kc;
		if (!trans_b) {
			const float *b = B + k0 * ldb + j0 + jp;
			__mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
			__mmask16 m1 = (__mmask16)(nr <= 16 ? 0 : nr >= 32 ? 0xffff : (1u << (nr - 16)) - 1);
			for (size_t k = 0; k < kc; k++, b += ldb) {
				_mm512_storeu_ps(p + k * NR, _mm512_maskz_loadu_ps(m0, b));
				_mm512_storeu_ps(p + k * NR + 16, _mm512_maskz_loadu_ps(m1, b + 16));
			}
			continue;
		}
		/* op(B)[k][j] = B[j][k]: each column j is a contiguous row of B. */
		if (nr < NR)
			memset(p, 0, kc * NR * sizeof(float));
		for (size_t j = 0; j < nr; j++) {
			const float *b = B + (j0 + jp + j) * ldb + k0;
			for (size_t k = 0; k < kc; k++)
				p[k * NR + j] = b[k];
		}
	}
}

/* acc[r] (2 vectors each) = sum_k a[r][k] * bp[k][0:32], rows < mr. */
static inline __attribute__((always_inline)) void
micro(int mr, size_t kc, const float *a, size_t lda, const float *bp, __m512 acc[MR][2])
{
	/* The row loops unroll whole (mr is a constant at every call), so
	 * the 2 x mr accumulators live in registers at -O2 as at -O3. */
#pragma GCC unroll 12
	for (int r = 0; r < mr; r++)
		acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	for (size_t k = 0; k < kc; k++) {
		__m512 b0 = _mm512_loadu_ps(bp + k * NR);
		__m512 b1 = _mm512_loadu_ps(bp + k * NR + 16);
#pragma GCC unroll 12
		for (int r = 0; r < mr; r++) {
			__m512 av = _mm512_set1_ps(a[(size_t)r * lda + k]);
			acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
		}
	}
}

/* C tile update of the contract above; nr columns of 32 are written. */
static inline __attribute__((always_inline)) void
store(int mr, size_t nr, __m512 acc[MR][2], float *C, size_t ldc, float alpha, float beta,
      bool first)
{
	__mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffff : (1u << nr) - 1);
	__mmask16 m1 = (__mmask16)(nr <= 16 ? 0 : nr >= 32 ? 0xffff : (1u << (nr - 16)) - 1);
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
	for (int r = 0; r < mr; r++) {
		float *c = C + (size_t)r * ldc;
		__m512 c0, c1;
		if (first && beta == 0.0f) {
			c0 = _mm512_mul_ps(va, acc[r][0]);
			c1 = _mm512_mul_ps(va, acc[r][1]);
		} else {
			c0 = _mm512_maskz_loadu_ps(m0, c);
			c1 = _mm512_maskz_loadu_ps(m1, c + 16);
			if (first) {
				c0 = _mm512_mul_ps(vb, c0);
				c1 = _mm512_mul_ps(vb, c1);
			}
			c0 = _mm512_fmadd_ps(va, acc[r][0], c0);
			c1 = _mm512_fmadd_ps(va, acc[r][1], c1);
		}
		_mm512_mask_storeu_ps(c, m0, c0);
		_mm512_mask_storeu_ps(c + 16, m1, c1);
	}
}

#define TILE(rows)                                                      \
	do {                                                            \
		__m512 acc[MR][2];                                      \
		micro((rows), kc, a, lda, bp, acc);                     \
		store((rows), nr, acc, c, ldc, alpha, beta, first);    \
	} while (0)

/* One panel of kc x NR against rows [0, mr) of a (mr <= MR). */
static void tile(size_t mr, size_t nr, size_t kc, const float *a, size_t lda, const float *bp,
		 float *c, size_t ldc, float alpha, float beta, bool first)
{
	switch (mr) {
	case 12: TILE(12); break;
	case 11: TILE(11); break;
	case 10: TILE(10); break;
	case 9: TILE(9); break;
	case 8: TILE(8); break;
	case 7: TILE(7); break;
	case 6: TILE(6); break;
	case 5: TILE(5); break;
	case 4: TILE(4); break;
	case 3: TILE(3); break;
	case 2: TILE(2); break;
	default: TILE(1); break;
	}
}

/* One row of A against op(B) = B[K,N] read in place, DIRECT_NR columns
 * per pass (a decode step's p v: packing B for one row would copy it all
 * to read it once). Each element's chain is the packed path's: per KC
 * block acc = fma(a[k], b[k], acc) from 0, then the same C update. */
#define DIRECT_NR 64
static void row_direct(size_t N, size_t K, float alpha, const float *a, const float *B,
		       size_t ldb, float beta, float *c)
{
	const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	for (size_t j = 0; j < N; j += DIRECT_NR) {
		__mmask16 m[4];
		for (int v = 0; v < 4; v++) {
			size_t lo = j + 16 * (size_t)v, n = lo >= N ? 0 : N - lo;
			m[v] = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
		}
		for (size_t k0 = 0; k0 < K; k0 += KC) {
			size_t kc = K - k0 < KC ? K - k0 : KC;
			__m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(),
					  _mm512_setzero_ps(), _mm512_setzero_ps() };
			const float *b = B + k0 * ldb + j;
			for (size_t k = 0; k < kc; k++, b += ldb) {
				__m512 ak = _mm512_set1_ps(a[k0 + k]);
#pragma GCC unroll 4
				for (int v = 0; v < 4; v++)
					acc[v] = _mm512_fmadd_ps(
						ak, _mm512_maskz_loadu_ps(m[v], b + 16 * v), acc[v]);
			}
#pragma GCC unroll 4
			for (int v = 0; v < 4; v++) {
				float *cv = c + j + 16 * (size_t)v;
				__m512 cc;
				if (k0 == 0 && beta == 0.0f) {
					cc = _mm512_mul_ps(va, acc[v]);
				} else {
					cc = _mm512_maskz_loadu_ps(m[v], cv);
					if (k0 == 0)
						cc = _mm512_mul_ps(vb, cc);
					cc = _mm512_fmadd_ps(va, acc[v], cc);
				}
				_mm512_mask_storeu_ps(cv, m[v], cc);
			}
		}
	}
}

void kn__sgemm_avx512(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
		      float *pack)
{
	if (!trans_b && M <= KN__SGEMM_DIRECT_M) {
		for (size_t i = 0; i < M; i++)
			row_direct(N, K, alpha, A + i * lda, B, ldb, beta, C + i * ldc);
		return;
	}
	for (size_t j0 = 0; j0 < N; j0 += NC) {
		size_t nc = N - j0 < NC ? N - j0 : NC;
		for (size_t k0 = 0; k0 < K; k0 += KC) {
			size_t kc = K - k0 < KC ? K - k0 : KC;
			bool first = k0 == 0;
			pack_b(trans_b, B, ldb, k0, kc, j0, nc, pack);
			for (size_t i0 = 0; i0 < M; i0 += MC) {
				size_t mc = M - i0 < MC ? M - i0 : MC;
				for (size_t jp = 0; jp < nc; jp += NR) {
					size_t nr = nc - jp < NR ? nc - jp : NR;
					const float *bp = pack + jp * kc;
					for (size_t i = i0; i < i0 + mc; i += MR) {
						size_t mr = i0 + mc - i < MR ? i0 + mc - i : MR;
						tile(mr, nr, kc, A + i * lda + k0, lda, bp,
						     C + i * ldc + j0 + jp, ldc, alpha, beta,
						     first);
					}
				}
			}
		}
	}
}
