/* dev_ocl_mat.c - the opencl back end's weights and products: a weight
 * matrix is its GGUF rows copied to the device unchanged, a product is
 * kernels/opencl/dev_linear.cl's linear_<type> (dequantized in registers,
 * float32 sums) over the x rows as they are.
 */
#include <stdint.h>

#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/dev_ocl.h"

/* The kernel of each type this back end multiplies; NULL: not yet. */
static const char *ocl_linear_kernel(int type)
{
	switch (type) {
	case 0: return "linear_f32";
	case 1: return "linear_f16";
	case 2: return "linear_q4_0";
	case 3: return "linear_q4_1";
	case 6: return "linear_q5_0";
	case 7: return "linear_q5_1";
	case 8: return "linear_q8_0";
	case 10: return "linear_q2_K";
	case 11: return "linear_q3_K";
	case 12: return "linear_q4_K";
	case 13: return "linear_q5_K";
	case 14: return "linear_q6_K";
	case 20: return "linear_iq4_nl";
	case 23: return "linear_iq4_xs";
	case 30: return "linear_bf16";
	default: return NULL;
	}
}

int dev__ocl_mat_create(struct dev_mat *m, const void *host, char *err, size_t errlen)
{
	if (!ocl_linear_kernel(m->type))
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

int dev__ocl_linear(struct dev_queue *q, const struct dev_mat *w, const float *x, size_t M,
		    const float *b, float *y)
{
	size_t N = w->rows, K = w->cols;
	if (M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return -ST_INVAL;
	cl_kernel k;
	if (dev__ocl_kernel(q, ocl_linear_kernel(w->type), &k, NULL, 0))
		return -ST_DEVICE;
	cl_uint arg = 0;
	cl_ulong rb = w->row_bytes;
	cl_uint has_b = b != NULL, m32 = (cl_uint)M, n32 = (cl_uint)N, k32 = (cl_uint)K;
	int rc = ocl_mat_buf(q, k, &arg, w->impl, N * w->row_bytes);
	if (!rc && clSetKernelArg(k, arg++, sizeof(rb), &rb) != CL_SUCCESS)
		rc = -ST_DEVICE;
	if (!rc)
		rc = ocl_mat_buf(q, k, &arg, x, M * K * sizeof(float));
	if (!rc) /* without a bias, x stands in for the buffer the kernel ignores */
		rc = ocl_mat_buf(q, k, &arg, b ? (const void *)b : (const void *)x,
				 b ? N * sizeof(float) : sizeof(float));
	if (!rc && clSetKernelArg(k, arg++, sizeof(has_b), &has_b) != CL_SUCCESS)
		rc = -ST_DEVICE;
	if (!rc)
		rc = ocl_mat_buf(q, k, &arg, y, M * N * sizeof(float));
	const cl_uint dims[3] = { m32, n32, k32 };
	for (int i = 0; !rc && i < 3; i++)
		if (clSetKernelArg(k, arg++, sizeof(cl_uint), &dims[i]) != CL_SUCCESS)
			rc = -ST_DEVICE;
	if (rc)
		return rc;
	size_t local[2] = { 64, 1 };
	size_t global[2] = { (N + 63) / 64 * 64, M };
	if (clEnqueueNDRangeKernel(dev__ocl_queue(q), k, 2, NULL, global, local, 0, NULL, NULL) !=
	    CL_SUCCESS)
		return -ST_DEVICE;
	return 0;
}
