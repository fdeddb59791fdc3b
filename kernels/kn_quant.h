/* kn_quant.h - GGUF/ggml block-quantized weights: dequantization and
 * matrix-vector products straight from the blocks.
 *
 * Block layouts follow the GGUF specification and ggml's block
 * definitions (ggml-common.h: block_q4_0, block_q4_1, block_q5_0, block_q5_1, block_q8_0,
 * block_q4_K, block_q5_K, block_q6_K; fp16 scales are IEEE binary16,
 * little-endian). Types are numbered as ggml's enum ggml_type so a GGUF
 * tensor's type field indexes them directly:
 *   F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14,
 *   BF16 30.
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
	KN_Q_Q4_1 = 3,
	KN_Q_Q5_0 = 6,
	KN_Q_Q5_1 = 7,
	KN_Q_Q8_0 = 8,
	KN_Q_Q2_K = 10,
	KN_Q_Q3_K = 11,
	KN_Q_Q4_K = 12,
	KN_Q_Q5_K = 13,
	KN_Q_Q6_K = 14,
	KN_Q_IQ4_NL = 20,
	KN_Q_IQ4_XS = 23,
	KN_Q_BF16 = 30,
	KN_Q_MAX = 40 /* table size: ggml type numbers below it */
};

/* The geometry of one ggml tensor type: what a reader needs to size a
 * tensor, whether or not a kernel implements the type. One table
 * (kn_qtype_get) for every type ggml numbers; every ISA's kn_qops entry
 * points into it, so the ISAs cannot disagree on a block's size. */
struct kn_qtype_info {
	const char *name;     /* as GGUF tools print it: "F32", "Q4_K", "BF16" */
	uint32_t block_elems; /* elements per block: 1 (F32/F16/BF16), 32, or 256 (K-quants) */
	uint32_t block_bytes; /* bytes per block */
};

/* kn_qtype_get - the geometry of ggml type number `type` (any type of
 * ggml.h's enum ggml_type, implemented here or not), or NULL for a
 * retired (4, 5, 31-33: Q4_2, Q4_3, Q4_0_4_4 ...) or unknown number.
 * Borrowed, static; any thread, no kn_init needed. */
const struct kn_qtype_info *kn_qtype_get(int type);

/* The kernels of one (type, ISA). */
struct kn_qops {
	int type;                    /* enum kn_qtype */
	const struct kn_qtype_info *geom; /* kn_qtype_get(type): name, block_elems, block_bytes */
	/* dst[0..n) = the n elements stored in src (n a multiple of block_elems). */
	void (*dequant)(const void *restrict src, float *restrict dst, size_t n);
	/* y[r] = sum_i W_r[i] * x[i] for r < n_rows, where row r starts at
	 * (const char *)W + r * row_bytes and holds k elements; x is float32.
	 * Sums in float32 (x is used as is, never quantized). */
	void (*gemv)(const void *restrict W, size_t row_bytes, const float *restrict x,
		     float *restrict y, size_t n_rows, size_t k);
	/* Integer path (llama.cpp's vec_dot_<type>_q8_<0|K>): the activation
	 * vector is quantized once into xq (xq_bytes(k) bytes, the type's
	 * partner format) and every row is an integer dot product with it.
	 * NULL for types without one (F32/F16/BF16: use gemv).
	 *
	 * Partner formats (ggml-common.h block_q8_0 / block_q8_K, packed, at
	 * any byte address):
	 *   Q8_0 (Q4_0, Q5_0, Q8_0, IQ4_NL; 32 el, 34 B): d fp16 @0, int8 qs[32] @2.
	 *        ggml's quantize_row_q8_0_ref: d = amax / 127 rounded to fp16
	 *        (nearest even), q = roundf(x * (d ? 1 / d : 0)) with the
	 *        float d (not the fp16 one).
	 *   Q8_1 (Q4_1, Q5_1; 32 el, 36 B): d fp16 @0, s fp16 @2, int8 qs[32] @4.
	 *        ggml's quantize_row_q8_1_ref: d and qs as Q8_0's, s =
	 *        fp16(d * sum qs) (the float d); the weights' min m meets it
	 *        as m * s.
	 *   Q8_K (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS; 256 el, 292 B): float d @0, int8 qs[256]
	 *        @4, int16 bsums[16] @260 (sums of 16 consecutive qs).
	 *        ggml's quantize_row_q8_K_ref: max = the first element of
	 *        largest |x|, iscale = -127 / max, q = min(127,
	 *        nearest_int(iscale x)) (round half to even), d = 1 / iscale;
	 *        an all-zero block is d = 0, qs = bsums = 0.
	 * quantize_x is bit-exact with the reference in every variant.
	 * gemv_xq: y[r] = sum over blocks of (d_w d_x) * (integer dot of the
	 * codes) (Q4_1, Q5_1: plus m_w s_x; K-quants: minus (dmin_w d_x) * sum m_j bsum_j); the integer
	 * sums are exact in every variant, only the float combine's order
	 * differs (tests: within 4e-6 of the exact value, relative to
	 * sum |w x_q|). Against gemv on the float x, the difference is the
	 * quantization error of x (about 1e-3 of sum |w x|). */
	size_t (*xq_bytes)(size_t k);
	void (*quantize_x)(const float *restrict x, void *restrict xq, size_t k);
	void (*gemv_xq)(const void *restrict W, size_t row_bytes, const void *restrict xq,
			float *restrict y, size_t n_rows, size_t k);
	/* F16 / BF16 only (NULL otherwise): y[0..k) = x rounded to the
	 * weight's precision and widened back, as ggml converts activations
	 * to the vec_dot_type F16 / BF16 before a product with such weights
	 * (round to nearest even: F16C vcvtps2ph, ggml_compute_fp32_to_bf16;
	 * NaN stays NaN). Run gemv on y to get ggml's numbers. Bit-exact with
	 * the reference in every variant. */
	void (*round_x)(const float *restrict x, float *restrict y, size_t k);
	/* gemm_xq - gemv_xq for n_x quantized x rows at once (row j at
	 * (const char *)xq + j * xq_stride; its results at y + j * ldy), each
	 * weight block read and unpacked once for up to four x rows. For every
	 * (weight row, x row) pair the arithmetic is this ISA's gemv_xq's, so
	 * the results are the same bit for bit as gemv_xq row by row (a row's
	 * result never depends on how many share the call). NULL where the
	 * ISA has no such kernel (call gemv_xq per row). */
	void (*gemm_xq)(const void *restrict W, size_t row_bytes, const void *restrict xq,
			size_t xq_stride, size_t n_x, float *restrict y, size_t ldy,
			size_t n_rows, size_t k);
	/* Q4_0 / Q5_0 / IQ4_NL only (NULL otherwise, and where the ISA's own
	 * gemm_xq is as fast): dst = the n_blocks blocks at src as Q8_0 blocks
	 * (34 B each): the same fp16 d, codes q - 8 / q - 16 / the codebook's
	 * value as int8. Exact: Q8_0
	 * dequant of dst equals the type's dequant of src, and this ISA's
	 * Q8_0 gemv_xq / gemm_xq on dst equal the type's gemv_xq bit for bit
	 * (the same integer sums, lane by lane, and the same scales), at
	 * Q8_0's speed. For weight tiles reused by many x rows. */
	void (*to_q8_0)(const void *restrict src, void *restrict dst, size_t n_blocks);
};

/* kn_qops_get - the kernels of ggml type `type` for the ISA kn_init chose,
 * or NULL for a type not implemented. */
const struct kn_qops *kn_qops_get(int type);

/* kn_qops_for - the same for one ISA (tests), NULL if the CPU lacks it or
 * the type is not implemented. */
const struct kn_qops *kn_qops_for(enum kn_isa isa, int type);

/* A packed layout of a weight matrix: its rows regrouped, once at load,
 * so that the integer path runs on whole blocks of several rows at a time
 * (llama.cpp's CPU "repack" of Q4_0 / IQ4_NL / Q4_K weights is the same
 * idea). Where a (type, ISA) has one it is that ISA's fastest product for
 * the type, at every number of x rows.
 *
 * Every ISA but the reference's kn_qpack_get runs them (AVX2, and
 * AVX-512: with VNNI its own kernels for Q8_0, Q5_0, Q4_1 and Q4_K, AVX2's
 * without VNNI).
 *
 * Q8_0, 16 rows (kn_qpack_get(KN_Q_Q8_0)): n_rows a multiple
 * of 16, k of 32, nb = k / 32 blocks per row, rb = nb * 34 (the plain row
 * size). The packed matrix takes n_rows * rb bytes, like the plain one:
 * group g (rows 16g .. 16g + 15) at g * 16 * rb, and in it block b at
 * b * 544: the 16 rows' fp16 d (row order, 32 bytes), then 8 chunks c of
 * 64 bytes, chunk c holding row r's codes 4c .. 4c + 3 plus 128 (as
 * unsigned bytes) at 4r. So W + c * rb addresses row c's group for c a
 * multiple of 16, as in the plain layout.
 * Q5_0, 16 rows: the same groups (n_rows * rb bytes, rb =
 * nb * 22), block b of a group at b * 352: the 16 rows' fp16 d (32
 * bytes), their qh (4 bytes each, row order: 64 bytes), then 4 chunks c
 * of 64 bytes, chunk c holding row r's qs bytes 4c .. 4c + 3 at 4r (the
 * low nibbles are codes 4c .. 4c + 3, the high ones 16 + 4c ..).
 * Q4_1, 16 rows: the same groups (rb = nb * 20), block b of a group at
 * b * 320: the 16 rows' fp16 d (32 bytes), their fp16 m (32 bytes), then
 * the qs bytes in 4 chunks of 64 as Q5_0's.
 * Q4_K, 16 rows: k a multiple of 256, nb = k / 256, rb = nb * 144;
 * block b of a group at b * 2304: the 16 rows' fp16 d (32 bytes), fp16
 * dmin (32), the three little-endian words of each row's 12 scale bytes
 * (scales[0..3] of the 16 rows, 64 bytes, then [4..7], then [8..11]), then
 * for each qs quarter p (32 bytes: sub-blocks 2p in the low nibbles, 2p + 1
 * in the high ones) 8 chunks c of 64 bytes, row r's qs bytes 32p + 4c ..
 * + 3 at 4r. Its x partner is its plain one, Q8_K; per block y[r] =
 * fmaf(isum, d_w d_x, y), then y = fmaf(-msum, dmin_w d_x, y) (isum = sum
 * of scale times sub-block dot, msum = sum of min times the sub-block's
 * x sum: ggml's integer terms).
 * The x partner of Q8_0 and Q5_0 (ops->xq_bytes(k) = nb * 40 bytes): the Q8_0 quantization
 * of x (ggml's quantize_row_q8_0_ref, the same codes and fp16 d as
 * KN_Q_Q8_0's quantize_x) stored as the codes of every block (nb * 32 int8),
 * then every block's d widened to float (nb * 4), then every block's sum
 * of codes (nb * int32), at any byte address. Q4_1's (the same size): its
 * plain partner, ggml's Q8_1 (the same codes and d, and s = fp16(d times
 * the codes' sum)), as codes, d widened, s widened (nb * float).
 * Product: y[r] = fmaf((float)isum_b, d_w,b * d_x,b, y) over blocks b in
 * order from y = 0, isum_b the block's exact integer dot; Q4_1 then
 * y = fmaf(m_w,b, s_x,b, y) in each block. The same
 * operations, in the same order, in every variant, so gemv_xq and gemm_xq
 * of every ISA equal the reference (kernels/ref/qpack.c) bit for bit; they
 * differ from the plain type's gemv_xq only in float rounding (its
 * combine order is another).
 */
struct kn_qpack {
	/* The kernels on the packed layout: type, geom, xq_bytes, quantize_x,
	 * gemv_xq and gemm_xq (n_rows a multiple of `rows`, W at a group);
	 * dequant, gemv, round_x and to_q8_0 are NULL, so the packed matrix
	 * goes only to the integer path (dev_par_qlinear with scratch). */
	const struct kn_qops *ops;
	size_t rows; /* rows per group */
	/* dst (n_rows * row_bytes bytes, row_bytes the plain row size) = the
	 * plain matrix W of n_rows rows of k elements, packed. */
	void (*pack)(const void *restrict W, size_t row_bytes, size_t n_rows, size_t k,
		     void *restrict dst);
};

/* kn_qpack_get - the packed layout of type for the ISA kn_init chose, or
 * NULL where there is none (the plain kernels are then the fastest). */
const struct kn_qpack *kn_qpack_get(int type);

/* kn_qpack_for - the same for one ISA (tests): NULL if the CPU lacks what
 * its kernels need. The scalar reference: kn_qpack_for(KN_ISA_REF, type),
 * which kn_qpack_get never returns. */
const struct kn_qpack *kn_qpack_for(enum kn_isa isa, int type);

/* kn_qtype_row_bytes - bytes of a row of k elements of type, 0 when the
 * type has no kernels here (kn_qops_get NULL) or k is not a multiple of
 * its block. */
size_t kn_qtype_row_bytes(int type, size_t k);

#endif /* KN_QUANT_H */
