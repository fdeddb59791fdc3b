/* kernels/x86/bf16_dp_avx512.c - the bfloat16 product of kn_bf16.h with
 * AVX512-BF16's VDPBF16PS, for CPUs that have it but no AMX (AMD Zen 4 and
 * Zen 5, Intel Cooper Lake). Intel SDM vol. 2, VDPBF16PS: each float32
 * lane of the destination adds the two products of one pair of bfloat16
 * of each source, rounding to nearest even after each add, denormal inputs
 * and results flushed to zero (as AMX's TDPBF16PS does).
 *
 * It reads the same operands as the AMX kernel: W packed by kn_bf16_pack
 * (per 16 columns, the k-pairs one after another, 16 columns x 2 k-values
 * = one zmm per pair), x as 32-row blocks of bfloat16 (kn__bf16_rows_avx512
 * or the caller's). A micro-tile is 8 rows x 32 columns: 16 accumulators;
 * each k-pair loads two zmm of W and broadcasts one 32-bit pair per row.
 * The pairs of W for 32 columns (64 bytes each, K/2 of them: 24 KB at
 * K = 384) stay in L1 while the four 8-row tiles of a block go by.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_bf16_int.h"

/* The pair (k = 2q, 2q + 1) of the bfloat16 row a, broadcast. */
static inline __m512bh kn_pair(const uint16_t *a, size_t q)
{
	uint32_t v;
	memcpy(&v, a + 2 * q, sizeof(v));
	return (__m512bh)_mm512_set1_epi32((int)v);
}

/* 16 columns of y row yr from acc (the first nc), + bias. */
static inline void kn_store(float *yr, __m512 acc, const float *bias, size_t nc)
{
	__mmask16 m = nc >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nc) - 1);
	if (bias)
		acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, bias));
	_mm512_mask_storeu_ps(yr, m, acc);
}

/* y rows [0, rows) (rows <= 8), columns [0, nc) (nc <= 16 * NB) = the 8
 * bfloat16 rows at a (lda apart; all 8 are read) times np pairs of the NB
 * packed 16-column panels at b (panel j at b + j * pstride), + bias. */
#define KN_DP_TILE(NAME, NB)                                                               \
	static void NAME(const uint16_t *a, size_t lda, const uint16_t *b, size_t pstride,  \
			 size_t np, float *y, size_t ldy, size_t rows, size_t nc,           \
			 const float *bias)                                                 \
	{                                                                                  \
		__m512 acc[8][NB];                                                         \
		for (int r = 0; r < 8; r++)                                                \
			for (int j = 0; j < NB; j++)                                       \
				acc[r][j] = _mm512_setzero_ps();                           \
		for (size_t q = 0; q < np; q++) {                                          \
			__m512bh w[NB];                                                    \
			for (int j = 0; j < NB; j++)                                       \
				w[j] = (__m512bh)_mm512_loadu_si512(b + j * pstride +      \
								    q * 32);               \
			for (int r = 0; r < 8; r++) {                                      \
				__m512bh p = kn_pair(a + r * lda, q);                      \
				for (int j = 0; j < NB; j++)                               \
					acc[r][j] = _mm512_dpbf16_ps(acc[r][j], p, w[j]);  \
			}                                                                  \
		}                                                                          \
		for (size_t r = 0; r < rows; r++)                                          \
			for (int j = 0; j < NB && (size_t)j * 16 < nc; j++)                \
				kn_store(y + r * ldy + j * 16, acc[r][j],                  \
					 bias ? bias + j * 16 : NULL, nc - (size_t)j * 16); \
	}

#if defined(__GNUC__) && !defined(__clang__) /* clang unrolls these constant loops itself */
#pragma GCC push_options
#pragma GCC optimize("unroll-loops")
#endif
KN_DP_TILE(kn_dp_tile2, 2)
KN_DP_TILE(kn_dp_tile1, 1)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* y rows [m0, m0 + 32) below M = the 32-row bfloat16 block a (lda apart)
 * times the packed W (kb blocks of 32 k-values per 16 columns), + bias. */
static void kn_dp_rows(size_t m0, size_t M, size_t N, size_t kb, const uint16_t *a, size_t lda,
		       const uint16_t *Wp, const float *bias, float *y, size_t ldy)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, pstride = kb * KN__BF16_NB * KN__BF16_KB;
	size_t np = kb * KN__BF16_KB / 2, rows = M - m0 < KN__BF16_TM ? M - m0 : KN__BF16_TM;
	for (size_t j = 0; j < nb; j += 2) {
		size_t n0 = j * KN__BF16_NB, nc = N - n0;
		const uint16_t *b = Wp + j * pstride;
		const float *bj = bias ? bias + n0 : NULL;
		for (size_t r0 = 0; r0 < rows; r0 += 8) {
			size_t nr = rows - r0 < 8 ? rows - r0 : 8;
			float *yt = y + (m0 + r0) * ldy + n0;
			if (j + 2 <= nb)
				kn_dp_tile2(a + r0 * lda, lda, b, pstride, np, yt, ldy, nr,
					    nc < 32 ? nc : 32, bj);
			else
				kn_dp_tile1(a + r0 * lda, lda, b, pstride, np, yt, ldy, nr, nc, bj);
		}
	}
}

void kn__bf16_linear_dp(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			const uint16_t *Wp, const float *bias, float *y, size_t ldy,
			uint16_t *abuf)
{
	size_t kb = (K + KN__BF16_KB - 1) / KN__BF16_KB, kp = kb * KN__BF16_KB;
	for (size_t m0 = 0; m0 < M; m0 += KN__BF16_TM) {
		size_t rows = M - m0 < KN__BF16_TM ? M - m0 : KN__BF16_TM;
		kn__bf16_rows_avx512(x + m0 * ldx, ldx, rows, K, kp, abuf);
		kn_dp_rows(m0, M, N, kb, abuf, kp, Wp, bias, y, ldy);
	}
}

void kn__bf16_linear_dp_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			    const uint16_t *Wp, const float *bias, float *y, size_t ldy)
{
	size_t kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	for (size_t m0 = 0; m0 < M; m0 += KN__BF16_TM)
		kn_dp_rows(m0, M, N, kb, xb + m0 * ldxb, ldxb, Wp, bias, y, ldy);
}
