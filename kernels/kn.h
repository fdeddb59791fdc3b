/* kn.h - inferd's compute kernels: pure functions on plain float arrays.
 *
 * Every element-wise/row kernel has a scalar reference (kernels/ref/) and
 * SIMD variants (kernels/x86/, one ISA per file) chosen once at start-up
 * from CPU features and reached through the kn_ops table (ggml's
 * type_traits_cpu idea). Kernels never allocate, lock or log; any n works
 * (SIMD loops end with a scalar tail); pointers need no alignment.
 * Matrix products go to OpenBLAS (kernels/blas/).
 * Thread: any; kn_init must have run once before (it is idempotent).
 */
#ifndef KN_H
#define KN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kn_isa {
	KN_ISA_REF = 0, /* scalar C reference */
	KN_ISA_AVX2,    /* AVX2 + FMA + F16C */
	KN_ISA_AVX512,  /* AVX-512F (+BW/VL where used) */
	KN_ISA_COUNT
};

/* The table of row kernels. All lengths are element counts. */
struct kn_ops {
	enum kn_isa isa;
	const char *name; /* "ref", "avx2", "avx512" */
	/* y[i] = (float)x[i], x IEEE binary16 bits. y and x do not alias. */
	void (*f16_to_f32)(const uint16_t *restrict x, float *restrict y, size_t n);
	/* y = (x - mean) / sqrt(var + eps) * gamma + beta over one row of n;
	 * y may equal x. (Ba et al. 2016; torch.nn.LayerNorm) */
	void (*layer_norm)(const float *x, const float *gamma, const float *beta, float *y,
			   size_t n, float eps);
	/* x = x * 0.5 * (1 + erf(x / sqrt(2))) in place (exact GELU,
	 * torch.nn.GELU default), max abs error vs erff <= 1e-5 * (1 + |x|). */
	void (*gelu)(float *x, size_t n);
	/* x = softmax(x) in place over one row (max-subtracted). */
	void (*softmax)(float *x, size_t n);
	/* softmax over one row of n >= 1 in place, returning its log-sum-exp
	 * m + logf(sum) from the same float exps (m the row's maximum, sum
	 * the exps' float sum): a decode step's part of the keys, its weight
	 * for kn_attention_decode_merge (kernels/kn_attn_dec.c) in one pass
	 * of exps. The SIMD variants take every element through the vector
	 * exp (kn_int.h's approximation), the row's tail masked; within
	 * 1e-6 relative of the reference's expf, its lse within 1e-5. */
	float (*softmax_lse)(float *x, size_t n);
	/* y[i] += x[i] */
	void (*add)(float *restrict y, const float *restrict x, size_t n);
	/* y[i] = y[i] * a + b[i]  (b may be NULL: y *= a) */
	void (*scale_add)(float *restrict y, float a, const float *restrict b, size_t n);
	/* sum x[i]*y[i] */
	float (*dot)(const float *x, const float *y, size_t n);
	/* y[i] = alpha * sum_j x[j] B[i*ldb + j] for i < n (ldb >= k): one row
	 * against n rows, a decode step's attention scores q k^T. Each y[i]
	 * within dot's tolerance of the exact value (the SIMD variants sum 8
	 * rows at a time, in another order than dot's). */
	void (*dot_rows)(const float *x, const float *B, size_t ldb, size_t n, size_t k,
			 float alpha, float *y);
	/* dot_rows for g rows of x at once (row h at x + h ldx; g >= 1), row
	 * h's results at y + h ldy: y[h ldy + i] = alpha * sum_j x[h ldx + j]
	 * B[i ldb + j]. Grouped-query attention's g query heads against their
	 * one KV head's keys, each key loaded once for all of them (SIMD: up
	 * to 4 heads a pass with AVX-512, 3 with AVX2). Each within dot's
	 * tolerance of the exact value. */
	void (*dot_rows_g)(const float *x, size_t ldx, size_t g, const float *B, size_t ldb,
			   size_t n, size_t k, float alpha, float *y, size_t ldy);
	/* y[h ldy + j] = sum_i p[h ldp + i] B[i ldb + j] for h < g, j < k: g
	 * rows of weights p [g, n] times B [n, k] (ldb >= k), a decode step's
	 * probabilities of g query heads times their KV head's values, each
	 * value row loaded once for all of them (as dot_rows_g, heads a pass).
	 * Sums in float32 over i in order from 0 (the SIMD variants too, so
	 * every variant gives the reference's bits up to FMA contraction). */
	void (*gemv_t_g)(const float *p, size_t ldp, size_t g, const float *B, size_t ldb,
			 size_t n, size_t k, float *y, size_t ldy);
	/* y[r] = sum_k W[r*ldw + k] * x[k] for r < n_rows: a matrix-vector
	 * product with IEEE binary16 weights W [n_rows, ldw >= k] (a decode
	 * step reads half the bytes of float32 weights). Products and sums
	 * in float32; y does not alias x or W. */
	void (*gemv_f16)(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			 float *restrict y, size_t n_rows, size_t k);
	/* y = x / sqrt(mean(x^2) + eps) * w over one row of n (RMSNorm, Zhang &
	 * Sennrich 2019; llama.cpp's ggml_rms_norm then a multiply); w may be
	 * NULL (no scale); y may equal x. */
	void (*rms_norm)(const float *x, const float *w, float *y, size_t n, float eps);
	/* gate[i] = act(gate[i]) * up[i]: the gated MLPs. gelu_tanh_mul uses
	 * the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
	 * (GeGLU, Gemma; ggml_gelu), silu_mul x / (1 + exp(-x)) (SwiGLU,
	 * llama/qwen). Max abs error vs double <= 1e-5 * (1 + |result|). */
	void (*gelu_tanh_mul)(float *restrict gate, const float *restrict up, size_t n);
	void (*silu_mul)(float *restrict gate, const float *restrict up, size_t n);
	/* gate[i] = g(gate[i]) * up[i] with g read from a table of 65536
	 * floats indexed by the binary16 bits of x (kn_f32_to_f16, as F16C's
	 * vcvtps2ph rounds): 0 for x <= -10, x for x >= 10, else table[f16(x)]
	 * (ggml's CPU GeGLU on its binary16 GELU table, gemma). Bit for bit
	 * the same in every variant. */
	void (*geglu_table_mul)(float *restrict gate, const float *restrict up,
				const float *restrict table, size_t n);
	/* The first index of the largest of x[0..n) (n >= 1), as the scan
	 * "best = i if x[i] > x[best]" from best = 0 finds it: a NaN is never
	 * taken, except x[0], which then stays (greedy sampling over logits). */
	size_t (*argmax)(const float *x, size_t n);
	/* log(sum exp(x[i])) over one row, max-subtracted, in double after
	 * the exps (a decode step's log-softmax over the vocabulary): -INFINITY
	 * when n is 0 or every x[i] is -INFINITY. The SIMD variants take float
	 * exps (kn_int.h's approximation) summed in float per block of
	 * KN__LSE_BLOCK and in double across blocks; within 1e-6 of the
	 * reference's double exps. */
	double (*logsumexp)(const float *x, size_t n);
	/* y[0..n) = bfloat16(softmax(scale * x)) (kn_half.h's nearest-even
	 * rounding), y[n..n_pad) = 0: one row of attention probabilities as
	 * kn_bf16_linear_b16 reads them. x is clobbered. Bit for bit what
	 * scale_add(x, scale, NULL), softmax(x) and kn_f32_to_bf16 of each
	 * element give in the same table. n >= 1, n_pad >= n. */
	void (*softmax_bf16)(float *x, size_t n, float scale, uint16_t *y, size_t n_pad);
	/* x's softmax quantized per row as kn_i8.h would, into never-negative
	 * codes (gemm_u8's): e[i] = exp(x[i] - max x) left in x[0..n),
	 * q[i] = nearbyintf(127 * e[i]) (in [0, 127]; the largest is 127),
	 * q[n..n_pad) = 0, *scale = 1 / (127 * sum e), so that p[i] ~ q[i] *
	 * *scale. Three passes instead of softmax's three plus the
	 * quantizer's two, no division per element. n >= 1, n_pad >= n. */
	void (*softmax_i8)(float *x, size_t n, int8_t *q, size_t n_pad, float *scale);
	/* y[c] = sum_r x[r] * bf16(W[r*ldw + c]) for c < n, W bfloat16 bits,
	 * y overwritten: a row vector times a bfloat16 matrix (a decode
	 * step's query times a head's transposed key cache, its probabilities
	 * times the value cache). float32 products and sums, the order the
	 * variant's; y aliases neither input. */
	void (*gemv_t_bf16)(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			    float *restrict y, size_t n_rows, size_t n);
	/* gemv_t_bf16 with IEEE binary16 W (kn_half.h's exact widening): a
	 * decode step's probabilities times an LLM's float16 value cache. */
	void (*gemv_t_f16)(const uint16_t *restrict W, size_t ldw, const float *restrict x,
			   float *restrict y, size_t n_rows, size_t n);
	/* gemv_f16 for g rows of x at once (row h at x + h ldx; g >= 1; its
	 * results at y + h ldy): grouped-query attention's g query heads
	 * against their KV head's float16 keys, each key widened once for
	 * all of them. Row h's results are gemv_f16's (W, ldw, x + h ldx,
	 * y + h ldy, n_rows, k) in the same table, bit for bit. */
	void (*dot_rows_g_f16)(const float *x, size_t ldx, size_t g, const uint16_t *W,
			       size_t ldw, size_t n_rows, size_t k, float *y, size_t ldy);
};

/* kn_init - detect the CPU and fill the table; force picks an ISA
 * (KN_ISA_REF for --kernels=ref), or pass KN_ISA_COUNT for the best the
 * CPU has. A forced ISA the CPU lacks falls back to the best available.
 * Also sets OpenBLAS to 1 thread (the engine owns threading; callers may
 * change it with kn_blas_set_threads). Returns the table in use. */
const struct kn_ops *kn_init(enum kn_isa force);

/* kn_ops_for - the table of one ISA (for tests comparing variants), or
 * NULL when the CPU cannot run it. */
const struct kn_ops *kn_ops_for(enum kn_isa isa);

/* kn_ops - the table kn_init chose. */
const struct kn_ops *kn_ops(void);

/* The instruction-set ceiling, from the environment variable
 * INFERD_CPU_ISA, read once with the CPU detection: "native" (unset: all
 * the CPU has), "avx512" (no AMX: bfloat16 products on AVX512-BF16 where
 * present) or "avx2" (AVX2 + FMA + F16C only: no AVX-512, no VNNI of
 * either width, no bfloat16 products) - to run a lesser CPU's kernels on a
 * bigger one, as CTranslate2's CT2_FORCE_CPU_ISA does. A ceiling above
 * what the CPU has changes nothing. */
enum kn_cap { KN_CAP_NATIVE, KN_CAP_AVX512, KN_CAP_AVX2 };

/* kn_cpu_cap - the ceiling in effect; *bad (may be NULL) is set to the
 * variable's value when it names none of the three (native is used then),
 * else to NULL. kn_cap_name - "native", "avx512" or "avx2". */
enum kn_cap kn_cpu_cap(const char **bad);
const char *kn_cap_name(enum kn_cap cap);

#endif /* KN_H */
