/* kernels/x86/bf16_avx512.h - float32 to bfloat16 rounding for AVX-512F,
 * shared by x86/bf16_amx.c (the packers) and x86/ops_avx512.c (softmax
 * into bfloat16). Not a public header; include only from files built with
 * -mavx512f. */
#ifndef KN_BF16_AVX512_H
#define KN_BF16_AVX512_H

#include <immintrin.h>

/* Each lane of u (float32 bits) rounded to bfloat16 in its high half:
 * nearest even, a NaN kept and made quiet - kn_half.h's kn_f32_to_bf16,
 * per lane. */
static inline __m512i kn__rne_hi512(__m512i u)
{
	const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
	__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(round, lsb));
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						_mm512_set1_epi32(0x7f800000));
	return _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
}

/* 16 float32 (as bits) to their 16 bfloat16, kn__rne_hi512's rounding. */
static inline __m256i kn__bf16x16(__m512i u)
{
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(kn__rne_hi512(u), 16));
}

#endif /* KN_BF16_AVX512_H */
