/* eng_whisper_fwd.c - the Whisper encoder and decoder forward passes in
 * float32: matrix products through kn_linear (OpenBLAS), attention,
 * LayerNorm and GELU through kernels/. Follows openai/whisper model.py
 * (AudioEncoder, TextDecoder, ResidualAttentionBlock): pre-norm residual
 * blocks, x + attn(ln(x)), x + mlp(ln(x)).
 */
#include <math.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/models/eng_whisper_int.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_blas.h"
#include "devices/dev_par.h"
#include "devices/dev_pool.h"

#define EW_LN_EPS 1e-5f /* torch.nn.LayerNorm default, used by Whisper */

static size_t ew_max(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* --- scratch ------------------------------------------------------------ */

/* uint16_t elements of one decoder layer's bfloat16 cross-attention cache
 * (kn_kv16_pack of its keys and values [A, 2d]). */
static size_t ew_kv16_layer(const struct eng_whisper_hp *hp)
{
	return kn_kv16_len((size_t)hp->n_audio_ctx, (size_t)hp->n_heads,
			   (size_t)(hp->d_model / hp->n_heads));
}

int eng_whisper_enc_create(const struct eng_whisper *w, int nth, struct eng_whisper_enc **out)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t T = ENG_WHISPER_N_FRAMES, A = (size_t)hp->n_audio_ctx, d = (size_t)hp->d_model;
	struct eng_whisper_enc *e = mem_calloc(1, sizeof(*e));
	*out = NULL;
	if (!e)
		return -ST_NOMEM;
	/* im2col of conv2 ([A, 3d]) or conv1 ([T, 3 n_mels]), or one attention
	 * score block ([A, A], or what the bfloat16 or int8 path needs) per
	 * thread. */
	if (nth < 1)
		nth = 1;
	size_t hd = d / (size_t)hp->n_heads, per = A * A; /* floats per thread */
	if (w->bf16)
		per = dev_par_attention_bf16_scratch(A, A, hd);
	else if (w->i8_attn)
		per = dev_par_attention_i8_scratch(A, A, hd);
	e->scratch_len = ew_max(ew_max(A * 3 * d, T * 3 * (size_t)hp->n_mels), (size_t)nth * per);
	e->x = mem_alloc(A * d * sizeof(float));
	if (w->cross_bf16)
		e->cross_kv16 = mem_alloc((size_t)hp->dec_layers * ew_kv16_layer(hp) *
					  sizeof(uint16_t));
	else
		e->cross_kv = mem_alloc((size_t)hp->dec_layers * A * 2 * d * sizeof(float));
	e->mel_t = mem_alloc(T * (size_t)hp->n_mels * sizeof(float));
	e->conv1 = mem_alloc(T * d * sizeof(float));
	e->h = mem_alloc(A * ew_max(3 * d, (size_t)hp->d_ffn) * sizeof(float));
	e->attn = mem_alloc(A * d * sizeof(float));
	e->scratch = mem_alloc(e->scratch_len * sizeof(float));
	bool cross = e->cross_kv || e->cross_kv16;
	if (!e->x || !cross || !e->mel_t || !e->conv1 || !e->h || !e->attn || !e->scratch) {
		eng_whisper_enc_destroy(e);
		return -ST_NOMEM;
	}
	e->n_ctx = A;
	*out = e;
	return 0;
}

void eng_whisper_enc_trim(const struct eng_whisper *w, struct eng_whisper_enc *e, size_t n_ctx)
{
	size_t A = (size_t)w->hp.n_audio_ctx;
	e->n_ctx = n_ctx && n_ctx < A ? n_ctx : A;
}

size_t eng_whisper_enc_ctx(const struct eng_whisper_enc *e)
{
	return e->n_ctx;
}

void eng_whisper_enc_destroy(struct eng_whisper_enc *e)
{
	if (!e)
		return;
	mem_free(e->x);
	mem_free(e->cross_kv);
	mem_free(e->cross_kv16);
	mem_free(e->mel_t);
	mem_free(e->conv1);
	mem_free(e->h);
	mem_free(e->attn);
	mem_free(e->scratch);
	mem_free(e);
}

int eng_whisper_kv_create(const struct eng_whisper *w, struct eng_whisper_kv **out)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t n = (size_t)hp->dec_layers * (size_t)hp->n_text_ctx * (size_t)hp->d_model;
	struct eng_whisper_kv *kv = mem_calloc(1, sizeof(*kv));
	*out = NULL;
	if (!kv)
		return -ST_NOMEM;
	kv->k = mem_alloc(n * sizeof(float));
	kv->v = mem_alloc(n * sizeof(float));
	if (!kv->k || !kv->v) {
		eng_whisper_kv_destroy(kv);
		return -ST_NOMEM;
	}
	*out = kv;
	return 0;
}

void eng_whisper_kv_destroy(struct eng_whisper_kv *kv)
{
	if (!kv)
		return;
	mem_free(kv->k);
	mem_free(kv->v);
	mem_free(kv);
}

void eng_whisper_kv_copy(const struct eng_whisper *w, struct eng_whisper_kv *dst,
			 const struct eng_whisper_kv *src)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t layer = (size_t)hp->n_text_ctx * (size_t)hp->d_model;
	size_t used = src->len * (size_t)hp->d_model * sizeof(float);
	for (int l = 0; l < hp->dec_layers; l++) {
		memcpy(dst->k + l * layer, src->k + l * layer, used);
		memcpy(dst->v + l * layer, src->v + l * layer, used);
	}
	dst->len = src->len;
}

size_t eng_whisper_kv_len(const struct eng_whisper_kv *kv)
{
	return kv->len;
}

void eng_whisper_kv_reset(struct eng_whisper_kv *kv)
{
	kv->len = 0;
}

/* --- shared blocks ------------------------------------------------------ */

static void ew_layer_norm_rows(struct dev_pool *p, const struct ew_norm *n, const float *x,
			       float *y, size_t rows, size_t d)
{
	dev_par_layer_norm(p, rows, d, x, n->gamma, n->beta, y, EW_LN_EPS);
}

/* Rows at or below which binary16 weights are read instead of float32:
 * a matrix-vector product is bound by the bytes of W it reads. */
#define EW_F16_MAX_ROWS ENG_WHISPER_STEP_MAX /* eng_whisper_decode_steps' rows */

static void ew_linear_apply(struct dev_pool *p, const struct ew_linear *l, const float *x,
			    float *y, size_t rows)
{
	if (l->wbf && rows > EW_F16_MAX_ROWS &&
	    !dev_par_linear_bf16(p, rows, (size_t)l->n_out, (size_t)l->n_in, x, l->wbf, l->b, y))
		return; /* compute type bfloat16 (out of memory: float32 below) */
	if (l->i8.packed) /* compute type int8 */
		dev_par_linear_i8(p, rows, x, &l->i8, l->b, y);
	else if (l->w16 && rows <= EW_F16_MAX_ROWS)
		dev_par_linear_f16(p, rows, (size_t)l->n_out, (size_t)l->n_in, x, l->w16, l->b, y);
	else
		dev_par_linear(p, rows, (size_t)l->n_out, (size_t)l->n_in, x, l->w, l->b, y);
}

/* x += ffn2(gelu(ffn1(ln(x)))) over rows; h holds [rows, d_ffn], t [rows, d]. */
static void ew_mlp(struct dev_pool *p, const struct ew_norm *ln, const struct ew_linear *f1,
		   const struct ew_linear *f2, float *x, float *t, float *h, size_t rows, size_t d)
{
	ew_layer_norm_rows(p, ln, x, t, rows, d);
	ew_linear_apply(p, f1, t, h, rows);
	dev_par_gelu(p, h, rows * (size_t)f1->n_out);
	ew_linear_apply(p, f2, h, t, rows);
	dev_par_add(p, x, t, rows * d);
}

/* --- encoder ------------------------------------------------------------ */

/* Self-attention of one window's A rows: qkv [A, 3d] -> out [A, d]. */
static void ew_encoder_attention(const struct eng_whisper *w, struct dev_pool *p, size_t A,
				 const float *qkv, float *out, float *scratch)
{
	size_t d = (size_t)w->hp.d_model, H = (size_t)w->hp.n_heads;
	if (w->bf16)
		dev_par_attention_bf16(p, A, A, H, d / H, qkv, 3 * d, qkv + d, 3 * d, qkv + 2 * d,
				       3 * d, out, d, scratch);
	else if (w->i8_attn)
		dev_par_attention_i8(p, A, A, H, d / H, qkv, 3 * d, qkv + d, 3 * d, qkv + 2 * d,
				     3 * d, out, d, scratch);
	else
		dev_par_attention(p, A, A, H, d / H, qkv, 3 * d, qkv + d, 3 * d, qkv + 2 * d, 3 * d,
				  out, d, false, 0, scratch);
}

static void ew_encoder_front(const struct eng_whisper *w, struct eng_whisper_enc *e,
			     struct dev_pool *p, const float *mel, size_t stride, size_t frame0,
			     size_t n_frames)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t A = e->n_ctx, T = ENG_WHISPER_INPUT_STRIDE * A;
	size_t M = (size_t)hp->n_mels, d = (size_t)hp->d_model;
	if (n_frames > T)
		n_frames = T;
	/* transpose the window to time-major, zero past the audio (a trimmed
	 * window's last frames are padding too, so its positions see what the
	 * full window's first A positions see) */
	for (size_t t = 0; t < T; t++)
		for (size_t m = 0; m < M; m++)
			e->mel_t[t * M + m] = t < n_frames ? mel[m * stride + frame0 + t] : 0.0f;
	dev_par_conv1d(p, T, M, d, 3, 1, 1, e->mel_t, w->conv1.w, w->conv1.b, e->conv1, e->scratch);
	dev_par_gelu(p, e->conv1, T * d);
	dev_par_conv1d(p, T, d, d, 3, 2, 1, e->conv1, w->conv2.w, w->conv2.b, e->x, e->scratch);
	dev_par_gelu(p, e->x, A * d);
	dev_par_add(p, e->x, w->enc_pos, A * d);
}

static void ew_encoder_layer(const struct eng_whisper *w, const struct ew_enc_layer *l,
			     struct eng_whisper_enc *e, struct dev_pool *p)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t A = e->n_ctx, d = (size_t)hp->d_model;
	ew_layer_norm_rows(p, &l->ln_attn, e->x, e->attn, A, d);
	ew_linear_apply(p, &l->qkv, e->attn, e->h, A);
	ew_encoder_attention(w, p, A, e->h, e->attn, e->scratch);
	ew_linear_apply(p, &l->out, e->attn, e->conv1, A); /* conv1 is free now: [A, d] temp */
	dev_par_add(p, e->x, e->conv1, A * d);
	ew_mlp(p, &l->ln_ffn, &l->ffn1, &l->ffn2, e->x, e->attn, e->h, A, d);
}

static void ew_cross_kv16(const struct eng_whisper_hp *hp, struct dev_pool *p, const float *kv,
			  size_t A, uint16_t *out)
{
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads;
	dev_par_kv16_pack(p, kv, 2 * d, A, H, d / H, out);
}

void eng_whisper_encode(const struct eng_whisper *w, struct eng_whisper_enc *e,
			struct dev_pool *p, const float *mel, size_t mel_stride, size_t frame0,
			size_t n_frames)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t A = e->n_ctx, d = (size_t)hp->d_model;
	ew_encoder_front(w, e, p, mel, mel_stride, frame0, n_frames);
	for (int i = 0; i < hp->enc_layers; i++)
		ew_encoder_layer(w, &w->enc[i], e, p);
	ew_layer_norm_rows(p, &w->enc_ln, e->x, e->x, A, d);
	/* The decoder's cross-attention keys and values depend only on the
	 * encoder output: compute them once per window (in bfloat16 through
	 * h, which is free now). */
	for (int i = 0; i < hp->dec_layers; i++) {
		size_t off = (size_t)i * (size_t)hp->n_audio_ctx * 2 * d;
		ew_linear_apply(p, &w->dec[i].cross_kv, e->x,
				e->cross_kv16 ? e->h : e->cross_kv + off, A);
		if (e->cross_kv16)
			ew_cross_kv16(hp, p, e->h, A, e->cross_kv16 + (size_t)i * ew_kv16_layer(hp));
	}
}

/* --- encoder, several windows at once ------------------------------------- */

/* One window of a batched encoder pass. */
struct ew_win {
	struct eng_whisper_enc *e;
	const float *mel;
	size_t stride, frame0, n_frames;
};

/* The layers over n windows' rows stacked ([sum A_b, d], window b's A_b =
 * encs[b]->n_ctx rows from row r0[b]): norms and matrix products over all
 * rows at once, attention per window. */
static void ew_encoder_stacked(const struct eng_whisper *w, struct dev_pool *p,
			       struct eng_whisper_enc *const *encs, const size_t *r0, float *X,
			       float *H, float *T, float *U, size_t n, size_t rows)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model;
	for (int i = 0; i < hp->enc_layers; i++) {
		const struct ew_enc_layer *l = &w->enc[i];
		ew_layer_norm_rows(p, &l->ln_attn, X, T, rows, d);
		ew_linear_apply(p, &l->qkv, T, H, rows);
		for (size_t b = 0; b < n; b++)
			ew_encoder_attention(w, p, encs[b]->n_ctx, H + r0[b] * 3 * d, T + r0[b] * d,
					     encs[0]->scratch);
		ew_linear_apply(p, &l->out, T, U, rows);
		dev_par_add(p, X, U, rows * d);
		ew_mlp(p, &l->ln_ffn, &l->ffn1, &l->ffn2, X, T, H, rows, d);
	}
	ew_layer_norm_rows(p, &w->enc_ln, X, X, rows, d);
}

/* The cross-attention keys and values of every window, one product per
 * decoder layer over all rows (U: [rows, 2d] scratch). */
static void ew_cross_kv_stacked(const struct eng_whisper *w, struct dev_pool *p,
				struct eng_whisper_enc *const *encs, const size_t *r0,
				const float *X, float *U, size_t n, size_t rows)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model, Af = (size_t)hp->n_audio_ctx;
	for (int i = 0; i < hp->dec_layers; i++) {
		ew_linear_apply(p, &w->dec[i].cross_kv, X, U, rows);
		for (size_t b = 0; b < n; b++) {
			size_t A = encs[b]->n_ctx;
			const float *u = U + r0[b] * 2 * d;
			if (encs[b]->cross_kv16)
				ew_cross_kv16(hp, p, u, A,
					      encs[b]->cross_kv16 + (size_t)i * ew_kv16_layer(hp));
			else
				memcpy(encs[b]->cross_kv + (size_t)i * Af * 2 * d, u,
				       A * 2 * d * sizeof(float));
		}
	}
}

int eng_whisper_encode_batch(const struct eng_whisper *w, struct dev_pool *p,
			     struct eng_whisper_enc *const *encs, const float *const *mels,
			     const size_t *strides, const size_t *frame0, const size_t *n_frames,
			     size_t n)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model, rows = 0;
	if (n == 0)
		return 0;
	size_t *r0 = mem_alloc(n * sizeof(size_t));
	for (size_t b = 0; r0 && b < n; b++) {
		r0[b] = rows;
		rows += encs[b]->n_ctx;
	}
	float *X = mem_alloc(rows * d * sizeof(float));
	float *H = mem_alloc(rows * ew_max(3 * d, (size_t)hp->d_ffn) * sizeof(float));
	float *T = mem_alloc(rows * d * sizeof(float));
	float *U = mem_alloc(rows * 2 * d * sizeof(float));
	int rc = r0 && X && H && T && U ? 0 : -ST_NOMEM;
	for (size_t b = 0; !rc && b < n; b++) {
		ew_encoder_front(w, encs[b], p, mels[b], strides[b], frame0[b], n_frames[b]);
		memcpy(X + r0[b] * d, encs[b]->x, encs[b]->n_ctx * d * sizeof(float));
	}
	if (!rc)
		ew_encoder_stacked(w, p, encs, r0, X, H, T, U, n, rows);
	for (size_t b = 0; !rc && b < n; b++)
		memcpy(encs[b]->x, X + r0[b] * d, encs[b]->n_ctx * d * sizeof(float));
	if (!rc)
		ew_cross_kv_stacked(w, p, encs, r0, X, U, n, rows);
	mem_free(r0);
	mem_free(X);
	mem_free(H);
	mem_free(T);
	mem_free(U);
	return rc;
}

/* --- decoder ------------------------------------------------------------ */

/* out[n, d] = cross-attention of the queries q [n, d] over window e's keys
 * and values of decoder layer li (bfloat16 when the encoder keeps them
 * so). scores: the decoder's score scratch. */
static void ew_cross_attention(struct dev_pool *p, const struct eng_whisper_hp *hp,
			       const struct eng_whisper_enc *e, int li, const float *q, float *out,
			       size_t n, float *scores)
{
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads, A = e->n_ctx;
	if (e->cross_kv16) {
		const uint16_t *c = e->cross_kv16 + (size_t)li * ew_kv16_layer(hp);
		dev_par_attention_kv16(p, n, A, H, d / H, q, d, c, out, d, scores);
		return;
	}
	const float *kv = e->cross_kv + (size_t)li * (size_t)hp->n_audio_ctx * 2 * d;
	dev_par_attention(p, n, A, H, d / H, q, d, kv, 2 * d, kv + d, 2 * d, out, d, false, 0,
			  scores);
}

/* Scratch for n decoder rows: x, t, h [n, d_ffn], qkv [n, 3d], scores. */
struct ew_dec_scratch {
	float *x, *t, *h, *qkv, *scores;
};

static int ew_dec_scratch_alloc(const struct eng_whisper_hp *hp, size_t n, int nth,
				struct ew_dec_scratch *s)
{
	size_t d = (size_t)hp->d_model;
	/* keys per score row: the longest context (the audio's as
	 * kn_attention_kv16 counts it) */
	size_t kvmax = ew_max((size_t)hp->n_text_ctx, kn_kv16_scratch((size_t)hp->n_audio_ctx));
	s->x = mem_alloc(n * d * sizeof(float));
	s->t = mem_alloc(n * d * sizeof(float));
	s->h = mem_alloc(n * ew_max((size_t)hp->d_ffn, 3 * d) * sizeof(float));
	s->qkv = mem_alloc(n * 3 * d * sizeof(float));
	s->scores = mem_alloc((size_t)nth * n * kvmax * sizeof(float));
	if (s->x && s->t && s->h && s->qkv && s->scores)
		return 0;
	mem_free(s->x);
	mem_free(s->t);
	mem_free(s->h);
	mem_free(s->qkv);
	mem_free(s->scores);
	return -ST_NOMEM;
}

static void ew_dec_scratch_free(struct ew_dec_scratch *s)
{
	mem_free(s->x);
	mem_free(s->t);
	mem_free(s->h);
	mem_free(s->qkv);
	mem_free(s->scores);
}

/* What an alignment pass keeps of the cross-attention: the scores before
 * the softmax of heads[k] (layer, head), keys j < n_cols, into scores
 * [n_heads][n][n_cols]. */
struct ew_capture {
	const int (*heads)[2];
	size_t n_heads, n_cols;
	float *scores;
};

static void ew_capture_scores(const struct eng_whisper_hp *hp, const struct eng_whisper_enc *e,
			      int li, const float *q, size_t n, const struct ew_capture *c)
{
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads, hd = d / H;
	size_t A = e->n_ctx, Af = (size_t)hp->n_audio_ctx;
	for (size_t k = 0; k < c->n_heads; k++) {
		if (c->heads[k][0] != li)
			continue;
		size_t h = (size_t)c->heads[k][1];
		float *out = c->scores + k * n * c->n_cols;
		if (e->cross_kv16)
			kn_attention_scores_kv16(n, A, c->n_cols, hd, h, q, d,
						 e->cross_kv16 + (size_t)li * ew_kv16_layer(hp), out,
						 c->n_cols);
		else
			kn_attention_scores(n, c->n_cols, hd, q + h * hd, d,
					    e->cross_kv + (size_t)li * Af * 2 * d + h * hd, 2 * d, out,
					    c->n_cols);
	}
}

static void ew_decoder_layer(const struct eng_whisper *w, int li, const struct eng_whisper_enc *e,
			     struct eng_whisper_kv *kv, struct dev_pool *p,
			     struct ew_dec_scratch *s, size_t n, const struct ew_capture *cap)
{
	const struct eng_whisper_hp *hp = &w->hp;
	const struct ew_dec_layer *l = &w->dec[li];
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads;
	size_t pos = kv->len, layer = (size_t)hp->n_text_ctx * d;
	float *K = kv->k + li * layer, *V = kv->v + li * layer;
	/* causal self-attention over the cache plus the new rows */
	ew_layer_norm_rows(p, &l->ln_self, s->x, s->t, n, d);
	ew_linear_apply(p, &l->self_qkv, s->t, s->qkv, n);
	for (size_t r = 0; r < n; r++) {
		memcpy(K + (pos + r) * d, s->qkv + r * 3 * d + d, d * sizeof(float));
		memcpy(V + (pos + r) * d, s->qkv + r * 3 * d + 2 * d, d * sizeof(float));
	}
	dev_par_attention(p, n, pos + n, H, d / H, s->qkv, 3 * d, K, d, V, d, s->t, d, true, pos,
			  s->scores);
	ew_linear_apply(p, &l->self_out, s->t, s->h, n);
	dev_par_add(p, s->x, s->h, n * d);
	/* cross-attention over the encoder output */
	ew_layer_norm_rows(p, &l->ln_cross, s->x, s->t, n, d);
	ew_linear_apply(p, &l->cross_q, s->t, s->qkv, n);
	if (cap)
		ew_capture_scores(hp, e, li, s->qkv, n, cap);
	ew_cross_attention(p, hp, e, li, s->qkv, s->t, n, s->scores);
	ew_linear_apply(p, &l->cross_out, s->t, s->h, n);
	dev_par_add(p, s->x, s->h, n * d);
	ew_mlp(p, &l->ln_ffn, &l->ffn1, &l->ffn2, s->x, s->t, s->h, n, d);
}

/* logits[n_vocab] = ln(x_row) . tok_emb^T (the tied output projection). */
static void ew_logits(const struct eng_whisper *w, struct dev_pool *p, const float *row,
		      float *tmp, float *logits)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model;
	kn_ops()->layer_norm(row, w->dec_ln.gamma, w->dec_ln.beta, tmp, d, EW_LN_EPS);
	if (w->tok_emb_i8.packed)
		dev_par_linear_i8(p, 1, tmp, &w->tok_emb_i8, NULL, logits);
	else if (w->tok_emb16)
		dev_par_linear_f16(p, 1, (size_t)hp->n_vocab, d, tmp, w->tok_emb16, NULL, logits);
	else
		dev_par_linear(p, 1, (size_t)hp->n_vocab, d, tmp, w->tok_emb, NULL, logits);
}

/* logits[rows, n_vocab] = ln(x) . tok_emb^T for rows rows of x; tmp
 * [rows, d]. */
static void ew_logits_rows(const struct eng_whisper *w, struct dev_pool *p, const float *x,
			   size_t rows, float *tmp, float *logits)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model;
	for (size_t r = 0; r < rows; r++)
		kn_ops()->layer_norm(x + r * d, w->dec_ln.gamma, w->dec_ln.beta, tmp + r * d, d,
				     EW_LN_EPS);
	if (w->tok_emb_i8.packed)
		dev_par_linear_i8(p, rows, tmp, &w->tok_emb_i8, NULL, logits);
	else if (w->tok_emb16)
		dev_par_linear_f16(p, rows, (size_t)hp->n_vocab, d, tmp, w->tok_emb16, NULL, logits);
	else
		dev_par_linear(p, rows, (size_t)hp->n_vocab, d, tmp, w->tok_emb, NULL, logits);
}

#define EW_ALIGN_ROWS 16 /* logits rows per product in an alignment pass */

int eng_whisper_align_pass(const struct eng_whisper *w, const struct eng_whisper_enc *e,
			   struct dev_pool *p, const int32_t *tokens, size_t n,
			   const int (*heads)[2], size_t n_heads, size_t n_cols, size_t r0,
			   size_t n_probs, int32_t n_text, float *scores, float *probs)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model, V = (size_t)hp->n_vocab;
	if (n == 0 || n > (size_t)hp->n_text_ctx)
		return -ST_TOOBIG;
	if (n_cols == 0 || n_cols > e->n_ctx || (n_probs && r0 + n_probs >= n) ||
	    n_text < 1 || (size_t)n_text > V)
		return -ST_INVAL;
	for (size_t k = 0; k < n_heads; k++)
		if (heads[k][0] < 0 || heads[k][0] >= hp->dec_layers || heads[k][1] < 0 ||
		    heads[k][1] >= hp->n_heads)
			return -ST_INVAL;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return -ST_INVAL;
	struct eng_whisper_kv *kv = NULL;
	struct ew_dec_scratch s = { 0 };
	float *logits = mem_alloc(EW_ALIGN_ROWS * V * sizeof(float));
	float *tmp = mem_alloc(EW_ALIGN_ROWS * d * sizeof(float));
	int rc = logits && tmp ? eng_whisper_kv_create(w, &kv) : -ST_NOMEM;
	if (!rc)
		rc = ew_dec_scratch_alloc(hp, n, dev_pool_size(p), &s);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		memcpy(s.x + i * d, w->tok_emb + (size_t)tokens[i] * d, d * sizeof(float));
		kn_ops()->add(s.x + i * d, w->dec_pos + i * d, d);
	}
	struct ew_capture cap = { heads, n_heads, n_cols, scores };
	for (int li = 0; li < hp->dec_layers; li++)
		ew_decoder_layer(w, li, e, kv, p, &s, n, &cap);
	/* P(tokens[r + 1] | row r), the softmax over the text tokens only */
	for (size_t i0 = 0; i0 < n_probs; i0 += EW_ALIGN_ROWS) {
		size_t rows = n_probs - i0 < EW_ALIGN_ROWS ? n_probs - i0 : EW_ALIGN_ROWS;
		ew_logits_rows(w, p, s.x + (r0 + i0) * d, rows, tmp, logits);
		for (size_t r = 0; r < rows; r++) {
			const float *l = logits + r * V;
			int32_t next = tokens[r0 + i0 + r + 1];
			double lse = kn_ops()->logsumexp(l, (size_t)n_text);
			probs[i0 + r] = next < n_text ? (float)exp((double)l[next] - lse) : 0.0f;
		}
	}
out:
	ew_dec_scratch_free(&s);
	eng_whisper_kv_destroy(kv);
	mem_free(logits);
	mem_free(tmp);
	return rc;
}

int eng_whisper_decode(const struct eng_whisper *w, const struct eng_whisper_enc *e,
		       struct eng_whisper_kv *kv, struct dev_pool *p, const int32_t *tokens,
		       size_t n, float *logits, float *logits_at, size_t at_index)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model;
	if (n == 0 || kv->len + n > (size_t)hp->n_text_ctx)
		return -ST_TOOBIG;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return -ST_INVAL;
	struct ew_dec_scratch s;
	if (ew_dec_scratch_alloc(hp, n, dev_pool_size(p), &s))
		return -ST_NOMEM;
	for (size_t i = 0; i < n; i++) {
		memcpy(s.x + i * d, w->tok_emb + (size_t)tokens[i] * d, d * sizeof(float));
		kn_ops()->add(s.x + i * d, w->dec_pos + (kv->len + i) * d, d);
	}
	for (int li = 0; li < hp->dec_layers; li++)
		ew_decoder_layer(w, li, e, kv, p, &s, n, NULL);
	kv->len += n;
	ew_logits(w, p, s.x + (n - 1) * d, s.t, logits);
	if (logits_at && at_index < n)
		ew_logits(w, p, s.x + at_index * d, s.t, logits_at);
	ew_dec_scratch_free(&s);
	return 0;
}

/* --- batched decode steps ------------------------------------------------- */

/* Products of step rows: binary16 weights whenever the layer has them, for
 * any number of rows (the single-sequence decode step reads them too), so
 * a row's result does not depend on how many others share the pass. */
static void ew_step_linear(struct dev_pool *p, const struct ew_linear *l, const float *x,
			   float *y, size_t rows)
{
	if (l->i8.packed) /* compute type int8 */
		dev_par_linear_i8(p, rows, x, &l->i8, l->b, y);
	else if (l->w16)
		dev_par_linear_f16(p, rows, (size_t)l->n_out, (size_t)l->n_in, x, l->w16, l->b, y);
	else
		dev_par_linear(p, rows, (size_t)l->n_out, (size_t)l->n_in, x, l->w, l->b, y);
}

/* Where each sequence's rows sit in the batch. */
static size_t ew_step_rows(const struct eng_whisper_step *st, size_t n, size_t *r0)
{
	size_t rows = 0;
	for (size_t i = 0; i < n; i++) {
		r0[i] = rows;
		rows += st[i].n;
	}
	return rows;
}

static void ew_step_layer(const struct eng_whisper *w, int li, struct dev_pool *p,
			  const struct eng_whisper_step *st, size_t n, const size_t *r0,
			  size_t rows, struct ew_dec_scratch *s)
{
	const struct eng_whisper_hp *hp = &w->hp;
	const struct ew_dec_layer *l = &w->dec[li];
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads;
	size_t layer = (size_t)hp->n_text_ctx * d;
	ew_layer_norm_rows(p, &l->ln_self, s->x, s->t, rows, d);
	ew_step_linear(p, &l->self_qkv, s->t, s->qkv, rows);
	for (size_t i = 0; i < n; i++) {
		struct eng_whisper_kv *kv = st[i].kv;
		float *K = kv->k + li * layer, *V = kv->v + li * layer;
		const float *q = s->qkv + r0[i] * 3 * d;
		for (size_t j = 0; j < st[i].n; j++) {
			memcpy(K + (kv->len + j) * d, q + j * 3 * d + d, d * sizeof(float));
			memcpy(V + (kv->len + j) * d, q + j * 3 * d + 2 * d, d * sizeof(float));
		}
		dev_par_attention(p, st[i].n, kv->len + st[i].n, H, d / H, q, 3 * d, K, d, V, d,
				  s->t + r0[i] * d, d, true, kv->len, s->scores);
	}
	ew_step_linear(p, &l->self_out, s->t, s->h, rows);
	dev_par_add(p, s->x, s->h, rows * d);
	ew_layer_norm_rows(p, &l->ln_cross, s->x, s->t, rows, d);
	ew_step_linear(p, &l->cross_q, s->t, s->qkv, rows);
	for (size_t i = 0; i < n; i++)
		ew_cross_attention(p, hp, st[i].e, li, s->qkv + r0[i] * d, s->t + r0[i] * d, st[i].n,
				   s->scores);
	ew_step_linear(p, &l->cross_out, s->t, s->h, rows);
	dev_par_add(p, s->x, s->h, rows * d);
	ew_layer_norm_rows(p, &l->ln_ffn, s->x, s->t, rows, d);
	ew_step_linear(p, &l->ffn1, s->t, s->h, rows);
	dev_par_gelu(p, s->h, rows * (size_t)l->ffn1.n_out);
	ew_step_linear(p, &l->ffn2, s->h, s->t, rows);
	dev_par_add(p, s->x, s->t, rows * d);
}

/* The logits each sequence wants (its last row, and its at_index row when
 * logits_at is set), all in one product with the token embeddings. */
static int ew_step_logits(const struct eng_whisper *w, struct dev_pool *p,
			  const struct eng_whisper_step *st, size_t n, const size_t *r0,
			  struct ew_dec_scratch *s)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model, nv = (size_t)hp->n_vocab, k = 0;
	float *logits = mem_alloc(2 * n * nv * sizeof(float));
	float **dst = mem_alloc(2 * n * sizeof(float *));
	if (!logits || !dst) {
		mem_free(logits);
		mem_free(dst);
		return -ST_NOMEM;
	}
	for (size_t i = 0; i < n; i++)
		for (int which = 0; which < 2; which++) {
			float *out = which ? st[i].logits_at : st[i].logits;
			if (!out)
				continue;
			size_t row = r0[i] + (which ? st[i].at_index : st[i].n - 1);
			kn_ops()->layer_norm(s->x + row * d, w->dec_ln.gamma, w->dec_ln.beta,
					     s->h + k * d, d, EW_LN_EPS);
			dst[k++] = out;
		}
	if (w->tok_emb_i8.packed)
		dev_par_linear_i8(p, k, s->h, &w->tok_emb_i8, NULL, logits);
	else if (w->tok_emb16)
		dev_par_linear_f16(p, k, nv, d, s->h, w->tok_emb16, NULL, logits);
	else
		dev_par_linear(p, k, nv, d, s->h, w->tok_emb, NULL, logits);
	for (size_t i = 0; i < k; i++)
		memcpy(dst[i], logits + i * nv, nv * sizeof(float));
	mem_free(logits);
	mem_free(dst);
	return 0;
}

int eng_whisper_decode_steps(const struct eng_whisper *w, struct dev_pool *p,
			     const struct eng_whisper_step *steps, size_t n)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model;
	for (size_t i = 0; i < n; i++) {
		const struct eng_whisper_step *q = &steps[i];
		if (q->n < 1 || q->n > ENG_WHISPER_STEP_MAX || !q->logits ||
		    (q->logits_at && q->at_index >= q->n))
			return -ST_INVAL;
		if (q->kv->len + q->n > (size_t)hp->n_text_ctx)
			return -ST_TOOBIG;
		for (size_t j = 0; j < q->n; j++)
			if (q->tokens[j] < 0 || q->tokens[j] >= hp->n_vocab)
				return -ST_INVAL;
	}
	if (n == 0)
		return 0;
	size_t *r0 = mem_alloc(n * sizeof(size_t));
	struct ew_dec_scratch s;
	size_t rows = r0 ? ew_step_rows(steps, n, r0) : 0;
	if (!r0 || ew_dec_scratch_alloc(hp, rows > 2 * n ? rows : 2 * n, dev_pool_size(p), &s)) {
		mem_free(r0);
		return -ST_NOMEM;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < steps[i].n; j++) {
			float *x = s.x + (r0[i] + j) * d;
			memcpy(x, w->tok_emb + (size_t)steps[i].tokens[j] * d, d * sizeof(float));
			kn_ops()->add(x, w->dec_pos + (steps[i].kv->len + j) * d, d);
		}
	for (int li = 0; li < hp->dec_layers; li++)
		ew_step_layer(w, li, p, steps, n, r0, rows, &s);
	int rc = ew_step_logits(w, p, steps, n, r0, &s);
	if (!rc)
		for (size_t i = 0; i < n; i++)
			steps[i].kv->len += steps[i].n;
	ew_dec_scratch_free(&s);
	mem_free(r0);
	return rc;
}
