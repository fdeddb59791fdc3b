/* kernels/x86/bf16_pack_avx512.c - the AVX-512 (F, BW) conversions of
 * kn_bf16.h: float32 rows to bfloat16 (plain, transposed, and the 32-row
 * blocks the products read) and the packers of W into the tile layout,
 * each bit for bit the scalar kn_f32_to_bf16 of every element (the
 * rounding is x86/bf16_avx512.h's kn__rne_hi512). Shared by the AMX and
 * the AVX512-BF16 products; needs AVX-512F/BW only.
 */
#include <immintrin.h>
#include <string.h>

#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"
#include "kernels/x86/bf16_avx512.h"

void kn__bf16_rows_avx512(const float *x, size_t ldx, size_t rows, size_t K, size_t kp,
			    uint16_t *a)
{
	for (size_t r = 0; r < KN__BF16_TM; r++) {
		uint16_t *dst = a + r * kp;
		size_t k = r < rows ? K : 0;
		if (r < rows)
			kn__bf16_from_f32_avx512(x + r * ldx, dst, K);
		memset(dst + k, 0, (kp - k) * sizeof(*dst));
	}
}

/* 16 floats at p (the first nv of them; the rest 0), as raw bits. */
static inline __m512i kn_load16(const float *p, size_t nv)
{
	__mmask16 m = nv >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nv) - 1);
	return _mm512_castps_si512(_mm512_maskz_loadu_ps(m, p));
}

void kn__bf16_from_f32_avx512(const float *x, uint16_t *y, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
		_mm256_storeu_si256((__m256i *)(y + i), kn__bf16x16(u));
	}
	for (; i < n; i++)
		y[i] = kn_f32_to_bf16(x[i]);
}

/* Blocks of 16 x 16: 16 rows of x converted (kn__bf16x16) into a small
 * buffer, then written out column by column. */
void kn__bf16_from_f32_t_avx512(const float *x, size_t ldx, size_t rows, size_t cols,
				uint16_t *y, size_t ldy)
{
	uint16_t t[16][16];
	for (size_t r0 = 0; r0 < rows; r0 += 16) {
		size_t nr = rows - r0 < 16 ? rows - r0 : 16;
		for (size_t c0 = 0; c0 < cols; c0 += 16) {
			size_t nc = cols - c0 < 16 ? cols - c0 : 16;
			for (size_t i = 0; i < nr; i++) {
				__m512i u = kn_load16(x + (r0 + i) * ldx + c0, nc);
				_mm256_storeu_si256((__m256i *)t[i], kn__bf16x16(u));
			}
			for (size_t c = 0; c < nc; c++)
				for (size_t i = 0; i < nr; i++)
					y[(c0 + c) * ldy + r0 + i] = t[i][c];
		}
	}
}

void kn__bf16_pack_cols_avx512(const float *B, size_t ldb, size_t N, size_t K, uint16_t *out)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	for (size_t i = 0; i < nb; i++) {
		size_t n0 = i * KN__BF16_NB, nv = N - n0 < 16 ? N - n0 : 16;
		for (size_t j = 0; j < kb; j++) {
			uint16_t *blk = out + (i * kb + j) * KN__BF16_NB * KN__BF16_KB;
			for (size_t pair = 0; pair < KN__BF16_KB / 2; pair++) {
				size_t k = j * KN__BF16_KB + 2 * pair;
				__m512i u0 = k < K ? kn_load16(B + k * ldb + n0, nv) : _mm512_setzero_si512();
				__m512i u1 = k + 1 < K ? kn_load16(B + (k + 1) * ldb + n0, nv)
						       : _mm512_setzero_si512();
				__m512i v = _mm512_or_si512(_mm512_srli_epi32(kn__rne_hi512(u0), 16),
							    _mm512_and_si512(kn__rne_hi512(u1), hi));
				_mm512_storeu_si512(blk + pair * 32, v);
			}
		}
	}
}

void kn__bf16_pack_rows_avx512(const float *W, size_t ldw, size_t N, size_t K, uint16_t *out)
{
	size_t nb = (N + KN__BF16_NB - 1) / KN__BF16_NB, kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	/* the high halves of lanes 0..15 of a, then of b: 32 bfloat16 in order */
	const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37,
					     35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9,
					     7, 5, 3, 1);
	uint32_t t[16][16];
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < kb; j++) {
			size_t k0 = j * KN__BF16_KB, kv = K - k0 < 32 ? K - k0 : 32;
			for (size_t c = 0; c < KN__BF16_NB; c++) {
				size_t n = i * KN__BF16_NB + c;
				__m512i v = _mm512_setzero_si512();
				if (n < N) {
					const float *src = W + n * ldw + k0;
					__m512i a = kn__rne_hi512(kn_load16(src, kv));
					__m512i b = kv > 16 ? kn__rne_hi512(kn_load16(src + 16, kv - 16))
							    : _mm512_setzero_si512();
					v = _mm512_permutex2var_epi16(a, odd, b);
				}
				_mm512_storeu_si512(t[c], v); /* t[c][pair]: k-values 2 pair, +1 */
			}
			uint32_t *blk = (uint32_t *)(out + (i * kb + j) * KN__BF16_NB * KN__BF16_KB);
			for (size_t pair = 0; pair < 16; pair++)
				for (size_t c = 0; c < 16; c++)
					blk[pair * 16 + c] = t[c][pair];
		}
}
