/* kn_quant.h - GGUF/ggml block-quantized weights: dequantization and
 * matrix-vector products straight from the blocks.
 *
 * Block layouts follow the GGUF specification and ggml's block
 * definitions (ggml-common.h: block_q4_0, block_q5_0, block_q8_0,
 * block_q4_K, block_q5_K, block_q6_K; fp16 scales are IEEE binary16,
 * little-endian). Types are numbered as ggml's enum ggml_type so a GGUF
 * tensor's type field indexes them directly:
 *   F32 0, F16 1, Q4_0 2, Q5_0 6, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14, BF16 30.
 * A row of k elements is k / block_elems blocks, stored contiguously
 * (k must be a multiple of block_elems; GGUF guarantees it for a tensor's
 * first dimension).
 *
 * Each type has a scalar reference and AVX2 / AVX-512 variants, chosen by
 * kn_init like the row kernels (kn.h); tests compare every variant with
 * the reference on random blocks, odd row counts included.
 * Thread: any, after kn_init. Kernels never allocate.
 */
#ifndef KN_QUANT_H
#define KN_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"

enum kn_qtype {
	KN_Q_F32 = 0,
	KN_Q_F16 = 1,
	KN_Q_Q4_0 = 2,
	KN_Q_Q5_0 = 6,
	KN_Q_Q8_0 = 8,
	KN_Q_Q4_K = 12,
	KN_Q_Q5_K = 13,
	KN_Q_Q6_K = 14,
	KN_Q_BF16 = 30,
	KN_Q_MAX = 40 /* table size: ggml type numbers below it */
};

/* The kernels of one (type, ISA). */
struct kn_qops {
	int type;          /* enum kn_qtype */
	const char *name;  /* "q4_K" ... as ggml names it */
	int block_elems;   /* elements per block: 1 (F32/F16/BF16), 32, or 256 (K-quants) */
	int block_bytes;   /* bytes per block */
	/* dst[0..n) = the n elements stored in src (n a multiple of block_elems). */
	void (*dequant)(const void *restrict src, float *restrict dst, size_t n);
	/* y[r] = sum_i W_r[i] * x[i] for r < n_rows, where row r starts at
	 * (const char *)W + r * row_bytes and holds k elements; x is float32.
	 * Sums in float32 (x is used as is, never quantized). */
	void (*gemv)(const void *restrict W, size_t row_bytes, const float *restrict x,
		     float *restrict y, size_t n_rows, size_t k);
};

/* kn_qops_get - the kernels of ggml type `type` for the ISA kn_init chose,
 * or NULL for a type not implemented. */
const struct kn_qops *kn_qops_get(int type);

/* kn_qops_for - the same for one ISA (tests), NULL if the CPU lacks it or
 * the type is not implemented. */
const struct kn_qops *kn_qops_for(enum kn_isa isa, int type);

/* kn_qtype_row_bytes - bytes of a row of k elements of type, 0 when the
 * type is unknown or k is not a multiple of its block. */
size_t kn_qtype_row_bytes(int type, size_t k);

#endif /* KN_QUANT_H */
