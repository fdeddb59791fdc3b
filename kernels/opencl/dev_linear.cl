/* dev_linear.cl - y[M, N] = x[M, K] W^T + b for weights in their GGUF
 * block formats (ggml-common.h's block_* structs, read byte by byte so a
 * block needs no alignment), dequantized in registers and multiplied in
 * float32: one work item per output, dimension 0 over N, 1 over M.
 * devices/dev_ocl_mat.c launches linear_<type>.
 */

/* binary16 bits at p (little endian) as a float. */
static float lin_half(global const uchar *p)
{
	ushort h = (ushort)(p[0] | (p[1] << 8));
	return vload_half(0, (private half *)&h);
}

/* Each type's dot product of one weight row with one x row of K floats. */

static float dot_f32(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint k = 0; k < K; k++)
		s += as_float((uint)(w[4 * k] | (w[4 * k + 1] << 8) | (w[4 * k + 2] << 16) |
				     ((uint)w[4 * k + 3] << 24))) * x[k];
	return s;
}

static float dot_f16(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint k = 0; k < K; k++)
		s += lin_half(w + 2 * k) * x[k];
	return s;
}

static float dot_bf16(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint k = 0; k < K; k++)
		s += as_float((uint)(w[2 * k] | (w[2 * k + 1] << 8)) << 16) * x[k];
	return s;
}

/* block_q8_0: d (f16), 32 int8 */
static float dot_q8_0(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 34, x += 32) {
		float t = 0.0f;
		for (uint j = 0; j < 32; j++)
			t += (float)(char)w[2 + j] * x[j];
		s += lin_half(w) * t;
	}
	return s;
}

/* block_q4_0: d, 16 bytes of nibbles: low nibbles elements 0-15, high 16-31, minus 8 */
static float dot_q4_0(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 18, x += 32) {
		float t = 0.0f;
		for (uint j = 0; j < 16; j++) {
			uchar q = w[2 + j];
			t += (float)((int)(q & 15) - 8) * x[j] + (float)((int)(q >> 4) - 8) * x[j + 16];
		}
		s += lin_half(w) * t;
	}
	return s;
}

/* block_q4_1: d, m, 16 bytes of nibbles: d q + m */
static float dot_q4_1(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 20, x += 32) {
		float d = lin_half(w), m = lin_half(w + 2);
		for (uint j = 0; j < 16; j++) {
			uchar q = w[4 + j];
			s += (d * (float)(q & 15) + m) * x[j] + (d * (float)(q >> 4) + m) * x[j + 16];
		}
	}
	return s;
}

/* The fifth bits of q5_0 / q5_1: bit j of the 32-bit qh for element j. */
static uint lin_qh(global const uchar *p)
{
	return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* block_q5_0: d, qh[4], 16 bytes of nibbles, minus 16 */
static float dot_q5_0(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 22, x += 32) {
		uint qh = lin_qh(w + 2);
		float t = 0.0f;
		for (uint j = 0; j < 16; j++) {
			uchar q = w[6 + j];
			int lo = (int)((q & 15) | (((qh >> j) & 1) << 4)) - 16;
			int hi = (int)((q >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
			t += (float)lo * x[j] + (float)hi * x[j + 16];
		}
		s += lin_half(w) * t;
	}
	return s;
}

/* block_q5_1: d, m, qh[4], 16 bytes of nibbles: d q + m */
static float dot_q5_1(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 24, x += 32) {
		float d = lin_half(w), m = lin_half(w + 2);
		uint qh = lin_qh(w + 4);
		for (uint j = 0; j < 16; j++) {
			uchar q = w[8 + j];
			uint lo = (q & 15) | (((qh >> j) & 1) << 4);
			uint hi = (q >> 4) | (((qh >> (j + 16)) & 1) << 4);
			s += (d * (float)lo + m) * x[j] + (d * (float)hi + m) * x[j + 16];
		}
	}
	return s;
}

/* One kernel per type around its dot product. */
#define LINEAR_KERNEL(T)                                                                      \
	kernel void linear_##T(global char *wb, ulong wo, ulong row_bytes, global char *xb,     \
			       ulong xo, global char *bb, ulong bo, uint has_b, global char *yb, \
			       ulong yo, uint M, uint N, uint K)                                  \
	{                                                                                     \
		uint n = get_global_id(0), m = get_global_id(1);                                 \
		if (n >= N || m >= M)                                                            \
			return;                                                                  \
		global const uchar *w = (global const uchar *)(wb + wo) + (ulong)n * row_bytes; \
		global const float *x = (global const float *)(xb + xo) + (ulong)m * K;         \
		float s = dot_##T(w, x, K);                                                      \
		if (has_b)                                                                       \
			s += ((global const float *)(bb + bo))[n];                               \
		((global float *)(yb + yo))[(ulong)m * N + n] = s;                              \
	}

LINEAR_KERNEL(f32)
LINEAR_KERNEL(f16)
LINEAR_KERNEL(bf16)
LINEAR_KERNEL(q8_0)
LINEAR_KERNEL(q4_0)
LINEAR_KERNEL(q4_1)
LINEAR_KERNEL(q5_0)
LINEAR_KERNEL(q5_1)
