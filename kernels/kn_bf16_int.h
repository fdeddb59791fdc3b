/* kn_bf16_int.h - the bfloat16 kernels behind kn_bf16.h (kernels/ only).
 * KN__BF16_TM rows of x are converted per block into the caller's scratch
 * of KN__BF16_TM x Kp bfloat16 (Kp = K rounded up to 32). */
#ifndef KN_BF16_INT_H
#define KN_BF16_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KN__BF16_TM 32 /* rows per block: two 16-row tiles */
#define KN__BF16_KB 32 /* k-values per tile row */
#define KN__BF16_NB 16 /* columns per tile */

/* AMX: M, N, K >= 1; abuf [KN__BF16_TM * Kp]. */
void kn__bf16_linear_amx(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			 const uint16_t *Wp, const float *bias, float *y, size_t ldy,
			 uint16_t *abuf);

/* AMX with x already in bfloat16: xb rows ldxb >= K rounded up to 32
 * apart, zero in [K, that), and rows up to M rounded up to 32 readable. */
void kn__bf16_linear_amx_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			     const uint16_t *Wp, const float *bias, float *y, size_t ldy);

/* AVX512-BF16 (VDPBF16PS, x86/bf16_dp_avx512.c): the same operands and
 * contract as the two AMX kernels above; the sums in another order. */
void kn__bf16_linear_dp(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			const uint16_t *Wp, const float *bias, float *y, size_t ldy,
			uint16_t *abuf);
void kn__bf16_linear_dp_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			    const uint16_t *Wp, const float *bias, float *y, size_t ldy);

/* Which product kn_bf16_linear runs: the best the CPU has unless a test
 * picked another. kn__bf16_use - run kernel k from now on (for tests);
 * false, and nothing changed, if the CPU cannot run it. */
enum kn__bf16_kernel { KN__BF16_NONE, KN__BF16_DP, KN__BF16_AMX };
bool kn__bf16_use(enum kn__bf16_kernel k);

/* rows (<= 32) rows of float32 x (ldx apart) into the [32][kp] bfloat16
 * block a, each row rounded (kn_f32_to_bf16) and zero past K, the rows past
 * rows zero (x86/bf16_pack_avx512.c). */
void kn__bf16_rows_avx512(const float *x, size_t ldx, size_t rows, size_t K, size_t kp,
			  uint16_t *a);

/* The packers of kn_bf16.h with AVX-512 (BW), used where kn_bf16_ok():
 * element (n, k) of the N x K operand is W[n * ldw + k] (rows) or
 * B[k * ldb + n] (cols). kn__bf16_pack_ref is the scalar packer they
 * match bit for bit: element (n, k) = src[n * sn + k * sk]. */
void kn__bf16_pack_rows_avx512(const float *W, size_t ldw, size_t N, size_t K, uint16_t *out);
void kn__bf16_pack_cols_avx512(const float *B, size_t ldb, size_t N, size_t K, uint16_t *out);
void kn__bf16_from_f32_avx512(const float *x, uint16_t *y, size_t n);
void kn__bf16_from_f32_t_avx512(const float *x, size_t ldx, size_t rows, size_t cols,
				uint16_t *y, size_t ldy);
void kn__bf16_pack_ref(const float *src, size_t sn, size_t sk, size_t N, size_t K,
		       uint16_t *out);

/* The scalar reference: the same products, summed in double (exact up to
 * the final rounding to float32), for tests. */
void kn__bf16_linear_ref(size_t M, size_t N, size_t K, const float *x, size_t ldx,
			 const uint16_t *Wp, const float *bias, float *y, size_t ldy);

/* Element (n, k) of W packed by kn_bf16_pack, as bfloat16 bits. */
static inline uint16_t kn__bf16_packed_at(const uint16_t *Wp, size_t K, size_t n, size_t k)
{
	size_t kb = (K + KN__BF16_KB - 1) / KN__BF16_KB;
	size_t blk = (n / KN__BF16_NB) * kb + k / KN__BF16_KB;
	size_t pair = (k % KN__BF16_KB) / 2;
	return Wp[(blk * 16 + pair) * 32 + (n % KN__BF16_NB) * 2 + (k & 1)];
}

#endif /* KN_BF16_INT_H */
