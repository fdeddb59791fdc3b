/* dev_ocl_ops.c - the opencl back end's compute (struct dev_ops): each op
 * resolves its device addresses to (buffer, offset) pairs and enqueues one
 * kernel of kernels/opencl/dev_ops.cl on the queue's in-order command
 * queue; only argmax, whose result is host memory, waits for it.
 */
#include <stdint.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"
#include "kernels/kn_quant.h"

#define OCL_LOCAL 64	 /* work-group size of element kernels */
#define OCL_ROW_LOCAL 256 /* most items per row of row kernels (OPS_LOCAL) */

/* A kernel being set up: its arguments go in order; the first failure
 * sticks in rc. */
struct ocl_call {
	struct dev_queue *q;
	cl_kernel k;
	cl_uint arg;
	int rc;
};

static struct ocl_call ocl_begin(struct dev_queue *q, const char *name)
{
	struct ocl_call c = { q, NULL, 0, 0 };
	c.rc = dev__ocl_kernel(q, name, &c.k, NULL, 0);
	if (c.rc)
		c.rc = -ST_DEVICE;
	return c;
}

static void ocl_arg(struct ocl_call *c, size_t size, const void *v)
{
	if (!c->rc && clSetKernelArg(c->k, c->arg++, size, v) != CL_SUCCESS)
		c->rc = -ST_DEVICE;
}

/* A device address as its buffer and byte offset (two arguments); the n
 * bytes from p must lie in one allocation of the queue's device. */
static void ocl_buf(struct ocl_call *c, const void *p, size_t n)
{
	cl_mem mem;
	size_t off;
	if (c->rc)
		return;
	if (dev__ocl_resolve(dev_queue_device(c->q), p, n, &mem, &off)) {
		c->rc = -ST_INVAL;
		return;
	}
	cl_ulong o = off;
	ocl_arg(c, sizeof(mem), &mem);
	ocl_arg(c, sizeof(o), &o);
}

static void ocl_u32(struct ocl_call *c, size_t v)
{
	cl_uint u = (cl_uint)v;
	if (v > UINT32_MAX)
		c->rc = c->rc ? c->rc : -ST_INVAL;
	ocl_arg(c, sizeof(u), &u);
}

static void ocl_u64(struct ocl_call *c, size_t v)
{
	cl_ulong u = v;
	ocl_arg(c, sizeof(u), &u);
}

/* Bytes of a strided block of rows: the last row's start plus its width. */
static size_t ocl_rows_bytes(size_t rows, size_t ld, size_t width, size_t elem)
{
	return ((rows - 1) * ld + width) * elem;
}

static void ocl_f32(struct ocl_call *c, float v)
{
	ocl_arg(c, sizeof(v), &v);
}

/* Enqueue c's kernel over groups x local items. */
static int ocl_run(struct ocl_call *c, size_t groups, size_t local)
{
	if (c->rc)
		return c->rc;
	size_t global = groups * local;
	if (clEnqueueNDRangeKernel(dev__ocl_queue(c->q), c->k, 1, NULL, &global, &local, 0, NULL,
				   NULL) != CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* Items over n0 x n1 in work-groups of OCL_LOCAL x 1 (n0 rounded up: the
 * kernel skips the items past n0). */
static int ocl_run_2d(struct ocl_call *c, size_t n0, size_t n1)
{
	if (c->rc)
		return c->rc;
	size_t local[2] = { OCL_LOCAL, 1 };
	size_t global[2] = { (n0 + OCL_LOCAL - 1) / OCL_LOCAL * OCL_LOCAL, n1 };
	if (clEnqueueNDRangeKernel(dev__ocl_queue(c->q), c->k, 2, NULL, global, local, 0, NULL,
				   NULL) != CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* One item per element, n of them. */
static int ocl_run_elems(struct ocl_call *c, size_t n)
{
	return ocl_run(c, (n + OCL_LOCAL - 1) / OCL_LOCAL, OCL_LOCAL);
}

/* One work-group per row of d: a power of two of items, at most
 * OCL_ROW_LOCAL and the device's limit, no more than d needs. */
static int ocl_run_rows(struct ocl_call *c, size_t rows, size_t d)
{
	size_t max = OCL_ROW_LOCAL, dev_max = 0;
	if (!c->rc && clGetKernelWorkGroupInfo(c->k, dev__ocl_device(dev_queue_device(c->q)),
					       CL_KERNEL_WORK_GROUP_SIZE, sizeof(dev_max), &dev_max,
					       NULL) == CL_SUCCESS &&
	    dev_max < max)
		max = dev_max;
	size_t local = 1;
	while (local * 2 <= max && local < d)
		local *= 2;
	return ocl_run(c, rows, local);
}

static int ocl_rms_norm(struct dev_queue *q, const float *x, const float *w, float *y,
			size_t rows, size_t d, float eps)
{
	struct ocl_call c = ocl_begin(q, "rms_norm_f32");
	size_t bytes = rows * d * sizeof(float);
	ocl_buf(&c, x, bytes);
	ocl_buf(&c, w ? (const void *)w : (const void *)x, w ? d * sizeof(float) : bytes);
	ocl_u32(&c, w != NULL);
	ocl_buf(&c, y, bytes);
	ocl_u32(&c, d);
	ocl_f32(&c, eps);
	return ocl_run_rows(&c, rows, d);
}

static int ocl_layer_norm(struct dev_queue *q, const float *x, const float *gamma,
			  const float *beta, float *y, size_t rows, size_t d, float eps)
{
	struct ocl_call c = ocl_begin(q, "layer_norm_f32");
	size_t bytes = rows * d * sizeof(float);
	ocl_buf(&c, x, bytes);
	ocl_buf(&c, gamma, d * sizeof(float));
	ocl_buf(&c, beta, d * sizeof(float));
	ocl_buf(&c, y, bytes);
	ocl_u32(&c, d);
	ocl_f32(&c, eps);
	return ocl_run_rows(&c, rows, d);
}

static int ocl_add(struct dev_queue *q, float *y, const float *x, size_t n)
{
	struct ocl_call c = ocl_begin(q, "add_f32");
	ocl_buf(&c, y, n * sizeof(float));
	ocl_buf(&c, x, n * sizeof(float));
	ocl_u32(&c, n);
	return ocl_run_elems(&c, n);
}

/* x *= s, or x = s tanh(x / s): one float parameter over n elements. */
static int ocl_elems_f(struct dev_queue *q, const char *name, float *x, float s, size_t n)
{
	struct ocl_call c = ocl_begin(q, name);
	ocl_buf(&c, x, n * sizeof(float));
	ocl_f32(&c, s);
	ocl_u32(&c, n);
	return ocl_run_elems(&c, n);
}

static int ocl_scale(struct dev_queue *q, float *x, float s, size_t n)
{
	return ocl_elems_f(q, "scale_f32", x, s, n);
}

static int ocl_softcap(struct dev_queue *q, float *x, size_t n, float cap)
{
	return ocl_elems_f(q, "softcap_f32", x, cap, n);
}

static int ocl_gelu(struct dev_queue *q, float *x, size_t n)
{
	struct ocl_call c = ocl_begin(q, "gelu_f32");
	ocl_buf(&c, x, n * sizeof(float));
	ocl_u32(&c, n);
	return ocl_run_elems(&c, n);
}

static int ocl_glu(struct dev_queue *q, enum dev_glu kind, float *g, const float *u, size_t n)
{
	struct ocl_call c = ocl_begin(q, "glu_f32");
	ocl_buf(&c, g, n * sizeof(float));
	ocl_buf(&c, u, n * sizeof(float));
	ocl_u32(&c, (size_t)kind);
	ocl_u32(&c, n);
	return ocl_run_elems(&c, n);
}

static int ocl_softmax(struct dev_queue *q, float *x, size_t rows, size_t n)
{
	struct ocl_call c = ocl_begin(q, "softmax_f32");
	ocl_buf(&c, x, rows * n * sizeof(float));
	ocl_u32(&c, n);
	return ocl_run_rows(&c, rows, n);
}

static int ocl_kv_store(struct dev_queue *q, void *y, size_t hs, bool f16, const float *x,
			size_t ldx, size_t n, size_t n_heads, size_t head_dim)
{
	struct ocl_call c = ocl_begin(q, "kv_store");
	ocl_buf(&c, y, ((n_heads - 1) * hs + n * head_dim) * (f16 ? 2 : 4));
	ocl_u64(&c, hs);
	ocl_u32(&c, f16);
	ocl_buf(&c, x, ocl_rows_bytes(n, ldx, n_heads * head_dim, 4));
	ocl_u64(&c, ldx);
	ocl_u64(&c, n * n_heads * head_dim);
	ocl_u32(&c, n_heads);
	ocl_u32(&c, head_dim);
	return ocl_run_elems(&c, n * n_heads * head_dim);
}

/* The indices land in a device buffer of the queue's device, then come
 * back to out. */
static int ocl_argmax(struct dev_queue *q, const float *x, size_t rows, size_t n, int32_t *out)
{
	struct dev *d = dev_queue_device(q);
	int32_t *ids = dev__ocl_alloc(d, rows * sizeof(int32_t));
	if (!ids)
		return -ST_NOMEM;
	struct ocl_call c = ocl_begin(q, "argmax_f32");
	ocl_buf(&c, x, rows * n * sizeof(float));
	ocl_buf(&c, ids, rows * sizeof(int32_t));
	ocl_u32(&c, n);
	int rc = ocl_run_rows(&c, rows, n);
	if (!rc)
		rc = dev__ocl_download(q, out, ids, rows * sizeof(int32_t));
	dev__ocl_free(d, ids);
	return rc;
}

static int ocl_rope(struct dev_queue *q, float *x, size_t n_tok, size_t ld, size_t n_head,
		    size_t head_dim, size_t n_rot, const float *cs, bool neox)
{
	struct ocl_call c = ocl_begin(q, "rope_f32");
	ocl_buf(&c, x, ((n_tok - 1) * ld + n_head * head_dim) * sizeof(float));
	ocl_u64(&c, ld);
	ocl_u32(&c, head_dim);
	ocl_u32(&c, n_rot);
	ocl_buf(&c, cs, n_tok * n_rot * sizeof(float));
	ocl_u32(&c, neox);
	if (c.rc)
		return c.rc;
	size_t global[3] = { n_rot / 2, n_head, n_tok };
	if (clEnqueueNDRangeKernel(dev__ocl_queue(q), c.k, 3, NULL, global, NULL, 0, NULL, NULL) !=
	    CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* The keys a sequence's rows see at most (its scores' stride). */
static size_t ocl_attn_keys(const struct dev_attn *a, const struct dev_attn_seq *sg)
{
	return a->full ? sg->n_kv : sg->pos0 + sg->n;
}

/* One sequence's attention: a work-group per (row, head) over the
 * scratch sc (n rows x n_head x its keys); full attention computes in
 * float32 whatever a->prec asks (more exactly than it asks). */

static int ocl_attn_seq(struct dev_queue *q, const struct dev_attn *a,
			const struct dev_attn_seq *sg, float *sc)
{
	size_t n_kv = ocl_attn_keys(a, sg), hd = a->head_dim, esz = a->kv_type == 1 ? 2 : 4;
	size_t hs = sg->hs ? sg->hs : hd, kvw = (a->n_head_kv - 1) * hs + hd;
	struct ocl_call c = ocl_begin(q, "attn_window");
	ocl_buf(&c, a->q + sg->r0 * a->ldq, ocl_rows_bytes(sg->n, a->ldq, a->n_head * hd, 4));
	ocl_u64(&c, a->ldq);
	if (a->kv_type == 2) { /* one packed cache holds both */
		size_t bytes = dev_kv16_len(n_kv, a->n_head, hd) * sizeof(uint16_t);
		ocl_buf(&c, sg->k, bytes);
		ocl_buf(&c, sg->k, bytes);
	} else {
		ocl_buf(&c, sg->k, ocl_rows_bytes(n_kv, a->ldk, kvw, esz));
		ocl_buf(&c, sg->v, ocl_rows_bytes(n_kv, a->ldv, kvw, esz));
	}
	ocl_u64(&c, a->ldk);
	ocl_u64(&c, a->ldv);
	ocl_u64(&c, hs);
	ocl_u32(&c, (size_t)a->kv_type);
	ocl_buf(&c, a->out + sg->r0 * a->ldo, ocl_rows_bytes(sg->n, a->ldo, a->n_head * hd, 4));
	ocl_u64(&c, a->ldo);
	ocl_buf(&c, sc, sg->n * a->n_head * n_kv * sizeof(float));
	ocl_u32(&c, n_kv);
	ocl_u32(&c, hd);
	ocl_u32(&c, a->n_head / a->n_head_kv);
	ocl_u64(&c, a->full ? 0 : sg->pos0);
	ocl_u64(&c, a->window);
	ocl_f32(&c, a->scale);
	ocl_f32(&c, a->softcap);
	ocl_u32(&c, a->full);
	return ocl_run_2d(&c, sg->n * OCL_LOCAL, a->n_head);
}

/* The scores' scratch is one device buffer for the largest sequence,
 * freed once the queue has run every sequence. */
static int ocl_attention(struct dev_queue *q, const struct dev_attn *a,
			 const struct dev_attn_seq *seqs, size_t n_seqs)
{
	struct dev *d = dev_queue_device(q);
	size_t most = 0;
	for (size_t s = 0; s < n_seqs; s++) {
		size_t need = seqs[s].n * a->n_head * ocl_attn_keys(a, &seqs[s]);
		most = need > most ? need : most;
	}
	float *sc = dev__ocl_alloc(d, most * sizeof(float));
	if (!sc)
		return -ST_NOMEM;
	int rc = 0;
	for (size_t s = 0; !rc && s < n_seqs; s++)
		rc = ocl_attn_seq(q, a, &seqs[s], sc);
	if (clFinish(dev__ocl_queue(q)) != CL_SUCCESS && !rc)
		rc = -ST_DEVICE;
	dev__ocl_free(d, sc);
	return rc;
}

static int ocl_scores(struct dev_queue *q, const struct dev_scores *s)
{
	size_t hd = s->head_dim;
	struct ocl_call c = ocl_begin(q, "attn_scores");
	ocl_buf(&c, s->q, ocl_rows_bytes(s->n_q, s->ldq, s->n_heads * hd, 4));
	ocl_u64(&c, s->ldq);
	ocl_buf(&c, s->k, s->kv_type == 2 ? dev_kv16_len(s->n_kv, s->n_heads, hd) * 2
					  : ocl_rows_bytes(s->n_cols, s->ldk, s->n_heads * hd, 4));
	ocl_u64(&c, s->ldk);
	ocl_u32(&c, (size_t)s->kv_type);
	ocl_buf(&c, s->out, ocl_rows_bytes(s->n_q, s->ldo, s->n_cols, 4));
	ocl_u64(&c, s->ldo);
	ocl_u32(&c, s->n_cols);
	ocl_u32(&c, hd);
	ocl_u32(&c, s->h);
	ocl_u32(&c, s->n_heads);
	ocl_u64(&c, s->n_kv);
	return ocl_run_2d(&c, s->n_cols, s->n_q);
}

static int ocl_kv16_pack(struct dev_queue *q, const float *kv, size_t ldkv, size_t n_kv,
			 size_t n_heads, size_t head_dim, uint16_t *cache)
{
	size_t d = n_heads * head_dim, nb = (n_kv + 63) / 64;
	struct ocl_call c = ocl_begin(q, "kv16_pack");
	ocl_buf(&c, kv, ocl_rows_bytes(n_kv, ldkv, 2 * d, sizeof(float)));
	ocl_u64(&c, ldkv);
	ocl_buf(&c, cache, dev_kv16_len(n_kv, n_heads, head_dim) * sizeof(uint16_t));
	ocl_u32(&c, n_kv);
	ocl_u32(&c, n_heads);
	ocl_u32(&c, head_dim);
	return ocl_run_2d(&c, d, nb * 64);
}

static int ocl_memcpy(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	struct dev *d = dev_queue_device(q);
	cl_mem md, ms;
	size_t od, os;
	if (dev__ocl_resolve(d, dst, n, &md, &od) || dev__ocl_resolve(d, src, n, &ms, &os))
		return -ST_INVAL;
	if (clEnqueueCopyBuffer(dev__ocl_queue(q), ms, md, os, od, n, 0, NULL, NULL) != CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* Each matrix in turn; host outputs come back from y: every row, or each
 * row's argmax (argmax_f32 on the device, then the indices). */
static int ocl_linear_n(struct dev_queue *q, const float *x, size_t M,
			const struct dev_linear_out *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t N = o[i].w->rows;
		int rc = dev__ocl_linear(q, o[i].w, x, M, o[i].b, o[i].y);
		if (!rc && o[i].argmax)
			rc = ocl_argmax(q, o[i].y, M, N, o[i].argmax);
		for (size_t m = 0; !rc && o[i].yrows && m < M; m++)
			rc = dev__ocl_download(q, o[i].yrows[m], o[i].y + m * N, N * sizeof(float));
		if (rc)
			return rc;
	}
	return 0;
}

/* Looked up on the host (dev_mat keeps the caller's rows), then uploaded. */
static int ocl_embed(struct dev_queue *q, const struct dev_mat *m, const int32_t *ids, size_t n,
		     float *y)
{
	const struct kn_qops *plain = kn_qops_get(m->type);
	if (!plain)
		return -ST_UNSUPPORTED;
	float *rows = mem_alloc(n * m->cols * sizeof(float));
	if (!rows)
		return -ST_NOMEM;
	for (size_t i = 0; i < n; i++)
		plain->dequant((const char *)m->host + (size_t)ids[i] * m->row_bytes,
			       rows + i * m->cols, m->cols);
	int rc = dev__ocl_upload(q, y, rows, n * m->cols * sizeof(float));
	mem_free(rows);
	return rc;
}

const struct dev_ops dev__ocl_ops = {
	.rms_norm = ocl_rms_norm,
	.layer_norm = ocl_layer_norm,
	.add = ocl_add,
	.scale = ocl_scale,
	.softcap = ocl_softcap,
	.gelu = ocl_gelu,
	.glu = ocl_glu,
	.softmax = ocl_softmax,
	.memcpy = ocl_memcpy,
	.kv_store = ocl_kv_store,
	.argmax = ocl_argmax,
	.rope = ocl_rope,
	.attention = ocl_attention,
	.scores = ocl_scores,
	.kv16_pack = ocl_kv16_pack,
	.conv1d = dev__ocl_conv1d,
	.mat_create = dev__ocl_mat_create,
	.mat_destroy = dev__ocl_mat_destroy,
	.linear = dev__ocl_linear,
	.linear_n = ocl_linear_n,
	.embed = ocl_embed,
};
