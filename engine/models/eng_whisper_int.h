/* eng_whisper_int.h - the Whisper weight and scratch structs, shared by
 * eng_whisper_load.c and eng_whisper_fwd.c only. */
#ifndef ENG_WHISPER_INT_H
#define ENG_WHISPER_INT_H

#include <stdbool.h>

#include "engine/models/eng_whisper.h"

struct eng_binds;

/* nn.Linear: w [n_out, n_in] row-major, b [n_out] (NULL: no bias), as
 * host rows each device's set is made from (eng_whisper_dev.c).
 * Decoder weights stored as float16 also keep those bits in w16, which a
 * decode step (a few rows) reads at half the bandwidth. Compute type
 * bfloat16: wbf holds w rounded to bfloat16 (dev_round_bf16), for
 * products of many rows. Compute type int8: i8 holds DEV_TYPE_I8R rows
 * (until eng_whisper_seal frees them) and w, w16 are NULL; otherwise i8
 * is NULL. */
struct ew_linear {
	float *w;
	uint16_t *w16; /* [n_out, n_in] binary16, or NULL */
	uint16_t *wbf; /* [n_out, n_in] bfloat16, or NULL */
	void *i8;      /* [n_out] DEV_TYPE_I8R rows, or NULL */
	float *b;
	int n_out, n_in;
};

/* nn.LayerNorm over d_model. */
struct ew_norm {
	float *gamma, *beta;
};

struct ew_enc_layer {
	struct ew_norm ln_attn;
	struct ew_linear qkv; /* [3d, d]: q, k, v stacked (CT2 fuses them) */
	struct ew_linear out; /* [d, d] */
	struct ew_norm ln_ffn;
	struct ew_linear ffn1, ffn2; /* [d_ffn, d], [d, d_ffn] */
};

struct ew_dec_layer {
	struct ew_norm ln_self;
	struct ew_linear self_qkv, self_out;
	struct ew_norm ln_cross;
	struct ew_linear cross_q;  /* [d, d] */
	struct ew_linear cross_kv; /* [2d, d]: k then v of the encoder output */
	struct ew_linear cross_out;
	struct ew_norm ln_ffn;
	struct ew_linear ffn1, ffn2;
};

struct eng_whisper {
	struct eng_whisper_hp hp;
	struct ew_linear conv1, conv2; /* w [d, c_in, 3] */
	float *enc_pos;                /* [n_audio_ctx, d] */
	struct ew_enc_layer *enc;      /* [enc_layers] */
	struct ew_norm enc_ln;
	float *tok_emb;                /* [n_vocab, d], also the output projection */
	uint16_t *tok_emb16;           /* the same as binary16 when stored so, or NULL */
	void *tok_emb_i8;              /* compute type int8: the projection as
					* DEV_TYPE_I8R rows, else NULL (tok_emb16 is
					* then NULL too) */
	float *dec_pos;                /* [n_text_ctx, d] */
	struct ew_dec_layer *dec;      /* [dec_layers] */
	struct ew_norm dec_ln;
	bool bf16;                     /* encoder attention in bfloat16 (DEV_ATTN_BF16) */
	bool int8_enc, int8_dec;       /* compute type int8 there (what the model loaded
					* with: the I8R host rows go at eng_whisper_seal) */
	bool i8_attn;                  /* encoder attention on the int8 path
					* (DEV_ATTN_I8): compute type int8 */
	bool cross_bf16;               /* the cross-attention keys and values kept in
					* bfloat16 (dev_kv16_pack): every compute type
					* but the float32 (exact) one */
	int (*align_heads)[2];         /* config.json alignment_heads {layer, head} */
	size_t n_align_heads;
	struct eng_binds *binds;       /* the weights on devices (eng_whisper_dev.c) */
	void **allocs;                 /* every weight array above, for destroy */
	size_t n_allocs, cap_allocs;
	size_t weight_bytes;
};

/* A linear's matrices on one device (ew_linear's, NULL where it has none):
 * w F32, w16 F16 and wbf BF16 with DEV_MAT_CT2, i8 DEV_TYPE_I8R; b the
 * bias in device memory. */
struct ew_dlinear {
	struct dev_mat *w, *w16, *wbf, *i8;
	const float *b;
	size_t n_out;
};

struct ew_dnorm {
	const float *gamma, *beta;
};

struct ew_denc_layer {
	struct ew_dnorm ln_attn, ln_ffn;
	struct ew_dlinear qkv, out, ffn1, ffn2;
};

struct ew_ddec_layer {
	struct ew_dnorm ln_self, ln_cross, ln_ffn;
	struct ew_dlinear self_qkv, self_out, cross_q, cross_kv, cross_out, ffn1, ffn2;
};

/* The model's weights on one device (eng_whisper_w_get): every matrix a
 * dev_mat, every vector in device memory. */
struct eng_whisper_w {
	struct dev *dev;
	struct dev_mat *conv1, *conv2; /* F32 [d, c_in 3] */
	const float *conv1_b, *conv2_b;
	const float *enc_pos, *dec_pos;
	struct ew_denc_layer *enc;
	struct ew_dnorm enc_ln;
	struct ew_ddec_layer *dec;
	struct ew_dnorm dec_ln;
	struct dev_mat *emb;  /* the token embeddings (F32): lookups */
	struct dev_mat *proj; /* the tied output projection: I8R, F16 or F32 with
			       * DEV_MAT_CT2; emb itself when F32 */
};

/* eng_whisper_w_get - w's weights on d (made now if new; a cpu device
 * shares the host's set), one more reference; eng_whisper_w_put drops
 * it. err says why not (a type the device lacks, out of memory). */
int eng_whisper_w_get(const struct eng_whisper *w, struct dev *d, struct eng_whisper_w **out,
		      char *err, size_t errlen);
void eng_whisper_w_put(const struct eng_whisper *w, struct eng_whisper_w *ww);

/* eng_whisper_untrack - free p, a block of `bytes` the loader allocated
 * for w (a float copy int8 replaced, int8 rows every device copied);
 * NULL or a block not w's: nothing. */
void eng_whisper_untrack(struct eng_whisper *w, void *p, size_t bytes);

/* eng_whisper_binds_init / _free - w->binds (load, destroy);
 * eng_whisper_binds_seal - no set made from now on (eng_binds_seal). */
void eng_whisper_binds_seal(struct eng_whisper *w);
int eng_whisper_binds_init(struct eng_whisper *w, char *err, size_t errlen);
void eng_whisper_binds_free(struct eng_whisper *w);

/* One window's encoder output and the decoder's cross-attention keys and
 * values, in device memory of ww's device; the host staging of its input. */
struct eng_whisper_enc {
	const struct eng_whisper *w;
	struct eng_whisper_w *ww; /* a reference: the weights on this device */
	size_t n_ctx;   /* encoder positions the window has (eng_whisper_enc_trim):
			 * n_audio_ctx, or fewer; rows below are [n_ctx, ...] of
			 * buffers sized for n_audio_ctx */
	float *x;       /* [n_audio_ctx, d]: encoder output after the final norm */
	float *cross_kv; /* [dec_layers][n_audio_ctx, 2d], or NULL when: */
	uint16_t *cross_kv16; /* the same in bfloat16 (model bf16 set), else NULL:
			       * per layer a dev_kv16_pack cache */
	float *mel_host; /* [3000, n_mels] time-major input, host memory */
	float *mel_t;   /* the same on the device */
	float *conv1;   /* [3000, d] */
	float *h;       /* [n_audio_ctx, max(3d, d_ffn)] */
	float *attn;    /* [n_audio_ctx, d] */
};

struct eng_whisper_kv {
	struct dev *dev; /* where the cache lives */
	size_t len;  /* positions filled */
	float *k, *v; /* [dec_layers][n_text_ctx, d] each */
};

#endif /* ENG_WHISPER_INT_H */
