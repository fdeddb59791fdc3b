/* kn_int.h - kernels/ internal: the per-ISA kn_ops and kn_qops tables, the
 * quantized block geometry, and the shared numeric constants of the
 * vectorised erf/exp approximations.
 *
 * Each table is a const object defined in the one file that owns its ISA
 * (ref/ops.c, x86/ops_avx2.c, x86/ops_avx512.c); kn_init.c only points at
 * them after checking the CPU can run them. Nothing here is public API.
 */
#ifndef KN_INT_H
#define KN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_quant.h"

extern const struct kn_ops kn__ops_ref;	   /* ref/ops.c, any CPU */
extern const struct kn_ops kn__ops_avx2;   /* x86/ops_avx2.c, AVX2+FMA+F16C */
extern const struct kn_ops kn__ops_avx512; /* x86/ops_avx512.c, AVX-512F/BW/VL */

/* kn__argmax_finish - the SIMD argmax's last steps (kn.h argmax): of
 * `lanes` lanes' maxima bv and their first indices bx (lane 0 never NaN),
 * the largest, the lowest index among equals; then the scan continued over
 * x[i..n) from it. */
static inline size_t kn__argmax_finish(const float *bv, const int32_t *bx, int lanes,
				       const float *x, size_t i, size_t n)
{
	int r = 0;
	for (int l = 1; l < lanes; l++)
		if (bv[l] > bv[r] || (bv[l] == bv[r] && bx[l] < bx[r]))
			r = l;
	size_t arg = (size_t)bx[r];
	for (; i < n; i++)
		if (x[i] > x[arg])
			arg = i;
	return arg;
}

/* The geometry of every ggml type (kn_quant.c), indexed by ggml type;
 * kn_qtype_get hands it out. */
extern const struct kn_qtype_info kn__qtypes[KN_Q_MAX];

/* The 16 values an IQ4_NL / IQ4_XS code (a nibble) stands for, before its
 * block's scale (ggml-common.h kvalues_iq4nl; kn_qtype.c). */
extern const int8_t kn__iq4nl_values[16];

/* The quantized-weight kernels (kn_quant.h) of each ISA, indexed by ggml
 * type; an entry with a NULL geom is a type not implemented. kn_quant.c
 * hands them out once kn_ops_for says the CPU runs that ISA. */
extern const struct kn_qops kn__qops_ref[KN_Q_MAX];    /* ref/quant.c */
extern const struct kn_qops kn__qops_avx2[KN_Q_MAX];   /* x86/quant_avx2.c */
extern const struct kn_qops kn__qops_avx512[KN_Q_MAX]; /* x86/quant_avx512.c */

/* The packed layouts (kn_quant.h struct kn_qpack) of each ISA, indexed by
 * ggml type; an entry with a NULL ops has none. AVX-512's need VNNI
 * (kn_quant.c checks). */
extern const struct kn_qpack kn__qpack_ref[KN_Q_MAX];    /* ref/qpack.c */
extern const struct kn_qpack kn__qpack_avx2[KN_Q_MAX];   /* x86/qpack_avx2.c */
extern const struct kn_qpack kn__qpack_avx512[KN_Q_MAX]; /* x86/qpack_avx512.c */

/* The packed layouts' x partner (kn_quant.h; kn_qpack.c): x quantized by q8 (an ISA's
 * KN_Q_Q8_0 kernels: the same codes and d in every ISA) and laid out
 * codes, float d, int32 sums. */
void kn__qpack_q8_0_x(const struct kn_qops *q8, const float *restrict x, void *restrict xq,
		      size_t k);
/* Packed Q4_1's x partner: x quantized by q4_1 (an ISA's KN_Q_Q4_1 kernels,
 * whose partner is ggml's Q8_1: the same codes and d as Q8_0's, and s =
 * fp16(d sum codes)), laid out codes, float d, s widened to float. */
void kn__qpack_q8_1_x(const struct kn_qops *q4_1, const float *restrict x, void *restrict xq,
		      size_t k);
size_t kn__qpack_xq_bytes(size_t k); /* its bytes for k elements */
size_t kn__qpack_xq_bytes_k(size_t k); /* packed Q4_K's partner, Q8_K: its bytes */

/* The scalar packers' loop (kn_qpack.c): put(o, r, blk) for every plain
 * block blk of W, o its group's packed block (packed_block bytes each), r
 * its row in the group. */
typedef void (*kn__qpack_row_fn)(uint8_t *o, size_t r, const uint8_t *blk);
void kn__qpack_each(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst, size_t packed_block, kn__qpack_row_fn put);

/* Packed Q8_0, Q5_0, Q4_1 and Q4_K (kn_quant.h): the scalar packers, which define
 * the layouts (AVX-512 has a faster Q8_0 one, tested equal; packing runs
 * once at load). */
void kn__qpack_q8_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst);
void kn__qpack_q5_0(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst);
void kn__qpack_q4_1(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst);
void kn__qpack_q4_k(const void *restrict W, size_t rb, size_t n_rows, size_t k,
		    void *restrict dst);

/* Packed geometry (kn_quant.h): rows per group, bytes per block of a
 * group (Q8_0, Q5_0, Q4_1, Q4_K), x partner bytes per block. */
enum {
	KN__QP_ROWS = 16,
	KN__QP_Q8_0_BLOCK = 32 + 16 * 32,
	KN__QP_Q5_0_BLOCK = 32 + 16 * 4 + 16 * 16,
	KN__QP_Q4_1_BLOCK = 32 + 32 + 16 * 16,
	KN__QP_Q4_K_BLOCK = 32 + 32 + 3 * 64 + 16 * 128,
	KN__QP_X_BLOCK = 32 + 4 + 4,
};

/* Block geometry of the quantized types (ggml-common.h): elements per
 * block (QK4_0 = QK5_0 = QK8_0 = 32, QK_K = 256) and bytes per block. */
enum {
	KN__QK = 32,
	KN__QK_K = 256,
	KN__Q4_0_BYTES = 2 + 16,           /* d, qs[16] */
	KN__Q4_1_BYTES = 2 + 2 + 16,       /* d, m, qs[16] */
	KN__Q5_1_BYTES = 2 + 2 + 4 + 16,   /* d, m, qh[4], qs[16] */
	KN__Q5_0_BYTES = 2 + 4 + 16,       /* d, qh[4], qs[16] */
	KN__Q8_0_BYTES = 2 + 32,           /* d, qs[32] */
	KN__Q4_K_BYTES = 2 + 2 + 12 + 128, /* d, dmin, scales[12], qs[128] */
	KN__Q5_K_BYTES = 2 + 2 + 12 + 32 + 128, /* ... qh[32], qs[128] */
	KN__Q6_K_BYTES = 128 + 64 + 16 + 2,     /* ql, qh, scales[16], d */
	KN__Q2_K_BYTES = 16 + 64 + 2 + 2,       /* scales[16], qs[64], d, dmin */
	KN__Q3_K_BYTES = 32 + 64 + 12 + 2,      /* hmask[32], qs[64], scales[12], d */
	KN__IQ4_NL_BYTES = 2 + 16,              /* d, qs[16] (codebook indices) */
	KN__IQ4_XS_BYTES = 2 + 2 + 4 + 128,     /* d, scales_h, scales_l[4], qs[128] */
	/* the activation partner formats of gemv_xq (kn_quant.h) */
	KN__Q8_0X_BYTES = 2 + 32,          /* d fp16, qs[32] */
	KN__Q8_1X_BYTES = 2 + 2 + 32,      /* d fp16, s fp16 (d * sum qs), qs[32] */
	KN__Q8_K_BYTES = 4 + 256 + 2 * 16, /* d float, qs[256], bsums[16] */
};

/* The 6-bit scale and min of sub-block j < 8 from the 12 packed bytes
 * (ggml get_scale_min_k4): j < 4 sit in the low 6 bits of bytes j and
 * j + 4; j >= 4 take a nibble of byte j + 4 for their low 4 bits and the
 * top 2 bits of bytes j - 4 / j for their high 2 bits. */
static inline void kn__scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Whether the CPU runs AVX512-VNNI (vpdpbusd / vpdpwssd); detected with
 * the other ISAs in kn_init.c. x86/quant_avx512.c picks its gemv_xq inner
 * loops by it (VNNI, else the AVX-512BW maddubs/madd form). */
bool kn__has_avx512vnni(void);

/* Tests: on false, kn__has_avx512vnni answers false from now on (so the
 * AVX-512BW form runs on a VNNI CPU); on true, it answers what the CPU
 * has again. Returns the new kn__has_avx512vnni(). */
bool kn__set_avx512vnni(bool on);

/* expf by Cephes-style range reduction (S. Moshier, Cephes Math Library,
 * expf.c): x = n*ln2 + r, |r| <= ln2/2, ln2 split in two parts so n*KN__LN2_HI
 * is exact; e^r = 1 + r + r^2 * P(r), P of degree 5 (the Cephes coefficients,
 * about 1 ulp on the reduced range); 2^n assembled in the exponent bits.
 * Inputs below KN__EXP_LO give 0 (the exact result there is subnormal or 0,
 * which is what softmax of a -INFINITY mask needs); above KN__EXP_HI they
 * are clamped (softmax only feeds x - max <= 0). */
#define KN__EXP_HI 88.3762626647949f
#define KN__EXP_LO -87.3365447504019f /* ln(FLT_MIN): 2^n stays normal */
#define KN__LOG2E  1.44269504088896341f
#define KN__LN2_HI 0.693359375f
#define KN__LN2_LO -2.12194440e-4f
#define KN__EXP_P0 1.9875691500e-4f
#define KN__EXP_P1 1.3981999507e-3f
#define KN__EXP_P2 8.3334519073e-3f
#define KN__EXP_P3 4.1665795894e-2f
#define KN__EXP_P4 1.6666665459e-1f
#define KN__EXP_P5 5.0000001201e-1f

/* erf for the vectorised exact GELU. Our own least-squares fits (numpy on
 * 400/600 Chebyshev nodes against mpmath's erf/erfc at 40 digits; the
 * script is summarised in the test's comment):
 *   |x| <= 1:     erf(x)  = x * A(x^2),              A of degree 6
 *   1 < |x| <= 4: erf(|x|) = 1 - exp(-x^2) * B(|x|),  B of degree 9
 *   |x| > 4:      erf(x)  = sign(x) (erfc(4) = 1.5e-8 is below f32 ulp of 1)
 * Measured in float32: max abs error 1.3e-7 against mpmath (the f32
 * rounding floor), so GELU stays far inside kn.h's 1e-5 (1 + |x|). */
#define KN__ERF_SPLIT 1.0f
#define KN__ERF_CLAMP 4.0f
#define KN__ERF_A0    1.128379166e+00f
#define KN__ERF_A1    -3.761262557e-01f
#define KN__ERF_A2    1.128358225e-01f
#define KN__ERF_A3    -2.685369110e-02f
#define KN__ERF_A4    5.188098890e-03f
#define KN__ERF_A5    -8.008189325e-04f
#define KN__ERF_A6    7.847259134e-05f
#define KN__ERF_B0    9.955538423e-01f
#define KN__ERF_B1    -1.098544880e+00f
#define KN__ERF_B2    9.090805486e-01f
#define KN__ERF_B3    -5.847129549e-01f
#define KN__ERF_B4    2.896041094e-01f
#define KN__ERF_B5    -1.073762059e-01f
#define KN__ERF_B6    2.857500287e-02f
#define KN__ERF_B7    -5.119213458e-03f
#define KN__ERF_B8    5.499906889e-04f
#define KN__ERF_B9    -2.666528696e-05f

#define KN__SQRT1_2 0.70710678118654752f /* 1/sqrt(2) */

/* Elements whose float exps the SIMD logsumexp sums in float before
 * adding the block's sum to a double. */
#define KN__LSE_BLOCK 1024

/* kn__sgemm_* - C[M,N] = alpha * A[M,K] * op(B) + beta * C, the kn_gemm
 * contract of kn_blas.h (op(B) = B[K,N], or B[N,K]^T when trans_b), with
 * one fixed order of operations per element, so that a row's result never
 * depends on M or on the tile or thread computing it: K in blocks of
 * KN__SGEMM_KC; per block acc = fmaf(A[i][k], op(B)[k][j], acc) from 0 for
 * k in order; then C = alpha * acc (first block, beta 0: C is not read),
 * fmaf(alpha, acc, beta * C) (first block) or fmaf(alpha, acc, C) (later
 * blocks). The scalar reference (ref/sgemm.c), the AVX2 kernel
 * (x86/sgemm_avx2.c) and the AVX-512 kernel (x86/sgemm_avx512.c) agree
 * bit for bit. pack: KN__SGEMM_PACK floats of scratch (the SIMD kernels'
 * packed op(B) block; the reference ignores it); no alignment needed.
 * M, N, K >= 1. */
#define KN__SGEMM_KC   256
#define KN__SGEMM_NC   512
#define KN__SGEMM_PACK (KN__SGEMM_KC * KN__SGEMM_NC)
/* Up to this many rows times B [K,N] (no trans_b), the SIMD kernels read B
 * in place, one row at a time, instead of packing it (same chains). */
#define KN__SGEMM_DIRECT_M 4
void kn__sgemm_ref(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		   size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
		   float *pack);
void kn__sgemm_avx2(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		    size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
		    float *pack);
void kn__sgemm_avx512(bool trans_b, size_t M, size_t N, size_t K, float alpha, const float *A,
		      size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
		      float *pack);

/* Query rows per block of kn_attention and its bfloat16 and int8 forms:
 * 96 x 1500 scores are 576 KB, within a core's L2 beside the panels of the
 * products. */
#define KN_ATTN_ROWS 96

#endif /* KN_INT_H */
