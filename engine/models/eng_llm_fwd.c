/* eng_llm_fwd.c - the forward pass of a GGUF decoder-only model, in
 * chunks of tokens, over a device pool. Follows llama.cpp's graphs for the
 * same architectures (src/models/llama.cpp, qwen2.cpp, qwen3.cpp,
 * gemma3.cpp): pre-norm blocks with RMSNorm; gemma3 adds q/k norms,
 * post-attention and post-FFN norms, GeGLU, scaled embeddings and
 * sliding-window layers with their own RoPE base.
 */
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev_pool.h"
#include "engine/eng_par.h"
#include "engine/models/eng_llm_int.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_quant.h"

#define EL_CHUNK 256 /* tokens per forward chunk (prompt processing) */

/* --- KV cache ------------------------------------------------------------ */

int eng_llm_kv_create(const struct eng_llm *m, size_t n_ctx, struct eng_llm_kv **out)
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
	kv->k = mem_alloc(n * sizeof(float));
	kv->v = mem_alloc(n * sizeof(float));
	if (!kv->k || !kv->v) {
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

struct el_buf {
	float *x, *h, *q, *k, *v, *att, *g, *u, *o;
	float *scores; /* nth * n * n_ctx */
	float *tile;   /* (nth * ENG_PAR_QTILE + n) * kmax: eng_par_qlinear scratch */
	int32_t *pos;
	int nth;
};

static void el_buf_free(struct el_buf *b)
{
	float *all[] = { b->x, b->h, b->q, b->k, b->v, b->att, b->g, b->u, b->o, b->scores, b->tile };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		mem_free(all[i]);
	mem_free(b->pos);
	memset(b, 0, sizeof(*b));
}

static int el_buf_alloc(const struct eng_llm_hp *hp, size_t n, size_t n_ctx, int nth,
			struct el_buf *b)
{
	size_t d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * (size_t)hp->head_dim_k;
	size_t kvd = (size_t)hp->n_head_kv * (size_t)hp->head_dim_k, ff = (size_t)hp->n_ff;
	size_t kmax = ff > qd ? ff : qd;
	kmax = kmax > d ? kmax : d;
	memset(b, 0, sizeof(*b));
	b->nth = nth;
	b->x = mem_alloc(n * d * sizeof(float));
	b->h = mem_alloc(n * d * sizeof(float));
	b->q = mem_alloc(n * qd * sizeof(float));
	b->k = mem_alloc(n * kvd * sizeof(float));
	b->v = mem_alloc(n * kvd * sizeof(float));
	b->att = mem_alloc(n * qd * sizeof(float));
	b->g = mem_alloc(n * ff * sizeof(float));
	b->u = mem_alloc(n * ff * sizeof(float));
	b->o = mem_alloc(n * d * sizeof(float));
	b->scores = mem_alloc((size_t)nth * n * n_ctx * sizeof(float));
	/* eng_par_qlinear's scratch: weight tiles, and x rounded for F16/BF16 */
	b->tile = mem_alloc(((size_t)nth * ENG_PAR_QTILE + n) * kmax * sizeof(float));
	b->pos = mem_alloc(n * sizeof(int32_t));
	if (b->x && b->h && b->q && b->k && b->v && b->att && b->g && b->u && b->o && b->scores &&
	    b->tile && b->pos)
		return 0;
	el_buf_free(b);
	return -ST_NOMEM;
}

/* --- pieces ------------------------------------------------------------- */

static void el_linear(struct dev_pool *p, const struct el_mat *w, const float *bias,
		      const float *x, float *y, size_t n, struct el_buf *b)
{
	eng_par_qlinear(p, n, (size_t)w->n_rows, (size_t)w->n_cols, x, w->data, w->row_bytes, w->q,
			bias, y, b->tile);
}

/* y[r] = rms_norm(x[r]) * w for rows of width d (w NULL: no weight). */
static void el_rms_rows(const float *x, const float *w, float *y, size_t rows, size_t d, float eps)
{
	const struct kn_ops *ops = kn_ops();
	for (size_t r = 0; r < rows; r++)
		ops->rms_norm(x + r * d, w, y + r * d, d, eps);
}

struct el_attn_task {
	const struct eng_llm_hp *hp;
	const struct el_buf *b;
	const float *K, *V; /* this layer's cache */
	size_t n, pos0, window;
};

/* Each thread takes whole query heads; query head h reads kv head
 * h / (n_head / n_head_kv) (grouped-query attention). */
static void el_attn_heads(void *arg, int ith, int nth)
{
	const struct el_attn_task *t = arg;
	const struct eng_llm_hp *hp = t->hp;
	size_t hd = (size_t)hp->head_dim_k, qd = (size_t)hp->n_head * hd;
	size_t kvd = (size_t)hp->n_head_kv * hd, group = (size_t)(hp->n_head / hp->n_head_kv);
	float *scores = t->b->scores + (size_t)ith * t->n * (t->pos0 + t->n);
	long h0, h1;
	dev_split(hp->n_head, ith, nth, 1, &h0, &h1);
	for (long h = h0; h < h1; h++) {
		size_t g = (size_t)h / group;
		kn_attention_window(t->n, t->pos0 + t->n, 1, hd, t->b->q + (size_t)h * hd, qd,
				    t->K + g * hd, kvd, t->V + g * hd, kvd, t->b->att + (size_t)h * hd,
				    qd, t->pos0, t->window, hp->attn_scale, scores);
	}
}

static void el_attention(const struct eng_llm *m, int il, struct eng_llm_kv *kv,
			 struct dev_pool *p, struct el_buf *b, size_t n)
{
	const struct eng_llm_hp *hp = &m->hp;
	const struct el_layer *l = &m->layers[il];
	size_t d = (size_t)hp->n_embd, hd = (size_t)hp->head_dim_k;
	size_t qd = (size_t)hp->n_head * hd, kvd = kv->row, pos0 = kv->len;
	el_rms_rows(b->x, l->attn_norm, b->h, n, d, hp->rms_eps);
	el_linear(p, &l->wq, l->bq, b->h, b->q, n, b);
	el_linear(p, &l->wk, l->bk, b->h, b->k, n, b);
	el_linear(p, &l->wv, l->bv, b->h, b->v, n, b);
	if (l->q_norm)
		el_rms_rows(b->q, l->q_norm, b->q, n * (size_t)hp->n_head, hd, hp->rms_eps);
	if (l->k_norm)
		el_rms_rows(b->k, l->k_norm, b->k, n * (size_t)hp->n_head_kv, hd, hp->rms_eps);
	float base = l->swa ? hp->rope_base_swa : hp->rope_base;
	float scale = l->swa ? 1.0f : hp->rope_freq_scale;
	kn_rope(b->q, n, qd, (size_t)hp->n_head, hd, (size_t)hp->n_rot, b->pos, base, scale,
		hp->rope_neox);
	kn_rope(b->k, n, kvd, (size_t)hp->n_head_kv, hd, (size_t)hp->n_rot, b->pos, base, scale,
		hp->rope_neox);
	float *K = kv->k + (size_t)il * kv->n_ctx * kvd, *V = kv->v + (size_t)il * kv->n_ctx * kvd;
	memcpy(K + pos0 * kvd, b->k, n * kvd * sizeof(float));
	memcpy(V + pos0 * kvd, b->v, n * kvd * sizeof(float));
	struct el_attn_task t = { hp, b, K, V, n, pos0, l->swa ? (size_t)hp->n_swa : 0 };
	dev_pool_run(p, el_attn_heads, &t);
	el_linear(p, &l->wo, NULL, b->att, b->o, n, b);
	if (l->post_attn_norm)
		el_rms_rows(b->o, l->post_attn_norm, b->o, n, d, hp->rms_eps);
	eng_par_add(p, b->x, b->o, n * d);
}

/* gate[i] = GELU(gate[i]) * up[i] the way ggml's CPU GeGLU computes it:
 * 0 below -10, the identity above 10, else the binary16 table. */
static void el_geglu_f16(const float *table, float *gate, const float *up, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = gate[i];
		float gl = x <= -10.0f ? 0.0f : x >= 10.0f ? x : table[el_f32_to_f16(x)];
		gate[i] = gl * up[i];
	}
}

static void el_ffn(const struct eng_llm *m, int il, struct dev_pool *p, struct el_buf *b, size_t n)
{
	const struct eng_llm_hp *hp = &m->hp;
	const struct el_layer *l = &m->layers[il];
	size_t d = (size_t)hp->n_embd, ff = (size_t)hp->n_ff;
	el_rms_rows(b->x, l->ffn_norm, b->h, n, d, hp->rms_eps);
	el_linear(p, &l->w_gate, NULL, b->h, b->g, n, b);
	el_linear(p, &l->w_up, NULL, b->h, b->u, n, b);
	if (m->gelu_f16)
		el_geglu_f16(m->gelu_f16, b->g, b->u, n * ff);
	else if (hp->arch == ENG_LLM_ARCH_GEMMA3)
		kn_ops()->gelu_tanh_mul(b->g, b->u, n * ff);
	else
		kn_ops()->silu_mul(b->g, b->u, n * ff);
	el_linear(p, &l->w_down, NULL, b->g, b->o, n, b);
	if (l->post_ffw_norm)
		el_rms_rows(b->o, l->post_ffw_norm, b->o, n, d, hp->rms_eps);
	eng_par_add(p, b->x, b->o, n * d);
}

static void el_embed(const struct eng_llm *m, const int32_t *tokens, size_t n, struct el_buf *b)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t d = (size_t)hp->n_embd;
	const struct el_mat *e = &m->tok_embd;
	for (size_t t = 0; t < n; t++) {
		e->q->dequant((const char *)e->data + (size_t)tokens[t] * e->row_bytes, b->x + t * d, d);
		if (hp->embd_scale != 1.0f)
			kn_ops()->scale_add(b->x + t * d, hp->embd_scale, NULL, d);
	}
}

/* The final norm and the lm head for `rows` rows starting at row r0. */
static void el_logits(const struct eng_llm *m, struct dev_pool *p, struct el_buf *b, size_t r0,
		      size_t rows, float *logits)
{
	const struct eng_llm_hp *hp = &m->hp;
	size_t d = (size_t)hp->n_embd;
	el_rms_rows(b->x + r0 * d, m->output_norm, b->h, rows, d, hp->rms_eps);
	el_linear(p, &m->output, NULL, b->h, logits, rows, b);
}

static int el_chunk(const struct eng_llm *m, struct eng_llm_kv *kv, struct dev_pool *p,
		    const int32_t *tokens, size_t n, float *logits, bool all, struct el_buf *b)
{
	for (size_t t = 0; t < n; t++)
		b->pos[t] = (int32_t)(kv->len + t);
	el_embed(m, tokens, n, b);
	for (int il = 0; il < m->hp.n_layer; il++) {
		el_attention(m, il, kv, p, b, n);
		el_ffn(m, il, p, b, n);
	}
	kv->len += n;
	if (all)
		el_logits(m, p, b, 0, n, logits);
	else if (logits)
		el_logits(m, p, b, n - 1, 1, logits);
	return 0;
}

int eng_llm_forward(const struct eng_llm *m, struct eng_llm_kv *kv, struct dev_pool *p,
		    const int32_t *tokens, size_t n, bool all_logits, float *logits)
{
	const struct eng_llm_hp *hp = &m->hp;
	if (n == 0 || n > kv->n_ctx - kv->len)
		return -ST_TOOBIG;
	for (size_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return -ST_INVAL;
	size_t chunk = n < EL_CHUNK ? n : EL_CHUNK;
	struct el_buf b;
	if (el_buf_alloc(hp, chunk, kv->n_ctx, dev_pool_size(p), &b))
		return -ST_NOMEM;
	int rc = 0;
	for (size_t done = 0; !rc && done < n; done += chunk) {
		size_t c = n - done < chunk ? n - done : chunk;
		bool last = done + c == n;
		float *out = all_logits ? logits + done * (size_t)hp->n_vocab : last ? logits : NULL;
		rc = el_chunk(m, kv, p, tokens + done, c, out, all_logits, &b);
	}
	el_buf_free(&b);
	return rc;
}
