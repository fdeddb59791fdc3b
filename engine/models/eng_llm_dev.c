/* eng_llm_dev.c - a GGUF model's weights on a device: every matrix as a
 * dev_mat (the cpu back end borrows the map's rows or repacks them, other
 * back ends copy them), every vector copied to device memory. Made on the
 * first scratch of a device and shared by the replicas there
 * (engine/models/eng_binds.h: one set for every cpu device, made on a cpu
 * device the model opens at load; another device's set freed with its
 * last scratch, before that device can close).
 */
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/models/eng_binds.h"
#include "engine/models/eng_llm_int.h"

/* Building a binding: the first failure sticks. */
struct el_bind {
	struct eng_llm_w *w;
	int rc;
	char *err;
	size_t errlen;
};

static void el_bind_mat(struct el_bind *b, const struct el_mat *m, unsigned flags,
			struct dev_mat **out)
{
	*out = NULL;
	if (b->rc || !m->data)
		return;
	b->rc = dev_mat_create(b->w->dev, m->type, (size_t)m->n_rows, (size_t)m->n_cols, m->data,
			       m->row_bytes, flags, out, b->err, b->errlen);
}

static void el_bind_vec(struct el_bind *b, const float *v, size_t n, const float **out)
{
	eng_binds_vec(b->w->dev, v, n, out, &b->rc, b->err, b->errlen);
}

/* The vectors of a layer, with their lengths, as pairs. */
#define EL_LAYER_VECS 9
static void el_layer_vecs(const struct eng_llm_hp *hp, const struct el_layer *l,
			  struct el_dlayer *dl, const float **src, const float ***dst, size_t *n)
{
	size_t d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * (size_t)hp->head_dim_k;
	size_t kvd = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k;
	size_t qw = hp->qk_norm_full ? qd : (size_t)hp->head_dim_k;
	size_t kw = hp->qk_norm_full ? kvd : (size_t)hp->head_dim_k;
	const float *s[EL_LAYER_VECS] = { l->attn_norm, l->q_norm,	 l->k_norm,
					  l->post_attn_norm, l->ffn_norm, l->post_ffw_norm,
					  l->bq,	     l->bk,	  l->bv };
	const float **t[EL_LAYER_VECS] = { &dl->attn_norm,	&dl->q_norm,   &dl->k_norm,
					   &dl->post_attn_norm, &dl->ffn_norm, &dl->post_ffw_norm,
					   &dl->bq,		&dl->bk,       &dl->bv };
	size_t len[EL_LAYER_VECS] = { d, qw, kw, d, d, d, qd, kvd, kvd };
	memcpy(src, s, sizeof(s));
	memcpy(dst, t, sizeof(t));
	memcpy(n, len, sizeof(len));
}

static void el_bind_layer(struct el_bind *b, const struct eng_llm *m, int i)
{
	const struct el_layer *l = &m->layers[i];
	struct el_dlayer *dl = &b->w->layers[i];
	const struct el_mat *src[7] = { &l->wq, &l->wk, &l->wv, &l->wo,
					&l->w_gate, &l->w_up, &l->w_down };
	struct dev_mat **dst[7] = { &dl->wq, &dl->wk, &dl->wv, &dl->wo,
				    &dl->w_gate, &dl->w_up, &dl->w_down };
	for (int j = 0; j < 7; j++)
		el_bind_mat(b, src[j], 0, dst[j]);
	const float *vs[EL_LAYER_VECS], **vd[EL_LAYER_VECS];
	size_t vn[EL_LAYER_VECS];
	el_layer_vecs(&m->hp, l, dl, vs, vd, vn);
	for (int j = 0; j < EL_LAYER_VECS; j++)
		el_bind_vec(b, vs[j], vn[j], vd[j]);
}

static void el_w_free(const void *model, void *set)
{
	const struct eng_llm *m = model;
	struct eng_llm_w *w = set;
	if (!w)
		return;
	if (w->embd != w->output)
		dev_mat_destroy(w->embd);
	dev_mat_destroy(w->output);
	dev_free(w->dev, (void *)w->output_b);
	dev_free(w->dev, (void *)w->output_norm);
	for (int i = 0; w->layers && i < m->hp.n_layer; i++) {
		struct el_dlayer *dl = &w->layers[i];
		struct dev_mat *mats[7] = { dl->wq, dl->wk, dl->wv, dl->wo,
					    dl->w_gate, dl->w_up, dl->w_down };
		for (int j = 0; j < 7; j++)
			dev_mat_destroy(mats[j]);
		const float *vs[EL_LAYER_VECS], **vd[EL_LAYER_VECS];
		size_t vn[EL_LAYER_VECS];
		el_layer_vecs(&m->hp, &m->layers[i], dl, vs, vd, vn);
		for (int j = 0; j < EL_LAYER_VECS; j++)
			dev_free(w->dev, (void *)*vd[j]);
	}
	mem_free(w->layers);
	mem_free(w);
}

/* A new set on d (a cpu device stands for all: eng_binds). */
static int el_w_make(const void *model, struct dev *d, void **out, char *err, size_t errlen)
{
	const struct eng_llm *m = model;
	const struct eng_llm_hp *hp = &m->hp;
	struct eng_llm_w *w = mem_calloc(1, sizeof(*w));
	*out = NULL;
	if (!w)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	struct el_bind b = { w, 0, err, errlen };
	w->dev = d;
	w->layers = mem_calloc((size_t)hp->n_layer, sizeof(*w->layers));
	if (!w->layers)
		b.rc = st_errf(-ST_NOMEM, err, errlen, "out of memory");
	el_bind_mat(&b, &m->output, 0, &w->output);
	if (hp->tied_output)
		w->embd = w->output;
	else
		el_bind_mat(&b, &m->tok_embd, DEV_MAT_LOOKUP, &w->embd);
	el_bind_vec(&b, m->output_b, (size_t)hp->n_vocab, &w->output_b);
	el_bind_vec(&b, m->output_norm, (size_t)hp->n_embd, &w->output_norm);
	for (int i = 0; !b.rc && i < hp->n_layer; i++)
		el_bind_layer(&b, m, i);
	if (b.rc) {
		el_w_free(m, w);
		return b.rc;
	}
	*out = w;
	return 0;
}

static const struct eng_bind_ops el_ops = { el_w_make, el_w_free };

int eng_llm_w_get(const struct eng_llm *m, struct dev *d, struct eng_llm_w **out, char *err,
		  size_t errlen)
{
	void *set;
	int rc = eng_binds_get(m->binds, &el_ops, m, d, &set, err, errlen);
	*out = set;
	return rc;
}

void eng_llm_w_put(const struct eng_llm *m, struct eng_llm_w *w)
{
	eng_binds_put(m->binds, &el_ops, m, w);
}

int eng_llm_hold(const struct eng_llm *m, struct dev *d, void **set, char *err, size_t errlen)
{
	return eng_binds_get(m->binds, &el_ops, m, d, set, err, errlen);
}

void eng_llm_release(const struct eng_llm *m, void *set)
{
	eng_binds_put(m->binds, &el_ops, m, set);
}

int eng_llm_binds_init(struct eng_llm *m, char *err, size_t errlen)
{
	return eng_binds_init(&m->binds, err, errlen);
}

void eng_llm_w_free_all(struct eng_llm *m)
{
	eng_binds_free(m->binds, &el_ops, m);
	m->binds = NULL;
}
