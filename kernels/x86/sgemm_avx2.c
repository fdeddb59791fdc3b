/* kernels/x86/sgemm_avx2.c - float32 matrix product for AVX2 + FMA, the
 * contract of kn__sgemm in kernels/kn_int.h.
 *
 * The same layered blocking as x86/sgemm_avx512.c (K. Goto and R. van de
 * Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS
 * 34(3), 2008; the BLIS loop order), sized for 16 ymm registers: each
 * KC x NC block of op(B) is packed once into panels of NR = 16 columns
 * ([k][16], zero-padded), rows of A go through in blocks of MC, MR = 6
 * rows at a time against one panel: 6 x 2 accumulators, 2 B vectors and
 * one broadcast of A make 15 registers, and each k step issues 12 FMAs
 * for 8 loads (the BLIS Haswell shape). A is read in place, one
 * vbroadcastss per row and k.
 *
 * Every C element is the same chain of operations as in the AVX-512
 * kernel and ref/sgemm.c: per KC block, acc = fma(a[k], b[k], acc) for k
 * in order from acc = 0, then C = alpha * acc (first block, beta 0: C is
 * not read), fma(alpha, acc, beta * C) (first block) or fma(alpha, acc, C)
 * (later blocks). So the three agree bit for bit.
 */
#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kn_int.h"

#define MR 6
#define NR 16
#define MC 96
#define KC KN__SGEMM_KC
#define NC KN__SGEMM_NC

/* Lane mask for the first n (0..8) of 8 floats, for maskload/maskstore. */
static inline __m256i lanes(size_t n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n),
				  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 x 8 transpose: rows r[0..7] (8 floats each) to columns. */
static inline void transpose8(__m256 r[8])
{
	__m256 t[8];
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	__m256 u[8];
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
		r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
	}
}

/* One panel from B[N,K] (trans_b): p[k][j] = b[j * ldb + k] for j < nr,
 * zero for nr <= j < NR; whole 8 x 8 blocks through transpose8. */
static void pack_bt(const float *b, size_t ldb, size_t kc, size_t nr, float *p)
{
	if (nr < NR)
		memset(p, 0, kc * NR * sizeof(float));
	size_t j8 = nr & ~(size_t)7, k8 = kc & ~(size_t)7;
	for (size_t j = 0; j < j8; j += 8)
		for (size_t k = 0; k < k8; k += 8) {
			__m256 r[8];
			for (int i = 0; i < 8; i++)
				r[i] = _mm256_loadu_ps(b + (j + i) * ldb + k);
			transpose8(r);
			for (int i = 0; i < 8; i++)
				_mm256_storeu_ps(p + (k + i) * NR + j, r[i]);
		}
	for (size_t j = 0; j < nr; j++)
		for (size_t k = j < j8 ? k8 : 0; k < kc; k++)
			p[k * NR + j] = b[j * ldb + k];
}

/* Pack op(B)[k0:k0+kc, j0:j0+nc] into ceil(nc/NR) panels of kc x NR,
 * columns past nc zeroed. */
static void pack_b(bool trans_b, const float *B, size_t ldb, size_t k0, size_t kc, size_t j0,
		   size_t nc, float *bp)
{
	for (size_t jp = 0; jp < nc; jp += NR) {
		size_t nr = nc - jp < NR ? nc - jp : NR;
		float *p = bp + jp * kc;
		if (trans_b) {
			/* op(B)[k][j] = B[j][k]: each column j is a row of B */
			pack_bt(B + (j0 + jp) * ldb + k0, ldb, kc, nr, p);
			continue;
		}
		const float *b = B + k0 * ldb + j0 + jp;
		__m256i m0 = lanes(nr >= 8 ? 8 : nr), m1 = lanes(nr <= 8 ? 0 : nr - 8);
		for (size_t k = 0; k < kc; k++, b += ldb) {
			_mm256_storeu_ps(p + k * NR, _mm256_maskload_ps(b, m0));
			_mm256_storeu_ps(p + k * NR + 8, _mm256_maskload_ps(b + 8, m1));
		}
	}
}

/* acc[r] (2 vectors each) = sum_k a[r][k] * bp[k][0:16], rows < mr. */
static inline __attribute__((always_inline)) void
micro(int mr, size_t kc, const float *a, size_t lda, const float *bp, __m256 acc[MR][2])
{
#pragma GCC unroll 6
	for (int r = 0; r < mr; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
	for (size_t k = 0; k < kc; k++) {
		__m256 b0 = _mm256_loadu_ps(bp + k * NR);
		__m256 b1 = _mm256_loadu_ps(bp + k * NR + 8);
#pragma GCC unroll 6
		for (int r = 0; r < mr; r++) {
			__m256 av = _mm256_broadcast_ss(a + (size_t)r * lda + k);
			acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
			acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
		}
	}
}

/* C tile update of the contract above; nr columns of 16 are written. */
static inline __attribute__((always_inline)) void
store(int mr, size_t nr, __m256 acc[MR][2], float *C, size_t ldc, float alpha, float beta,
      bool first)
{
	__m256i m0 = lanes(nr >= 8 ? 8 : nr), m1 = lanes(nr <= 8 ? 0 : nr - 8);
	__m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
	for (int r = 0; r < mr; r++) {
		float *c = C + (size_t)r * ldc;
		__m256 c0, c1;
		if (first && beta == 0.0f) {
			c0 = _mm256_mul_ps(va, acc[r][0]);
			c1 = _mm256_mul_ps(va, acc[r][1]);
		} else {
			if (nr == NR) {
				c0 = _mm256_loadu_ps(c);
				c1 = _mm256_loadu_ps(c + 8);
			} else {
				c0 = _mm256_maskload_ps(c, m0);
				c1 = _mm256_maskload_ps(c + 8, m1);
			}
			if (first) {
				c0 = _mm256_mul_ps(vb, c0);
				c1 = _mm256_mul_ps(vb, c1);
			}
			c0 = _mm256_fmadd_ps(va, acc[r][0], c0);
			c1 = _mm256_fmadd_ps(va, acc[r][1], c1);
		}
		if (nr == NR) {
			_mm256_storeu_ps(c, c0);
			_mm256_storeu_ps(c + 8, c1);
		} else {
			_mm256_maskstore_ps(c, m0, c0);
			_mm256_maskstore_ps(c + 8, m1, c1);
		}
	}
}

/* The C tile's lines (a row of 16 floats spans at most 2), fetched while
 * the micro-kernel runs: C is not in L1 (often not in L2) by then. */
#define TILE(rows)                                                      \
	do {                                                            \
		__m256 acc[MR][2];                                      \
		for (int r_ = 0; r_ < (rows); r_++) {                   \
			_mm_prefetch((const char *)(c + r_ * ldc), _MM_HINT_T0);      \
			_mm_prefetch((const char *)(c + r_ * ldc + 15), _MM_HINT_T0); \
		}                                                       \
		micro((rows), kc, a, lda, bp, acc);                     \
		store((rows), nr, acc, c, ldc, alpha, beta, first);    \
	} while (0)

/* One panel of kc x NR against rows [0, mr) of a (mr <= MR). */
static void tile(size_t mr, size_t nr, size_t kc, const float *a, size_t lda, const float *bp,
		 float *c, size_t ldc, float alpha, float beta, bool first)
{
	switch (mr) {
	case 6: TILE(6); break;
	case 5: TILE(5); break;
	case 4: TILE(4); break;
	case 3: TILE(3); break;
	case 2: TILE(2); break;
	default: TILE(1); break;
	}
}

/* One row of A against op(B) = B[K,N] read in place, DIRECT_NR columns
 * (8 accumulators) per pass, as in x86/sgemm_avx512.c: the same chain per
 * element as the packed path. */
#define DIRECT_NR 64
static void row_direct(size_t N, size_t K, float alpha, const float *a, const float *B,
		       size_t ldb, float beta, float *c)
{
	const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
	for (size_t j = 0; j < N; j += DIRECT_NR) {
		__m256i m[8];
		bool full = j + DIRECT_NR <= N;
		for (int v = 0; v < 8; v++) {
			size_t lo = j + 8 * (size_t)v;
			m[v] = lanes(lo >= N ? 0 : N - lo >= 8 ? 8 : N - lo);
		}
		for (size_t k0 = 0; k0 < K; k0 += KC) {
			size_t kc = K - k0 < KC ? K - k0 : KC;
			__m256 acc[8];
			for (int v = 0; v < 8; v++)
				acc[v] = _mm256_setzero_ps();
			const float *b = B + k0 * ldb + j;
			if (full) {
				for (size_t k = 0; k < kc; k++, b += ldb) {
					__m256 ak = _mm256_broadcast_ss(a + k0 + k);
#pragma GCC unroll 8
					for (int v = 0; v < 8; v++)
						acc[v] = _mm256_fmadd_ps(ak, _mm256_loadu_ps(b + 8 * v),
									 acc[v]);
				}
			} else {
				for (size_t k = 0; k < kc; k++, b += ldb) {
					__m256 ak = _mm256_broadcast_ss(a + k0 + k);
#pragma GCC unroll 8
					for (int v = 0; v < 8; v++)
						acc[v] = _mm256_fmadd_ps(
							ak, _mm256_maskload_ps(b + 8 * v, m[v]), acc[v]);
				}
			}
#pragma GCC unroll 8
			for (int v = 0; v < 8; v++) {
				float *cv = c + j + 8 * (size_t)v;
				__m256 cc;
				if (k0 == 0 && beta == 0.0f) {
					cc = _mm256_mul_ps(va, acc[v]);
				} else {
					cc = _mm256_maskload_ps(cv, m[v]);
					if (k0 == 0)
						cc = _mm256_mul_ps(vb, cc);
					cc = _mm256_fmadd_ps(va, acc[v], cc);
				}
				_mm256_maskstore_ps(cv, m[v], cc);
			}
		}
	}
}

void kn__sgemm_avx2(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
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
