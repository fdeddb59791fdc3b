/* kn_i8.h - int8 matrix products with dynamically quantized activations:
 * what CTranslate2 runs for its "int8" / "int8_float32" compute types
 * (docs/quantization.md: weights int8 with one float scale per output row,
 * activations quantized per row at run time, integer products accumulated
 * in int32, the result scaled back to float32).
 *
 *   y[m,n] = fmaf((float)acc[m,n], xs[m] * ws[n], bias ? bias[n] : 0)
 *   acc[m,n] = sum_k xq[m,k] * wq[n,k]   (exact in int32)
 *
 * Quantization (weights at load, activations per call), symmetric per row:
 *   scale = max_k |x[k]| / qmax (float32 division), q[k] = nearbyintf(
 *   clamp(x[k] / scale, -qmax, qmax)) (round half to even); an all-zero
 *   row has scale 0 and q = 0. Weights always use qmax = 127 (codes in
 *   [-127, 127]: -128 never occurs, which keeps the AVX2 product exact).
 *   Activations use the variant's x_max: 127, or 63 (7-bit codes) for
 *   "avx2-x7" below.
 *
 * Because acc is exact and the epilogue is the one fmaf above in every
 * variant (the float product xs * ws first, then the fused multiply-add),
 * all variants agree bit for bit with the scalar reference run at the
 * same x_max. They differ only in how they reach acc:
 *   AVX-512 VNNI, AVX-VNNI: vpdpbusd on (xq + 128) as u8 times wq as s8,
 *     minus the column compensation comp[n] = 128 * sum_k wq[n,k] stored
 *     with the packed weights (CTranslate2's u8 x s8 trick);
 *   AVX2, AVX-512BW: vpmaddubsw on |wq| as u8 times xq * sign(wq) as s8,
 *     then vpmaddwd with ones into int32. With |xq|, |wq| <= 127 each pair
 *     sum is at most 2 * 127 * 127 = 32258 < 32767, so vpmaddubsw's int16
 *     saturation never triggers (with the +128 offset, 2 * 255 * 127 =
 *     64770 would overflow; hence no offset there).
 *   AVX2 with 7-bit activations ("avx2-x7", x_max 63): vpmaddubsw on
 *     xq + 64 (in [1, 127]) as u8 times wq as s8, then vpmaddwd with ones,
 *     minus comp[n] / 2 = 64 * sum_k wq[n,k]. Pair sums stay within
 *     2 * 127 * 127 as above, and the vpsignb / vpabsb of the sign trick,
 *     which take the multiplier ports on current x86 cores, are gone: up
 *     to 1.5x the AVX2 rate for one bit of activation precision (oneDNN's
 *     "Nuances of int8 Computations" gives up that bit on the weights
 *     instead, on CPUs without VNNI, for the same saturation reason).
 *
 * Packed weights (kn_i8_pack): columns in blocks of KN_I8_NB = 16, K in
 * groups of 4 (zero-padded to kn_i8_kpad(K)); byte (n, k) at
 *   ((n / 16) * (kpad / 4) + k / 4) * 64 + (n % 16) * 4 + k % 4,
 * so one 64-byte load holds 4 k-values of 16 columns, the operand order
 * vpdpbusd wants. Rows beyond N (to kn_i8_npad(N)) are zero, and scale and
 * comp have npad entries (zero beyond N).
 * Thread: any, after kn_init. Kernels never allocate.
 */
#ifndef KN_I8_H
#define KN_I8_H

#include <stddef.h>
#include <stdint.h>

#define KN_I8_NB 16 /* columns per packed block */
#define KN_I8_KG 4  /* k-values per group */
#define KN_I8_QMAX 127 /* the weights' code range, and most variants' x_max */

/* Padded sizes of the packed layout. */
static inline size_t kn_i8_kpad(size_t K) { return (K + 3) & ~(size_t)3; }
static inline size_t kn_i8_npad(size_t N) { return (N + 15) & ~(size_t)15; }

/* The quantized weights of one linear W[N,K], borrowed by the kernels. */
struct kn_i8w {
	const int8_t *packed; /* [npad * kpad] in the layout above */
	const float *scale;   /* [npad] ws: per output row, 0 beyond N */
	const int32_t *comp;  /* [npad] 128 * sum_k wq[n,k] */
	size_t N, K;
};

/* kn_i8_quantize_row - q[0..K) and *scale of one float row by the scheme
 * above with codes in [-qmax, qmax] (the reference every variant's
 * quantize_rows matches, with qmax its x_max; 127 for weights). */
void kn_i8_quantize_row(const float *x, size_t K, int qmax, int8_t *q, float *scale);

/* kn_i8_pack - pack already quantized weights wq[N,K] (row-major, codes in
 * [-127, 127]; -128 is clamped to -127) into packed[npad * kpad] and
 * fill comp[npad]. Load time; no allocation. */
void kn_i8_pack(const int8_t *wq, size_t N, size_t K, int8_t *packed, int32_t *comp);

/* kn_i8_quantize_w - quantize float W[N,K] per row (scale[n] =
 * max|W[n,:]| / 127) and pack it: packed[npad * kpad], scale[npad],
 * comp[npad]. scratch: kn_i8_kpad(K) bytes. Load time; each row
 * quantized as kn_i8_quantize_row with qmax 127 (vectorized where the CPU
 * has AVX2). */
void kn_i8_quantize_w(const float *W, size_t N, size_t K, int8_t *packed, float *scale,
		      int32_t *comp, int8_t *scratch);

enum kn_i8_kind {
	KN_I8_REF = 0,	  /* scalar C reference */
	KN_I8_AVX2,	  /* AVX2: vpmaddubsw / vpmaddwd (sign trick) */
	KN_I8_AVXVNNI,	  /* AVX-VNNI: ymm vpdpbusd */
	KN_I8_AVX512BW,	  /* AVX-512BW without VNNI: zmm vpmaddubsw / vpmaddwd */
	KN_I8_AVX512VNNI, /* AVX-512 VNNI: zmm vpdpbusd */
	KN_I8_AVX2_X7,	  /* AVX2, 7-bit activations: vpmaddubsw on xq + 64 */
	KN_I8_COUNT
};

struct kn_i8_ops {
	enum kn_i8_kind kind;
	const char *name; /* "ref", "avx2", "avxvnni", "avx512bw", "avx512vnni",
			     "avx2-x7" */
	int x_max;	  /* activation codes in [-x_max, x_max]: 127 or 63 */
	/* Quantize M rows x[m * ldx + 0..K) into q[m * ldq + 0..kpad) (the
	 * pad bytes written 0; ldq >= kn_i8_kpad(K)) and scale[m], exactly as
	 * kn_i8_quantize_row with qmax = x_max. */
	void (*quantize_rows)(const float *restrict x, size_t ldx, size_t M, size_t K,
			      int8_t *restrict q, size_t ldq, float *restrict scale);
	/* y[m * ldy + n] for m < M and n0 <= n < n1 (n0 a multiple of 16,
	 * n1 <= w->N) by the formula above; xq / xs as quantize_rows wrote
	 * them (rows of ldq bytes); bias [N] or NULL. y does not alias. */
	void (*gemm)(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
		     const float *restrict xs, const struct kn_i8w *w, const float *restrict bias,
		     float *restrict y, size_t ldy);
	/* gemm for activations whose codes are all in [0, 127] (rows that
	 * are never negative, quantized by kn_i8_quantize_rows: softmax
	 * probabilities), whatever x_max: the same y bit for bit. AVX2 reads
	 * them as u8 directly (vpmaddubsw, no sign trick, no offset); the
	 * others run their gemm. */
	void (*gemm_u8)(size_t M, size_t n0, size_t n1, const int8_t *restrict xq, size_t ldq,
			const float *restrict xs, const struct kn_i8w *w,
			const float *restrict bias, float *restrict y, size_t ldy);
};

/* kn_i8_quantize_rows - quantize_rows at qmax 127 whatever the variant
 * (kn_i8_quantize_row's codes, vectorized where the CPU has AVX2): the
 * weights' scheme, and gemm_u8's activations. */
void kn_i8_quantize_rows(const float *restrict x, size_t ldx, size_t M, size_t K,
			 int8_t *restrict q, size_t ldq, float *restrict scale);

/* kn_i8_ops - the fastest variant the ISA kn_init chose can run (AVX-512:
 * VNNI, else BW; AVX2: AVX-VNNI, else AVX2 with 7-bit activations; ref:
 * ref). Never NULL. */
const struct kn_i8_ops *kn_i8_ops(void);

/* kn_i8_ops_for - one variant (tests), or NULL when the CPU lacks it. */
const struct kn_i8_ops *kn_i8_ops_for(enum kn_i8_kind kind);

#endif /* KN_I8_H */
