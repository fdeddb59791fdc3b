/* dev_ops.c - dev.h's compute calls: sizes checked, empty work skipped,
 * then the op of the queue's device's back end (struct dev_ops).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_half.h"
#include "kernels/kn_i8.h"
#include "kernels/kn_quant.h"

static const struct dev_ops *dev_ops_of(const struct dev_queue *q)
{
	return dev_queue_device(q)->be->ops;
}

int dev_rms_norm(struct dev_queue *q, const float *x, const float *w, float *y, size_t rows,
		 size_t d, float eps)
{
	if (d == 0)
		return -ST_INVAL;
	return rows ? dev_ops_of(q)->rms_norm(q, x, w, y, rows, d, eps) : 0;
}

int dev_layer_norm(struct dev_queue *q, const float *x, const float *gamma, const float *beta,
		   float *y, size_t rows, size_t d, float eps)
{
	if (d == 0)
		return -ST_INVAL;
	return rows ? dev_ops_of(q)->layer_norm(q, x, gamma, beta, y, rows, d, eps) : 0;
}

int dev_add(struct dev_queue *q, float *y, const float *x, size_t n)
{
	return n ? dev_ops_of(q)->add(q, y, x, n) : 0;
}

int dev_scale(struct dev_queue *q, float *x, float s, size_t n)
{
	return n ? dev_ops_of(q)->scale(q, x, s, n) : 0;
}

int dev_softcap(struct dev_queue *q, float *x, size_t n, float cap)
{
	if (!(cap > 0.0f))
		return -ST_INVAL;
	return n ? dev_ops_of(q)->softcap(q, x, n, cap) : 0;
}

int dev_gelu(struct dev_queue *q, float *x, size_t n)
{
	return n ? dev_ops_of(q)->gelu(q, x, n) : 0;
}

int dev_glu(struct dev_queue *q, enum dev_glu kind, float *g, const float *u, size_t n)
{
	if (kind != DEV_GLU_SILU && kind != DEV_GLU_GELU_TANH && kind != DEV_GLU_GELU_F16)
		return -ST_INVAL;
	return n ? dev_ops_of(q)->glu(q, kind, g, u, n) : 0;
}

int dev_softmax(struct dev_queue *q, float *x, size_t rows, size_t n)
{
	if (n == 0)
		return -ST_INVAL;
	return rows ? dev_ops_of(q)->softmax(q, x, rows, n) : 0;
}

int dev_memcpy(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	return n ? dev_ops_of(q)->memcpy(q, dst, src, n) : 0;
}

int dev_kv_store(struct dev_queue *q, void *y, size_t hs, bool f16, const float *x, size_t ldx,
		 size_t n, size_t n_heads, size_t head_dim)
{
	if (ldx < n_heads * head_dim || (n_heads > 1 && hs < head_dim))
		return -ST_INVAL;
	if (n == 0 || n_heads == 0 || head_dim == 0)
		return 0;
	return dev_ops_of(q)->kv_store(q, y, hs, f16, x, ldx, n, n_heads, head_dim);
}

int dev_argmax(struct dev_queue *q, const float *x, size_t rows, size_t n, int32_t *out)
{
	if (n == 0)
		return -ST_INVAL;
	return rows ? dev_ops_of(q)->argmax(q, x, rows, n, out) : 0;
}

size_t dev_mat_row_bytes(int type, size_t cols)
{
	if (type == DEV_TYPE_I8R)
		return cols && cols <= SIZE_MAX - 4 ? 4 + cols : 0;
	return kn_qtype_row_bytes(type, cols);
}

int dev_quantize_i8r(const float *w, size_t rows, size_t cols, void *out)
{
	size_t rb = 4 + cols;
	int8_t *q = mem_alloc(kn_i8_kpad(cols)); /* the kernel writes a padded row */
	if (!q)
		return -ST_NOMEM;
	for (size_t r = 0; r < rows; r++) {
		char *row = (char *)out + r * rb;
		float s;
		kn_i8_quantize_rows(w + r * cols, cols, 1, cols, q, kn_i8_kpad(cols), &s);
		memcpy(row, &s, sizeof(s));
		memcpy(row + 4, q, cols);
	}
	mem_free(q);
	return 0;
}

double dev_host_logsumexp(const float *x, size_t n)
{
	return kn_ops()->logsumexp(x, n);
}

size_t dev_host_argmax(const float *x, size_t n)
{
	return kn_ops()->argmax(x, n);
}

void dev_round_bf16(const float *x, size_t n, uint16_t *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] = kn_f32_to_bf16(x[i]);
}

const char *dev_type_block(int type, uint32_t *block_elems, uint32_t *block_bytes)
{
	uint32_t e = 1, b = 1;
	const char *name = "I8R"; /* a row is its block: see dev_mat_row_bytes */
	if (type != DEV_TYPE_I8R) {
		const struct kn_qtype_info *t = kn_qtype_get(type);
		if (!t)
			return NULL;
		name = t->name, e = t->block_elems, b = t->block_bytes;
	}
	if (block_elems)
		*block_elems = e;
	if (block_bytes)
		*block_bytes = b;
	return name;
}

static const char *dev_type_name(int type)
{
	return dev_type_block(type, NULL, NULL);
}

void dev_f16_to_f32(const void *x, size_t n, float *y)
{
	kn_ops()->f16_to_f32(x, y, n);
}

void dev_bf16_to_f32(const void *x, size_t n, float *y)
{
	const uint8_t *b = x;
	for (size_t i = 0; i < n; i++)
		y[i] = kn_bf16_to_f32((uint16_t)(b[2 * i] | (b[2 * i + 1] << 8)));
}

int dev_mat_create(struct dev *d, int type, size_t rows, size_t cols, const void *host,
		   size_t row_bytes, unsigned flags, struct dev_mat **out, char *err,
		   size_t errlen)
{
	*out = NULL;
	st_errf(0, err, errlen, "%s", "");
	const char *name = dev_type_name(type);
	if (!name)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "weight type %d: unknown", type);
	if (rows == 0 || cols == 0 || row_bytes == 0 || row_bytes != dev_mat_row_bytes(type, cols))
		return st_errf(-ST_INVAL, err, errlen,
			       "%s weights of %zu x %zu: %zu bytes per row, where the type "
			       "makes %zu",
			       name, rows, cols, row_bytes, dev_mat_row_bytes(type, cols));
	bool ct2 = flags & DEV_MAT_CT2;
	if (ct2 != (type == DEV_TYPE_I8R) &&
	    (!ct2 || (type != KN_Q_F32 && type != KN_Q_F16 && type != KN_Q_BF16)))
		return st_errf(-ST_INVAL, err, errlen, "%s weights %s CTranslate2's arithmetic", name,
			       ct2 ? "cannot take" : "need");
	if (ct2 && (flags & DEV_MAT_LOOKUP))
		return st_errf(-ST_INVAL, err, errlen, "a lookup table has no products to compute");
	if (!d->be->ops->mat_create)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "%s: no weight matrices on this back end",
			       d->caps.name);
	struct dev_mat *m = mem_calloc(1, sizeof(*m));
	if (!m)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	*m = (struct dev_mat){ d, type, rows, cols, row_bytes, host, flags, NULL };
	int rc = flags & DEV_MAT_LOOKUP ? 0 : d->be->ops->mat_create(m, host, err, errlen);
	if (rc) {
		mem_free(m);
		return rc;
	}
	if (type == DEV_TYPE_I8R)
		m->host = NULL; /* its own copy from here on (dev.h): the rows may go */
	*out = m;
	return 0;
}

void dev_mat_destroy(struct dev_mat *m)
{
	if (!m)
		return;
	if (!(m->flags & DEV_MAT_LOOKUP))
		m->dev->be->ops->mat_destroy(m);
	mem_free(m);
}

/* Whether q may use m: a matrix lives in its device's memory, which every
 * cpu device shares (the host's). */
static bool dev_mat_usable(const struct dev_mat *m, const struct dev_queue *q)
{
	const struct dev *d = dev_queue_device(q);
	return m->dev == d || (m->dev->be == d->be && d->caps.kind == DEV_KIND_CPU);
}

/* ... and multiply by it. */
static bool dev_mat_multipliable(const struct dev_mat *m, const struct dev_queue *q)
{
	return dev_mat_usable(m, q) && !(m->flags & DEV_MAT_LOOKUP);
}

int dev_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
	       const float *b, float *y)
{
	if (!dev_mat_multipliable(w, q))
		return -ST_INVAL;
	return M ? dev_ops_of(q)->linear(q, w, x, M, b, y) : 0;
}

int dev_linear_n(struct dev_queue *q, const float *x, size_t M, const struct dev_linear_out *o,
		 size_t n)
{
	if (n == 0 || n > DEV_LINEAR_MAX)
		return -ST_INVAL;
	for (size_t i = 0; i < n; i++)
		if (!dev_mat_multipliable(o[i].w, q) || o[i].w->cols != o[0].w->cols ||
		    (o[i].w->flags & DEV_MAT_CT2) || (o[i].yrows && o[i].argmax))
			return -ST_INVAL;
	return M ? dev_ops_of(q)->linear_n(q, x, M, o, n) : 0;
}

int dev_embed(struct dev_queue *q, const struct dev_mat *m, const int32_t *ids, size_t n,
	      float *y)
{
	if (!dev_mat_usable(m, q) || m->type == DEV_TYPE_I8R)
		return -ST_INVAL;
	for (size_t i = 0; i < n; i++)
		if (ids[i] < 0 || (size_t)ids[i] >= m->rows)
			return -ST_INVAL;
	return n ? dev_ops_of(q)->embed(q, m, ids, n, y) : 0;
}

size_t dev_conv1d_out_len(size_t t_in, size_t k, size_t stride, size_t pad)
{
	if (!k || !stride || t_in + 2 * pad < k)
		return 0;
	return (t_in + 2 * pad - k) / stride + 1;
}

int dev_conv1d(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
	       size_t stride, size_t pad, const float *x, size_t t_in, const float *b, float *y)
{
	if (!dev_mat_multipliable(w, q) || w->type != KN_Q_F32 || !c_in || !k || w->cols != c_in * k ||
	    !dev_conv1d_out_len(t_in, k, stride, pad) || !dev_ops_of(q)->conv1d)
		return -ST_INVAL;
	return dev_ops_of(q)->conv1d(q, w, c_in, k, stride, pad, x, t_in, b, y);
}

int dev_rope_angles(struct dev_queue *q, float *cs, size_t n_tok, size_t n_rot,
		    const int32_t *pos, float base, float freq_scale, const float *freq_factors)
{
	if (n_rot == 0 || n_rot % 2)
		return -ST_INVAL;
	if (n_tok == 0)
		return 0;
	float *host = mem_alloc(n_tok * n_rot * sizeof(float));
	if (!host)
		return -ST_NOMEM;
	kn_rope_angles(host, n_tok, n_rot, pos, base, freq_scale, freq_factors);
	int rc = dev_queue_device(q)->be->upload(q, cs, host, n_tok * n_rot * sizeof(float));
	mem_free(host);
	return rc;
}

int dev_rope(struct dev_queue *q, float *x, size_t n_tok, size_t ld, size_t n_head,
	     size_t head_dim, size_t n_rot, const float *cs, bool neox)
{
	if (n_rot == 0 || n_rot % 2 || n_rot > head_dim || n_head * head_dim > ld)
		return -ST_INVAL;
	return n_tok ? dev_ops_of(q)->rope(q, x, n_tok, ld, n_head, head_dim, n_rot, cs, neox) : 0;
}

int dev_attention(struct dev_queue *q, const struct dev_attn *a, const struct dev_attn_seq *seqs,
		  size_t n_seqs)
{
	if (a->n_head == 0 || a->n_head_kv == 0 || a->head_dim == 0 ||
	    a->n_head % a->n_head_kv || a->kv_type < 0 || a->kv_type > 2)
		return -ST_INVAL;
	for (size_t s = 0; s < n_seqs; s++)
		if (seqs[s].n == 0 || (a->full && seqs[s].n_kv == 0))
			return -ST_INVAL;
	if (a->full ? a->n_head != a->n_head_kv || a->kv_type == 1 ||
			      (a->kv_type == 2 && a->prec != DEV_ATTN_F32) || a->window ||
			      a->softcap != 0.0f ||
			      fabsf(a->scale * sqrtf((float)a->head_dim) - 1.0f) > 1e-6f ||
			      (a->prec != DEV_ATTN_F32 && a->prec != DEV_ATTN_BF16 &&
			       a->prec != DEV_ATTN_I8)
		    : a->prec != DEV_ATTN_F32 || a->kv_type == 2 ||
			      (a->ct2 && (a->n_head != a->n_head_kv || a->kv_type || a->window ||
					  a->softcap != 0.0f ||
					  fabsf(a->scale * sqrtf((float)a->head_dim) - 1.0f) > 1e-6f)))
		return -ST_INVAL;
	return n_seqs ? dev_ops_of(q)->attention(q, a, seqs, n_seqs) : 0;
}

int dev_attention_scores(struct dev_queue *q, const struct dev_scores *s)
{
	if (!s->head_dim || s->h >= s->n_heads || (s->kv_type != 0 && s->kv_type != 2) ||
	    (s->kv_type == 2 && s->n_cols > s->n_kv))
		return -ST_INVAL;
	return s->n_q && s->n_cols ? dev_ops_of(q)->scores(q, s) : 0;
}

size_t dev_kv16_len(size_t n_kv, size_t n_heads, size_t head_dim)
{
	return kn_kv16_len(n_kv, n_heads, head_dim);
}

int dev_kv16_pack(struct dev_queue *q, const float *kv, size_t ldkv, size_t n_kv, size_t n_heads,
		  size_t head_dim, uint16_t *cache)
{
	if (!n_heads || !head_dim || ldkv < 2 * n_heads * head_dim)
		return -ST_INVAL;
	return n_kv ? dev_ops_of(q)->kv16_pack(q, kv, ldkv, n_kv, n_heads, head_dim, cache) : 0;
}
