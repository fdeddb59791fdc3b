/* dev_ocl_mat.c - the opencl back end's weights and products: a weight
 * matrix is its GGUF rows copied to the device unchanged; a product
 * computes what the cpu back end's scalar reference computes
 * (kernels/ref/quant.c, as llama.cpp's CPU back end): x's rows are first
 * quantized to the type's partner format (Q8_0, Q8_1 or Q8_K) or rounded
 * to binary16 / bfloat16, into device scratch, then
 * kernels/opencl/dev_linear_xq.cl's linear_xq_<type> takes integer dot
 * products per block with a float epilogue (F16 / BF16: float sums over
 * the rounded x), the same operations in the same order as the reference,
 * so the results are its bits. F32 weights multiply x as it is
 * (dev_linear.cl's linear_f32). DEV_MAT_CT2's F16 and DEV_TYPE_I8R
 * matrices multiply x as it is too (linear_xq_f16 on the float rows,
 * linear_xq_i8r).
 *
 * The scratch is sized per call (M rows of the partner format) and freed
 * as soon as the two kernels are enqueued: OpenCL deletes a buffer only
 * after the commands queued on it have finished, so no wait is needed, and
 * nothing is held between calls (a per-queue cache would save one
 * clCreateBuffer per product, but would live in the queue's state).
 */
#include <stdint.h>

#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/opencl/dev_ocl.h"
#include "kernels/kn_quant.h"

/* How one weight type's product runs here. */
struct ocl_lin {
	const char *linear; /* the product kernel */
	const char *prep;   /* the kernel preparing x's rows, or NULL: x as it is */
	uint32_t elems;	    /* x elements per prepared block */
	uint32_t bytes;	    /* bytes per prepared block (kn_quant.h's partners) */
};

#define OCL_Q8_0 "quantize_q8_0", 32, 34
#define OCL_Q8_1 "quantize_q8_1", 32, 36
#define OCL_Q8_K "quantize_q8_K", 256, 292

/* By ggml type number; a type without a linear kernel is not supported. */
static const struct ocl_lin ocl_lins[] = {
	[KN_Q_F32] = { "linear_f32", NULL, 1, 4 },
	[KN_Q_F16] = { "linear_xq_f16", "round_x_f16", 1, 4 },
	[KN_Q_BF16] = { "linear_xq_bf16", "round_x_bf16", 1, 4 },
	[KN_Q_Q4_0] = { "linear_xq_q4_0", OCL_Q8_0 },
	[KN_Q_Q5_0] = { "linear_xq_q5_0", OCL_Q8_0 },
	[KN_Q_Q8_0] = { "linear_xq_q8_0", OCL_Q8_0 },
	[KN_Q_IQ4_NL] = { "linear_xq_iq4_nl", OCL_Q8_0 },
	[KN_Q_Q4_1] = { "linear_xq_q4_1", OCL_Q8_1 },
	[KN_Q_Q5_1] = { "linear_xq_q5_1", OCL_Q8_1 },
	[KN_Q_Q2_K] = { "linear_xq_q2_K", OCL_Q8_K },
	[KN_Q_Q3_K] = { "linear_xq_q3_K", OCL_Q8_K },
	[KN_Q_Q4_K] = { "linear_xq_q4_K", OCL_Q8_K },
	[KN_Q_Q5_K] = { "linear_xq_q5_K", OCL_Q8_K },
	[KN_Q_Q6_K] = { "linear_xq_q6_K", OCL_Q8_K },
	[KN_Q_IQ4_XS] = { "linear_xq_iq4_xs", OCL_Q8_K },
};

/* DEV_MAT_CT2's arithmetic (dev.h): F16 and I8R against x as it is;
 * F32, and BF16 (x rounded), as without it. */
static const struct ocl_lin ocl_lin_ct2_f16 = { "linear_xq_f16", NULL, 1, 4 };
static const struct ocl_lin ocl_lin_ct2_i8r = { "linear_xq_i8r", NULL, 1, 4 };

/* The product of a matrix of type and flags, or NULL: not supported (yet). */
static const struct ocl_lin *ocl_lin_of(int type, unsigned flags)
{
	if (flags & DEV_MAT_CT2) {
		if (type == KN_Q_F16)
			return &ocl_lin_ct2_f16;
		if (type == DEV_TYPE_I8R)
			return &ocl_lin_ct2_i8r;
	}
	if (type < 0 || (size_t)type >= sizeof(ocl_lins) / sizeof(ocl_lins[0]) ||
	    !ocl_lins[type].linear)
		return NULL;
	return &ocl_lins[type];
}

int dev__ocl_mat_create(struct dev_mat *m, const void *host, char *err, size_t errlen)
{
	if (!ocl_lin_of(m->type, m->flags))
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "%s: weights of ggml type %d are not supported by the opencl back "
			       "end yet",
			       m->dev->caps.name, m->type);
	size_t n = m->rows * m->row_bytes;
	void *p = dev__ocl_alloc(m->dev, n);
	if (!p)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of device memory (%zu bytes)",
			       m->dev->caps.name, n);
	dev__ocl_copy(m->dev, p, host, n);
	m->impl = p;
	return 0;
}

void dev__ocl_mat_destroy(struct dev_mat *m)
{
	dev__ocl_free(m->dev, m->impl);
}

/* One buffer argument pair (cl_mem, byte offset) for n bytes at p. */
static int ocl_mat_buf(struct dev_queue *q, cl_kernel k, cl_uint *arg, const void *p, size_t n)
{
	cl_mem mem;
	size_t off;
	if (dev__ocl_resolve(dev_queue_device(q), p, n, &mem, &off))
		return -ST_INVAL;
	cl_ulong o = off;
	if (clSetKernelArg(k, (*arg)++, sizeof(mem), &mem) != CL_SUCCESS ||
	    clSetKernelArg(k, (*arg)++, sizeof(o), &o) != CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* The bias b of n floats and its flag (two buffer arguments, then a
 * uint): without a bias, x stands in for the buffer the kernel ignores. */
static int ocl_mat_bias(struct dev_queue *q, cl_kernel k, cl_uint *arg, const float *b, size_t n,
			const void *x)
{
	cl_uint has_b = b != NULL;
	int rc = ocl_mat_buf(q, k, arg, b ? (const void *)b : x, b ? n * sizeof(float) : sizeof(float));
	if (!rc && clSetKernelArg(k, (*arg)++, sizeof(has_b), &has_b) != CL_SUCCESS)
		rc = -ST_DEVICE;
	return rc;
}

/* n uint arguments in order. */
static int ocl_mat_u32s(cl_kernel k, cl_uint *arg, const cl_uint *v, int n)
{
	for (int i = 0; i < n; i++)
		if (clSetKernelArg(k, (*arg)++, sizeof(cl_uint), &v[i]) != CL_SUCCESS)
			return -ST_DEVICE;
	return 0;
}

/* Kernel k over a 2-D range; local NULL: the driver's choice. */
static int ocl_mat_run(struct dev_queue *q, cl_kernel k, const size_t global[2],
		       const size_t *local)
{
	if (clEnqueueNDRangeKernel(dev__ocl_queue(q), k, 2, NULL, global, local, 0, NULL, NULL) !=
	    CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}

/* xq = l->prep over the M rows of K floats at x: one work item per
 * prepared block of each row. */
static int ocl_lin_prep(struct dev_queue *q, const struct ocl_lin *l, const float *x, size_t M,
			size_t K, void *xq)
{
	cl_kernel k;
	if (dev__ocl_kernel(q, l->prep, &k, NULL, 0))
		return -ST_DEVICE;
	cl_uint arg = 0, k32 = (cl_uint)K;
	int rc = ocl_mat_buf(q, k, &arg, x, M * K * sizeof(float));
	if (!rc)
		rc = ocl_mat_buf(q, k, &arg, xq, M * (K / l->elems) * l->bytes);
	if (!rc && clSetKernelArg(k, arg++, sizeof(k32), &k32) != CL_SUCCESS)
		rc = -ST_DEVICE;
	const size_t global[2] = { K / l->elems, M };
	return rc ? rc : ocl_mat_run(q, k, global, NULL);
}

/* y = kernel `name` over w and the M rows at x (x_bytes of them: floats,
 * or the prepared rows), plus b (NULL: none). */
static int ocl_lin_run(struct dev_queue *q, const char *name, const struct dev_mat *w,
		       const void *x, size_t x_bytes, size_t M, const float *b, float *y)
{
	size_t N = w->rows;
	cl_kernel k;
	if (dev__ocl_kernel(q, name, &k, NULL, 0))
		return -ST_DEVICE;
	cl_uint arg = 0;
	cl_ulong rb = w->row_bytes;
	int rc = ocl_mat_buf(q, k, &arg, w->impl, N * w->row_bytes);
	if (!rc && clSetKernelArg(k, arg++, sizeof(rb), &rb) != CL_SUCCESS)
		rc = -ST_DEVICE;
	if (!rc)
		rc = ocl_mat_buf(q, k, &arg, x, x_bytes);
	if (!rc)
		rc = ocl_mat_bias(q, k, &arg, b, N, x);
	if (!rc)
		rc = ocl_mat_buf(q, k, &arg, y, M * N * sizeof(float));
	const cl_uint dims[3] = { (cl_uint)M, (cl_uint)N, (cl_uint)w->cols };
	if (!rc)
		rc = ocl_mat_u32s(k, &arg, dims, 3);
	const size_t local[2] = { 64, 1 }, global[2] = { (N + 63) / 64 * 64, M };
	return rc ? rc : ocl_mat_run(q, k, global, local);
}

int dev__ocl_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
		    const float *b, float *y)
{
	size_t N = w->rows, K = w->cols;
	if (M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return -ST_INVAL;
	const struct ocl_lin *l = ocl_lin_of(w->type, w->flags);
	if (!l->prep)
		return ocl_lin_run(q, l->linear, w, x, M * K * sizeof(float), M, b, y);
	/* x's rows quantized (or rounded) once, into scratch for this call */
	struct dev *d = dev_queue_device(q);
	size_t row = K / l->elems * l->bytes;
	if (M > SIZE_MAX / row)
		return -ST_NOMEM;
	void *xq = dev__ocl_alloc(d, M * row);
	if (!xq)
		return -ST_NOMEM;
	int rc = ocl_lin_prep(q, l, x, M, K, xq);
	if (!rc)
		rc = ocl_lin_run(q, l->linear, w, xq, M * row, M, b, y);
	dev__ocl_free(d, xq); /* deleted once the queue has run both kernels */
	return rc;
}

int dev__ocl_conv1d(struct dev_queue *q, const struct dev_mat *w, size_t c_in, size_t k,
		    size_t stride, size_t pad, const float *x, size_t t_in, const float *b,
		    float *y)
{
	size_t c_out = w->rows, t_out = dev_conv1d_out_len(t_in, k, stride, pad);
	if (t_in > UINT32_MAX || c_in > UINT32_MAX || c_out > UINT32_MAX || k > UINT32_MAX ||
	    stride > UINT32_MAX || pad > UINT32_MAX || t_out > UINT32_MAX)
		return -ST_INVAL;
	cl_kernel kn;
	if (dev__ocl_kernel(q, "conv1d_f32", &kn, NULL, 0))
		return -ST_DEVICE;
	cl_uint arg = 0;
	int rc = ocl_mat_buf(q, kn, &arg, w->impl, c_out * w->row_bytes);
	if (!rc)
		rc = ocl_mat_buf(q, kn, &arg, x, t_in * c_in * sizeof(float));
	if (!rc)
		rc = ocl_mat_bias(q, kn, &arg, b, c_out, x);
	if (!rc)
		rc = ocl_mat_buf(q, kn, &arg, y, t_out * c_out * sizeof(float));
	const cl_uint dims[7] = { (cl_uint)t_in,   (cl_uint)c_in, (cl_uint)c_out, (cl_uint)k,
				  (cl_uint)stride, (cl_uint)pad,  (cl_uint)t_out };
	if (!rc)
		rc = ocl_mat_u32s(kn, &arg, dims, 7);
	const size_t local[2] = { 64, 1 }, global[2] = { (c_out + 63) / 64 * 64, t_out };
	return rc ? rc : ocl_mat_run(q, kn, global, local);
}
