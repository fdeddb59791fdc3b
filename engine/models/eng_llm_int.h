/* eng_llm_int.h - eng_llm's weight views, shared by eng_llm_load.c,
 * eng_llm_dev.c and eng_llm_fwd.c only. */
#ifndef ENG_LLM_INT_H
#define ENG_LLM_INT_H


#include "engine/models/eng_llm.h"

struct dev;
struct eng_binds;
struct dev_mat;

/* A weight matrix in the map: n_rows rows of n_cols elements of a GGUF
 * type (the GGUF dims are [n_cols, n_rows]), or a float vector. */
struct el_mat {
	const void *data;         /* borrowed from the GGUF map; NULL: absent */
	int type;                 /* ggml type number */
	size_t row_bytes;
	int n_rows, n_cols;
};

/* A layer's weights on a device (eng_llm_dev.c): vectors are device
 * addresses (NULL where the model has none), matrices dev_mats. */
struct el_dlayer {
	const float *attn_norm, *q_norm, *k_norm, *post_attn_norm;
	const float *ffn_norm, *post_ffw_norm;
	const float *bq, *bk, *bv;
	struct dev_mat *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
};

/* The model's weights on one device (or, for cpu devices, on the host's
 * memory every cpu device shares), made on first use and shared by every
 * replica there. */
struct eng_llm_w {
	struct dev *dev;            /* where they live: the binds' host device (cpu)
				     * or the caller's (eng_binds.h) */
	struct dev_mat *embd;       /* token lookups (the output's matrix when tied) */
	struct dev_mat *output;
	const float *output_b, *output_norm;
	struct el_dlayer *layers;   /* [n_layer] */
};

/* eng_llm_w_get - the weights of m usable by queues of d (made now if
 * none are), with a reference; eng_llm_w_put drops it. err says why not
 * (a type the device lacks, out of memory). */
int eng_llm_w_get(const struct eng_llm *m, struct dev *d, struct eng_llm_w **out, char *err,
		  size_t errlen);
void eng_llm_w_put(const struct eng_llm *m, struct eng_llm_w *w);

/* eng_llm_w_free_all - free every binding left (eng_llm_destroy). */
void eng_llm_w_free_all(struct eng_llm *m);

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
	struct eng_binds *binds;           /* the weights on devices (eng_llm_dev.c) */
};

/* eng_llm_binds_init - m->binds with its host device, a cpu device opened
 * at load, on the loading thread (its hwloc probe must not run on a
 * replica's thread beside the event loop); err says why not. */
int eng_llm_binds_init(struct eng_llm *m, char *err, size_t errlen);

struct eng_llm_kv {
	struct dev *dev;                   /* where the cache lives (borrowed) */
	size_t n_ctx, len;                 /* the most positions it may hold; those it holds */
	size_t cap;                        /* positions its arrays have room for (<= n_ctx) */
	size_t n_layer, n_head, head_dim;  /* a layer's block: n_head blocks of cap x head_dim */
	size_t row;                        /* n_head head_dim: floats per position per layer */
	float *k, *v;                      /* [n_layer][n_head][cap][head_dim] float32 on dev, or
					    * NULL */
	uint16_t *k16, *v16;               /* the same in binary16, or NULL */
};

#endif /* ENG_LLM_INT_H */
