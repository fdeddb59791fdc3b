/* kn_i8_int.h - kernels/ internal: the int8 product tables of each
 * variant (kn_i8.h) and the one epilogue they all share. */
#ifndef KN_I8_INT_H
#define KN_I8_INT_H

#include <math.h>
#include <stdbool.h>

#include "kernels/kn_i8.h"

extern const struct kn_i8_ops kn__i8_ref;	 /* ref/i8.c */
extern const struct kn_i8_ops kn__i8_avx2;	 /* x86/i8_avx2.c */
extern const struct kn_i8_ops kn__i8_avxvnni;	 /* x86/i8_avxvnni.c */
extern const struct kn_i8_ops kn__i8_avx512bw;	 /* x86/i8_avx512.c */
extern const struct kn_i8_ops kn__i8_avx512vnni; /* x86/i8_avx512.c */

/* The float epilogue of every variant: the scale product first (one
 * rounding), then one fused multiply-add, as the SIMD paths do with
 * vmulps and vfmadd. */
static inline float kn__i8_epilogue(int32_t acc, float xs, float ws, float b)
{
	float s = xs * ws;
	return fmaf((float)acc, s, b);
}

extern const struct kn_i8_ops kn__i8_avx2_x7;	 /* x86/i8_avx2.c */

/* The reference quantizer and product (ref/i8.c) at any qmax: the
 * quantize_rows of kn_i8.h with codes in [-qmax, qmax]; the product reads
 * plain codes whatever the range. */
void kn__i8_quantize_rows_ref(const float *restrict x, size_t ldx, size_t M, size_t K,
			      int8_t *restrict q, size_t ldq, float *restrict scale, int qmax);
void kn__i8_gemm_ref(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		     const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
		     float *restrict y, size_t ldy);

/* The AVX2 activation quantizer (x86/i8_avx2.c), codes in [-127, 127],
 * shared by the AVX-VNNI and AVX-512 tables (a row is too short for zmm to
 * pay) and used for every weight (kn_i8_quantize_w). */
void kn__i8_quantize_rows_avx2(const float *restrict x, size_t ldx, size_t M, size_t K,
			       int8_t *restrict q, size_t ldq, float *restrict scale);

/* Whether the CPU runs AVX-VNNI (the VEX-encoded ymm vpdpbusd; CPUID leaf
 * 7 subleaf 1, EAX bit 4); detected once in kn_init.c. */
bool kn__has_avxvnni(void);

#endif /* KN_I8_INT_H */
