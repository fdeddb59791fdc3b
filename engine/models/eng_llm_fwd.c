/* eng_llm_fwd.c - the forward pass of a GGUF decoder-only model, in
 * chunks of tokens, over a device pool. Follows llama.cpp's graphs for the
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
#include "devices/dev_pool.h"
#include "devices/dev_par.h"
#include "engine/models/eng_llm_int.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_half.h"
#include "kernels/kn_quant.h"

#define EL_CHUNK 256 /* tokens per forward chunk (prompt processing) */

/* --- KV cache ------------------------------------------------------------ */

int eng_llm_kv_create(const struct eng_llm *m, size_t n_ctx, bool f16, struct eng_llm_kv **out)
{
	const struct eng_llm_hp *hp = &m->hp;
	struct eng_llm_kv *kv = mem_calloc(1, sizeof(*kv));
	*out = NULL;
	if (!kv || n_ctx == 0) {
		mem_free(kv);
		return kv ? -ST_INVAL : -ST_NOMEM;
	}
	kv->n_ctx = n_ctx;
	kv->row = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k;
	size_t n = (size_t)hp->n_layer * n_ctx * kv->row;
	bool ok;
	if (f16) {
		kv->k16 = mem_alloc(n * sizeof(uint16_t));
		kv->v16 = mem_alloc(n * sizeof(uint16_t));
		ok = kv->k16 && kv->v16;
	} else {
		kv->k = mem_alloc(n * sizeof(float));
		kv->v = mem_alloc(n * sizeof(float));
		ok = kv->k && kv->v;
	}
	if (!ok) {
		eng_llm_kv_destroy(kv);
		return -ST_NOMEM;
	}
	*out = kv;
	return 0;
}

void eng_llm_kv_destroy(struct eng_llm_kv *kv)
{
	if (!kv)
		return;
	mem_free(kv->k);
	mem_free(kv->v);
	mem_free(kv->k16);
	mem_free(kv->v16);
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

/* What one sequence contributes to the batch being computed. */
struct el_seg {
	struct eng_llm_kv *kv;
	size_t r0, n;  /* its rows in the batch */
	size_t pos0;   /* kv->len before the pass */
};

/* Scratch of a forward pass: activations for cap_rows rows, attention
 * scores for rows of one sequence against up to cap_ctx positions per
 * thread, and the logits of up to EL_OUT_ROWS rows at a time. */
struct eng_llm_scratch {
	size_t cap_rows, cap_ctx;
	int nth;
	float *x, *h, *q, *k, *v, *att, *g, *u, *o;
	float *scores; /* nth * scores_ld: kn_attention_window(_f16)'s scratch per thread */
	size_t scores_ld; /* cap_rows * cap_ctx, and a chunk of widened binary16 keys */
	float *tile;   /* (nth * DEV_PAR_QTILE + cap_rows) * kmax: dev_par_qlinear scratch */
	float *logits; /* EL_OUT_ROWS * n_vocab */
	float *rope[2];	     /* per row, n_rot floats: kn_rope_angles at rope_base, rope_base_swa */
	int32_t *pos, *tok;  /* per row */
	struct el_seg *seg;  /* per sequence (at most cap_rows) */
	size_t n_seg;
};

#define EL_OUT_ROWS 16 /* rows of logits computed together (one pass over the lm head) */

void eng_llm_scratch_destroy(struct eng_llm_scratch *b)
{
	if (!b)
		return;
	float *all[] = { b->x, b->h, b->q, b->k, b->v, b->att, b->g, b->u, b->o, b->scores,
			 b->tile, b->logits };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		mem_free(all[i]);
	mem_free(b->rope[0]);
	mem_free(b->rope[1]);
	mem_free(b->pos);
	mem_free(b->tok);
	mem_free(b->seg);
	mem_free(b);
}

int eng_llm_scratch_create(const struct eng_llm *m, size_t rows, size_t n_ctx, int nth,
			   struct eng_llm_scratch **out)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * (size_t)hp->head_dim_k;
	size_t kvd = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k, ff = (size_t)hp->n_ff;
	size_t kmax = ff > qd ? ff : qd;
	kmax = kmax > d ? kmax : d;
	*out = NULL;
	if (rows == 0 || n_ctx == 0 || nth < 1)
		return -ST_INVAL;
	struct eng_llm_scratch *b = mem_calloc(1, sizeof(*b));
	if (!b)
		return -ST_NOMEM;
	b->cap_rows = rows;
	b->cap_ctx = n_ctx;
	b->nth = nth;
	b->x = mem_alloc(rows * d * sizeof(float));
	b->h = mem_alloc(rows * d * sizeof(float));
	b->q = mem_alloc(rows * qd * sizeof(float));
	b->k = mem_alloc(rows * kvd * sizeof(float));
	b->v = mem_alloc(rows * kvd * sizeof(float));
	b->att = mem_alloc(rows * qd * sizeof(float));
	b->g = mem_alloc(rows * ff * sizeof(float));
	b->u = mem_alloc(rows * ff * sizeof(float));
	b->o = mem_alloc(rows * d * sizeof(float));
	b->scores_ld = rows * n_ctx + KN_WIN16_CHUNK * (size_t)hp->head_dim_k;
	b->scores = mem_alloc((size_t)nth * b->scores_ld * sizeof(float));
	/* dev_par_qlinear's scratch: weight tiles, and x rounded for F16/BF16 */
	b->tile = mem_alloc(((size_t)nth * DEV_PAR_QTILE + rows) * kmax * sizeof(float));
	b->logits = mem_alloc((size_t)EL_OUT_ROWS * (size_t)hp->n_vocab * sizeof(float));
	for (int i = 0; i < 2; i++)
		b->rope[i] = mem_alloc((rows * (size_t)hp->n_rot + 1) * sizeof(float));
	b->pos = mem_alloc(rows * sizeof(int32_t));
	b->tok = mem_alloc(rows * sizeof(int32_t));
	b->seg = mem_alloc(rows * sizeof(struct el_seg));
	if (!(b->x && b->h && b->q && b->k && b->v && b->att && b->g && b->u && b->o &&
	      b->scores && b->tile && b->logits && b->rope[0] && b->rope[1] && b->pos && b->tok &&
	      b->seg)) {
		eng_llm_scratch_destroy(b);
		return -ST_NOMEM;
	}
	*out = b;
	return 0;
}

/* --- pieces ------------------------------------------------------------- */

static void el_linear(struct dev_pool *p, const struct el_mat *w, const float *bias,
		      const float *x, float *y, size_t n, struct eng_llm_scratch *b)
{
	dev_par_qlinear(p, n, (size_t)w->n_rows, (size_t)w->n_cols, x, w->data, w->row_bytes, w->q,
			bias, y, b->tile);
}

/* The products of up to DEV_PAR_QMULTI_MAX matrices over the same x (n
 * rows), x quantized once (dev_par_qlinear_multi). */
static void el_linear_n(struct dev_pool *p, const struct el_mat *const *w,
			const float *const *bias, float *const *y, size_t n_mats, const float *x,
			size_t n, struct eng_llm_scratch *b)
{
	struct dev_par_qmat m[DEV_PAR_QMULTI_MAX];
	for (size_t i = 0; i < n_mats; i++)
		m[i] = (struct dev_par_qmat){ .W = w[i]->data, .row_bytes = w[i]->row_bytes,
					      .N = (size_t)w[i]->n_rows, .q = w[i]->q,
					      .b = bias[i], .y = y[i] };
	dev_par_qlinear_multi(p, n, (size_t)w[0]->n_cols, x, m, n_mats, b->tile);
}

/* y[r] = rms_norm(x[r]) * w for rows of width d (w NULL: no weight). */
static void el_rms_rows(const float *x, const float *w, float *y, size_t rows, size_t d, float eps)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t r = 0; r < rows; r++)
		ops->rms_norm(x + r * d, w, y + r * d, d, eps);
}

/* x += o, o first scaled by the architecture's residual scale (granite). */
static void el_residual(struct dev_pool *p, const struct eng_llm_hp *hp, float *x, float *o,
			size_t n)
{
	if (hp->residual_scale != 1.0f)
		kn_ops()->scale_add(o, hp->residual_scale, NULL, n);
	dev_par_add(p, x, o, n);
}

/* n logits in place: divided by the logit scale (granite, as ggml_scale
 * by its inverse), then soft-capped over the pool (gemma2, kn_softcap). */
static void el_logit_caps(struct dev_pool *p, const struct eng_llm_hp *hp, float *l, size_t n)
{
	if (hp->logit_scale != 1.0f)
		kn_ops()->scale_add(l, 1.0f / hp->logit_scale, NULL, n);
	if (hp->final_softcap > 0.0f)
		dev_par_softcap(p, l, n, hp->final_softcap);
}

/* A block's input: x RMS-normed by w into h, or x itself where the
 * architecture has no pre-norm (w NULL: olmo2). */
static const float *el_pre_norm(const float *x, const float *w, float *h, size_t rows, size_t d,
				float eps)
{
	if (!w)
		return x;
	el_rms_rows(x, w, h, rows, d, eps);
	return h;
}

struct el_attn_task {
	const struct eng_llm_hp *hp;
	const struct eng_llm_scratch *b;
	int il;
	size_t window;
};

/* A (sequence, head) pair's share of the attention's work: its rows
 * times the keys they see (the last row sees pos0 + n). */
static size_t el_attn_cost(const struct el_seg *sg)
{
	return sg->n * (sg->pos0 + sg->n);
}

/* The (sequence, query head) pairs of the batch are split over the
 * threads by their work (a decode batch mixes sequences of a few and of
 * thousands of keys: an even count of pairs left one thread waiting): a
 * thread takes the pairs whose work starts in its share of the total.
 * Query head h reads kv head h / (n_head / n_head_kv) (grouped-query
 * attention). Each sequence's rows attend to its own cache. */
static void el_attn_heads(void *arg, int ith, int nth)
{
	const struct el_attn_task *t = arg;
	const struct eng_llm_hp *hp = t->hp;
	const struct eng_llm_scratch *b = t->b;
	size_t hd = (size_t)hp->head_dim_k, qd = (size_t)hp->n_head * hd;
	size_t group = (size_t)(hp->n_head / hp->n_head_kv), nh = (size_t)hp->n_head;
	float *scores = b->scores + (size_t)ith * b->scores_ld;
	size_t total = 0, at = 0;
	for (size_t s = 0; s < b->n_seg; s++)
		total += nh * el_attn_cost(&b->seg[s]);
	/* shares [total * i / nth, total * (i + 1) / nth): rows times keys
	 * times heads times threads stays far below 2^64 */
	uint64_t lo = (uint64_t)total * (unsigned)ith / (unsigned)nth;
	uint64_t hi = (uint64_t)total * (unsigned)(ith + 1) / (unsigned)nth;
	for (size_t j = 0; j < b->n_seg * nh; j++) {
		const struct el_seg *sg = &b->seg[j / nh];
		size_t start = at;
		at += el_attn_cost(sg);
		if (start < lo || start >= hi)
			continue;
		size_t h = j % nh, g = h / group;
		const struct eng_llm_kv *kv = sg->kv;
		size_t kvd = kv->row, off = (size_t)t->il * kv->n_ctx * kvd + g * hd;
		const float *q = b->q + sg->r0 * qd + h * hd;
		float *att = b->att + sg->r0 * qd + h * hd;
		if (kv->k16)
			kn_attention_window_f16(sg->n, sg->pos0 + sg->n, 1, hd, q, qd, kv->k16 + off,
						kvd, kv->v16 + off, kvd, att, qd, sg->pos0,
						t->window, hp->attn_scale, hp->attn_softcap,
						scores);
		else
			kn_attention_window(sg->n, sg->pos0 + sg->n, 1, hd, q, qd, kv->k + off, kvd,
					    kv->v + off, kvd, att, qd, sg->pos0, t->window,
					    hp->attn_scale, hp->attn_softcap, scores);
	}
}

/* A sequence's rows of k and v (rows of kvd floats) into layer il of its
 * cache at its positions: copied, or rounded to binary16 (nearest even,
 * as ggml's cpy to an F16 cache). */
static void el_kv_store(const struct el_seg *sg, int il, size_t kvd, const float *k,
			const float *v)
{
	struct eng_llm_kv *kv = sg->kv;
	size_t off = ((size_t)il * kv->n_ctx + sg->pos0) * kvd, n = sg->n * kvd;
	const float *ks = k + sg->r0 * kvd, *vs = v + sg->r0 * kvd;
	if (!kv->k16) {
		memcpy(kv->k + off, ks, n * sizeof(float));
		memcpy(kv->v + off, vs, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		kv->k16[off + i] = kn_f32_to_f16(ks[i]);
		kv->v16[off + i] = kn_f32_to_f16(vs[i]);
	}
}

static void el_attention(const struct eng_llm *m, int il, struct dev_pool *p,
			 struct eng_llm_scratch *b, size_t n)
{
	const struct eng_llm_hp *hp = &m->hp;
	const struct el_layer *l = &m->layers[il];
	size_t d = (size_t)hp->n_embd, hd = (size_t)hp->head_dim_k;
	size_t qd = (size_t)hp->n_head * hd, kvd = (size_t)hp->n_head_kv * hd;
	const float *in = el_pre_norm(b->x, l->attn_norm, b->h, n, d, hp->rms_eps);
	const struct el_mat *qkv[3] = { &l->wq, &l->wk, &l->wv };
	const float *qkv_b[3] = { l->bq, l->bk, l->bv };
	float *qkv_y[3] = { b->q, b->k, b->v };
	el_linear_n(p, qkv, qkv_b, qkv_y, 3, in, n, b);
	/* per head, or (olmo2) over each row's whole q / k */
	size_t qw = hp->qk_norm_full ? qd : hd, kw = hp->qk_norm_full ? kvd : hd;
	if (l->q_norm)
		el_rms_rows(b->q, l->q_norm, b->q, n * qd / qw, qw, hp->rms_eps);
	if (l->k_norm)
		el_rms_rows(b->k, l->k_norm, b->k, n * kvd / kw, kw, hp->rms_eps);
	const float *cs = b->rope[l->swa ? 1 : 0];
	kn_rope_apply(b->q, n, qd, (size_t)hp->n_head, hd, (size_t)hp->n_rot, cs, hp->rope_neox);
	kn_rope_apply(b->k, n, kvd, (size_t)hp->n_head_kv, hd, (size_t)hp->n_rot, cs, hp->rope_neox);
	for (size_t s = 0; s < b->n_seg; s++)
		el_kv_store(&b->seg[s], il, kvd, b->k, b->v);
	struct el_attn_task t = { hp, b, il, l->swa ? (size_t)hp->n_swa : 0 };
	dev_pool_run(p, el_attn_heads, &t);
	el_linear(p, &l->wo, NULL, b->att, b->o, n, b);
	if (l->post_attn_norm)
		el_rms_rows(b->o, l->post_attn_norm, b->o, n, d, hp->rms_eps);
	el_residual(p, hp, b->x, b->o, n * d);
}

/* The gated activation over n elements, split across the pool when they
 * are many (a batch of rows): element-wise, so the split changes no bit. */
#define EL_PAR_GLU 16384
struct el_glu {
	const struct eng_llm *m;
	float *g;
	const float *u;
	size_t n;
};

static void el_glu_part(void *arg, int ith, int nth)
{
	const struct el_glu *a = arg;
	long i0, i1;
	dev_split((long)a->n, ith, nth, 64, &i0, &i1);
	if (i1 <= i0)
		return;
	float *g = a->g + i0;
	const float *u = a->u + i0;
	size_t n = (size_t)(i1 - i0);
	if (a->m->gelu_f16) /* ggml's CPU GeGLU: its binary16 table */
		kn_ops()->geglu_table_mul(g, u, a->m->gelu_f16, n);
	else if (a->m->hp.geglu)
		kn_ops()->gelu_tanh_mul(g, u, n);
	else
		kn_ops()->silu_mul(g, u, n);
}

static void el_ffn(const struct eng_llm *m, int il, struct dev_pool *p,
		   struct eng_llm_scratch *b, size_t n)
{
	const struct eng_llm_hp *hp = &m->hp;
	const struct el_layer *l = &m->layers[il];
	size_t d = (size_t)hp->n_embd, ff = (size_t)hp->n_ff;
	const float *in = el_pre_norm(b->x, l->ffn_norm, b->h, n, d, hp->rms_eps);
	const struct el_mat *gu[2] = { &l->w_gate, &l->w_up };
	const float *gu_b[2] = { NULL, NULL };
	float *gu_y[2] = { b->g, b->u };
	el_linear_n(p, gu, gu_b, gu_y, 2, in, n, b);
	struct el_glu g = { m, b->g, b->u, n * ff };
	dev_pool_run(n * ff >= EL_PAR_GLU ? p : NULL, el_glu_part, &g);
	el_linear(p, &l->w_down, NULL, b->g, b->o, n, b);
	if (l->post_ffw_norm)
		el_rms_rows(b->o, l->post_ffw_norm, b->o, n, d, hp->rms_eps);
	el_residual(p, hp, b->x, b->o, n * d);
}

static void el_embed(const struct eng_llm *m, size_t n, struct eng_llm_scratch *b)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t d = (size_t)hp->n_embd;
	const struct el_mat *e = &m->tok_embd;
	for (size_t t = 0; t < n; t++) {
		e->q->dequant((const char *)e->data + (size_t)b->tok[t] * e->row_bytes, b->x + t * d, d);
		if (hp->embd_scale != 1.0f)
			kn_ops()->scale_add(b->x + t * d, hp->embd_scale, NULL, d);
	}
}

/* The lm head over the k normed rows in b->h: their logits into
 * dst[0..k), or (ids not NULL) only each row's argmax into *ids[i].
 * Without caps each tile of logits goes to its row's buffer while it is
 * in cache, or only its maximum is kept (dev_par_qmat yrows, argmax);
 * else through b->logits, capped there. */
static void el_lm_head(const struct eng_llm *m, struct dev_pool *p, struct eng_llm_scratch *b,
		       float *const *dst, int32_t *const *ids, size_t k)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t nv = (size_t)hp->n_vocab;
	bool caps = hp->logit_scale != 1.0f || hp->final_softcap > 0.0f;
	const struct el_mat *w = &m->output;
	int32_t best[EL_OUT_ROWS];
	struct dev_par_qmat o = { .W = w->data, .row_bytes = w->row_bytes, .N = nv, .q = w->q,
				  .b = m->output_b, .y = b->logits };
	if (!caps && ids)
		o.argmax = best;
	else if (!caps)
		o.yrows = dst;
	dev_par_qlinear_multi(p, k, (size_t)hp->n_embd, b->h, &o, 1, b->tile);
	if (caps)
		el_logit_caps(p, hp, b->logits, k * nv);
	for (size_t i = 0; ids && i < k; i++)
		*ids[i] = caps ? (int32_t)kn_ops()->argmax(b->logits + i * nv, nv) : best[i];
	for (size_t i = 0; caps && !ids && i < k; i++)
		memcpy(dst[i], b->logits + i * nv, nv * sizeof(float));
}

/* The final norm and the lm head for the rows the sequences want, up to
 * EL_OUT_ROWS rows per pass over the output matrix: first those whose
 * logits are wanted, then those that want only the greedy choice. */
static void el_logits(const struct eng_llm *m, struct dev_pool *p, struct eng_llm_scratch *b,
		      const struct eng_llm_seq *seqs, size_t n_seqs)
{
	const struct eng_llm_hp *hp = &m->hp;
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
				kn_ops()->rms_norm(b->x + r * d, m->output_norm, b->h + k * d, d,
						   hp->rms_eps);
				if (greedy)
					ids[k] = q->greedy;
				else
					dst[k] = q->logits + (q->all_logits ? j * nv : 0);
				if (++k == EL_OUT_ROWS) {
					el_lm_head(m, p, b, dst, greedy ? ids : NULL, k);
					k = 0;
				}
			}
		}
		if (k)
			el_lm_head(m, p, b, dst, greedy ? ids : NULL, k);
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
		*rows += q->n;
	}
	return *rows > b->cap_rows ? -ST_TOOBIG : 0;
}

int eng_llm_forward_batch(const struct eng_llm *m, struct dev_pool *p,
			  struct eng_llm_scratch *b, const struct eng_llm_seq *seqs, size_t n_seqs)
{
	size_t n;
	int rc = el_check(m, b, seqs, n_seqs, &n);
	if (rc || n_seqs == 0)
		return rc;
	if (dev_pool_size(p) > b->nth)
		return -ST_INVAL;
	size_t r = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		struct el_seg *sg = &b->seg[s];
		*sg = (struct el_seg){ seqs[s].kv, r, seqs[s].n, seqs[s].kv->len };
		for (size_t j = 0; j < sg->n; j++, r++) {
			b->pos[r] = (int32_t)(sg->pos0 + j);
			b->tok[r] = seqs[s].tokens[j];
		}
	}
	b->n_seg = n_seqs;
	/* the rotary angles of this pass's positions, once for every layer:
	 * global layers at rope_base and freq_scale, sliding-window ones at
	 * rope_base_swa unscaled (as el_attention picks them; the loader
	 * marks sliding-window layers exactly when n_swa and swa_pattern > 1) */
	kn_rope_angles(b->rope[0], n, (size_t)m->hp.n_rot, b->pos, m->hp.rope_base,
		       m->hp.rope_freq_scale, m->rope_freqs);
	if (m->hp.n_swa > 0 && m->hp.swa_pattern > 1)
		kn_rope_angles(b->rope[1], n, (size_t)m->hp.n_rot, b->pos, m->hp.rope_base_swa, 1.0f,
			       m->rope_freqs);
	el_embed(m, n, b);
	for (int il = 0; il < m->hp.n_layer; il++) {
		el_attention(m, il, p, b, n);
		el_ffn(m, il, p, b, n);
	}
	for (size_t s = 0; s < n_seqs; s++)
		seqs[s].kv->len += seqs[s].n;
	el_logits(m, p, b, seqs, n_seqs);
	return 0;
}

int eng_llm_forward(const struct eng_llm *m, struct eng_llm_kv *kv, struct dev_pool *p,
		    const int32_t *tokens, size_t n, bool all_logits, float *logits)
{
	const struct eng_llm_hp *hp = &m->hp;
	if (n == 0 || n > kv->n_ctx - kv->len)
		return -ST_TOOBIG;
	size_t chunk = n < EL_CHUNK ? n : EL_CHUNK;
	struct eng_llm_scratch *b;
	int rc = eng_llm_scratch_create(m, chunk, kv->n_ctx, dev_pool_size(p), &b);
	for (size_t done = 0; !rc && done < n; done += chunk) {
		size_t c = n - done < chunk ? n - done : chunk;
		bool last = done + c == n;
		struct eng_llm_seq q = {
			.kv = kv, .tokens = tokens + done, .n = c, .all_logits = all_logits,
			.logits = all_logits ? logits + done * (size_t)hp->n_vocab : last ? logits : NULL,
		};
		rc = eng_llm_forward_batch(m, p, b, &q, 1);
	}
	eng_llm_scratch_destroy(b);
	return rc;
}
