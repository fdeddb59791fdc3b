/* bench/kernels/kp_peak_avx2.c - the AVX2 peak loops of kp_int.h and the
 * read-bandwidth loop (built with -mavx2 -mfma). Each loop body is a
 * block of independent instructions repeated with .rept: enough chains
 * that the instruction's latency (FMA 4 cycles) is hidden behind its
 * throughput, so the time is the ports' limit.
 */
#include <immintrin.h>

#include "kp_int.h"

void kp__add_chain(long n)
{
	unsigned long x = 1, y = 3;
	__asm__ volatile("1:\n\t"
			 ".rept 100\n\t"
			 "add %2, %1\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b"
			 : "+r"(n), "+r"(x)
			 : "r"(y)
			 : "cc");
}

void kp__fma_ymm(long n)
{
	__asm__ volatile("vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
			 "vmovaps %%ymm0, %%ymm1\n\t"
			 "vmovaps %%ymm0, %%ymm2\n\t"
			 "vmovaps %%ymm0, %%ymm3\n\t"
			 "vmovaps %%ymm0, %%ymm4\n\t"
			 "vmovaps %%ymm0, %%ymm5\n\t"
			 "vmovaps %%ymm0, %%ymm6\n\t"
			 "vmovaps %%ymm0, %%ymm7\n\t"
			 "vmovaps %%ymm0, %%ymm8\n\t"
			 "vmovaps %%ymm0, %%ymm9\n\t"
			 "vmovaps %%ymm0, %%ymm10\n\t"
			 "vmovaps %%ymm0, %%ymm11\n\t"
			 "vmovaps %%ymm0, %%ymm12\n\t"
			 "vmovaps %%ymm0, %%ymm13\n\t"
			 "1:\n\t"
			 ".rept 8\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\t"
			 "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "cc");
}

void kp__i8_ymm(long n)
{
	/* u8 x s8 pairs to s16 (vpmaddubsw), pairs of s16 to s32 against ones
	 * (vpmaddwd), then into the s32 accumulator: the AVX2 int8 dot step. */
	__asm__ volatile("vpxor %%ymm12, %%ymm12, %%ymm12\n\t"
			 "vpxor %%ymm13, %%ymm13, %%ymm13\n\t"
			 "vpxor %%ymm14, %%ymm14, %%ymm14\n\t"
			 "1:\n\t"
			 ".rept 8\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm6\n\t"
			 "vpmaddwd %%ymm14, %%ymm6, %%ymm6\n\t"
			 "vpaddd %%ymm6, %%ymm0, %%ymm0\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm7\n\t"
			 "vpmaddwd %%ymm14, %%ymm7, %%ymm7\n\t"
			 "vpaddd %%ymm7, %%ymm1, %%ymm1\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm8\n\t"
			 "vpmaddwd %%ymm14, %%ymm8, %%ymm8\n\t"
			 "vpaddd %%ymm8, %%ymm2, %%ymm2\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm9\n\t"
			 "vpmaddwd %%ymm14, %%ymm9, %%ymm9\n\t"
			 "vpaddd %%ymm9, %%ymm3, %%ymm3\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm10\n\t"
			 "vpmaddwd %%ymm14, %%ymm10, %%ymm10\n\t"
			 "vpaddd %%ymm10, %%ymm4, %%ymm4\n\t"
			 "vpmaddubsw %%ymm13, %%ymm12, %%ymm11\n\t"
			 "vpmaddwd %%ymm14, %%ymm11, %%ymm11\n\t"
			 "vpaddd %%ymm11, %%ymm5, %%ymm5\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "cc");
}

uint32_t kp__read_ymm(const void *buf, size_t size_bytes)
{
	const __m256i *p = buf, *end = p + size_bytes / sizeof(__m256i);
	__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
	for (; p < end; p += 8) {
		s0 = _mm256_add_epi32(s0, _mm256_load_si256(p));
		s1 = _mm256_add_epi32(s1, _mm256_load_si256(p + 1));
		s2 = _mm256_add_epi32(s2, _mm256_load_si256(p + 2));
		s3 = _mm256_add_epi32(s3, _mm256_load_si256(p + 3));
		s0 = _mm256_add_epi32(s0, _mm256_load_si256(p + 4));
		s1 = _mm256_add_epi32(s1, _mm256_load_si256(p + 5));
		s2 = _mm256_add_epi32(s2, _mm256_load_si256(p + 6));
		s3 = _mm256_add_epi32(s3, _mm256_load_si256(p + 7));
	}
	__m256i s = _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
	__m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
	return (uint32_t)_mm_cvtsi128_si32(h);
}
