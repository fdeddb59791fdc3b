/* eng_whisper_int.h - the Whisper weight and scratch structs, shared by
 * eng_whisper_load.c and eng_whisper_fwd.c only. */
#ifndef ENG_WHISPER_INT_H
#define ENG_WHISPER_INT_H

#include "engine/models/eng_whisper.h"
#include "kernels/kn_i8.h"

/* nn.Linear: w [n_out, n_in] row-major, b [n_out] (NULL: no bias).
 * Decoder weights stored as float16 also keep those bits in w16, which a
 * decode step (one row) reads at half the bandwidth (kn gemv_f16).
 * Compute type int8: i8 holds the packed int8 weights (kn_i8.h) and w,
 * w16 are NULL; otherwise i8.packed is NULL. */
struct ew_linear {
	float *w;
	uint16_t *w16; /* [n_out, n_in] binary16, or NULL */
	uint16_t *wbf; /* compute type bfloat16: w packed by kn_bf16_pack, or NULL */
	struct kn_i8w i8;
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
	struct kn_i8w tok_emb_i8;      /* compute type int8: the projection in int8, else
					* packed NULL (tok_emb16 is then NULL too) */
	float *dec_pos;                /* [n_text_ctx, d] */
	struct ew_dec_layer *dec;      /* [dec_layers] */
	struct ew_norm dec_ln;
	bool bf16;                     /* encoder attention in bfloat16 (kn_attention_bf16) */
	bool i8_attn;                  /* encoder attention on the int8 path
					* (kn_attention_i8): compute type int8 */
	bool cross_bf16;               /* the cross-attention keys and values kept in
					* bfloat16 (kn_kv16_pack): every compute type
					* but the float32 (exact) one */
	int (*align_heads)[2];         /* config.json alignment_heads {layer, head} */
	size_t n_align_heads;
	void **allocs;                 /* every weight array above, for destroy */
	size_t n_allocs, cap_allocs;
	size_t weight_bytes;
};

/* One window's encoder scratch and output; cross K/V for the decoder. */
struct eng_whisper_enc {
	size_t n_ctx;   /* encoder positions the window has (eng_whisper_enc_trim):
			 * n_audio_ctx, or fewer; rows below are [n_ctx, ...] of
			 * buffers sized for n_audio_ctx */
	float *x;       /* [n_audio_ctx, d]: encoder output after the final norm */
	float *cross_kv; /* [dec_layers][n_audio_ctx, 2d], or NULL when: */
	uint16_t *cross_kv16; /* the same in bfloat16 (model bf16 set), else NULL:
			       * per layer a kn_kv16_pack cache (kn_attn.h) */
	float *mel_t;   /* [3000, n_mels] time-major input */
	float *conv1;   /* [3000, d] */
	float *h;       /* [n_audio_ctx, max(3d, d_ffn)] */
	float *attn;    /* [n_audio_ctx, d] */
	float *scratch; /* im2col and attention scores */
	size_t scratch_len;
};

struct eng_whisper_kv {
	size_t len;  /* positions filled */
	float *k, *v; /* [dec_layers][n_text_ctx, d] each */
};

#endif /* ENG_WHISPER_INT_H */
