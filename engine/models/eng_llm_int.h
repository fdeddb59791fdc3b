/* eng_llm_int.h - eng_llm's weight views, shared by eng_llm_load.c and
 * eng_llm_fwd.c only. */
#ifndef ENG_LLM_INT_H
#define ENG_LLM_INT_H

#include "engine/models/eng_llm.h"

struct kn_qops;

/* A weight matrix in the map: n_rows rows of n_cols elements of a GGUF
 * type (the GGUF dims are [n_cols, n_rows]), or a float vector. */
struct el_mat {
	const void *data;         /* borrowed from the GGUF map, or `packed`; NULL: absent */
	const struct kn_qops *q;  /* the type's kernels (on the packed layout when packed) */
	void *packed;             /* owned: the rows in kn_qpack's layout, or NULL */
	size_t row_bytes;
	int n_rows, n_cols;
};

struct el_layer {
	const float *attn_norm, *q_norm, *k_norm, *post_attn_norm; /* attn_norm NULL: none (olmo2) */
	const float *ffn_norm, *post_ffw_norm;                     /* ffn_norm likewise */
	const float *bq, *bk, *bv;         /* qwen2 biases, or NULL */
	struct el_mat wq, wk, wv, wo;
	struct el_mat w_gate, w_up, w_down;
	bool swa;                          /* sliding-window layer */
};

struct eng_llm {
	struct eng_llm_hp hp;
	struct el_mat tok_embd;            /* [n_vocab rows, n_embd] */
	struct el_mat output;              /* lm head, or tok_embd when tied */
	const float *output_b;             /* its bias (phi3), or NULL */
	const float *output_norm;
	const float *rope_freqs;           /* [n_rot / 2] RoPE frequency factors (llama 3), or NULL */
	struct el_layer *layers;           /* [n_layer] */
	float *gelu_f16;                   /* [65536] GELU of every binary16 value, rounded to
					    * binary16 (ggml's table; gemma3's GeGLU), or NULL */
};

struct eng_llm_kv {
	size_t n_ctx, len;
	size_t row;                        /* floats per position per layer */
	float *k, *v;                      /* [n_layer][n_ctx][row] float32, or NULL */
	uint16_t *k16, *v16;               /* the same in binary16, or NULL */
};

#endif /* ENG_LLM_INT_H */
