/* dev_par.h - the cpu back end's model operations, split over its worker
 * pool (devices/dev_pool.h); moved here from engine/ so that the forward
 * passes can reach them through the device interface instead of naming
 * the back end (the engine still calls them directly until then). Each
 * call runs one parallel-for whose threads
 * take disjoint row (or column, or head) ranges and call the kernels on
 * them. BLAS itself stays single-threaded (kn_init), so the pool is the
 * only source of threads. A NULL pool runs everything on the caller.
 * Shapes are row-major float32 as in kernels/kn*.h.
 */
#ifndef DEV_PAR_H
#define DEV_PAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dev_pool;

/* y[M,N] = x[M,K] W[N,K]^T + b[N] (b may be NULL). Rows are split when
 * there are enough of them, else output columns (a decode step, M = 1). */
void dev_par_linear(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
		    const float *W, const float *b, float *y);

/* Rows of weights a thread handles at a time (tiles kept in cache). */
#define DEV_PAR_QTILE 64

/* x rows from which dev_par_qlinear widens Q4_0 / Q5_0 weight tiles to
 * Q8_0 (kn_quant.h to_q8_0) and uses Q8_0's multi-row kernel: the same
 * bits, faster where the ISA's Q8_0 kernel is (AVX2 on a 2-core EPYC:
 * 23.3 against 19.3 GOP/s for Q5_0, 21 for Q4_0), the widening paid once
 * per tile for all the rows. */
#define DEV_PAR_WIDEN_ROWS 16

/* dev_par_linear with binary16 weights W16 [N,K] (decode steps): output
 * columns split in tiles of DEV_PAR_QTILE, kn gemv_f16 per row and tile,
 * so W is read once for all M rows and each row's result is the same for
 * any M and any thread count. */
void dev_par_linear_f16(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
			const uint16_t *W16, const float *b, float *y);

struct kn_qops;

/* y[M,N] = x[M,K] W[N,K]^T + b[N] with W in a GGUF block type (q's
 * kernels; row r at (const char *)W + r * row_bytes), computed as
 * llama.cpp's CPU back end does. A type with an integer path
 * (q->gemv_xq: Q4_0 .. Q6_K) has its x rows quantized to the partner
 * format once on the caller thread, then the threads take output columns
 * and call q->gemv_xq (q->gemm_xq for several rows; from
 * DEV_PAR_WIDEN_ROWS rows Q4_0 / Q5_0 tiles widened to Q8_0 first) in
 * weight tiles of DEV_PAR_QTILE rows. F16/BF16
 * weights (q->round_x) get x rounded to their precision first, like
 * ggml's vec_dot_type. Without an integer path: up to 4 rows, q->gemv
 * per row over output columns; more rows, each thread dequantises
 * DEV_PAR_QTILE weight rows at a time into its part of scratch and
 * multiplies them with OpenBLAS (F32 weights straight from W).
 * scratch: (q->round_x ? M * K : 0) + dev_pool_size(p) * DEV_PAR_QTILE * K
 * floats; NULL turns the integer path and the rounding off (gemv / tiles
 * on the float x; tests), and is not allowed with a packed layout's
 * kernels (kn_quant.h struct kn_qpack: integer path only, no q->gemv). */
void dev_par_qlinear(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
		     const void *W, size_t row_bytes, const struct kn_qops *q, const float *b,
		     float *y, float *scratch);

/* One matrix of dev_par_qlinear_multi: W [N, K] in q's block type (as
 * dev_par_qlinear takes it), bias b or NULL, results y [M, N]; or, where
 * yrows is not NULL, results in the M rows yrows[m] (N floats each); or,
 * where argmax is not NULL, only each row's kn argmax (the index of its
 * largest result, the first of equals; a NaN never taken but at index 0)
 * in argmax[m]. With yrows or argmax, y is scratch of the same size whose
 * contents are left unspecified. */
struct dev_par_qmat {
	const void *W;
	size_t row_bytes, N;
	const struct kn_qops *q;
	const float *b;
	float *y;
	float *const *yrows;
	int32_t *argmax;
};

#define DEV_PAR_QMULTI_MAX 4

/* dev_par_qlinear for n matrices over the same x [M, K] (a layer's q, k
 * and v; gate and up), with the same results: where every matrix takes
 * the integer path, each N is a multiple of 16 and scratch holds the
 * quantized rows of them all, one run of the pool quantizes x once per
 * partner format (its rows split over the threads, then a barrier; fewer
 * rows than threads, a decode step's, each thread quantizes them all into
 * its own copy and waits for no one), then takes all the
 * matrices' columns laid end to end; otherwise dev_par_qlinear one matrix
 * after the other. yrows get their rows tile by tile, while the tile is
 * in cache (the lm head's logits into each sequence's buffer); argmax,
 * each row's maximum. scratch: as dev_par_qlinear's. Either way each
 * result equals dev_par_qlinear's bit for bit. */
void dev_par_qlinear_multi(struct dev_pool *p, size_t M, size_t K, const float *x,
			   const struct dev_par_qmat *mats, size_t n, float *scratch);

struct kn_i8w;

/* Widest input dev_par_linear_i8 takes (its threads quantize rows into a
 * stack buffer of this many bytes). */
#define DEV_PAR_I8_MAX_K 32768

/* y[M,N] = x[M,K] W[N,K]^T + b[N] with W int8 (kn_i8.h: packed, one scale
 * per output row; N, K from w, K <= DEV_PAR_I8_MAX_K), CTranslate2's int8
 * compute type: each x row quantized per row (scale max|x| / 127) by the
 * thread that needs it, integer products, the float epilogue of kn_i8.h.
 * Rows are split when there are enough of them, else output columns (in
 * blocks of 16; every thread then quantizes the few rows itself). A row's
 * result is the same for any M, any split and any thread count. b may be
 * NULL; y does not alias x. */
void dev_par_linear_i8(struct dev_pool *p, size_t M, const float *x, const struct kn_i8w *w,
		       const float *b, float *y);

/* LayerNorm of each of rows rows of width d; y may equal x. */
void dev_par_layer_norm(struct dev_pool *p, size_t rows, size_t d, const float *x,
			const float *gamma, const float *beta, float *y, float eps);

/* x = gelu(x) over n elements; y += x over n elements. */
void dev_par_gelu(struct dev_pool *p, float *x, size_t n);
void dev_par_add(struct dev_pool *p, float *y, const float *x, size_t n);

/* x = cap tanh(x / cap) over n elements (kn_softcap; gemma2's logits). */
void dev_par_softcap(struct dev_pool *p, float *x, size_t n, float cap);

/* kn_attention_bf16 with heads split over threads; scratch holds
 * dev_pool_size(p) * dev_par_attention_bf16_scratch(n_q, n_kv, head_dim)
 * floats (one region per thread: the size kn_attention's score block
 * takes, or what the bfloat16 path needs when that is more). */
void dev_par_attention_bf16(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			    size_t head_dim, const float *q, size_t ldq, const float *k,
			    size_t ldk, const float *v, size_t ldv, float *out, size_t ldo,
			    float *scratch);
size_t dev_par_attention_bf16_scratch(size_t n_q, size_t n_kv, size_t head_dim);

/* kn_attention_i8 with heads split over threads; scratch holds
 * dev_pool_size(p) * dev_par_attention_i8_scratch(n_q, n_kv, head_dim)
 * floats (one region per thread, as for the bfloat16 path). */
void dev_par_attention_i8(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			  size_t head_dim, const float *q, size_t ldq, const float *k, size_t ldk,
			  const float *v, size_t ldv, float *out, size_t ldo, float *scratch);
size_t dev_par_attention_i8_scratch(size_t n_q, size_t n_kv, size_t head_dim);

/* kn_bf16_linear (y[M,N] = x[M,K] . W^T + b with W packed by kn_bf16_pack)
 * with rows split over threads, each with its block of scratch (allocated
 * here, 32 x K bfloat16 per thread). 0, or -ST_NOMEM with nothing written. */
int dev_par_linear_bf16(struct dev_pool *p, size_t M, size_t N, size_t K, const float *x,
			const uint16_t *Wp, const float *b, float *y);

/* kn_attention with heads split over threads; scratch holds
 * dev_pool_size(p) * n_q * n_kv floats (one score block per thread). */
void dev_par_attention(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
		       size_t head_dim, const float *q, size_t ldq, const float *k, size_t ldk,
		       const float *v, size_t ldv, float *out, size_t ldo, bool causal,
		       size_t q_pos0, float *scratch);

/* kn_kv16_pack with heads split over threads. */
void dev_par_kv16_pack(struct dev_pool *p, const float *kv, size_t ldkv, size_t n_kv,
		       size_t n_heads, size_t head_dim, uint16_t *cache);

/* kn_attention_kv16 over a kn_kv16_pack cache (no mask) with heads split
 * over threads; scratch holds dev_pool_size(p) * kn_kv16_scratch(n_kv)
 * floats. */
void dev_par_attention_kv16(struct dev_pool *p, size_t n_q, size_t n_kv, size_t n_heads,
			    size_t head_dim, const float *q, size_t ldq, const uint16_t *cache,
			    float *out, size_t ldo, float *scratch);

/* kn_conv1d with output rows split over threads; scratch holds
 * t_out * c_in * k floats (each thread uses its rows' part). */
void dev_par_conv1d(struct dev_pool *p, size_t t_in, size_t c_in, size_t c_out, size_t k,
		    size_t stride, size_t pad, const float *x, const float *w, const float *bias,
		    float *y, float *scratch);

#endif /* DEV_PAR_H */
