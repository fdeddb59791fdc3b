/* eng_whisper_fwd.c - the Whisper encoder and decoder forward passes
 * through the device interface (devices/dev.h): the weights are the
 * replica's device's set (eng_whisper_dev.c), every activation, cache and
 * scratch lives in that device's memory, and every operation is one of
 * its compute ops, so the same pass runs on any back end. On the cpu back
 * end each op is the kernel this pass called directly before (DEV_MAT_CT2
 * products, kn_attention and its bfloat16 / int8 variants, dev_par's
 * splits), so the results are the same bits. Follows openai/whisper
 * model.py (AudioEncoder, TextDecoder, ResidualAttentionBlock): pre-norm
 * residual blocks, x + attn(ln(x)), x + mlp(ln(x)).
 */
#include <math.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/models/eng_whisper_int.h"

#define EW_LN_EPS 1e-5f /* torch.nn.LayerNorm default, used by Whisper */

static size_t ew_max(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* One pass: the model, its weights on the queue's device, the queue, and
 * the first failure (every later op is skipped). */
struct ew_pass {
	const struct eng_whisper *w;
	const struct eng_whisper_w *ww;
	struct dev_queue *q;
	int rc;
};

#define EW_DO(ps, call)                \
	do {                           \
		if (!(ps)->rc)         \
			(ps)->rc = (call); \
	} while (0)

/* --- scratch ------------------------------------------------------------ */

/* uint16_t elements of one decoder layer's bfloat16 cross-attention cache
 * (dev_kv16_pack of its keys and values [A, 2d]). */
static size_t ew_kv16_layer(const struct eng_whisper_hp *hp)
{
	return dev_kv16_len((size_t)hp->n_audio_ctx, (size_t)hp->n_heads,
			    (size_t)(hp->d_model / hp->n_heads));
}

int eng_whisper_enc_create(const struct eng_whisper *w, struct dev *d,
			   struct eng_whisper_enc **out, char *err, size_t errlen)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t T = ENG_WHISPER_N_FRAMES, A = (size_t)hp->n_audio_ctx, dm = (size_t)hp->d_model;
	struct eng_whisper_enc *e = mem_calloc(1, sizeof(*e));
	*out = NULL;
	if (!e)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	e->w = w;
	int rc = eng_whisper_w_get(w, d, &e->ww, err, errlen);
	if (rc) {
		mem_free(e);
		return rc;
	}
	if (w->cross_bf16)
		e->cross_kv16 = dev_alloc(d, (size_t)hp->dec_layers * ew_kv16_layer(hp) *
						     sizeof(uint16_t));
	else
		e->cross_kv = dev_alloc(d, (size_t)hp->dec_layers * A * 2 * dm * sizeof(float));
	e->x = dev_alloc(d, A * dm * sizeof(float));
	e->mel_host = mem_alloc(T * (size_t)hp->n_mels * sizeof(float));
	e->mel_t = dev_alloc(d, T * (size_t)hp->n_mels * sizeof(float));
	e->conv1 = dev_alloc(d, T * dm * sizeof(float));
	e->h = dev_alloc(d, A * ew_max(3 * dm, (size_t)hp->d_ffn) * sizeof(float));
	e->attn = dev_alloc(d, A * dm * sizeof(float));
	bool cross = e->cross_kv || e->cross_kv16;
	if (!e->x || !cross || !e->mel_host || !e->mel_t || !e->conv1 || !e->h || !e->attn) {
		eng_whisper_enc_destroy(e);
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for an encoder window");
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
	struct dev *d = e->ww->dev;
	dev_free(d, e->x);
	dev_free(d, e->cross_kv);
	dev_free(d, e->cross_kv16);
	mem_free(e->mel_host);
	dev_free(d, e->mel_t);
	dev_free(d, e->conv1);
	dev_free(d, e->h);
	dev_free(d, e->attn);
	eng_whisper_w_put(e->w, e->ww);
	mem_free(e);
}

int eng_whisper_kv_create(const struct eng_whisper *w, struct dev *d, struct eng_whisper_kv **out)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t n = (size_t)hp->dec_layers * (size_t)hp->n_text_ctx * (size_t)hp->d_model;
	struct eng_whisper_kv *kv = mem_calloc(1, sizeof(*kv));
	*out = NULL;
	if (!kv)
		return -ST_NOMEM;
	kv->dev = d;
	kv->k = dev_alloc(d, n * sizeof(float));
	kv->v = dev_alloc(d, n * sizeof(float));
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
	dev_free(kv->dev, kv->k);
	dev_free(kv->dev, kv->v);
	mem_free(kv);
}

int eng_whisper_kv_copy(const struct eng_whisper *w, struct dev_queue *q,
			struct eng_whisper_kv *dst, const struct eng_whisper_kv *src)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t layer = (size_t)hp->n_text_ctx * (size_t)hp->d_model;
	size_t used = src->len * (size_t)hp->d_model * sizeof(float);
	int rc = 0;
	for (int l = 0; !rc && l < hp->dec_layers; l++) {
		rc = dev_memcpy(q, dst->k + l * layer, src->k + l * layer, used);
		if (!rc)
			rc = dev_memcpy(q, dst->v + l * layer, src->v + l * layer, used);
	}
	if (!rc)
		dst->len = src->len;
	return rc;
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

static void ew_norm_rows(struct ew_pass *ps, const struct ew_dnorm *n, const float *x, float *y,
			 size_t rows)
{
	size_t d = (size_t)ps->w->hp.d_model;
	EW_DO(ps, dev_layer_norm(ps->q, x, n->gamma, n->beta, y, rows, d, EW_LN_EPS));
}

/* Rows at or below which binary16 weights are read instead of float32:
 * a matrix-vector product is bound by the bytes of W it reads. */
#define EW_F16_MAX_ROWS ENG_WHISPER_STEP_MAX /* eng_whisper_decode_steps' rows */

/* y [rows, n_out] = x l^T + b in the model's compute type: int8 where the
 * layer has it; bfloat16 for many rows where it has that (float32 when
 * the device cannot); binary16 for a few rows, or for every row of a
 * batched step (step: so that a row's result does not depend on how many
 * others share the pass); else float32. */
static void ew_linear_run(struct ew_pass *ps, const struct ew_dlinear *l, const float *x,
			  float *y, size_t rows, bool step)
{
	if (ps->rc)
		return;
	if (!step && l->wbf && rows > EW_F16_MAX_ROWS &&
	    !dev_linear(ps->q, l->wbf, x, rows, l->b, y))
		return; /* compute type bfloat16 (out of memory: float32 below) */
	const struct dev_mat *m = l->w;
	if (l->i8)
		m = l->i8;
	else if (l->w16 && (step || rows <= EW_F16_MAX_ROWS))
		m = l->w16;
	ps->rc = dev_linear(ps->q, m, x, rows, l->b, y);
}

static void ew_linear_apply(struct ew_pass *ps, const struct ew_dlinear *l, const float *x,
			    float *y, size_t rows)
{
	ew_linear_run(ps, l, x, y, rows, false);
}

/* x += ffn2(gelu(ffn1(ln(x)))) over rows; h holds [rows, d_ffn], t [rows, d]. */
static void ew_mlp(struct ew_pass *ps, const struct ew_dnorm *ln, const struct ew_dlinear *f1,
		   const struct ew_dlinear *f2, float *x, float *t, float *h, size_t rows, bool step)
{
	size_t d = (size_t)ps->w->hp.d_model;
	ew_norm_rows(ps, ln, x, t, rows);
	ew_linear_run(ps, f1, t, h, rows, step);
	EW_DO(ps, dev_gelu(ps->q, h, rows * f1->n_out));
	ew_linear_run(ps, f2, h, t, rows, step);
	EW_DO(ps, dev_add(ps->q, x, t, rows * d));
}

/* Unmasked attention of Whisper's heads: q rows ldq apart from q (each
 * sequence's rows from its r0), out [rows, d]; the keys and values as the
 * sequences point at them (kv_type 0: rows ldkv apart; 2: a bfloat16
 * cache), in the encoder's precision (prec) or float32. */
static void ew_full_attention(struct ew_pass *ps, const float *q, size_t ldq, float *out,
			      int kv_type, size_t ldkv, enum dev_attn_prec prec,
			      const struct dev_attn_seq *seqs, size_t n)
{
	size_t d = (size_t)ps->w->hp.d_model, H = (size_t)ps->w->hp.n_heads;
	struct dev_attn a = { H,     H,	   d / H, q,	ldq, out, d, ldkv, ldkv, kv_type, 0,
			      1.0f / sqrtf((float)(d / H)), 0.0f, true, prec, false };
	EW_DO(ps, dev_attention(ps->q, &a, seqs, n));
}

/* --- encoder ------------------------------------------------------------ */

/* The encoder's self-attention precision: the compute type's. */
static enum dev_attn_prec ew_enc_prec(const struct eng_whisper *w)
{
	return w->bf16 ? DEV_ATTN_BF16 : w->i8_attn ? DEV_ATTN_I8 : DEV_ATTN_F32;
}

/* seqs[b]: window b's rows of the fused q|k|v at H ([rows, 3d], window
 * b's A_b rows from r0[b]) for its self-attention. */
static void ew_encoder_seqs(size_t d, const float *H, struct eng_whisper_enc *const *encs,
			    const size_t *r0, size_t n, struct dev_attn_seq *seqs)
{
	for (size_t b = 0; b < n; b++) {
		const float *base = H + r0[b] * 3 * d;
		seqs[b] = (struct dev_attn_seq){ r0[b], encs[b]->n_ctx, 0, base + d, base + 2 * d,
						 encs[b]->n_ctx, 0, false };
	}
}

/* The convolutions of window e over mel frames [frame0, frame0 + n_frames)
 * of a [n_mels, stride] spectrogram (host memory): e->x = gelu(conv2(
 * gelu(conv1(mel)))) + positions. */
static void ew_encoder_front(struct ew_pass *ps, struct eng_whisper_enc *e, const float *mel,
			     size_t stride, size_t frame0, size_t n_frames)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	const struct eng_whisper_w *ww = ps->ww;
	size_t A = e->n_ctx, T = ENG_WHISPER_INPUT_STRIDE * A;
	size_t M = (size_t)hp->n_mels, d = (size_t)hp->d_model;
	if (n_frames > T)
		n_frames = T;
	/* transpose the window to time-major, zero past the audio (a trimmed
	 * window's last frames are padding too, so its positions see what the
	 * full window's first A positions see) */
	for (size_t t = 0; t < T; t++)
		for (size_t m = 0; m < M; m++)
			e->mel_host[t * M + m] = t < n_frames ? mel[m * stride + frame0 + t] : 0.0f;
	EW_DO(ps, dev_upload(ps->q, e->mel_t, e->mel_host, T * M * sizeof(float)));
	EW_DO(ps, dev_conv1d(ps->q, ww->conv1, M, 3, 1, 1, e->mel_t, T, ww->conv1_b, e->conv1));
	EW_DO(ps, dev_gelu(ps->q, e->conv1, T * d));
	EW_DO(ps, dev_conv1d(ps->q, ww->conv2, d, 3, 2, 1, e->conv1, T, ww->conv2_b, e->x));
	EW_DO(ps, dev_gelu(ps->q, e->x, A * d));
	EW_DO(ps, dev_add(ps->q, e->x, ww->enc_pos, A * d));
}

/* The layers over n windows' rows stacked in X ([rows, d], window b's
 * A_b = encs[b]->n_ctx rows from row r0[b]): norms and matrix products
 * over all rows at once, attention per window (seqs: ew_encoder_seqs
 * over H). H [rows, max(3d, d_ffn)], T and U [rows, d] scratch. */
static void ew_encoder_layers(struct ew_pass *ps, const struct dev_attn_seq *seqs, size_t n,
			      float *X, float *H, float *T, float *U, size_t rows)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	size_t d = (size_t)hp->d_model;
	for (int i = 0; i < hp->enc_layers; i++) {
		const struct ew_denc_layer *l = &ps->ww->enc[i];
		ew_norm_rows(ps, &l->ln_attn, X, T, rows);
		ew_linear_apply(ps, &l->qkv, T, H, rows);
		ew_full_attention(ps, H, 3 * d, T, 0, 3 * d, ew_enc_prec(ps->w), seqs, n);
		ew_linear_apply(ps, &l->out, T, U, rows);
		EW_DO(ps, dev_add(ps->q, X, U, rows * d));
		ew_mlp(ps, &l->ln_ffn, &l->ffn1, &l->ffn2, X, T, H, rows, false);
	}
	ew_norm_rows(ps, &ps->ww->enc_ln, X, X, rows);
}

/* The decoder's cross-attention keys and values of every window, one
 * product per decoder layer over all rows of X (U: [rows, 2d] scratch;
 * a lone float32 window writes its cache directly). */
static void ew_cross_kv(struct ew_pass *ps, struct eng_whisper_enc *const *encs,
			const size_t *r0, size_t n, const float *X, float *U, size_t rows)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads, Af = (size_t)hp->n_audio_ctx;
	for (int i = 0; !ps->rc && i < hp->dec_layers; i++) {
		size_t off = (size_t)i * Af * 2 * d;
		bool direct = n == 1 && encs[0]->cross_kv;
		ew_linear_apply(ps, &ps->ww->dec[i].cross_kv, X, direct ? encs[0]->cross_kv + off : U,
				rows);
		for (size_t b = 0; !direct && b < n; b++) {
			size_t A = encs[b]->n_ctx;
			const float *u = U + r0[b] * 2 * d;
			if (encs[b]->cross_kv16)
				EW_DO(ps, dev_kv16_pack(ps->q, u, 2 * d, A, H, d / H,
							encs[b]->cross_kv16 +
								(size_t)i * ew_kv16_layer(hp)));
			else
				EW_DO(ps, dev_memcpy(ps->q, encs[b]->cross_kv + off, u,
						     A * 2 * d * sizeof(float)));
		}
	}
}

int eng_whisper_encode(const struct eng_whisper *w, struct eng_whisper_enc *e,
		       struct dev_queue *q, const float *mel, size_t mel_stride, size_t frame0,
		       size_t n_frames)
{
	struct ew_pass ps = { w, e->ww, q, 0 };
	size_t zero = 0;
	struct dev_attn_seq seq;
	ew_encoder_front(&ps, e, mel, mel_stride, frame0, n_frames);
	/* the window's own buffers: conv1 is free after the front ([A, d]
	 * temp), attn and h as the stacked pass's T and H; the keys and
	 * values through h once the layers are done */
	ew_encoder_seqs((size_t)w->hp.d_model, e->h, &e, &zero, 1, &seq);
	ew_encoder_layers(&ps, &seq, 1, e->x, e->h, e->attn, e->conv1, e->n_ctx);
	ew_cross_kv(&ps, &e, &zero, 1, e->x, e->h, e->n_ctx);
	return ps.rc;
}

/* --- encoder, several windows at once ------------------------------------- */

int eng_whisper_encode_batch(const struct eng_whisper *w, struct dev_queue *q,
			     struct eng_whisper_enc *const *encs, const float *const *mels,
			     const size_t *strides, const size_t *frame0, const size_t *n_frames,
			     size_t n)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t d = (size_t)hp->d_model, rows = 0;
	if (n == 0)
		return 0;
	size_t *r0 = mem_alloc(n * sizeof(size_t));
	struct dev_attn_seq *seqs = mem_alloc(n * sizeof(*seqs));
	for (size_t b = 0; r0 && b < n; b++) {
		r0[b] = rows;
		rows += encs[b]->n_ctx;
	}
	struct ew_pass ps = { w, encs[0]->ww, q, 0 };
	struct dev *dv = dev_queue_device(q);
	float *X = dev_alloc(dv, rows * d * sizeof(float));
	float *H = dev_alloc(dv, rows * ew_max(3 * d, (size_t)hp->d_ffn) * sizeof(float));
	float *T = dev_alloc(dv, rows * d * sizeof(float));
	float *U = dev_alloc(dv, rows * 2 * d * sizeof(float));
	ps.rc = r0 && seqs && X && H && T && U ? 0 : -ST_NOMEM;
	for (size_t b = 0; !ps.rc && b < n; b++) {
		ew_encoder_front(&ps, encs[b], mels[b], strides[b], frame0[b], n_frames[b]);
		EW_DO(&ps, dev_memcpy(q, X + r0[b] * d, encs[b]->x,
				      encs[b]->n_ctx * d * sizeof(float)));
	}
	if (!ps.rc)
		ew_encoder_seqs(d, H, encs, r0, n, seqs);
	ew_encoder_layers(&ps, seqs, n, X, H, T, U, rows);
	for (size_t b = 0; b < n; b++)
		EW_DO(&ps, dev_memcpy(q, encs[b]->x, X + r0[b] * d,
				      encs[b]->n_ctx * d * sizeof(float)));
	ew_cross_kv(&ps, encs, r0, n, X, U, rows);
	dev_free(dv, X);
	dev_free(dv, H);
	dev_free(dv, T);
	dev_free(dv, U);
	mem_free(r0);
	mem_free(seqs);
	return ps.rc;
}

/* --- decoder ------------------------------------------------------------ */

/* out = cross-attention of the queries q (rows d apart; sequence i's
 * rows from r0[i]) over each sequence's window's keys and values of
 * decoder layer li (bfloat16 where the encoder keeps them so). */
static void ew_cross_attention(struct ew_pass *ps, int li, const float *q, float *out,
			       const struct eng_whisper_enc *const *encs, const size_t *r0,
			       const size_t *rows, size_t n, struct dev_attn_seq *seqs)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	size_t d = (size_t)hp->d_model, Af = (size_t)hp->n_audio_ctx;
	bool kv16 = encs[0]->cross_kv16 != NULL;
	for (size_t i = 0; i < n; i++) {
		const struct eng_whisper_enc *e = encs[i];
		const void *k, *v = NULL;
		if (kv16) {
			k = e->cross_kv16 + (size_t)li * ew_kv16_layer(hp);
		} else {
			const float *kv = e->cross_kv + (size_t)li * Af * 2 * d;
			k = kv, v = kv + d;
		}
		seqs[i] = (struct dev_attn_seq){ r0[i], rows[i], 0, k, v, e->n_ctx, 0, false };
	}
	ew_full_attention(ps, q, d, out, kv16 ? 2 : 0, 2 * d, DEV_ATTN_F32, seqs, n);
}

/* Causal self-attention of sequence rows [r0, r0 + n) of qkv ([rows, 3d])
 * over cache kv's layer li, after storing their keys and values at
 * positions kv->len ..; out [rows, d]. */
static void ew_self_attention(struct ew_pass *ps, int li, struct eng_whisper_kv *kv,
			      const float *qkv, size_t r0, size_t n, float *out)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads;
	size_t layer = (size_t)hp->n_text_ctx * d, pos = kv->len;
	float *K = kv->k + li * layer, *V = kv->v + li * layer;
	const float *q = qkv + r0 * 3 * d;
	for (size_t j = 0; j < n; j++) {
		EW_DO(ps, dev_memcpy(ps->q, K + (pos + j) * d, q + j * 3 * d + d, d * sizeof(float)));
		EW_DO(ps, dev_memcpy(ps->q, V + (pos + j) * d, q + j * 3 * d + 2 * d,
				     d * sizeof(float)));
	}
	struct dev_attn a = { H,     H,	   d / H, qkv, 3 * d, out, d, d, d, 0, 0,
			      1.0f / sqrtf((float)(d / H)), 0.0f, false, DEV_ATTN_F32, true };
	struct dev_attn_seq seq = { r0, n, pos, K, V, 0, 0, false };
	EW_DO(ps, dev_attention(ps->q, &a, &seq, 1));
}

/* Scratch for n decoder rows on the device: x, t [n, d], h [n, max(d_ffn,
 * 3d)], qkv [n, 3d], logits [n_logits, n_vocab]; and the attention
 * sequences of up to n_seqs sequences on the host. */
struct ew_dec_scratch {
	struct dev *dev;
	float *x, *t, *h, *qkv, *logits;
	struct dev_attn_seq *seqs;
};

static void ew_dec_scratch_free(struct ew_dec_scratch *s)
{
	dev_free(s->dev, s->x);
	dev_free(s->dev, s->t);
	dev_free(s->dev, s->h);
	dev_free(s->dev, s->qkv);
	dev_free(s->dev, s->logits);
	mem_free(s->seqs);
}

static int ew_dec_scratch_alloc(const struct eng_whisper_hp *hp, struct dev *dv, size_t n,
				size_t n_logits, size_t n_seqs, struct ew_dec_scratch *s)
{
	size_t d = (size_t)hp->d_model;
	*s = (struct ew_dec_scratch){ .dev = dv };
	s->x = dev_alloc(dv, n * d * sizeof(float));
	s->t = dev_alloc(dv, n * d * sizeof(float));
	s->h = dev_alloc(dv, n * ew_max((size_t)hp->d_ffn, 3 * d) * sizeof(float));
	s->qkv = dev_alloc(dv, n * 3 * d * sizeof(float));
	s->logits = dev_alloc(dv, n_logits * (size_t)hp->n_vocab * sizeof(float));
	s->seqs = mem_alloc(n_seqs * sizeof(*s->seqs));
	if (s->x && s->t && s->h && s->qkv && s->logits && s->seqs)
		return 0;
	ew_dec_scratch_free(s);
	return -ST_NOMEM;
}

/* s->x rows [r0, r0 + n) = the embeddings of tokens at positions pos ..
 * pos + n - 1. */
static void ew_embed(struct ew_pass *ps, struct ew_dec_scratch *s, size_t r0,
		     const int32_t *tokens, size_t n, size_t pos)
{
	size_t d = (size_t)ps->w->hp.d_model;
	EW_DO(ps, dev_embed(ps->q, ps->ww->emb, tokens, n, s->x + r0 * d));
	EW_DO(ps, dev_add(ps->q, s->x + r0 * d, ps->ww->dec_pos + pos * d, n * d));
}

/* What an alignment pass keeps of the cross-attention: the scores before
 * the softmax of heads[k] (layer, head), keys j < n_cols, into scores
 * [n_heads][n][n_cols] on the device. */
struct ew_capture {
	const int (*heads)[2];
	size_t n_heads, n_cols;
	float *scores;
};

static void ew_capture_scores(struct ew_pass *ps, const struct eng_whisper_enc *e, int li,
			      const float *q, size_t n, const struct ew_capture *c)
{
	const struct eng_whisper_hp *hp = &ps->w->hp;
	size_t d = (size_t)hp->d_model, H = (size_t)hp->n_heads, Af = (size_t)hp->n_audio_ctx;
	for (size_t k = 0; k < c->n_heads; k++) {
		if (c->heads[k][0] != li)
			continue;
		struct dev_scores sc = { n, c->n_cols, d / H, (size_t)c->heads[k][1], H, q, d,
					 0, NULL, 2 * d, e->n_ctx, c->scores + k * n * c->n_cols,
					 c->n_cols };
		if (e->cross_kv16) {
			sc.kv_type = 2;
			sc.k = e->cross_kv16 + (size_t)li * ew_kv16_layer(hp);
		} else {
			sc.k = e->cross_kv + (size_t)li * Af * 2 * d;
		}
		EW_DO(ps, dev_attention_scores(ps->q, &sc));
	}
}

/* One decoder layer over the rows of n sequences (sequence i: rows[i]
 * rows from r0[i], its cache kvs[i], its window encs[i]); step: the
 * batched decode steps' products (ew_linear_run). */
static void ew_decoder_layer(struct ew_pass *ps, int li, struct ew_dec_scratch *s,
			     struct eng_whisper_kv *const *kvs,
			     const struct eng_whisper_enc *const *encs, const size_t *r0,
			     const size_t *rows, size_t n, size_t total, bool step,
			     const struct ew_capture *cap)
{
	const struct ew_ddec_layer *l = &ps->ww->dec[li];
	size_t d = (size_t)ps->w->hp.d_model;
	/* causal self-attention over the cache plus the new rows */
	ew_norm_rows(ps, &l->ln_self, s->x, s->t, total);
	ew_linear_run(ps, &l->self_qkv, s->t, s->qkv, total, step);
	for (size_t i = 0; i < n; i++)
		ew_self_attention(ps, li, kvs[i], s->qkv, r0[i], rows[i], s->t);
	ew_linear_run(ps, &l->self_out, s->t, s->h, total, step);
	EW_DO(ps, dev_add(ps->q, s->x, s->h, total * d));
	/* cross-attention over the encoder output */
	ew_norm_rows(ps, &l->ln_cross, s->x, s->t, total);
	ew_linear_run(ps, &l->cross_q, s->t, s->qkv, total, step);
	if (cap)
		ew_capture_scores(ps, encs[0], li, s->qkv, total, cap);
	ew_cross_attention(ps, li, s->qkv, s->t, encs, r0, rows, n, s->seqs);
	ew_linear_run(ps, &l->cross_out, s->t, s->h, total, step);
	EW_DO(ps, dev_add(ps->q, s->x, s->h, total * d));
	ew_mlp(ps, &l->ln_ffn, &l->ffn1, &l->ffn2, s->x, s->t, s->h, total, step);
}

/* Host out[k][n_vocab] = ln(x row rows[k]) . tok_emb^T (the tied output
 * projection) for k < n, in one product; tmp [n, d] and s->logits on the
 * device. */
static void ew_logits(struct ew_pass *ps, struct ew_dec_scratch *s, const size_t *rows,
		      size_t n, float *tmp, float *const *out)
{
	size_t d = (size_t)ps->w->hp.d_model, nv = (size_t)ps->w->hp.n_vocab;
	for (size_t k = 0; k < n; k++)
		ew_norm_rows(ps, &ps->ww->dec_ln, s->x + rows[k] * d, tmp + k * d, 1);
	EW_DO(ps, dev_linear(ps->q, ps->ww->proj, tmp, n, NULL, s->logits));
	for (size_t k = 0; k < n; k++)
		EW_DO(ps, dev_download(ps->q, out[k], s->logits + k * nv, nv * sizeof(float)));
}

static int ew_check_tokens(const struct eng_whisper_hp *hp, const int32_t *tokens, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return -ST_INVAL;
	return 0;
}

#define EW_ALIGN_ROWS 16 /* logits rows per product in an alignment pass */

/* probs[i] = P(tokens[r0 + i + 1] | row r0 + i) for i < n_probs, the
 * softmax over the first n_text logits, EW_ALIGN_ROWS rows per product. */
static void ew_align_probs(struct ew_pass *ps, struct ew_dec_scratch *s, const int32_t *tokens,
			   size_t r0, size_t n_probs, int32_t n_text, float *host, float *probs)
{
	size_t nv = (size_t)ps->w->hp.n_vocab;
	size_t rows[EW_ALIGN_ROWS];
	float *out[EW_ALIGN_ROWS];
	for (size_t i0 = 0; !ps->rc && i0 < n_probs; i0 += EW_ALIGN_ROWS) {
		size_t m = n_probs - i0 < EW_ALIGN_ROWS ? n_probs - i0 : EW_ALIGN_ROWS;
		for (size_t r = 0; r < m; r++) {
			rows[r] = r0 + i0 + r;
			out[r] = host + r * nv;
		}
		ew_logits(ps, s, rows, m, s->t, out);
		for (size_t r = 0; !ps->rc && r < m; r++) {
			const float *l = host + r * nv;
			int32_t next = tokens[r0 + i0 + r + 1];
			double lse = dev_host_logsumexp(l, (size_t)n_text);
			probs[i0 + r] = next < n_text ? (float)exp((double)l[next] - lse) : 0.0f;
		}
	}
}

int eng_whisper_align_pass(const struct eng_whisper *w, const struct eng_whisper_enc *e,
			   struct dev_queue *q, const int32_t *tokens, size_t n,
			   const int (*heads)[2], size_t n_heads, size_t n_cols, size_t r0,
			   size_t n_probs, int32_t n_text, float *scores, float *probs)
{
	const struct eng_whisper_hp *hp = &w->hp;
	size_t V = (size_t)hp->n_vocab;
	if (n == 0 || n > (size_t)hp->n_text_ctx)
		return -ST_TOOBIG;
	if (n_cols == 0 || n_cols > e->n_ctx || (n_probs && r0 + n_probs >= n) ||
	    n_text < 1 || (size_t)n_text > V)
		return -ST_INVAL;
	for (size_t k = 0; k < n_heads; k++)
		if (heads[k][0] < 0 || heads[k][0] >= hp->dec_layers || heads[k][1] < 0 ||
		    heads[k][1] >= hp->n_heads)
			return -ST_INVAL;
	if (ew_check_tokens(hp, tokens, n))
		return -ST_INVAL;
	struct dev *dv = dev_queue_device(q);
	struct ew_pass ps = { w, e->ww, q, 0 };
	struct eng_whisper_kv *kv = NULL;
	struct ew_dec_scratch s = { .dev = dv };
	size_t n_sc = n_heads * n * n_cols;
	float *host = mem_alloc(EW_ALIGN_ROWS * V * sizeof(float));
	float *dsc = dev_alloc(dv, (n_sc ? n_sc : 1) * sizeof(float));
	ps.rc = host && dsc ? eng_whisper_kv_create(w, dv, &kv) : -ST_NOMEM;
	if (!ps.rc)
		ps.rc = ew_dec_scratch_alloc(hp, dv, ew_max(n, EW_ALIGN_ROWS), EW_ALIGN_ROWS, 1, &s);
	size_t zero = 0;
	ew_embed(&ps, &s, 0, tokens, n, 0);
	struct ew_capture cap = { heads, n_heads, n_cols, dsc };
	for (int li = 0; !ps.rc && li < hp->dec_layers; li++)
		ew_decoder_layer(&ps, li, &s, &kv, &e, &zero, &n, 1, n, false, &cap);
	EW_DO(&ps, dev_download(q, scores, dsc, n_sc * sizeof(float)));
	ew_align_probs(&ps, &s, tokens, r0, n_probs, n_text, host, probs);
	ew_dec_scratch_free(&s);
	eng_whisper_kv_destroy(kv);
	dev_free(dv, dsc);
	mem_free(host);
	return ps.rc;
}

int eng_whisper_decode(const struct eng_whisper *w, const struct eng_whisper_enc *e,
		       struct eng_whisper_kv *kv, struct dev_queue *q, const int32_t *tokens,
		       size_t n, float *logits, float *logits_at, size_t at_index)
{
	const struct eng_whisper_hp *hp = &w->hp;
	if (n == 0 || kv->len + n > (size_t)hp->n_text_ctx)
		return -ST_TOOBIG;
	if (ew_check_tokens(hp, tokens, n))
		return -ST_INVAL;
	struct ew_dec_scratch s;
	if (ew_dec_scratch_alloc(hp, dev_queue_device(q), n, 1, 1, &s))
		return -ST_NOMEM;
	struct ew_pass ps = { w, e->ww, q, 0 };
	size_t zero = 0;
	ew_embed(&ps, &s, 0, tokens, n, kv->len);
	for (int li = 0; !ps.rc && li < hp->dec_layers; li++)
		ew_decoder_layer(&ps, li, &s, &kv, &e, &zero, &n, 1, n, false, NULL);
	/* the last row's logits, then the at_index row's, one row each (the
	 * products of one row: as the steps compute them) */
	size_t last = n - 1;
	ew_logits(&ps, &s, &last, 1, s.t, &logits);
	if (logits_at && at_index < n)
		ew_logits(&ps, &s, &at_index, 1, s.t, &logits_at);
	if (!ps.rc)
		kv->len += n;
	ew_dec_scratch_free(&s);
	return ps.rc;
}

/* --- batched decode steps ------------------------------------------------- */

int eng_whisper_decode_steps(const struct eng_whisper *w, struct dev_queue *q,
			     const struct eng_whisper_step *steps, size_t n)
{
	const struct eng_whisper_hp *hp = &w->hp;
	for (size_t i = 0; i < n; i++) {
		const struct eng_whisper_step *st = &steps[i];
		if (st->n < 1 || st->n > ENG_WHISPER_STEP_MAX || !st->logits ||
		    (st->logits_at && st->at_index >= st->n))
			return -ST_INVAL;
		if (st->kv->len + st->n > (size_t)hp->n_text_ctx)
			return -ST_TOOBIG;
		if (ew_check_tokens(hp, st->tokens, st->n))
			return -ST_INVAL;
	}
	if (n == 0)
		return 0;
	/* per sequence: its first row, rows, cache and window; then the rows
	 * whose logits are wanted and where they go */
	size_t *r0 = mem_alloc(n * sizeof(size_t)), *rows = mem_alloc(n * sizeof(size_t));
	size_t *lrows = mem_alloc(2 * n * sizeof(size_t));
	struct eng_whisper_kv **kvs = mem_alloc(n * sizeof(*kvs));
	const struct eng_whisper_enc **encs = mem_alloc(n * sizeof(*encs));
	float **dst = mem_alloc(2 * n * sizeof(float *));
	struct ew_dec_scratch s = { .dev = dev_queue_device(q) };
	struct ew_pass ps = { w, steps[0].e->ww, q, 0 };
	size_t total = 0, k = 0;
	ps.rc = r0 && rows && lrows && kvs && encs && dst ? 0 : -ST_NOMEM;
	for (size_t i = 0; !ps.rc && i < n; i++) {
		r0[i] = total;
		rows[i] = steps[i].n;
		kvs[i] = steps[i].kv;
		encs[i] = steps[i].e;
		total += steps[i].n;
		for (int which = 0; which < 2; which++) {
			float *out = which ? steps[i].logits_at : steps[i].logits;
			if (!out)
				continue;
			lrows[k] = r0[i] + (which ? steps[i].at_index : steps[i].n - 1);
			dst[k++] = out;
		}
	}
	if (!ps.rc)
		ps.rc = ew_dec_scratch_alloc(hp, s.dev, ew_max(total, k), k, n, &s);
	for (size_t i = 0; i < n; i++)
		if (!ps.rc)
			ew_embed(&ps, &s, r0[i], steps[i].tokens, steps[i].n, steps[i].kv->len);
	for (int li = 0; !ps.rc && li < hp->dec_layers; li++)
		ew_decoder_layer(&ps, li, &s, kvs, encs, r0, rows, n, total, true, NULL);
	if (!ps.rc)
		ew_logits(&ps, &s, lrows, k, s.h, dst);
	if (!ps.rc)
		for (size_t i = 0; i < n; i++)
			steps[i].kv->len += steps[i].n;
	ew_dec_scratch_free(&s);
	mem_free(r0);
	mem_free(rows);
	mem_free(lrows);
	mem_free(kvs);
	mem_free(encs);
	mem_free(dst);
	return ps.rc;
}
