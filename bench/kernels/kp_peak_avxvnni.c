/* bench/kernels/kp_peak_avxvnni.c - the AVX-VNNI peak loop of kp_int.h
 * (built with -mavxvnni; run only where CPUID says AVX-VNNI): vpdpbusd on
 * ymm in its VEX encoding, u8 x s8 groups of 4 into s32 in one
 * instruction, on 12 independent accumulators.
 */
#include "kp_int.h"

void kp__vnni_ymm(long n)
{
	__asm__ volatile("vpxor %%ymm12, %%ymm12, %%ymm12\n\t"
			 "vpxor %%ymm13, %%ymm13, %%ymm13\n\t"
			 "1:\n\t"
			 ".rept 8\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm0\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm1\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm2\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm3\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm4\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm5\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm6\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm7\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm8\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm9\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm10\n\t"
			 "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm11\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "cc");
}
