/* dev_cpu_ops.c - the cpu back end's compute (struct dev_ops): the
 * kernels of kernels/kn.h on host memory, split over the queue's pool
 * (dev_par.c) where the forward passes split them today, so a pass
 * through the device interface computes the same bits as a direct one.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/dev_par.h"
#include "devices/dev_pool.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_half.h"
#include "kernels/kn_i8.h"
#include "kernels/kn_quant.h"

static int cpu_rms_norm(struct dev_queue *q, const float *x, const float *w, float *y,
			size_t rows, size_t d, float eps)
{
	(void)q;
	const struct kn_ops *ops = kn_ops();
	for (size_t r = 0; r < rows; r++)
		ops->rms_norm(x + r * d, w, y + r * d, d, eps);
	return 0;
}

static int cpu_layer_norm(struct dev_queue *q, const float *x, const float *gamma,
			  const float *beta, float *y, size_t rows, size_t d, float eps)
{
	dev_par_layer_norm(dev__queue_pool(q), rows, d, x, gamma, beta, y, eps);
	return 0;
}

static int cpu_add(struct dev_queue *q, float *y, const float *x, size_t n)
{
	dev_par_add(dev__queue_pool(q), y, x, n);
	return 0;
}

static int cpu_scale(struct dev_queue *q, float *x, float s, size_t n)
{
	(void)q;
	kn_ops()->scale_add(x, s, NULL, n);
	return 0;
}

static int cpu_softcap(struct dev_queue *q, float *x, size_t n, float cap)
{
	dev_par_softcap(dev__queue_pool(q), x, n, cap);
	return 0;
}

static int cpu_gelu(struct dev_queue *q, float *x, size_t n)
{
	dev_par_gelu(dev__queue_pool(q), x, n);
	return 0;
}

/* ggml's CPU GELU table: the tanh approximation at every binary16 input,
 * rounded to binary16 (ggml_table_gelu_f16), built once. */
static float cpu_gelu_f16[65536];
static pthread_once_t cpu_gelu_f16_once = PTHREAD_ONCE_INIT;

static void cpu_gelu_f16_build(void)
{
	for (uint32_t i = 0; i < 65536; i++) {
		float x = kn_f16_to_f32((uint16_t)i);
		float y = 0.5f * x *
			  (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
		cpu_gelu_f16[i] = kn_f16_to_f32(kn_f32_to_f16(y));
	}
}

/* The gated activation is split over the pool when the elements are many
 * (a batch of rows): element-wise, so the split changes no bit. */
#define CPU_PAR_GLU 16384

struct cpu_glu {
	enum dev_glu kind;
	float *g;
	const float *u;
	size_t n;
};

static void cpu_glu_part(void *arg, int ith, int nth)
{
	const struct cpu_glu *a = arg;
	long i0, i1;
	dev_split((long)a->n, ith, nth, 64, &i0, &i1);
	if (i1 <= i0)
		return;
	float *g = a->g + i0;
	const float *u = a->u + i0;
	size_t n = (size_t)(i1 - i0);
	if (a->kind == DEV_GLU_GELU_F16)
		kn_ops()->geglu_table_mul(g, u, cpu_gelu_f16, n);
	else if (a->kind == DEV_GLU_GELU_TANH)
		kn_ops()->gelu_tanh_mul(g, u, n);
	else
		kn_ops()->silu_mul(g, u, n);
}

static int cpu_glu(struct dev_queue *q, enum dev_glu kind, float *g, const float *u, size_t n)
{
	if (kind == DEV_GLU_GELU_F16)
		pthread_once(&cpu_gelu_f16_once, cpu_gelu_f16_build);
	struct cpu_glu a = { kind, g, u, n };
	dev_pool_run(n >= CPU_PAR_GLU ? dev__queue_pool(q) : NULL, cpu_glu_part, &a);
	return 0;
}

static int cpu_softmax(struct dev_queue *q, float *x, size_t rows, size_t n)
{
	(void)q;
	for (size_t r = 0; r < rows; r++)
		kn_ops()->softmax(x + r * n, n);
	return 0;
}

static int cpu_kv_store(struct dev_queue *q, void *y, size_t hs, bool f16, const float *x,
			size_t ldx, size_t n, size_t n_heads, size_t head_dim)
{
	(void)q;
	for (size_t g = 0; g < n_heads; g++)
		for (size_t j = 0; j < n; j++) {
			const float *src = x + j * ldx + g * head_dim;
			size_t at = g * hs + j * head_dim;
			if (!f16) {
				memcpy((float *)y + at, src, head_dim * sizeof(float));
				continue;
			}
			uint16_t *dst = (uint16_t *)y + at;
			for (size_t e = 0; e < head_dim; e++)
				dst[e] = kn_f32_to_f16(src[e]);
		}
	return 0;
}

static int cpu_argmax(struct dev_queue *q, const float *x, size_t rows, size_t n, int32_t *out)
{
	(void)q;
	for (size_t r = 0; r < rows; r++)
		out[r] = (int32_t)kn_ops()->argmax(x + r * n, n);
	return 0;
}

/* --- weights and products ------------------------------------------------ */

/* How a cpu matrix multiplies: GGUF types through kn_qops as llama.cpp
 * does, DEV_MAT_CT2 ones through the kernels the Whisper forward pass
 * has always called (dev_par.h). */
enum cpu_mat_kind {
	CPU_MAT_Q = 0, /* kn_qops (dev_par_qlinear) */
	CPU_MAT_SGEMM, /* F32 | CT2: dev_par_linear on the host rows */
	CPU_MAT_F16,   /* F16 | CT2: dev_par_linear_f16 on the host rows */
	CPU_MAT_BF16,  /* BF16 | CT2: dev_par_linear_bf16 on kn_bf16_pack's layout */
	CPU_MAT_I8,    /* I8R: dev_par_linear_i8 on kn_i8.h's layout */
};

/* A cpu weight matrix: host rows, borrowed or repacked. */
struct cpu_mat {
	enum cpu_mat_kind kind;
	const void *data;	 /* the rows q computes on (CPU_MAT_Q, SGEMM, F16) */
	const struct kn_qops *q; /* the type's kernels (on the packed layout when packed) */
	void *packed;		 /* owned: kn_qpack's or kn_bf16_pack's layout, or NULL */
	struct kn_i8w i8;	 /* CPU_MAT_I8: its arrays owned */
};

/* I8R rows (dev.h) into kn_i8.h's packed layout; 0 or -ST_NOMEM. */
static int cpu_mat_i8(struct cpu_mat *c, const struct dev_mat *m, const void *host)
{
	size_t N = m->rows, K = m->cols, np = kn_i8_npad(N);
	int8_t *codes = mem_alloc(N * K), *packed = mem_alloc_huge(np * kn_i8_kpad(K));
	float *scale = mem_calloc(np, sizeof(float));
	int32_t *comp = mem_alloc(np * sizeof(int32_t));
	if (!codes || !packed || !scale || !comp) {
		mem_free(codes);
		mem_free_huge(packed);
		mem_free(scale);
		mem_free(comp);
		return -ST_NOMEM;
	}
	for (size_t r = 0; r < N; r++) {
		const char *row = (const char *)host + r * m->row_bytes;
		memcpy(&scale[r], row, sizeof(float));
		memcpy(codes + r * K, row + 4, K);
	}
	kn_i8_pack(codes, N, K, packed, comp);
	mem_free(codes);
	c->i8 = (struct kn_i8w){ packed, scale, comp, N, K };
	return 0;
}

/* BF16 rows packed for kn_bf16_linear (exact: bfloat16 values widen to
 * float32 and kn_bf16_pack rounds them back to the same bits). */
static int cpu_mat_bf16(struct cpu_mat *c, const struct dev_mat *m, const void *host)
{
	size_t n = m->rows * m->cols;
	float *f = mem_alloc(n * sizeof(float));
	c->packed = mem_alloc_huge(kn_bf16_packed_len(m->rows, m->cols) * sizeof(uint16_t));
	if (!f || !c->packed) {
		mem_free(f);
		return -ST_NOMEM;
	}
	const uint16_t *h = host;
	for (size_t i = 0; i < n; i++)
		f[i] = kn_bf16_to_f32(h[i]);
	kn_bf16_pack(f, m->rows, m->cols, c->packed);
	mem_free(f);
	return 0;
}

/* A DEV_MAT_CT2 matrix (types checked by dev_mat_create). */
static int cpu_mat_ct2(struct cpu_mat *c, const struct dev_mat *m, const void *host, char *err,
		       size_t errlen)
{
	int rc = 0;
	switch (m->type) {
	case KN_Q_F32: c->kind = CPU_MAT_SGEMM; break;
	case KN_Q_F16: c->kind = CPU_MAT_F16; break;
	case KN_Q_BF16:
		c->kind = CPU_MAT_BF16;
		if (!kn_bf16_ok())
			return st_errf(-ST_UNSUPPORTED, err, errlen,
				       "needs a CPU with AVX512-BF16 (AMD Zen 4 or later, Intel Cooper "
				       "Lake) or AMX-BF16 (Intel Sapphire Rapids or later, with a kernel "
				       "granting its tile state) for bfloat16 products%s",
				       kn_cpu_cap(NULL) == KN_CAP_AVX2 ? " (INFERD_CPU_ISA=avx2 caps "
									  "this process at AVX2)"
								       : "");
		rc = cpu_mat_bf16(c, m, host);
		break;
	default:
		c->kind = CPU_MAT_I8;
		if (m->cols > DEV_PAR_I8_MAX_K)
			return st_errf(-ST_UNSUPPORTED, err, errlen,
				       "int8 weights of %zu columns: at most %d", m->cols,
				       DEV_PAR_I8_MAX_K);
		rc = cpu_mat_i8(c, m, host);
	}
	return rc ? st_errf(rc, err, errlen, "out of memory") : 0;
}

static void cpu_mat_free(struct cpu_mat *c)
{
	mem_free_huge(c->packed);
	mem_free_huge((void *)c->i8.packed);
	mem_free((void *)c->i8.scale);
	mem_free((void *)c->i8.comp);
	mem_free(c);
}

static int cpu_mat_create(struct dev_mat *m, const void *host, char *err, size_t errlen)
{
	struct cpu_mat *c = mem_calloc(1, sizeof(*c));
	if (!c)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	c->data = host;
	if (m->flags & DEV_MAT_CT2) {
		int rc = cpu_mat_ct2(c, m, host, err, errlen);
		if (rc) {
			cpu_mat_free(c);
			return rc;
		}
		m->impl = c;
		return 0;
	}
	c->q = kn_qops_get(m->type);
	if (!c->q) {
		mem_free(c);
		return st_errf(-ST_UNSUPPORTED, err, errlen, "weights of type %s: no kernels",
			       kn_qtype_get(m->type)->name);
	}
	const struct kn_qpack *pk = kn_qpack_get(m->type);
	if (pk && m->rows % pk->rows == 0) {
		c->packed = mem_alloc_huge(m->rows * m->row_bytes);
		if (!c->packed) {
			mem_free(c);
			return st_errf(-ST_NOMEM, err, errlen, "out of memory");
		}
		pk->pack(host, m->row_bytes, m->rows, m->cols, c->packed);
		c->data = c->packed;
		c->q = pk->ops;
	}
	m->impl = c;
	return 0;
}

static void cpu_mat_destroy(struct dev_mat *m)
{
	cpu_mat_free(m->impl);
}

/* A cpu queue's scratch, grown to the largest call: dev_par_qlinear's,
 * and the attention's scores (one region per thread). */
struct cpu_queue {
	float *scratch;
	size_t cap; /* floats */
	float *attn;
	size_t attn_cap; /* floats */
};

/* *buf holds at least need floats (grown, contents dropped); 0 or
 * -ST_NOMEM. */
static int cpu_grow(float **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	float *s = mem_alloc(need * sizeof(float));
	if (!s)
		return -ST_NOMEM;
	mem_free(*buf);
	*buf = s;
	*cap = need;
	return 0;
}

int dev__cpu_queue_open(struct dev_queue *q, char *err, size_t errlen)
{
	struct cpu_queue *c = mem_calloc(1, sizeof(*c));
	if (!c)
		return st_errf(-ST_NOMEM, err, errlen, "queue: out of memory");
	dev__queue_set_impl(q, c);
	return 0;
}

void dev__cpu_queue_close(struct dev_queue *q)
{
	struct cpu_queue *c = dev__queue_impl(q);
	if (!c)
		return;
	mem_free(c->scratch);
	mem_free(c->attn);
	mem_free(c);
}

static int cpu_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
		      const float *b, float *y)
{
	const struct cpu_mat *m = w->impl;
	struct dev_pool *p = dev__queue_pool(q);
	struct cpu_queue *c = dev__queue_impl(q);
	switch (m->kind) {
	case CPU_MAT_SGEMM: dev_par_linear(p, M, w->rows, w->cols, x, m->data, b, y); return 0;
	case CPU_MAT_F16:
		dev_par_linear_f16(p, M, w->rows, w->cols, x, m->data, b, y);
		return 0;
	case CPU_MAT_BF16:
		return dev_par_linear_bf16(p, M, w->rows, w->cols, x, m->packed, b, y);
	case CPU_MAT_I8: dev_par_linear_i8(p, M, x, &m->i8, b, y); return 0;
	case CPU_MAT_Q: break;
	}
	/* dev_par_qlinear's scratch (dev_par.h): x rounded or quantized, then
	 * a tile of weights per thread */
	size_t need = (M + (size_t)dev_pool_size(p) * DEV_PAR_QTILE) * w->cols;
	if (cpu_grow(&c->scratch, &c->cap, need))
		return -ST_NOMEM;
	dev_par_qlinear(p, M, w->rows, w->cols, x, m->data, w->row_bytes, m->q, b, y, c->scratch);
	return 0;
}

static int cpu_linear_n(struct dev_queue *q, const float *x, size_t M,
			const struct dev_linear_out *o, size_t n)
{
	struct dev_pool *p = dev__queue_pool(q);
	struct cpu_queue *c = dev__queue_impl(q);
	size_t K = o[0].w->cols;
	if (cpu_grow(&c->scratch, &c->cap, (M + (size_t)dev_pool_size(p) * DEV_PAR_QTILE) * K))
		return -ST_NOMEM;
	struct dev_par_qmat m[DEV_LINEAR_MAX];
	for (size_t i = 0; i < n; i++) {
		const struct cpu_mat *w = o[i].w->impl;
		m[i] = (struct dev_par_qmat){ .W = w->data, .row_bytes = o[i].w->row_bytes,
					      .N = o[i].w->rows, .q = w->q, .b = o[i].b,
					      .y = o[i].y, .yrows = o[i].yrows,
					      .argmax = o[i].argmax };
	}
	dev_par_qlinear_multi(p, M, K, x, m, n, c->scratch);
	return 0;
}

/* On the caller's float32 rows (m->host, [c_out, c_in k] as the kernel
 * wants them; not a packed layout), im2col in the queue's scratch. */
static int cpu_conv1d(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
		      size_t stride, size_t pad, const float *x, size_t t_in, const float *b,
		      float *y)
{
	struct cpu_queue *c = dev__queue_impl(q);
	size_t t_out = dev_conv1d_out_len(t_in, k, stride, pad);
	if (cpu_grow(&c->scratch, &c->cap, t_out * c_in * k))
		return -ST_NOMEM;
	dev_par_conv1d(dev__queue_pool(q), t_in, c_in, w->rows, k, stride, pad, x, w->host, b, y,
		       c->scratch);
	return 0;
}

/* From the caller's rows with the type's plain kernels (a packed layout
 * has no dequant). */
static int cpu_embed(struct dev_queue *q, const struct dev_mat *m, const int32_t *ids, size_t n,
		     float *y)
{
	(void)q;
	const struct kn_qops *plain = kn_qops_get(m->type);
	for (size_t i = 0; i < n; i++)
		plain->dequant((const char *)m->host + (size_t)ids[i] * m->row_bytes, y + i * m->cols,
			       m->cols);
	return 0;
}

static int cpu_memcpy(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	(void)q;
	memcpy(dst, src, n);
	return 0;
}

/* --- rotary embedding and attention -------------------------------------- */

static int cpu_rope(struct dev_queue *q, float *x, size_t n_tok, size_t ld, size_t n_head,
		    size_t head_dim, size_t n_rot, const float *cs, bool neox)
{
	(void)q;
	kn_rope_apply(x, n_tok, ld, n_head, head_dim, n_rot, cs, neox);
	return 0;
}

/* Floats of one thread's scratch for full attention of n rows over n_kv
 * keys in a's precision (dev_par.h's sizes). */
static size_t cpu_attn_full_per(const struct dev_attn *a, size_t n, size_t n_kv)
{
	if (a->kv_type == 2)
		return kn_kv16_scratch(n_kv);
	switch (a->prec) {
	case DEV_ATTN_BF16: return dev_par_attention_bf16_scratch(n, n_kv, a->head_dim);
	case DEV_ATTN_I8: return dev_par_attention_i8_scratch(n, n_kv, a->head_dim);
	default: return n * n_kv;
	}
}

/* The keys a sequence's rows see: all n_kv (full), or up to its last row
 * (causal). */
static size_t cpu_attn_keys(const struct dev_attn *a, const struct dev_attn_seq *sg)
{
	return a->full ? sg->n_kv : sg->pos0 + sg->n;
}

/* Full attention, and causal attention with a->ct2: each sequence's heads
 * split over the pool by dev_par_attention(_bf16, _i8, _kv16), the calls
 * the Whisper encoder and decoder make. */
static int cpu_attention_full(struct dev_queue *q, const struct dev_attn *a,
			      const struct dev_attn_seq *seqs, size_t n_seqs)
{
	struct dev_pool *p = dev__queue_pool(q);
	struct cpu_queue *c = dev__queue_impl(q);
	if (a->prec == DEV_ATTN_BF16 && !kn_bf16_ok())
		return -ST_UNSUPPORTED;
	size_t per = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		size_t need = cpu_attn_full_per(a, seqs[s].n, cpu_attn_keys(a, &seqs[s]));
		per = need > per ? need : per;
	}
	if (cpu_grow(&c->attn, &c->attn_cap, per * (size_t)dev_pool_size(p)))
		return -ST_NOMEM;
	size_t nh = a->n_head, hd = a->head_dim;
	for (size_t s = 0; s < n_seqs; s++) {
		const struct dev_attn_seq *sg = &seqs[s];
		const float *qr = a->q + sg->r0 * a->ldq, *k = sg->k, *v = sg->v;
		float *o = a->out + sg->r0 * a->ldo;
		if (a->kv_type == 2)
			dev_par_attention_kv16(p, sg->n, sg->n_kv, nh, hd, qr, a->ldq, sg->k, o,
					       a->ldo, c->attn);
		else if (a->prec == DEV_ATTN_BF16)
			dev_par_attention_bf16(p, sg->n, sg->n_kv, nh, hd, qr, a->ldq, k, a->ldk, v,
					       a->ldv, o, a->ldo, c->attn);
		else if (a->prec == DEV_ATTN_I8)
			dev_par_attention_i8(p, sg->n, sg->n_kv, nh, hd, qr, a->ldq, k, a->ldk, v,
					     a->ldv, o, a->ldo, c->attn);
		else
			dev_par_attention(p, sg->n, cpu_attn_keys(a, sg), nh, hd, qr, a->ldq, k,
					  a->ldk, v, a->ldv, o, a->ldo, !a->full,
					  a->full ? 0 : sg->pos0, c->attn);
	}
	return 0;
}

static int cpu_scores(struct dev_queue *q, const struct dev_scores *s)
{
	(void)q;
	size_t hd = s->head_dim;
	if (s->kv_type == 2)
		kn_attention_scores_kv16(s->n_q, s->n_kv, s->n_cols, hd, s->h, s->q, s->ldq, s->k,
					 s->out, s->ldo);
	else
		kn_attention_scores(s->n_q, s->n_cols, hd, s->q + s->h * hd, s->ldq,
				    (const float *)s->k + s->h * hd, s->ldk, s->out, s->ldo);
	return 0;
}

static int cpu_kv16_pack(struct dev_queue *q, const float *kv, size_t ldkv, size_t n_kv,
			 size_t n_heads, size_t head_dim, uint16_t *cache)
{
	dev_par_kv16_pack(dev__queue_pool(q), kv, ldkv, n_kv, n_heads, head_dim, cache);
	return 0;
}

static int cpu_attention(struct dev_queue *q, const struct dev_attn *a,
			 const struct dev_attn_seq *seqs, size_t n_seqs)
{
	if (a->full || a->ct2)
		return cpu_attention_full(q, a, seqs, n_seqs);
	struct dev_pool *p = dev__queue_pool(q);
	struct cpu_queue *c = dev__queue_impl(q);
	if (cpu_grow(&c->attn, &c->attn_cap,
		     dev__cpu_causal_floats(dev_pool_size(p), a, seqs, n_seqs)))
		return -ST_NOMEM;
	dev__cpu_causal(p, a, seqs, n_seqs, c->attn);
	return 0;
}

const struct dev_ops dev__cpu_ops = {
	.rms_norm = cpu_rms_norm,
	.layer_norm = cpu_layer_norm,
	.add = cpu_add,
	.scale = cpu_scale,
	.softcap = cpu_softcap,
	.gelu = cpu_gelu,
	.glu = cpu_glu,
	.softmax = cpu_softmax,
	.memcpy = cpu_memcpy,
	.kv_store = cpu_kv_store,
	.argmax = cpu_argmax,
	.rope = cpu_rope,
	.attention = cpu_attention,
	.scores = cpu_scores,
	.kv16_pack = cpu_kv16_pack,
	.conv1d = cpu_conv1d,
	.mat_create = cpu_mat_create,
	.mat_destroy = cpu_mat_destroy,
	.linear = cpu_linear,
	.linear_n = cpu_linear_n,
	.embed = cpu_embed,
};
