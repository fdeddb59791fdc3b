/* eng_llm_fwd.c - the forward pass of a GGUF decoder-only model, in
 * chunks of tokens, through the device interface (devices/dev.h): every
 * activation, cache and weight lives on the replica's device and every
 * operation is one of its compute ops, so the same pass runs on any back
 * end. Follows llama.cpp's graphs for the
 * same architectures (src/models/llama.cpp, qwen2.cpp, qwen3.cpp,
 * gemma2.cpp, gemma3.cpp, granite.cpp): pre-norm blocks with RMSNorm;
 * gemma adds post-attention and post-FFN norms, GeGLU, scaled embeddings
 * and sliding-window layers (gemma3 with their own RoPE base and q/k
 * norms, gemma2 with soft-capped attention scores and logits); granite
 * scales embeddings, attention, block outputs and logits; olmo2 has no
 * pre-norms and norms q / k over their whole width; phi3's fused q/k/v
 * and gate/up tensors are row views (the loader's).
 */
#include <stdint.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/models/eng_llm_int.h"

#define EL_CHUNK 256 /* tokens per forward chunk (prompt processing) */

/* --- KV cache ------------------------------------------------------------ */

/* Arrays of cap positions for kv's type into *k, *v (NULL both on failure). */
static int el_kv_arrays(struct eng_llm_kv *kv, size_t cap, bool f16, void **k, void **v)
{
	size_t n = kv->n_layer * cap * kv->row * (f16 ? sizeof(uint16_t) : sizeof(float));
	*k = dev_alloc(kv->dev, n);
	*v = dev_alloc(kv->dev, n);
	if (*k && *v)
		return 0;
	dev_free(kv->dev, *k);
	dev_free(kv->dev, *v);
	*k = *v = NULL;
	return -ST_NOMEM;
}

/* The cache's arrays: k and v, of its type. */
static void el_kv_set(struct eng_llm_kv *kv, bool f16, void *k, void *v)
{
	if (f16) {
		kv->k16 = k;
		kv->v16 = v;
	} else {
		kv->k = k;
		kv->v = v;
	}
}

int eng_llm_kv_create_room(const struct eng_llm *m, struct dev *d, size_t n_ctx, size_t n_room,
			   bool f16, struct eng_llm_kv **out)
{
	const struct eng_llm_hp *hp = &m->hp;
	struct eng_llm_kv *kv = mem_calloc(1, sizeof(*kv));
	*out = NULL;
	if (!kv || n_ctx == 0 || n_room == 0) {
		mem_free(kv);
		return kv ? -ST_INVAL : -ST_NOMEM;
	}
	kv->dev = d;
	kv->n_ctx = n_ctx;
	kv->cap = n_room < n_ctx ? n_room : n_ctx;
	kv->n_layer = (size_t)hp->n_layer;
	kv->n_head = (size_t)hp->n_head_kv;
	kv->head_dim = (size_t)hp->head_dim_k;
	kv->row = kv->n_head * kv->head_dim;
	void *k, *v;
	if (el_kv_arrays(kv, kv->cap, f16, &k, &v)) {
		mem_free(kv);
		return -ST_NOMEM;
	}
	el_kv_set(kv, f16, k, v);
	*out = kv;
	return 0;
}

int eng_llm_kv_create(const struct eng_llm *m, struct dev *d, size_t n_ctx, bool f16,
		      struct eng_llm_kv **out)
{
	return eng_llm_kv_create_room(m, d, n_ctx, n_ctx, f16, out);
}

int eng_llm_kv_reserve(struct eng_llm_kv *kv, size_t n)
{
	if (n <= kv->cap)
		return 0;
	if (n > kv->n_ctx)
		return -ST_TOOBIG;
	size_t cap = kv->cap * 2 > n ? kv->cap * 2 : n;
	cap = cap < kv->n_ctx ? cap : kv->n_ctx;
	bool f16 = kv->k16 != NULL;
	size_t el = f16 ? sizeof(uint16_t) : sizeof(float), hd = kv->head_dim;
	void *k, *v;
	if (el_kv_arrays(kv, cap, f16, &k, &v))
		return -ST_NOMEM;
	char *ok = f16 ? (char *)kv->k16 : (char *)kv->k, *ov = f16 ? (char *)kv->v16 : (char *)kv->v;
	/* each (layer, KV head) block's cached rows to the same block of the new stride */
	for (size_t b = 0; b < kv->n_layer * kv->n_head; b++) {
		dev_copy(kv->dev, (char *)k + b * cap * hd * el, ok + b * kv->cap * hd * el,
			 kv->len * hd * el);
		dev_copy(kv->dev, (char *)v + b * cap * hd * el, ov + b * kv->cap * hd * el,
			 kv->len * hd * el);
	}
	dev_free(kv->dev, ok);
	dev_free(kv->dev, ov);
	el_kv_set(kv, f16, k, v);
	kv->cap = cap;
	return 0;
}

int eng_llm_kv_copy_prefix(struct eng_llm_kv *dst, const struct eng_llm_kv *src, size_t n)
{
	bool f16 = dst->k16 != NULL;
	if (dst == src || dst->dev != src->dev || f16 != (src->k16 != NULL) ||
	    dst->n_layer != src->n_layer || dst->row != src->row || dst->head_dim != src->head_dim ||
	    dst->len != 0 || n > src->len)
		return -ST_INVAL;
	int rc = eng_llm_kv_reserve(dst, n);
	if (rc)
		return rc;
	size_t el = f16 ? sizeof(uint16_t) : sizeof(float), hd = dst->head_dim;
	char *dk = f16 ? (char *)dst->k16 : (char *)dst->k;
	char *dv = f16 ? (char *)dst->v16 : (char *)dst->v;
	const char *sk = f16 ? (const char *)src->k16 : (const char *)src->k;
	const char *sv = f16 ? (const char *)src->v16 : (const char *)src->v;
	/* each (layer, KV head) block's first n rows, at each cache's own stride */
	for (size_t b = 0; b < dst->n_layer * dst->n_head; b++) {
		dev_copy(dst->dev, dk + b * dst->cap * hd * el, sk + b * src->cap * hd * el,
			 n * hd * el);
		dev_copy(dst->dev, dv + b * dst->cap * hd * el, sv + b * src->cap * hd * el,
			 n * hd * el);
	}
	dst->len = n;
	return 0;
}

int eng_llm_kv_clone_prefix(const struct eng_llm_kv *src, size_t n, struct eng_llm_kv **out)
{
	*out = NULL;
	if (n == 0 || n > src->len)
		return -ST_INVAL;
	struct eng_llm_kv *kv = mem_calloc(1, sizeof(*kv));
	if (!kv)
		return -ST_NOMEM;
	*kv = (struct eng_llm_kv){ .dev = src->dev, .n_ctx = src->n_ctx, .cap = n,
				   .n_layer = src->n_layer, .n_head = src->n_head,
				   .head_dim = src->head_dim, .row = src->row };
	bool f16 = src->k16 != NULL;
	void *k, *v;
	if (el_kv_arrays(kv, n, f16, &k, &v)) {
		mem_free(kv);
		return -ST_NOMEM;
	}
	el_kv_set(kv, f16, k, v);
	int rc = eng_llm_kv_copy_prefix(kv, src, n);
	if (rc) {
		eng_llm_kv_destroy(kv);
		return rc;
	}
	*out = kv;
	return 0;
}

size_t eng_llm_kv_position_bytes(const struct eng_llm_kv *kv)
{
	return 2 * kv->n_layer * kv->row * (kv->k16 ? sizeof(uint16_t) : sizeof(float));
}

size_t eng_llm_kv_bytes(const struct eng_llm_kv *kv)
{
	return kv->cap * eng_llm_kv_position_bytes(kv);
}

void eng_llm_kv_destroy(struct eng_llm_kv *kv)
{
	if (!kv)
		return;
	dev_free(kv->dev, kv->k);
	dev_free(kv->dev, kv->v);
	dev_free(kv->dev, kv->k16);
	dev_free(kv->dev, kv->v16);
	mem_free(kv);
}

size_t eng_llm_kv_len(const struct eng_llm_kv *kv)
{
	return kv->len;
}

size_t eng_llm_kv_ctx(const struct eng_llm_kv *kv)
{
	return kv->n_ctx;
}

void eng_llm_kv_truncate(struct eng_llm_kv *kv, size_t len)
{
	if (len < kv->len)
		kv->len = len;
}

/* --- scratch ------------------------------------------------------------- */

/* Scratch of a forward pass on one queue: activations for cap_rows rows
 * and the logits of up to EL_OUT_ROWS rows at a time on the device; the
 * positions, tokens and sequences of the pass on the host. */
struct eng_llm_scratch {
	const struct eng_llm *m;
	struct dev_queue *dq;
	struct dev *dev;
	struct eng_llm_w *w; /* the model's weights there (a reference) */
	size_t cap_rows, cap_ctx;
	float *x, *h, *q, *k, *v, *att, *g, *u, *o;
	float *logits;	     /* EL_OUT_ROWS * n_vocab */
	float *rope[2];	     /* per row, n_rot floats: angles at rope_base, rope_base_swa */
	int32_t *pos, *tok;  /* host, per row */
	struct dev_attn_seq *seg; /* host, per sequence (at most cap_rows) */
	struct eng_llm_kv **seg_kv;
	size_t n_seg;
};

#define EL_OUT_ROWS 16 /* rows of logits computed together (one pass over the lm head) */
#define EL_ACTS 10     /* device activation buffers: x .. o and logits */

/* The device buffers of b, for allocation and release. */
static void el_acts(struct eng_llm_scratch *b, float **all[EL_ACTS])
{
	float **a[EL_ACTS] = { &b->x, &b->h, &b->q, &b->k, &b->v, &b->att, &b->g, &b->u, &b->o,
			       &b->logits };
	memcpy(all, a, sizeof(a));
}

void eng_llm_scratch_destroy(struct eng_llm_scratch *b)
{
	if (!b)
		return;
	float **all[EL_ACTS];
	el_acts(b, all);
	for (size_t i = 0; i < EL_ACTS; i++)
		dev_free(b->dev, *all[i]);
	dev_free(b->dev, b->rope[0]);
	dev_free(b->dev, b->rope[1]);
	mem_free(b->pos);
	mem_free(b->tok);
	mem_free(b->seg);
	mem_free(b->seg_kv);
	if (b->w)
		eng_llm_w_put(b->m, b->w);
	mem_free(b);
}
int eng_llm_scratch_create(const struct eng_llm *m, struct dev_queue *dq, size_t rows,
			   size_t n_ctx, struct eng_llm_scratch **out, char *err, size_t errlen)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * (size_t)hp->head_dim_k;
	size_t kvd = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k, ff = (size_t)hp->n_ff;
	*out = NULL;
	if (rows == 0 || n_ctx == 0)
		return st_errf(-ST_INVAL, err, errlen, "empty scratch");
	struct eng_llm_scratch *b = mem_calloc(1, sizeof(*b));
	if (!b)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	b->m = m;
	b->dq = dq;
	b->dev = dev_queue_device(dq);
	b->cap_rows = rows;
	b->cap_ctx = n_ctx;
	int rc = eng_llm_w_get(m, b->dev, &b->w, err, errlen);
	if (rc) {
		eng_llm_scratch_destroy(b);
		return rc;
	}
	size_t widths[EL_ACTS] = { d, d, qd, kvd, kvd, qd, ff, ff, d, 0 };
	float **all[EL_ACTS];
	el_acts(b, all);
	bool ok = true;
	for (size_t i = 0; i < EL_ACTS; i++) {
		size_t n = i + 1 < EL_ACTS ? rows * widths[i] : EL_OUT_ROWS * (size_t)hp->n_vocab;
		*all[i] = dev_alloc(b->dev, n * sizeof(float));
		ok &= *all[i] != NULL;
	}
	for (int i = 0; i < 2; i++) {
		b->rope[i] = dev_alloc(b->dev, rows * (size_t)hp->n_rot * sizeof(float));
		ok &= b->rope[i] != NULL;
	}
	b->pos = mem_alloc(rows * sizeof(int32_t));
	b->tok = mem_alloc(rows * sizeof(int32_t));
	b->seg = mem_alloc(rows * sizeof(*b->seg));
	b->seg_kv = mem_alloc(rows * sizeof(*b->seg_kv));
	if (!ok || !b->pos || !b->tok || !b->seg || !b->seg_kv) {
		eng_llm_scratch_destroy(b);
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	}
	*out = b;
	return 0;
}

/* --- pieces ------------------------------------------------------------- */

/* The first failure of a pass sticks in rc; later steps are skipped. */
struct el_pass {
	const struct eng_llm *m;
	const struct eng_llm_w *w;
	struct eng_llm_scratch *b;
	struct dev_queue *dq;
	size_t n; /* rows */
	int rc;
};

#define EL_DO(ps, call)                \
	do {                           \
		if (!(ps)->rc)         \
			(ps)->rc = (call); \
	} while (0)

/* x += o, o first scaled by the architecture's residual scale (granite). */
static void el_residual(struct el_pass *ps, float *x, float *o, size_t n)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	if (hp->residual_scale != 1.0f)
		EL_DO(ps, dev_scale(ps->dq, o, hp->residual_scale, n));
	EL_DO(ps, dev_add(ps->dq, x, o, n));
}

/* A block's input: x RMS-normed by w into h, or x itself where the
 * architecture has no pre-norm (w NULL: olmo2). */
static const float *el_pre_norm(struct el_pass *ps, const float *w)
{
	struct eng_llm_scratch *b = ps->b;
	const struct eng_llm_hp *hp = &ps->m->hp;
	if (!w)
		return b->x;
	EL_DO(ps, dev_rms_norm(ps->dq, b->x, w, b->h, ps->n, (size_t)hp->n_embd, hp->rms_eps));
	return b->h;
}

/* Each sequence's new rows of k and v (rows of kvd floats) into layer il
 * of its cache at its positions, a block per KV head (el_attn_caches):
 * copied, or rounded to binary16 (nearest even, as ggml's cpy to an F16
 * cache). */
static void el_kv_store(struct el_pass *ps, int il, size_t kvd, size_t hd)
{
	struct eng_llm_scratch *b = ps->b;
	for (size_t s = 0; s < b->n_seg; s++) {
		const struct dev_attn_seq *sg = &b->seg[s];
		struct eng_llm_kv *kv = b->seg_kv[s];
		size_t off = (size_t)il * kv->cap * kvd + sg->pos0 * hd, hs = kv->cap * hd;
		bool f16 = kv->k16 != NULL;
		void *k = f16 ? (void *)(kv->k16 + off) : (void *)(kv->k + off);
		void *v = f16 ? (void *)(kv->v16 + off) : (void *)(kv->v + off);
		EL_DO(ps, dev_kv_store(ps->dq, k, hs, f16, b->k + sg->r0 * kvd, kvd, sg->n, kvd / hd,
				       hd));
		EL_DO(ps, dev_kv_store(ps->dq, v, hs, f16, b->v + sg->r0 * kvd, kvd, sg->n, kvd / hd,
				       hd));
	}
}

/* Each sequence's whole cache of layer il, for the attention: cap * kvd
 * elements, KV head g's keys a block of cap rows of hd from g cap hd (a
 * decode step reads each head's keys as one run of memory; rows of
 * every head side by side read a third of each cache line's neighbours
 * for SmolLM2's three KV heads, and streamed at a third of the speed). */
static void el_attn_caches(struct eng_llm_scratch *b, int il, size_t kvd, size_t hd)
{
	for (size_t s = 0; s < b->n_seg; s++) {
		const struct eng_llm_kv *kv = b->seg_kv[s];
		size_t off = (size_t)il * kv->cap * kvd;
		b->seg[s].k = kv->k16 ? (const void *)(kv->k16 + off) : (const void *)(kv->k + off);
		b->seg[s].v = kv->v16 ? (const void *)(kv->v16 + off) : (const void *)(kv->v + off);
		b->seg[s].hs = kv->cap * hd;
	}
}

static void el_attention(struct el_pass *ps, int il)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	const struct el_layer *l = &ps->m->layers[il];
	const struct el_dlayer *dl = &ps->w->layers[il];
	struct eng_llm_scratch *b = ps->b;
	size_t n = ps->n, d = (size_t)hp->n_embd, hd = (size_t)hp->head_dim_k;
	size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)hp->n_head_kv * hd;
	const float *in = el_pre_norm(ps, dl->attn_norm);
	struct dev_linear_out qkv[3] = { { dl->wq, dl->bq, b->q, NULL, NULL },
					 { dl->wk, dl->bk, b->k, NULL, NULL },
					 { dl->wv, dl->bv, b->v, NULL, NULL } };
	EL_DO(ps, dev_linear_n(ps->dq, in, n, qkv, 3));
	/* per head, or (olmo2) over each row's whole q / k */
	size_t qw = hp->qk_norm_full ? qd : hd, kw = hp->qk_norm_full ? kvd : hd;
	if (dl->q_norm)
		EL_DO(ps, dev_rms_norm(ps->dq, b->q, dl->q_norm, b->q, n * qd / qw, qw, hp->rms_eps));
	if (dl->k_norm)
		EL_DO(ps, dev_rms_norm(ps->dq, b->k, dl->k_norm, b->k, n * kvd / kw, kw, hp->rms_eps));
	const float *cs = b->rope[l->swa ? 1 : 0];
	size_t nh = (size_t)hp->n_head, nkv = (size_t)hp->n_head_kv, rot = (size_t)hp->n_rot;
	EL_DO(ps, dev_rope(ps->dq, b->q, n, qd, nh, hd, rot, cs, hp->rope_neox));
	EL_DO(ps, dev_rope(ps->dq, b->k, n, kvd, nkv, hd, rot, cs, hp->rope_neox));
	el_kv_store(ps, il, kvd, hd);
	el_attn_caches(b, il, kvd, hd);
	bool f16 = b->seg_kv[0]->k16 != NULL;
	struct dev_attn a = { nh, nkv, hd, b->q, qd, b->att, qd, hd, hd, f16 ? 1 : 0,
			      l->swa ? (size_t)hp->n_swa : 0, hp->attn_scale, hp->attn_softcap,
			      false, DEV_ATTN_F32, false };
	EL_DO(ps, dev_attention(ps->dq, &a, b->seg, b->n_seg));
	struct dev_linear_out wo = { dl->wo, NULL, b->o, NULL, NULL };
	EL_DO(ps, dev_linear_n(ps->dq, b->att, n, &wo, 1));
	if (dl->post_attn_norm)
		EL_DO(ps, dev_rms_norm(ps->dq, b->o, dl->post_attn_norm, b->o, n, d, hp->rms_eps));
	el_residual(ps, b->x, b->o, n * d);
}

static void el_ffn(struct el_pass *ps, int il)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	const struct el_dlayer *dl = &ps->w->layers[il];
	struct eng_llm_scratch *b = ps->b;
	size_t n = ps->n, d = (size_t)hp->n_embd, ff = (size_t)hp->n_ff;
	const float *in = el_pre_norm(ps, dl->ffn_norm);
	struct dev_linear_out gu[2] = { { dl->w_gate, NULL, b->g, NULL, NULL },
					{ dl->w_up, NULL, b->u, NULL, NULL } };
	EL_DO(ps, dev_linear_n(ps->dq, in, n, gu, 2));
	/* gemma's GeGLU as ggml's CPU computes it (its binary16 table) */
	enum dev_glu kind = hp->geglu ? DEV_GLU_GELU_F16 : DEV_GLU_SILU;
	EL_DO(ps, dev_glu(ps->dq, kind, b->g, b->u, n * ff));
	struct dev_linear_out down = { dl->w_down, NULL, b->o, NULL, NULL };
	EL_DO(ps, dev_linear_n(ps->dq, b->g, n, &down, 1));
	if (dl->post_ffw_norm)
		EL_DO(ps, dev_rms_norm(ps->dq, b->o, dl->post_ffw_norm, b->o, n, d, hp->rms_eps));
	el_residual(ps, b->x, b->o, n * d);
}

static void el_embed(struct el_pass *ps)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	struct eng_llm_scratch *b = ps->b;
	EL_DO(ps, dev_embed(ps->dq, ps->w->embd, b->tok, ps->n, b->x));
	if (hp->embd_scale != 1.0f)
		EL_DO(ps, dev_scale(ps->dq, b->x, hp->embd_scale, ps->n * (size_t)hp->n_embd));
}

/* The lm head over the k normed rows in b->h: their logits into
 * dst[0..k) (host), or (ids not NULL) only each row's argmax into *ids[i].
 * Without caps each row's logits go straight to its buffer, or only their
 * maximum is kept (dev_linear_n's yrows, argmax); else through b->logits,
 * divided by the logit scale (granite) and soft-capped (gemma2) there. */
static void el_lm_head(struct el_pass *ps, float *const *dst, int32_t *const *ids, size_t k)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	struct eng_llm_scratch *b = ps->b;
	size_t nv = (size_t)hp->n_vocab;
	bool caps = hp->logit_scale != 1.0f || hp->final_softcap > 0.0f;
	int32_t best[EL_OUT_ROWS];
	struct dev_linear_out o = { ps->w->output, ps->w->output_b, b->logits, NULL, NULL };
	if (!caps && ids)
		o.argmax = best;
	else if (!caps)
		o.yrows = dst;
	EL_DO(ps, dev_linear_n(ps->dq, b->h, k, &o, 1));
	if (caps && hp->logit_scale != 1.0f)
		EL_DO(ps, dev_scale(ps->dq, b->logits, 1.0f / hp->logit_scale, k * nv));
	if (caps && hp->final_softcap > 0.0f)
		EL_DO(ps, dev_softcap(ps->dq, b->logits, k * nv, hp->final_softcap));
	if (caps && ids)
		EL_DO(ps, dev_argmax(ps->dq, b->logits, k, nv, best));
	for (size_t i = 0; ids && i < k; i++)
		*ids[i] = best[i];
	for (size_t i = 0; caps && !ids && i < k; i++)
		EL_DO(ps, dev_download(ps->dq, dst[i], b->logits + i * nv, nv * sizeof(float)));
}

/* The final norm and the lm head for the rows the sequences want, up to
 * EL_OUT_ROWS rows per pass over the output matrix: first those whose
 * logits are wanted, then those that want only the greedy choice. */
static void el_logits(struct el_pass *ps, const struct eng_llm_seq *seqs, size_t n_seqs)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	struct eng_llm_scratch *b = ps->b;
	size_t d = (size_t)hp->n_embd, nv = (size_t)hp->n_vocab;
	float *dst[EL_OUT_ROWS];
	int32_t *ids[EL_OUT_ROWS];
	for (int greedy = 0; greedy < 2; greedy++) {
		size_t k = 0;
		for (size_t s = 0; s < n_seqs; s++) {
			const struct eng_llm_seq *q = &seqs[s];
			if (greedy ? !q->greedy || q->logits : !q->logits)
				continue;
			size_t first = q->logits && q->all_logits ? 0 : q->n - 1;
			for (size_t j = first; j < q->n; j++) {
				size_t r = b->seg[s].r0 + j;
				EL_DO(ps, dev_rms_norm(ps->dq, b->x + r * d, ps->w->output_norm,
						       b->h + k * d, 1, d, hp->rms_eps));
				if (greedy)
					ids[k] = q->greedy;
				else
					dst[k] = q->logits + (q->all_logits ? j * nv : 0);
				if (++k == EL_OUT_ROWS) {
					el_lm_head(ps, dst, greedy ? ids : NULL, k);
					k = 0;
				}
			}
		}
		if (k)
			el_lm_head(ps, dst, greedy ? ids : NULL, k);
	}
}

/* --- the pass -------------------------------------------------------------- */

static int el_check(const struct eng_llm *m, const struct eng_llm_scratch *b,
		    const struct eng_llm_seq *seqs, size_t n_seqs, size_t *rows)
{
	*rows = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		const struct eng_llm_seq *q = &seqs[s];
		if (q->n == 0 || !q->kv)
			return -ST_INVAL;
		if (q->n > q->kv->n_ctx - q->kv->len || q->kv->len + q->n > b->cap_ctx)
			return -ST_TOOBIG;
		for (size_t i = 0; i < q->n; i++)
			if (q->tokens[i] < 0 || q->tokens[i] >= m->hp.n_vocab)
				return -ST_INVAL;
		for (size_t t = 0; t < s; t++)
			if (seqs[t].kv == q->kv)
				return -ST_INVAL; /* one cache, one place in the batch */
		if ((q->kv->k16 != NULL) != (seqs[0].kv->k16 != NULL))
			return -ST_INVAL; /* one cache type per pass */
		*rows += q->n;
	}
	return *rows > b->cap_rows ? -ST_TOOBIG : 0;
}

/* The rotary angles of this pass's positions, once for every layer:
 * global layers at rope_base and freq_scale, sliding-window ones at
 * rope_base_swa unscaled (as el_attention picks them; the loader marks
 * sliding-window layers exactly when n_swa and swa_pattern > 1). */
static void el_rope_angles(struct el_pass *ps)
{
	const struct eng_llm_hp *hp = &ps->m->hp;
	struct eng_llm_scratch *b = ps->b;
	size_t rot = (size_t)hp->n_rot;
	EL_DO(ps, dev_rope_angles(ps->dq, b->rope[0], ps->n, rot, b->pos, hp->rope_base,
				  hp->rope_freq_scale, ps->m->rope_freqs));
	if (hp->n_swa > 0 && hp->swa_pattern > 1)
		EL_DO(ps, dev_rope_angles(ps->dq, b->rope[1], ps->n, rot, b->pos, hp->rope_base_swa,
					  1.0f, ps->m->rope_freqs));
}

int eng_llm_forward_batch(const struct eng_llm *m, struct eng_llm_scratch *b,
			  const struct eng_llm_seq *seqs, size_t n_seqs)
{
	size_t n;
	int rc = el_check(m, b, seqs, n_seqs, &n);
	if (rc || n_seqs == 0)
		return rc;
	for (size_t s = 0; s < n_seqs; s++) /* the caches' room for this pass's rows */
		if ((rc = eng_llm_kv_reserve(seqs[s].kv, seqs[s].kv->len + seqs[s].n)) != 0)
			return rc;
	size_t r = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		struct eng_llm_kv *kv = seqs[s].kv;
		b->seg[s] = (struct dev_attn_seq){ r, seqs[s].n, kv->len, NULL, NULL, 0, 0,
						   seqs[s].prompt };
		b->seg_kv[s] = kv;
		for (size_t j = 0; j < seqs[s].n; j++, r++) {
			b->pos[r] = (int32_t)(kv->len + j);
			b->tok[r] = seqs[s].tokens[j];
		}
	}
	b->n_seg = n_seqs;
	struct el_pass ps = { m, b->w, b, b->dq, n, 0 };
	el_rope_angles(&ps);
	el_embed(&ps);
	for (int il = 0; il < m->hp.n_layer; il++) {
		el_attention(&ps, il);
		el_ffn(&ps, il);
	}
	el_logits(&ps, seqs, n_seqs);
	if (ps.rc)
		return ps.rc;
	for (size_t s = 0; s < n_seqs; s++)
		seqs[s].kv->len += seqs[s].n;
	return 0;
}

int eng_llm_forward(const struct eng_llm *m, struct eng_llm_kv *kv, struct dev_queue *dq,
		    const int32_t *tokens, size_t n, bool all_logits, float *logits)
{
	const struct eng_llm_hp *hp = &m->hp;
	if (n == 0 || n > kv->n_ctx - kv->len)
		return -ST_TOOBIG;
	size_t chunk = n < EL_CHUNK ? n : EL_CHUNK;
	struct eng_llm_scratch *b;
	int rc = eng_llm_scratch_create(m, dq, chunk, kv->n_ctx, &b, NULL, 0);
	for (size_t done = 0; !rc && done < n; done += chunk) {
		size_t c = n - done < chunk ? n - done : chunk;
		bool last = done + c == n;
		struct eng_llm_seq q = {
			.kv = kv, .tokens = tokens + done, .n = c, .all_logits = all_logits,
			.prompt = n > 1,
			.logits = all_logits ? logits + done * (size_t)hp->n_vocab : last ? logits : NULL,
		};
		rc = eng_llm_forward_batch(m, b, &q, 1);
	}
	eng_llm_scratch_destroy(b);
	return rc;
}
