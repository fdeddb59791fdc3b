/* kn_bf16.h - bfloat16 matrix products (the "bfloat16" compute type):
 * y[M,N] = bf16(x[M,K]) . bf16(W[N,K])^T + bias[N], every product of two
 * bfloat16 values exact in float32 and the sums in float32 (the order of
 * the sums is the hardware's: x86 AMX TDPBF16PS). Inputs are rounded to
 * bfloat16 to nearest-even. W is packed once (kn_bf16_pack) into the tile
 * layout the kernel reads: 16 columns by 32 k-values per 1 KB block, the
 * k-values in pairs (the VNNI order), zero-padded to N % 16 = K % 32 = 0.
 * Rounding is kn_half.h's kn_f32_to_bf16.
 *
 * Runs where the CPU has AMX-TILE and AMX-BF16 and Linux grants the tile
 * state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here), or else
 * AVX512-BF16 (AMD Zen 4/5, Intel Cooper Lake): kn_bf16_ok() says so;
 * without either there is no fast path and callers keep float32
 * (CTranslate2 likewise refuses bfloat16 on a CPU that cannot compute it
 * efficiently). The scalar reference (ref/bf16.c) computes the same sums
 * in double, for tests. Thread: any; kn_bf16_linear keeps no state
 * between calls (the tile configuration is loaded and released per call).
 */
#ifndef KN_BF16_H
#define KN_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* kn_bf16_ok - a bfloat16 product can run (CPU features and, for AMX, the
 * OS's permission). */
bool kn_bf16_ok(void);

/* kn_bf16_kernel_name - the product kn_bf16_linear runs: "amx-bf16",
 * "avx512-bf16" or "none" (a static string). */
const char *kn_bf16_kernel_name(void);

/* kn_bf16_packed_len - uint16_t elements of W [N,K] packed. */
size_t kn_bf16_packed_len(size_t N, size_t K);

/* kn_bf16_pack - W [N,K] row-major float32 (nn.Linear's [out, in]) into
 * out [kn_bf16_packed_len(N, K)]. */
void kn_bf16_pack(const float *W, size_t N, size_t K, uint16_t *out);

/* kn_bf16_pack_rows - the same for W[n][k] at W[n * ldw + k] (rows of a
 * wider matrix: one head's keys). kn_bf16_pack_cols - for the operand
 * B[k][n] at B[k * ldb + n] (attention's values: y = P . B). */
void kn_bf16_pack_rows(const float *W, size_t ldw, size_t N, size_t K, uint16_t *out);
void kn_bf16_pack_cols(const float *B, size_t ldb, size_t N, size_t K, uint16_t *out);

/* kn_bf16_scratch_len - uint16_t elements of scratch kn_bf16_linear needs
 * for K (one block of rows of x in bfloat16: 32 x K rounded up to 32). */
size_t kn_bf16_scratch_len(size_t K);

/* kn_bf16_linear - y[m*ldy + n] = sum_k bf16(x[m*ldx + k]) * W[n][k] +
 * bias[n] (bias may be NULL) for m < M, n < N, with W packed by
 * kn_bf16_pack(W, N, K); scratch [kn_bf16_scratch_len(K)], no alignment
 * needed. Needs kn_bf16_ok(); y does not alias x. */
void kn_bf16_linear(size_t M, size_t N, size_t K, const float *x, size_t ldx,
		    const uint16_t *Wp, const float *bias, float *y, size_t ldy,
		    uint16_t *scratch);

/* kn_bf16_from_f32 - y[i] = kn_f32_to_bf16(x[i]) for i < n (a cache of
 * activations kept in bfloat16); AVX-512 where kn_bf16_ok(), else scalar,
 * the same bits. */
void kn_bf16_from_f32(const float *x, uint16_t *y, size_t n);

/* kn_bf16_from_f32_t - the same into the transpose: y[c * ldy + r] =
 * kn_f32_to_bf16(x[r * ldx + c]) for r < rows, c < cols (a key cache
 * stored column by column). */
void kn_bf16_from_f32_t(const float *x, size_t ldx, size_t rows, size_t cols, uint16_t *y,
			size_t ldy);

/* kn_bf16_lda - K rounded up to 32: the least row stride of x for
 * kn_bf16_linear_b16 (the k-values of one tile row). */
size_t kn_bf16_lda(size_t K);

/* kn_bf16_linear_b16 - kn_bf16_linear with x already rounded to bfloat16:
 * row m of x is xb[m * ldxb ..], ldxb >= kn_bf16_lda(K), its entries
 * [K, kn_bf16_lda(K)) zero; rows are read in blocks of 32, so xb holds M
 * rounded up to 32 rows (what the rows past M hold does not reach y).
 * Bit for bit kn_bf16_linear of the float32 rows those bfloat16 values
 * widen to. Needs kn_bf16_ok(). */
void kn_bf16_linear_b16(size_t M, size_t N, size_t K, const uint16_t *xb, size_t ldxb,
			const uint16_t *Wp, const float *bias, float *y, size_t ldy);

#endif /* KN_BF16_H */
