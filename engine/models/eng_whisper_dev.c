/* eng_whisper_dev.c - a Whisper model's weights on a device
 * (struct eng_whisper_w): every linear's host arrays as dev_mats with
 * CTranslate2's arithmetic (DEV_MAT_CT2: float32, its binary16 copy, its
 * bfloat16 rounding, or DEV_TYPE_I8R int8 rows), the convolutions as F32
 * matrices, every vector copied to device memory. One set per device,
 * shared by its replicas (engine/models/eng_binds.h); the cpu back end
 * borrows the float rows and packs the bfloat16 and int8 ones.
 */
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/models/eng_binds.h"
#include "engine/models/eng_whisper_int.h"

/* Building a set: the first failure sticks. */
struct ewd {
	struct eng_whisper_w *ww;
	int rc;
	char *err;
	size_t errlen;
};

static void ewd_mat(struct ewd *b, int type, size_t rows, size_t cols, const void *host,
		    unsigned flags, struct dev_mat **out)
{
	*out = NULL;
	if (b->rc || !host)
		return;
	b->rc = dev_mat_create(b->ww->dev, type, rows, cols, host, dev_mat_row_bytes(type, cols),
			       flags, out, b->err, b->errlen);
}

static void ewd_vec(struct ewd *b, const float *v, size_t n, const float **out)
{
	eng_binds_vec(b->ww->dev, v, n, out, &b->rc, b->err, b->errlen);
}

static void ewd_linear(struct ewd *b, const struct ew_linear *l, struct ew_dlinear *dl)
{
	size_t n = (size_t)l->n_out, k = (size_t)l->n_in;
	dl->n_out = n;
	ewd_mat(b, 0, n, k, l->w, DEV_MAT_CT2, &dl->w);
	ewd_mat(b, 1, n, k, l->w16, DEV_MAT_CT2, &dl->w16);
	ewd_mat(b, 30, n, k, l->wbf, DEV_MAT_CT2, &dl->wbf);
	ewd_mat(b, DEV_TYPE_I8R, n, k, l->i8, DEV_MAT_CT2, &dl->i8);
	ewd_vec(b, l->b, n, &dl->b);
}

static void ewd_linear_free(struct dev *d, struct ew_dlinear *dl)
{
	dev_mat_destroy(dl->w);
	dev_mat_destroy(dl->w16);
	dev_mat_destroy(dl->wbf);
	dev_mat_destroy(dl->i8);
	dev_free(d, (void *)dl->b);
}

static void ewd_norm(struct ewd *b, const struct ew_norm *n, size_t d, struct ew_dnorm *dn)
{
	ewd_vec(b, n->gamma, d, &dn->gamma);
	ewd_vec(b, n->beta, d, &dn->beta);
}

static void ewd_norm_free(struct dev *d, struct ew_dnorm *dn)
{
	dev_free(d, (void *)dn->gamma);
	dev_free(d, (void *)dn->beta);
}

/* A layer's linears and norms as arrays, in one order for make and free. */
#define EWD_ENC_LIN 4
#define EWD_DEC_LIN 7
static void ewd_enc_parts(const struct ew_enc_layer *l, struct ew_denc_layer *dl,
			  const struct ew_linear **ls, struct ew_dlinear **dls,
			  const struct ew_norm **ns, struct ew_dnorm **dns)
{
	const struct ew_linear *s[EWD_ENC_LIN] = { &l->qkv, &l->out, &l->ffn1, &l->ffn2 };
	struct ew_dlinear *t[EWD_ENC_LIN] = { &dl->qkv, &dl->out, &dl->ffn1, &dl->ffn2 };
	memcpy(ls, s, sizeof(s));
	memcpy(dls, t, sizeof(t));
	ns[0] = &l->ln_attn, ns[1] = &l->ln_ffn;
	dns[0] = &dl->ln_attn, dns[1] = &dl->ln_ffn;
}

static void ewd_dec_parts(const struct ew_dec_layer *l, struct ew_ddec_layer *dl,
			  const struct ew_linear **ls, struct ew_dlinear **dls,
			  const struct ew_norm **ns, struct ew_dnorm **dns)
{
	const struct ew_linear *s[EWD_DEC_LIN] = { &l->self_qkv,  &l->self_out, &l->cross_q,
						    &l->cross_kv,  &l->cross_out, &l->ffn1,
						    &l->ffn2 };
	struct ew_dlinear *t[EWD_DEC_LIN] = { &dl->self_qkv,  &dl->self_out, &dl->cross_q,
					       &dl->cross_kv,  &dl->cross_out, &dl->ffn1,
					       &dl->ffn2 };
	memcpy(ls, s, sizeof(s));
	memcpy(dls, t, sizeof(t));
	ns[0] = &l->ln_self, ns[1] = &l->ln_cross, ns[2] = &l->ln_ffn;
	dns[0] = &dl->ln_self, dns[1] = &dl->ln_cross, dns[2] = &dl->ln_ffn;
}

static void ewd_free(const void *model, void *set)
{
	const struct eng_whisper *w = model;
	struct eng_whisper_w *ww = set;
	if (!ww)
		return;
	struct dev *d = ww->dev;
	const struct ew_linear *ls[EWD_DEC_LIN];
	struct ew_dlinear *dls[EWD_DEC_LIN];
	const struct ew_norm *ns[3];
	struct ew_dnorm *dns[3];
	for (int i = 0; ww->enc && i < w->hp.enc_layers; i++) {
		ewd_enc_parts(&w->enc[i], &ww->enc[i], ls, dls, ns, dns);
		for (int j = 0; j < EWD_ENC_LIN; j++)
			ewd_linear_free(d, dls[j]);
		for (int j = 0; j < 2; j++)
			ewd_norm_free(d, dns[j]);
	}
	for (int i = 0; ww->dec && i < w->hp.dec_layers; i++) {
		ewd_dec_parts(&w->dec[i], &ww->dec[i], ls, dls, ns, dns);
		for (int j = 0; j < EWD_DEC_LIN; j++)
			ewd_linear_free(d, dls[j]);
		for (int j = 0; j < 3; j++)
			ewd_norm_free(d, dns[j]);
	}
	dev_mat_destroy(ww->conv1);
	dev_mat_destroy(ww->conv2);
	dev_free(d, (void *)ww->conv1_b);
	dev_free(d, (void *)ww->conv2_b);
	dev_free(d, (void *)ww->enc_pos);
	dev_free(d, (void *)ww->dec_pos);
	ewd_norm_free(d, &ww->enc_ln);
	ewd_norm_free(d, &ww->dec_ln);
	if (ww->proj != ww->emb)
		dev_mat_destroy(ww->proj);
	dev_mat_destroy(ww->emb);
	mem_free(ww->enc);
	mem_free(ww->dec);
	mem_free(ww);
}

/* The token embeddings and the tied projection: one F32 matrix for both,
 * or a lookup table beside the projection's own binary16 or int8 rows. */
static void ewd_embeddings(struct ewd *b, const struct eng_whisper *w)
{
	struct eng_whisper_w *ww = b->ww;
	size_t nv = (size_t)w->hp.n_vocab, d = (size_t)w->hp.d_model;
	if (w->tok_emb_i8)
		ewd_mat(b, DEV_TYPE_I8R, nv, d, w->tok_emb_i8, DEV_MAT_CT2, &ww->proj);
	else if (w->tok_emb16)
		ewd_mat(b, 1, nv, d, w->tok_emb16, DEV_MAT_CT2, &ww->proj);
	ewd_mat(b, 0, nv, d, w->tok_emb, ww->proj || b->rc ? DEV_MAT_LOOKUP : DEV_MAT_CT2,
		&ww->emb);
	if (!ww->proj)
		ww->proj = ww->emb;
}

static int ewd_make(const void *model, struct dev *d, void **out, char *err, size_t errlen)
{
	const struct eng_whisper *w = model;
	const struct eng_whisper_hp *hp = &w->hp;
	size_t dm = (size_t)hp->d_model, nm = (size_t)hp->n_mels;
	struct eng_whisper_w *ww = mem_calloc(1, sizeof(*ww));
	*out = NULL;
	if (!ww)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	ww->dev = d;
	struct ewd b = { ww, 0, err, errlen };
	ww->enc = mem_calloc((size_t)hp->enc_layers, sizeof(*ww->enc));
	ww->dec = mem_calloc((size_t)hp->dec_layers, sizeof(*ww->dec));
	if (!ww->enc || !ww->dec)
		b.rc = st_errf(-ST_NOMEM, err, errlen, "out of memory");
	ewd_mat(&b, 0, dm, nm * 3, w->conv1.w, 0, &ww->conv1);
	ewd_mat(&b, 0, dm, dm * 3, w->conv2.w, 0, &ww->conv2);
	ewd_vec(&b, w->conv1.b, dm, &ww->conv1_b);
	ewd_vec(&b, w->conv2.b, dm, &ww->conv2_b);
	ewd_vec(&b, w->enc_pos, (size_t)hp->n_audio_ctx * dm, &ww->enc_pos);
	ewd_vec(&b, w->dec_pos, (size_t)hp->n_text_ctx * dm, &ww->dec_pos);
	ewd_norm(&b, &w->enc_ln, dm, &ww->enc_ln);
	ewd_norm(&b, &w->dec_ln, dm, &ww->dec_ln);
	ewd_embeddings(&b, w);
	const struct ew_linear *ls[EWD_DEC_LIN];
	struct ew_dlinear *dls[EWD_DEC_LIN];
	const struct ew_norm *ns[3];
	struct ew_dnorm *dns[3];
	for (int i = 0; !b.rc && i < hp->enc_layers; i++) {
		ewd_enc_parts(&w->enc[i], &ww->enc[i], ls, dls, ns, dns);
		for (int j = 0; j < EWD_ENC_LIN; j++)
			ewd_linear(&b, ls[j], dls[j]);
		for (int j = 0; j < 2; j++)
			ewd_norm(&b, ns[j], dm, dns[j]);
	}
	for (int i = 0; !b.rc && i < hp->dec_layers; i++) {
		ewd_dec_parts(&w->dec[i], &ww->dec[i], ls, dls, ns, dns);
		for (int j = 0; j < EWD_DEC_LIN; j++)
			ewd_linear(&b, ls[j], dls[j]);
		for (int j = 0; j < 3; j++)
			ewd_norm(&b, ns[j], dm, dns[j]);
	}
	if (b.rc) {
		ewd_free(w, ww);
		return b.rc;
	}
	*out = ww;
	return 0;
}

static const struct eng_bind_ops ewd_ops = { ewd_make, ewd_free };

int eng_whisper_w_get(const struct eng_whisper *w, struct dev *d, struct eng_whisper_w **out,
		      char *err, size_t errlen)
{
	void *set;
	int rc = eng_binds_get(w->binds, &ewd_ops, w, d, &set, err, errlen);
	*out = set;
	return rc;
}

void eng_whisper_w_put(const struct eng_whisper *w, struct eng_whisper_w *ww)
{
	eng_binds_put(w->binds, &ewd_ops, w, ww);
}

int eng_whisper_hold(const struct eng_whisper *w, struct dev *d, void **set, char *err,
		     size_t errlen)
{
	return eng_binds_get(w->binds, &ewd_ops, w, d, set, err, errlen);
}

void eng_whisper_release(const struct eng_whisper *w, void *set)
{
	eng_binds_put(w->binds, &ewd_ops, w, set);
}

void eng_whisper_binds_seal(struct eng_whisper *w)
{
	eng_binds_seal(w->binds);
}

int eng_whisper_binds_init(struct eng_whisper *w, char *err, size_t errlen)
{
	int rc = eng_binds_init(&w->binds, err, errlen);
	struct eng_whisper_w *ww = NULL;
	if (!rc) /* the host's set, kept for the model's life */
		rc = eng_whisper_w_get(w, eng_binds_host(w->binds), &ww, err, errlen);
	eng_whisper_w_put(w, ww);
	return rc;
}

void eng_whisper_binds_free(struct eng_whisper *w)
{
	eng_binds_free(w->binds, &ewd_ops, w);
	w->binds = NULL;
}
