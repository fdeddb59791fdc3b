/* eng_llm.h - decoder-only transformer language models from GGUF files:
 * gemma2, gemma3, granite, olmo2, phi3 and the llama family (llama,
 * mistral, qwen2, qwen3), one code path with per-architecture settings
 * read from the file's metadata.
 *
 * Source followed: llama.cpp's graphs (src/models/llama.cpp, qwen2.cpp,
 * qwen3.cpp, gemma2.cpp, gemma3.cpp, granite.cpp, olmo2.cpp, phi3.cpp),
 * its fused-tensor loading (create_tensor_qkv) and hparams loading
 * (src/llama-model.cpp, the models' load_arch_hparams), and
 * the GGUF metadata keys of the GGUF specification ({arch}.block_count,
 * {arch}.attention.head_count, ...). Every size comes from the file.
 *
 * The pass runs through the device interface (devices/dev.h) on the
 * queue it is given: the weights go to that queue's device once (the cpu
 * back end reads the GGUF map's blocks in place or repacks them; others
 * copy them) and are shared by every replica there; activations and KV
 * caches live on the device. A struct eng_llm_kv is one sequence's KV
 * cache. Thread: eng_llm is immutable after load but for its per-device
 * weights (made under a lock); a kv belongs to one caller.
 */
#ifndef ENG_LLM_H
#define ENG_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_gguf;
struct dev;
struct dev_queue;
struct eng_llm;
struct eng_llm_kv;

enum eng_llm_arch {
	ENG_LLM_ARCH_LLAMA = 0, /* llama, mistral: SwiGLU, RoPE NORM */
	ENG_LLM_ARCH_QWEN2,     /* + q/k/v biases, RoPE NEOX */
	ENG_LLM_ARCH_QWEN3,     /* + per-head q/k RMSNorm, RoPE NEOX */
	ENG_LLM_ARCH_GEMMA3,    /* GeGLU, q/k norms, post norms, scaled embeddings, SWA */
	ENG_LLM_ARCH_GEMMA2,    /* gemma3 less q/k norms, plus attention and final
				 * logit soft-capping; every other layer SWA */
	ENG_LLM_ARCH_GRANITE,   /* llama plus embedding, attention, residual and logit scales */
	ENG_LLM_ARCH_OLMO2,     /* no pre-norms: post norms, q/k RMSNorm over the whole width */
	ENG_LLM_ARCH_PHI3,      /* fused q/k/v and gate/up matrices, RoPE NEOX, no SWA */
	ENG_LLM_ARCH_COUNT
};

struct eng_llm_hp {
	enum eng_llm_arch arch;
	int n_vocab, n_embd, n_layer, n_ff, n_ctx_train;
	int n_head, n_head_kv, head_dim_k, head_dim_v, n_rot;
	float rms_eps;
	float rope_base, rope_base_swa; /* swa layers use rope_base_swa */
	float rope_freq_scale;          /* 1 / linear scaling factor, global layers */
	bool rope_neox;                 /* pairs (j, j + n_rot/2) instead of (2j, 2j+1) */
	int n_swa;                      /* sliding window (0: none) */
	int swa_pattern;                /* layer il is global when il % pattern == pattern-1 */
	float attn_scale;               /* on q before the dot products */
	float embd_scale;               /* multiplies token embeddings (sqrt(n_embd) for gemma) */
	float attn_softcap;             /* 0, or the cap of attention scores (gemma2) */
	float final_softcap;            /* 0, or the cap of the logits (gemma2) */
	float residual_scale;           /* multiplies each block's output before the residual add */
	float logit_scale;              /* logits are divided by it (granite) */
	bool geglu;                     /* GELU-gated FFN (gemma) instead of SwiGLU */
	bool qk_norm_full;              /* q/k norms over all heads at once (olmo2), not per head */
	bool tied_output;               /* logits from token_embd.weight */
};

/* eng_llm_load - read the architecture and weights of g (borrowed; must
 * outlive the model). Errors: -ST_UNSUPPORTED (architecture or tensor type
 * not implemented), -ST_CORRUPT (missing tensor, shapes that disagree with
 * the metadata), -ST_NOMEM; err names the key or tensor. */
int eng_llm_load(const struct eng_gguf *g, struct eng_llm **out, char *err, size_t errlen);
void eng_llm_destroy(struct eng_llm *m);

/* eng_llm_hold - m's weights on d, made now if d has none yet (every cpu
 * device shares the host's), held in *set until eng_llm_release: a
 * replica holds its device's for its life. err says why not (a type d
 * lacks, out of memory). */
int eng_llm_hold(const struct eng_llm *m, struct dev *d, void **set, char *err, size_t errlen);
void eng_llm_release(const struct eng_llm *m, void *set);
const struct eng_llm_hp *eng_llm_hp(const struct eng_llm *m);
const char *eng_llm_arch_name(enum eng_llm_arch a);

/* eng_llm_kv_create - an empty KV cache of n_ctx positions: n_layer x
 * n_ctx x n_head_kv x head_dim values for K and for V, IEEE binary16 when
 * f16 (llama.cpp's default cache type, half the bytes a decode step reads
 * at long contexts; attention still computes in float32 on the widened
 * values: kn_attention_window_f16), else float32; in d's memory (d
 * borrowed: it must outlive the cache). -ST_INVAL (n_ctx 0), -ST_NOMEM. */
int eng_llm_kv_create(const struct eng_llm *m, struct dev *d, size_t n_ctx, bool f16,
		      struct eng_llm_kv **out);

/* eng_llm_kv_create_room - eng_llm_kv_create, its arrays with room for
 * n_room of the n_ctx positions now (1 .. n_ctx; more: n_ctx): a pass
 * that needs more grows them (eng_llm_kv_reserve), so that a sequence
 * holds memory for what it writes, not its whole context. */
int eng_llm_kv_create_room(const struct eng_llm *m, struct dev *d, size_t n_ctx, size_t n_room,
			   bool f16, struct eng_llm_kv **out);

/* eng_llm_kv_reserve - room for positions [0, n) (n <= n_ctx): arrays of
 * at least twice the room (at most n_ctx) take the cached positions'
 * keys and values, the old ones freed. Called by eng_llm_forward_batch
 * for each sequence before its pass. 0, -ST_TOOBIG (n > n_ctx), or
 * -ST_NOMEM with the cache as it was. */
int eng_llm_kv_reserve(struct eng_llm_kv *kv, size_t n);
/* eng_llm_kv_copy_prefix - the keys and values of src's positions [0, n)
 * into dst, which is empty, of the same model, type and device (another
 * sequence whose tokens begin as src's did: its prompt prefix need not
 * be computed again); dst's length becomes n. -ST_INVAL (a cache that
 * does not match, dst not empty, n past src's length), or
 * eng_llm_kv_reserve's errors with dst as it was. */
int eng_llm_kv_copy_prefix(struct eng_llm_kv *dst, const struct eng_llm_kv *src, size_t n);
/* eng_llm_kv_clone_prefix - a new cache of src's model, type, device and
 * context holding src's positions [0, n) (0 < n <= src's length) with
 * room for exactly those (a finished sequence's prompt kept for prefix
 * caching: its own cache has room for what it generated too). *out is
 * the caller's (eng_llm_kv_destroy). -ST_INVAL, -ST_NOMEM. */
int eng_llm_kv_clone_prefix(const struct eng_llm_kv *src, size_t n, struct eng_llm_kv **out);
/* eng_llm_kv_bytes - the bytes kv's arrays hold (its room, not its length). */
size_t eng_llm_kv_bytes(const struct eng_llm_kv *kv);
/* eng_llm_kv_position_bytes - the bytes of one position's keys and values
 * over all layers. */
size_t eng_llm_kv_position_bytes(const struct eng_llm_kv *kv);
void eng_llm_kv_destroy(struct eng_llm_kv *kv);
size_t eng_llm_kv_len(const struct eng_llm_kv *kv);
size_t eng_llm_kv_ctx(const struct eng_llm_kv *kv);
/* Forget positions >= len (len <= current length). */
void eng_llm_kv_truncate(struct eng_llm_kv *kv, size_t len);

/* eng_llm_forward - feed n tokens at positions kv_len .. kv_len+n-1 (the
 * cache grows by n) on queue dq, whose device holds kv. logits (host):
 * [n_vocab] for the last token, or, when all_logits, [n][n_vocab] for
 * every token (teacher forcing, tests). Long inputs are processed in
 * chunks internally; n > 1 tokens are a prompt (eng_llm_seq's prompt),
 * one a decode step. Called by dq's work items, or by one other thread
 * while dq runs none. Returns 0, -ST_TOOBIG (context full), -ST_INVAL (a
 * token id out of range), -ST_NOMEM, -ST_UNSUPPORTED (a weight type the
 * device lacks), -ST_DEVICE. */
int eng_llm_forward(const struct eng_llm *m, struct eng_llm_kv *kv, struct dev_queue *dq,
		    const int32_t *tokens, size_t n, bool all_logits, float *logits);

/* Scratch for eng_llm_forward_batch on queue dq: activations for up to
 * rows rows and caches of up to n_ctx positions on dq's device, and a
 * reference to the model's weights there (made by the first scratch of a
 * device). One per replica, reused by every pass. -ST_INVAL, -ST_NOMEM,
 * -ST_UNSUPPORTED, -ST_DEVICE, with err saying which. */
struct eng_llm_scratch;
int eng_llm_scratch_create(const struct eng_llm *m, struct dev_queue *dq, size_t rows,
			   size_t n_ctx, struct eng_llm_scratch **out, char *err, size_t errlen);
void eng_llm_scratch_destroy(struct eng_llm_scratch *s);

/* One sequence's part of a batched pass. */
struct eng_llm_seq {
	struct eng_llm_kv *kv;   /* its cache: n tokens go to positions kv_len .. */
	const int32_t *tokens;   /* [n] */
	size_t n;                /* >= 1 */
	float *logits;           /* NULL: none (a prefill chunk); else [n_vocab] for the
				  * last token, or [n][n_vocab] when all_logits */
	bool all_logits;
	int32_t *greedy;         /* NULL, or (logits NULL) where the index of the last
				  * token's largest logit goes, dev_argmax's choice
				  * (greedy decoding): the logits are then never
				  * written out, the lm head keeps each tile's
				  * maximum */
	bool prompt;             /* the tokens are a prompt's (a prefill chunk, even of
				  * one token): its attention as prefill rows
				  * (dev_attn_seq's prompt), the same bits however
				  * the prompt is cut; false: a decode step */
};

/* eng_llm_forward_batch - one forward pass over several sequences
 * (continuous batching, llama.cpp's ubatch): their rows go through every
 * matrix product together (one pass over each weight matrix for the whole
 * batch), each sequence's rows attend to its own cache only, and each
 * cache grows by its n (its arrays first made room for them:
 * eng_llm_kv_reserve, whose -ST_NOMEM ends the call before the pass). Rows in total <= the scratch's rows; a cache may
 * appear once. Results per sequence equal those of separate passes (the
 * same kernels per row; tests/unit/engine/models/test_llm.c checks it). It
 * runs on the scratch's queue. Returns 0, -ST_INVAL (a token out of range,
 * an empty part, a cache twice, float32 and binary16 caches mixed),
 * -ST_TOOBIG (a cache or the scratch full), nothing changed; or an op's
 * error (-ST_NOMEM, -ST_DEVICE), the caches' lengths unchanged. */
int eng_llm_forward_batch(const struct eng_llm *m, struct eng_llm_scratch *s,
			  const struct eng_llm_seq *seqs, size_t n_seqs);

#endif /* ENG_LLM_H */
