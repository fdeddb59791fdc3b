/* dev.h - the device interface: what engine/ may know about where its
 * work runs. One header for every back end; engine/ never names one.
 *
 * A device is an execution resource with its own memory and in-order work
 * queues. The `cpu` back end (dev_cpu.c): a device is a set of cores,
 * "cpu:0", "cpu:0-3", "cpu:0,2,4-5", checked against the cores this
 * process may use (hwloc's allowed cpuset, else sched_getaffinity); its
 * memory is host memory; a queue is one host thread pinned to the first of
 * its cores plus a team of worker threads (dev_pool.h) pinned one per
 * remaining core, so `threads` compute threads never exceed the cores
 * given. The `opencl` back end (devices/opencl/): a
 * device is one OpenCL device ("opencl", "opencl:N", "opencl:P.D"), its
 * memory the device's (dev_alloc hands out fake addresses that fault on
 * the host), a queue one unpinned host thread enqueueing on an in-order
 * cl_command_queue (threads 1; dev_queue_pool is NULL there). A `cuda`
 * back end would be the same with streams: the calls below do not change.
 * `inferd devices` prints dev_list.
 *
 * Model of use (engine/sched/eng_sched.c): a model replica opens its device,
 * creates one queue with its thread count and submits its scheduling loop
 * to it as a long-running work item; compute inside the item uses
 * dev_queue_pool(q) for parallel-for. Weights are shared (read-only host
 * memory for the cpu back end); per-replica scratch and KV caches come
 * from dev_alloc.
 *
 * Thread: dev_open/dev_close and dev_queue_create/destroy on any thread
 * (not concurrently on the same object); dev_queue_submit/sync from any
 * thread; dev_alloc/free/copy from any thread.
 */
#ifndef DEV_H
#define DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dev;
struct dev_queue;
struct dev_pool;

enum dev_kind {
	DEV_KIND_CPU = 0,
	DEV_KIND_CUDA,	 /* reserved: no back end yet (dev_open says so) */
	DEV_KIND_OPENCL, /* devices/opencl/: any OpenCL 1.2+ device */
};

#define DEV_MAX_CPUS 1024 /* CPU ids accepted in a spec: 0 .. DEV_MAX_CPUS-1 */
#define DEV_NAME_MAX 128 /* caps.name with its NUL; a longer set name ends in "..." */

/* What a device offers (filled by dev_open). */
struct dev_caps {
	enum dev_kind kind;
	char name[DEV_NAME_MAX];  /* canonical spec: "cpu:0-3", "cpu:0,2-3" (ranges
				   * merged, sorted); a set too fragmented to fit
				   * ends in "..." (dev_cpu_ids has it exactly) */
	int n_cores;              /* cores (cpu: CPU ids in the set) */
	const char *simd;         /* kernel ISA in use when opened (kn_ops()->name):
				   * "ref", "avx2", "avx512"; static storage */
	uint64_t mem_bytes;       /* memory the device can address (cpu: physical RAM) */
	char model[DEV_NAME_MAX]; /* what the hardware calls itself: the CPU's model
				   * name, the OpenCL device's CL_DEVICE_NAME */
	int compute_units;	  /* cpu: n_cores; opencl: CL_DEVICE_MAX_COMPUTE_UNITS */
};

/* dev_cpus_available - the CPU ids this process may run on, ascending,
 * into cpus[0..max) (max >= 1; the first max when there are more);
 * returns how many it stored (> 0), -ST_INVAL (cpus NULL or max < 1) or
 * -ST_IO. The set is hwloc's binding of the process (the union over its
 * threads) within hwloc's allowed cpuset (cgroups, offline CPUs); if hwloc
 * fails, sched_getaffinity of the calling thread. Ids >= DEV_MAX_CPUS are
 * left out. */
int dev_cpus_available(int *cpus, int max);

/* dev_open - the device named by spec: "cpu" (every available core),
 * "cpu:N", "cpu:A-B", or a comma list of those ("cpu:0,2-3"); "opencl"
 * (the first OpenCL device), "opencl:N" (the Nth over all platforms) or
 * "opencl:P.D" (platform P, device D). Errors:
 * -ST_INVAL (syntax, an empty set, a CPU id out of range), -ST_NOTFOUND
 * (a core this process may not use: err names it and lists the available
 * ones; no such OpenCL device: err lists those present, or says no OpenCL
 * platform was found), -ST_UNSUPPORTED (a kind without a back end,
 * "cuda:0"), -ST_DEVICE (the OpenCL driver would not make a context),
 * -ST_NOMEM, -ST_IO (the CPUs could not be listed); err (may be NULL when
 * errlen is 0) says which, and is "" on success. Specs are strict: no
 * spaces, no empty items, ids 0 .. DEV_MAX_CPUS-1, A <= B; duplicates and
 * overlaps merge. *out is new (dev_close), NULL on error. The cpu back end
 * also makes sure the kernels are initialised (kn_ops(): it keeps a table
 * an earlier kn_init chose, and OpenBLAS runs 1 thread). */
int dev_open(const char *spec, struct dev **out, char *err, size_t errlen);

/* dev_close - free the device; its queues must be destroyed first. NULL
 * is a no-op. */
void dev_close(struct dev *d);

/* dev_caps - what the device offers. Borrowed, valid until dev_close. */
const struct dev_caps *dev_caps(const struct dev *d);

/* dev_cpu_ids - the device's CPU ids ascending (cpu back end; NULL and 0
 * for others). Borrowed. */
const int *dev_cpu_ids(const struct dev *d, int *n);

/* Memory. dev_alloc returns n bytes aligned to 64 (NULL when out of
 * memory; n == 0 gives a unique pointer; cpu: through common/mem.h, so
 * mem_fail_after reaches it), dev_free releases it (NULL is a no-op; only
 * pointers from dev_alloc of the same device), dev_copy copies n bytes
 * between any two device or host addresses (cpu: memcpy; the ranges must
 * not overlap; n == 0 touches nothing). */
void *dev_alloc(struct dev *d, size_t n);
void dev_free(struct dev *d, void *p);
void dev_copy(struct dev *d, void *dst, const void *src, size_t n);

/* dev_upload / dev_download - n bytes from host memory to device memory
 * (dst from dev_alloc of q's device, plus an offset) or back, after the
 * work already on q; both return once the bytes have arrived (src may be
 * reused, dst read). cpu: memcpy. Returns 0, -ST_INVAL (the range is not
 * inside one allocation) or -ST_IO (the driver failed; the device is then
 * unusable). n == 0 touches nothing. */
int dev_upload(struct dev_queue *q, void *dst, const void *src, size_t n);
int dev_download(struct dev_queue *q, void *dst, const void *src, size_t n);

/* dev_list - the caps of every device this build can open, cpu first
 * (one entry: every available core), then each back end's in its own
 * order, into out[0..max); returns how many it stored. A back end whose
 * driver is absent lists nothing. */
int dev_list(struct dev_caps *out, int max);

/* dev_cpu_kernels - one line naming the kernels the cpu back end runs on
 * this CPU (its ISA's table, the int8 and bfloat16 products) and the
 * ceiling INFERD_CPU_ISA sets, into buf. Returns 0, or -ST_INVAL when
 * INFERD_CPU_ISA is set to no known ceiling (buf then says so). */
int dev_cpu_kernels(char *buf, size_t len);

/* --- compute ------------------------------------------------------------
 * The operations the model families need, by what the models need
 * (Whisper's encoder/decoder, the GGUF decoder-only models), each
 * implemented by every back end (struct dev_ops, dev_int.h). An op is
 * enqueued on q after the work already on it; on a back end with
 * asynchronous queues it may return before it has run (cpu: it has run,
 * split over the queue's pool). Ops are called by q's work items, or by
 * one other thread while q runs none (tests, tools).
 *
 * Pointers are device addresses of q's device (from dev_alloc, plus an
 * offset) unless named host. Rows are row-major float32 and contiguous:
 * row r of width d at x + r * d. Every op returns 0, -ST_INVAL (a size of
 * 0 where one is needed; an address range outside the device's memory),
 * -ST_NOMEM, or -ST_DEVICE (the back end failed: the device is then
 * unusable). Each op names the cpu reference it must agree with
 * (kernels/kn.h) and the bound the tests hold other back ends to. */

/* y = x / sqrt(mean(x^2) + eps) * w per row (w NULL: no weight; y may be
 * x): kn rms_norm, ggml_rms_norm then a multiply. */
int dev_rms_norm(struct dev_queue *q, const float *x, const float *w, float *y, size_t rows,
		 size_t d, float eps);

/* y = (x - mean) / sqrt(var + eps) * gamma + beta per row (y may be x):
 * kn layer_norm. */
int dev_layer_norm(struct dev_queue *q, const float *x, const float *gamma, const float *beta,
		   float *y, size_t rows, size_t d, float eps);

/* Element-wise over n floats: y += x; x *= s; x = cap tanh(x / cap)
 * (gemma2's soft cap); x = gelu(x) with erf (Whisper). */
int dev_add(struct dev_queue *q, float *y, const float *x, size_t n);
int dev_scale(struct dev_queue *q, float *x, float s, size_t n);
int dev_softcap(struct dev_queue *q, float *x, size_t n, float cap);
int dev_gelu(struct dev_queue *q, float *x, size_t n);

/* The gated activations of the MLPs: g = act(g) * u over n floats.
 * SILU: x / (1 + e^-x) (SwiGLU: llama, qwen, olmo2, phi3, granite);
 * GELU_TANH: the tanh approximation (GeGLU); GELU_F16: ggml's CPU GeGLU,
 * the tanh GELU of g rounded to binary16, rounded to binary16 again
 * (gemma2/3: what llama.cpp computes there). */
enum dev_glu { DEV_GLU_SILU = 0, DEV_GLU_GELU_TANH, DEV_GLU_GELU_F16 };
int dev_glu(struct dev_queue *q, enum dev_glu kind, float *g, const float *u, size_t n);

/* x = softmax(x) per row of n, in place, max subtracted first. */
int dev_softmax(struct dev_queue *q, float *x, size_t rows, size_t n);

/* n bytes from src to dst, both device addresses of q's device (not
 * overlapping), in order with q's other work (a KV cache's new rows). */
int dev_memcpy(struct dev_queue *q, void *dst, const void *src, size_t n);

/* dev_kv_store - n new rows of a KV cache's keys or values into the
 * cache, one block per KV head: x holds row j's n_heads heads of head_dim
 * floats side by side, rows ldx apart; head g's row j goes to y + g hs +
 * j head_dim elements (y: the first new position of head 0's block), as
 * float32 (f16 false) or as binary16 rounded to nearest even (f16: a
 * float16 cache, as ggml's cpy to F16). Each head's keys are then one
 * run of memory, which a decode step's attention streams. */
int dev_kv_store(struct dev_queue *q, void *y, size_t hs, bool f16, const float *x, size_t ldx,
		 size_t n, size_t n_heads, size_t head_dim);

/* host out[r] = the index of row r's largest of n floats (the first of
 * equals; kn argmax: a NaN is never taken but at index 0). Returns once
 * out is written. */
int dev_argmax(struct dev_queue *q, const float *x, size_t rows, size_t n, int32_t *out);

/* dev_rope_angles - the rotary angles of n_tok positions (host pos[])
 * into cs [n_tok, n_rot] on q's device: cs[t n_rot + 2j] = cos theta_j,
 * + 1 its sine, theta_j = pos freq_scale base^(-2j / n_rot) /
 * freq_factors[j] (host memory, n_rot / 2 floats; NULL: none). Computed
 * on the host in double (kn_rope_angles) and uploaded, so every back end
 * rotates by the same angles; returns once cs is written. */
int dev_rope_angles(struct dev_queue *q, float *cs, size_t n_tok, size_t n_rot,
		    const int32_t *pos, float base, float freq_scale, const float *freq_factors);

/* dev_rope - x [n_tok, ld] (n_head heads of head_dim at column h *
 * head_dim) rotated in place by dev_rope_angles' cs: the first n_rot dims
 * of each head, pairs (2j, 2j + 1), or (j, j + n_rot / 2) when neox
 * (kn_rope_apply; llama.cpp's ROPE_TYPE_NORM / NEOX). */
int dev_rope(struct dev_queue *q, float *x, size_t n_tok, size_t ld, size_t n_head,
	     size_t head_dim, size_t n_rot, const float *cs, bool neox);

/* Self-attention of a batch of sequences over their KV caches
 * (grouped-query: query head h reads KV head h / (n_head / n_head_kv)).
 * Query rows [r0, r0 + n) of q belong to sequence s, at positions pos0 ..
 * pos0 + n - 1; row i sees cached keys [lo, pos0 + i] with lo =
 * pos0 + i + 1 - window (window 0: from 0), scores scaled by scale and
 * soft-capped by softcap (> 0; 0: none) before the softmax; its output
 * goes to the same row of out. A sequence's k and v point at key 0 of its
 * cache for this layer (KV head g at g hs elements, hs 0 meaning head_dim:
 * the heads side by side in each row; key j at row j of ldk / ldv
 * elements; dev_kv_store's blocks: hs the cache's keys times head_dim,
 * ldk = ldv = head_dim), in kv_type: 0 float32, 1 binary16 (read exactly).
 * cpu: prefill rows by kn_attention_window(_f16) per (sequence, query
 * head); a decode row (n 1, prompt false) by kn_attention_decode per (KV
 * head, part of its keys), the parts merged (dev_cpu_attn.c); a prompt's
 * lone row (n 1, prompt true: a chunked prefill's last cut) as prefill
 * rows, so its bits do not depend on where the prompt was cut; the units
 * split over its
 * pool by rows times keys.
 * full: no mask (Whisper's encoder self-attention and its decoder's
 * cross-attention): every row of sequence s sees its n_kv keys [0, n_kv)
 * (pos0 ignored); n_head == n_head_kv, no window, no soft cap, and scale
 * 1 / sqrt(head_dim), as the cpu's kernels fix it; the keys and values
 * float32 (kv_type 0), or kv_type 2: k points at a dev_kv16_pack cache of
 * the sequence's n_kv keys (v ignored), read in float32 as
 * kn_attention_kv16 does (the cross-attention of Whisper's bfloat16
 * compute types), with prec DEV_ATTN_F32. prec
 * picks the products' precision there, as the model's compute type
 * does: DEV_ATTN_F32 (kn_attention), DEV_ATTN_BF16 (kn_attention_bf16:
 * q, k, the weights and v rounded to bfloat16), DEV_ATTN_I8
 * (kn_attention_i8: int8 codes); the cpu splits the heads of each
 * sequence over its pool, as the Whisper encoder calls them. Other back
 * ends may compute a lower precision in float32, more exactly than it
 * asks. Causal attention takes DEV_ATTN_F32 only.
 * ct2: causal attention as CTranslate2 computes it (Whisper's decoder
 * self-attention; cpu: kn_attention's causal mask, each sequence's heads
 * split over the pool as the full attention's are, where the default is
 * llama.cpp's kn_attention_window): n_head == n_head_kv, float32 keys, no
 * window, no soft cap, scale 1 / sqrt(head_dim). Other back ends compute
 * the same attention either way. */
enum dev_attn_prec { DEV_ATTN_F32, DEV_ATTN_BF16, DEV_ATTN_I8 };

struct dev_attn {
	size_t n_head, n_head_kv, head_dim;
	const float *q;
	size_t ldq;
	float *out;
	size_t ldo;
	size_t ldk, ldv;
	int kv_type;
	size_t window;
	float scale, softcap;
	bool full;
	enum dev_attn_prec prec;
	bool ct2;
};

struct dev_attn_seq {
	size_t r0, n, pos0;
	const void *k, *v;
	size_t n_kv; /* full attention's keys (causal: pos0 + n, this ignored) */
	size_t hs;   /* causal: elements from KV head g's column 0 to g + 1's (0: head_dim) */
	bool prompt; /* causal: the rows are a prompt's (prefill), even one */
};

int dev_attention(struct dev_queue *q, const struct dev_attn *a, const struct dev_attn_seq *seqs,
		  size_t n_seqs);

/* dev_attention_scores - head h's attention scores before the softmax,
 * the numbers full attention turns into weights (Whisper's word
 * alignment reads them from its cross-attention heads, as CTranslate2's
 * align() does): out[i][j] = (q_i . k_j) / sqrt(head_dim) for query rows
 * i < n_q and keys j < n_cols. q: rows ldq apart, head h at column h
 * head_dim; keys: kv_type 0, float32 rows ldk apart from key 0 (head h at
 * column h head_dim), or 2, a dev_kv16_pack cache of n_kv >= n_cols keys
 * of n_heads heads (ldk ignored); out: [n_q, n_cols] rows ldo apart; all
 * on q's device. cpu: kn_attention_scores(_kv16); other back ends within
 * float32 sum order of it. */
struct dev_scores {
	size_t n_q, n_cols, head_dim, h, n_heads;
	const float *q;
	size_t ldq;
	int kv_type;
	const void *k;
	size_t ldk, n_kv;
	float *out;
	size_t ldo;
};
int dev_attention_scores(struct dev_queue *q, const struct dev_scores *s);

/* dev_kv16_pack - a bfloat16 cache of n_kv attention keys and values for
 * full attention (kv_type 2), laid out as kernels/kn_attn.h's
 * kn_kv16_pack: from float32 rows kv (key j's row at j * ldkv: its keys
 * at columns [0, d), its values at [d, 2d), d = n_heads * head_dim),
 * rounded to nearest even, into cache of dev_kv16_len(n_kv, n_heads,
 * head_dim) uint16_t elements; both on q's device. Every back end writes
 * the same bits (cpu: the heads split over the pool). */
size_t dev_kv16_len(size_t n_kv, size_t n_heads, size_t head_dim);
int dev_kv16_pack(struct dev_queue *q, const float *kv, size_t ldkv, size_t n_kv, size_t n_heads,
		  size_t head_dim, uint16_t *cache);

/* --- weights and matrix products ---------------------------------------- */

/* Element types of weights, by GGUF's numbering (ggml_type): F32 0,
 * F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11,
 * Q4_K 12, Q5_K 13, Q6_K 14, IQ4_NL 20, IQ4_XS 23, BF16 30: the block
 * formats of ggml-common.h, kept on the device as they are in the file.
 * And one of inferd's own, numbered past ggml's:
 * DEV_TYPE_I8R - CTranslate2's int8 weights: each row a float32 scale s
 * (what one code is worth, 1 / CTranslate2's weight_scale) followed by
 * cols int8 codes c (w = c s, codes in [-127, 127]), 4 + cols bytes,
 * unaligned. Products quantize each row of x to int8 with its own scale
 * max|x| / 127 (CTranslate2's dynamic quantization; cpu: kernels/kn_i8.h);
 * other back ends may multiply the float x by the dequantized weights.
 * dev_embed refuses it, and no back end reads a DEV_TYPE_I8R matrix's
 * host rows after dev_mat_create returns (each computes from its own
 * copy): the caller may free them once every device's matrix is made. */
#define DEV_TYPE_I8R 64
struct dev_mat;

/* dev_type_block - the name of weight type `type` as ggml names it
 * ("Q4_K", "I8R" for DEV_TYPE_I8R) and the elements and bytes of one of
 * its blocks (NULL arguments skipped); NULL for a number no type has.
 * Every ggml type is named, those no back end multiplies too (a GGUF
 * reader names what it refuses). */
const char *dev_type_block(int type, uint32_t *block_elems, uint32_t *block_bytes);

/* dev_mat_row_bytes - bytes of one row of cols elements of weight type
 * `type` as GGUF stores it (whole blocks of ggml-common.h's formats), or
 * 0: a type no back end multiplies, or cols not a whole number of its
 * blocks. */
size_t dev_mat_row_bytes(int type, size_t cols);

/* dev_quantize_i8r - rows x cols float32 weights w (row-major) as
 * DEV_TYPE_I8R rows into out [rows * dev_mat_row_bytes(DEV_TYPE_I8R,
 * cols)]: per row s = max|w| / 127 and codes rint(w / s), kn_i8.h's
 * scheme (CTranslate2's int8 quantization, python/ctranslate2/specs/
 * model_spec.py, which multiplies by 127 / max|w| instead; an all-zero
 * row gets s = 0). Host memory; load time. 0 or -ST_NOMEM. */
int dev_quantize_i8r(const float *w, size_t rows, size_t cols, void *out);

/* dev_f16_to_f32 / dev_bf16_to_f32 - widen n binary16 / bfloat16 values
 * (little-endian bits at x, any alignment) to float32, exactly, into y.
 * Host memory: weights converted at load. */
void dev_f16_to_f32(const void *x, size_t n, float *y);
void dev_bf16_to_f32(const void *x, size_t n, float *y);

/* dev_host_logsumexp - log(sum_i exp(x[i])) over host memory x[0..n)
 * (n >= 1), in double; dev_host_argmax - the first index of the largest
 * of x[0..n) (n >= 1). For logits read back to the host (a sampler's
 * scores, word probabilities): the calling thread, with the host CPU's
 * fastest kernels (kn.h's logsumexp and argmax, which every ISA computes
 * alike up to the sum order of the exponentials). */
double dev_host_logsumexp(const float *x, size_t n);
size_t dev_host_argmax(const float *x, size_t n);

/* The host front end: work that runs on the host CPU, on the calling
 * thread, whatever device the model is on (as faster-whisper, whisper.cpp
 * and vLLM compute audio features on the CPU): its input comes from the
 * host (decoded audio) and it is small beside the model's passes. A new
 * back end implements none of it.
 *
 * dev_log_mel_create - Whisper's log-mel spectrogram for n_mels 80 or 128
 * (openai/whisper audio.py log_mel_spectrogram; faster-whisper 1.2.1's
 * FeatureExtractor: STFT n_fft 400, hop 160, Hann window, power, Slaney
 * mel filterbank, log10 clamped to max - 8, (x + 4) / 4; kernels/kn_mel.h
 * has the details). *out new, freed with dev_log_mel_destroy (NULL a
 * no-op). -ST_INVAL (other n_mels, out NULL), -ST_NOMEM.
 * dev_log_mel_frames - frames of n samples (after the caller's padding):
 * n / 160. dev_log_mel_scratch_len - floats of scratch dev_log_mel needs
 * (a constant, about 1.1 MB).
 * dev_log_mel - the features of samples[0..n) (16 kHz mono) into out
 * [n_mels][dev_log_mel_frames(n)], mel-major; scratch caller-owned, at
 * least dev_log_mel_scratch_len floats. Any number of threads at once,
 * each with its own scratch. -ST_INVAL (scratch too small, NULL). */
struct dev_log_mel;
int dev_log_mel_create(int n_mels, struct dev_log_mel **out);
void dev_log_mel_destroy(struct dev_log_mel *m);
size_t dev_log_mel_frames(size_t n_samples);
size_t dev_log_mel_scratch_len(const struct dev_log_mel *m);
int dev_log_mel(const struct dev_log_mel *m, const float *samples, size_t n, float *out,
		float *scratch, size_t scratch_len);

/* dev_host_linear - y[m][n] = x[m][k] w[n][k]^T + b[n] (b may be NULL;
 * nn.Linear's [out, in] weights), float32 in host memory, on the calling
 * thread (OpenBLAS sgemm, one thread): a host front end's products. */
void dev_host_linear(size_t m, size_t n, size_t k, const float *x, const float *w, const float *b,
		     float *y);

/* dev_round_bf16 - y[i] = x[i] rounded to bfloat16 (nearest, ties to
 * even: the rounding every BF16 product here applies), as the bits of
 * BF16 weights. Host memory. */
void dev_round_bf16(const float *x, size_t n, uint16_t *y);

/* dev_mat_create - a weight matrix of rows x cols of `type` on d, made
 * from host rows (row r at host + r * row_bytes, GGUF's layout) in the
 * layout d's back end computes with: cpu borrows host or repacks it
 * where its ISA has a faster layout (kernels/kn_quant.h kn_qpack); opencl
 * copies it to the device. Every back end keeps reading host for
 * dev_embed (looked up on the host, as llama.cpp keeps its input layer
 * there), so host must stay valid until dev_mat_destroy.
 * Weights are made once per device and shared by every queue of it.
 * flags DEV_MAT_LOOKUP: the matrix only feeds dev_embed (an embedding
 * table not tied to the output), so it is neither repacked nor copied,
 * and dev_linear refuses it.
 * Returns 0, -ST_UNSUPPORTED (a type this back end lacks: err names it),
 * -ST_INVAL (cols not a whole number of blocks, row_bytes wrong),
 * -ST_NOMEM, -ST_DEVICE. */
#define DEV_MAT_LOOKUP 1u
/* flags DEV_MAT_CT2: products as CTranslate2 computes them (the Whisper
 * models' reference) instead of llama.cpp: F32 and F16 weights multiply
 * x as it is, in float32 (cpu: F32 OpenBLAS sgemm, F16 kn gemv_f16 over
 * the binary16 bits; llama.cpp rounds x to binary16 for F16); BF16 rounds
 * x to bfloat16 and sums in float32 as both do (cpu: kernels/kn_bf16.h,
 * which needs AVX512-BF16 or AMX: -ST_UNSUPPORTED without). Other types
 * refuse it (-ST_INVAL); DEV_TYPE_I8R has only this arithmetic and
 * needs it. Such a matrix is never a lookup table, and dev_linear_n
 * refuses it. */
#define DEV_MAT_CT2 2u
int dev_mat_create(struct dev *d, int type, size_t rows, size_t cols, const void *host,
		   size_t row_bytes, unsigned flags, struct dev_mat **out, char *err,
		   size_t errlen);
void dev_mat_destroy(struct dev_mat *m);

/* dev_linear - y[M, rows] = x[M, cols] W^T + b (b NULL: none), W a
 * dev_mat of q's device; x, b, y device addresses, y not aliasing x.
 * cpu: kernels/kn_quant.h's kernels as llama.cpp's CPU back end computes
 * them (x quantized to the type's integer partner, Q8_0 / Q8_1 / Q8_K,
 * where it has one; F16 and BF16 x rounded to the weights' precision).
 * Other back ends may compute the float product of the dequantized
 * weights; the tests hold them to the cpu within that quantization of x. */
int dev_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
	       const float *b, float *y);

/* dev_linear_n - dev_linear for n (<= DEV_LINEAR_MAX) matrices over the
 * same x [M, cols] (a layer's q, k and v; gate and up; the lm head): the
 * same results as n calls, x prepared once (cpu: quantized once). Each
 * output: y [M, rows] on the device; or, where yrows is not NULL, row m
 * into host memory yrows[m] (rows floats); or, where argmax is not NULL,
 * only each row's argmax (dev_argmax's rule) into host argmax[m]; y is
 * then device scratch of [M, rows] whose contents are left unspecified.
 * Host outputs are written when the call returns. */
#define DEV_LINEAR_MAX 4
struct dev_linear_out {
	const struct dev_mat *w;
	const float *b;
	float *y;
	float *const *yrows;
	int32_t *argmax;
};
int dev_linear_n(struct dev_queue *q, const float *x, size_t M, const struct dev_linear_out *o,
		 size_t n);

/* dev_embed - y[i] = row ids[i] of m, dequantized to float32, for i < n
 * (host ids, each < m's rows; y [n, cols] on q's device): a token
 * embedding lookup. */
int dev_embed(struct dev_queue *q, const struct dev_mat *m, const int32_t *ids, size_t n,
	      float *y);

/* dev_conv1d - 1-D convolution with zero padding (torch.nn.Conv1d;
 * Whisper's front end: conv1 k 3 stride 1 pad 1, conv2 k 3 stride 2 pad 1):
 * x [t_in, c_in] time-major on q's device; w an F32 dev_mat of c_out rows
 * of c_in * k (PyTorch's and CTranslate2's [c_out, c_in, k] layout: input
 * channel c's taps at columns c k .. c k + k - 1); b [c_out] on the device
 * or NULL; y [t_out, c_out] with t_out = dev_conv1d_out_len(t_in, k,
 * stride, pad), not aliasing x. Input rows outside [0, t_in) read as zero.
 * cpu: kn_conv1d_rows (im2col, then a product over the whole patch
 * matrix) split over the pool by output rows, as the Whisper encoder
 * calls it; other back ends sum the taps in their own order and are held
 * to it within float32 sum-order error. Returns 0, -ST_INVAL (w not F32,
 * cols not c_in k, k or stride 0, t_out 0, w of another device), -ST_NOMEM,
 * -ST_DEVICE. */
size_t dev_conv1d_out_len(size_t t_in, size_t k, size_t stride, size_t pad);
int dev_conv1d(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
	       size_t stride, size_t pad, const float *x, size_t t_in, const float *b, float *y);

/* A work item: runs on the queue's thread; pool is the queue's compute
 * team (dev_pool_run(pool, ...); NULL where the back end has none). */
typedef void (*dev_work_fn)(void *arg, struct dev_pool *pool);

/* dev_queue_create - an in-order work queue on d with `threads` compute
 * threads (1 .. n_cores: the queue's own thread plus threads - 1 pool
 * workers, pinned to the first `threads` cores of the device, one each).
 * Errors: -ST_INVAL (threads out of range: err says the device's cores),
 * -ST_NOMEM, -ST_IO (a thread could not start). */
int dev_queue_create(struct dev *d, int threads, struct dev_queue **out, char *err,
		     size_t errlen);

/* dev_queue_destroy - run what was submitted, then stop and join the
 * threads. A long-running item must have been told to return first.
 * Items still running may submit: they get -ST_CLOSED. Not from an item
 * of the queue (it would join itself). NULL is a no-op. */
void dev_queue_destroy(struct dev_queue *q);

/* dev_queue_submit - append fn(arg, pool) to the queue; items run one
 * after another in submission order. Returns 0, -ST_NOMEM, or -ST_CLOSED
 * (the queue is being destroyed). */
int dev_queue_submit(struct dev_queue *q, dev_work_fn fn, void *arg);

/* dev_queue_sync - wait until every item submitted before the call has
 * returned (items submitted meanwhile are not waited for) and the device
 * has run every op enqueued on q before it, so that another queue of the
 * device may read what they wrote; returns 0, or -ST_DEVICE (the device
 * failed). Not from inside an item of the same queue (it would wait for
 * itself): -ST_INVAL then. Never from the queue's pool workers (inside a
 * dev_pool_run of its item): that deadlocks and is not detected. */
int dev_queue_sync(struct dev_queue *q);

/* dev_queue_parallel - host work a queue's work item splits over the
 * queue's host threads: fn(arg, ith, nth) for every ith < nth, nth the
 * queue's compute threads on the cpu back end (its pool) and 1 elsewhere
 * (the calling thread); returns when all have. For host computation
 * beside the device's (a sampler scanning many sequences' logits).
 * Called as q's ops are, fn calling no op of q. */
typedef void (*dev_host_fn)(void *arg, int ith, int nth);
void dev_queue_parallel(struct dev_queue *q, dev_host_fn fn, void *arg);

/* dev_queue_threads - compute threads of the queue (its `threads`). */
int dev_queue_threads(const struct dev_queue *q);

/* dev_queue_device - the device the queue belongs to. */
struct dev *dev_queue_device(const struct dev_queue *q);

#endif /* DEV_H */
