/* bench/kernels/kp_peak_avx512bf16.c - the AVX512-BF16 peak loop of
 * kp_int.h (built with -mavx512f -mavx512bf16; run only where the CPU has
 * it): vdpbf16ps on zmm, 24 chains (each adds 16 lanes x 2 bfloat16
 * products: 64 FLOPs).
 */
#include "kp_int.h"

void kp__dpbf16_zmm(long n)
{
	__asm__ volatile("vpxorq %%zmm24, %%zmm24, %%zmm24\n\t"
			 "vpxorq %%zmm25, %%zmm25, %%zmm25\n\t"
			 "1:\n\t"
			 ".rept 4\n\t"
			 ".irp r, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23\n\t"
			 "vdpbf16ps %%zmm25, %%zmm24, %%zmm\\r\n\t"
			 ".endr\n\t"
			 ".endr\n\t"
			 "dec %0\n\t"
			 "jnz 1b\n\t"
			 "vzeroupper"
			 : "+r"(n)
			 :
			 : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23",
			   "xmm24", "xmm25", "cc");
}
