/* bench/kernels/kp_peak_avx512.c - the AVX-512 peak loops of kp_int.h
 * (built with -mavx512f -mavx512bw -mavx512vnni; run only where the CPU
 * has them): FMA on zmm (24 chains), the AVX-512BW int8 dot step
 * (vpmaddubsw + vpmaddwd + vpaddd, 12 chains) and AVX512-VNNI vpdpbusd
 * (24 chains).
 */
#include "kp_int.h"

void kp__fma_zmm(long n)
{
	__asm__ volatile("vpxorq %%zmm0, %%zmm0, %%zmm0\n\t"
			 "vmovaps %%zmm0, %%zmm1\n\t"
			 "vmovaps %%zmm0, %%zmm2\n\t"
			 "vmovaps %%zmm0, %%zmm3\n\t"
			 "vmovaps %%zmm0, %%zmm4\n\t"
			 "vmovaps %%zmm0, %%zmm5\n\t"
			 "vmovaps %%zmm0, %%zmm6\n\t"
			 "vmovaps %%zmm0, %%zmm7\n\t"
			 "vmovaps %%zmm0, %%zmm8\n\t"
			 "vmovaps %%zmm0, %%zmm9\n\t"
			 "vmovaps %%zmm0, %%zmm10\n\t"
			 "vmovaps %%zmm0, %%zmm11\n\t"
			 "vmovaps %%zmm0, %%zmm12\n\t"
			 "vmovaps %%zmm0, %%zmm13\n\t"
			 "vmovaps %%zmm0, %%zmm14\n\t"
			 "vmovaps %%zmm0, %%zmm15\n\t"
			 "vmovaps %%zmm0, %%zmm16\n\t"
			 "vmovaps %%zmm0, %%zmm17\n\t"
			 "vmovaps %%zmm0, %%zmm18\n\t"
			 "vmovaps %%zmm0, %%zmm19\n\t"
			 "vmovaps %%zmm0, %%zmm20\n\t"
			 "vmovaps %%zmm0, %%zmm21\n\t"
			 "vmovaps %%zmm0, %%zmm22\n\t"
			 "vmovaps %%zmm0, %%zmm23\n\t"
			 "vmovaps %%zmm0, %%zmm24\n\t"
			 "vmovaps %%zmm0, %%zmm25\n\t"
			 "1:\n\t"
			 ".rept 4\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm0\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm1\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm2\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm3\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm4\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm5\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm6\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm7\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm8\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm9\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm10\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm11\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm12\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm13\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm14\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm15\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm16\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm17\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm18\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm19\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm20\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm21\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm22\n\t"
			 "vfmadd231ps %%zmm24, %%zmm25, %%zmm23\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
			   "xmm24", "xmm25", "xmm26", "cc");
}

void kp__i8_zmm(long n)
{
	__asm__ volatile("vpxorq %%zmm24, %%zmm24, %%zmm24\n\t"
			 "vpxorq %%zmm25, %%zmm25, %%zmm25\n\t"
			 "vpxorq %%zmm26, %%zmm26, %%zmm26\n\t"
			 "1:\n\t"
			 ".rept 4\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm12\n\t"
			 "vpmaddwd %%zmm26, %%zmm12, %%zmm12\n\t"
			 "vpaddd %%zmm12, %%zmm0, %%zmm0\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm13\n\t"
			 "vpmaddwd %%zmm26, %%zmm13, %%zmm13\n\t"
			 "vpaddd %%zmm13, %%zmm1, %%zmm1\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm14\n\t"
			 "vpmaddwd %%zmm26, %%zmm14, %%zmm14\n\t"
			 "vpaddd %%zmm14, %%zmm2, %%zmm2\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm15\n\t"
			 "vpmaddwd %%zmm26, %%zmm15, %%zmm15\n\t"
			 "vpaddd %%zmm15, %%zmm3, %%zmm3\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm16\n\t"
			 "vpmaddwd %%zmm26, %%zmm16, %%zmm16\n\t"
			 "vpaddd %%zmm16, %%zmm4, %%zmm4\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm17\n\t"
			 "vpmaddwd %%zmm26, %%zmm17, %%zmm17\n\t"
			 "vpaddd %%zmm17, %%zmm5, %%zmm5\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm18\n\t"
			 "vpmaddwd %%zmm26, %%zmm18, %%zmm18\n\t"
			 "vpaddd %%zmm18, %%zmm6, %%zmm6\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm19\n\t"
			 "vpmaddwd %%zmm26, %%zmm19, %%zmm19\n\t"
			 "vpaddd %%zmm19, %%zmm7, %%zmm7\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm20\n\t"
			 "vpmaddwd %%zmm26, %%zmm20, %%zmm20\n\t"
			 "vpaddd %%zmm20, %%zmm8, %%zmm8\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm21\n\t"
			 "vpmaddwd %%zmm26, %%zmm21, %%zmm21\n\t"
			 "vpaddd %%zmm21, %%zmm9, %%zmm9\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm22\n\t"
			 "vpmaddwd %%zmm26, %%zmm22, %%zmm22\n\t"
			 "vpaddd %%zmm22, %%zmm10, %%zmm10\n\t"
			 "vpmaddubsw %%zmm25, %%zmm24, %%zmm23\n\t"
			 "vpmaddwd %%zmm26, %%zmm23, %%zmm23\n\t"
			 "vpaddd %%zmm23, %%zmm11, %%zmm11\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
			   "xmm24", "xmm25", "xmm26", "cc");
}

void kp__vnni_zmm(long n)
{
	__asm__ volatile("vpxorq %%zmm24, %%zmm24, %%zmm24\n\t"
			 "vpxorq %%zmm25, %%zmm25, %%zmm25\n\t"
			 "1:\n\t"
			 ".rept 4\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm0\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm1\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm2\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm3\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm4\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm5\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm6\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm7\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm8\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm9\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm10\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm11\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm12\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm13\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm14\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm15\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm16\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm17\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm18\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm19\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm20\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm21\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm22\n\t"
			 "vpdpbusd %%zmm25, %%zmm24, %%zmm23\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
			   "xmm24", "xmm25", "xmm26", "cc");
}
