/* dev_linear.cl - y[M, N] = x[M, K] W^T + b for float32 weights: x as it
 * is, float32 sums, one work item per output (dimension 0 over N, 1 over
 * M). Every other type goes through dev_linear_xq.cl, which computes what
 * the cpu reference computes (x quantized or rounded first).
 * devices/dev_ocl_mat.c launches linear_f32, and conv1d_f32 (a 1-D
 * convolution over float32 weights, Whisper's front end).
 */

/* The weight row read byte by byte (rows need no alignment). */
static float dot_f32(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint k = 0; k < K; k++)
		s += as_float((uint)(w[4 * k] | (w[4 * k + 1] << 8) | (w[4 * k + 2] << 16) |
				     ((uint)w[4 * k + 3] << 24))) * x[k];
	return s;
}

kernel void linear_f32(global char *wb, ulong wo, ulong row_bytes, global char *xb, ulong xo,
			 global char *bb, ulong bo, uint has_b, global char *yb, ulong yo, uint M,
			 uint N, uint K)
{
	uint n = get_global_id(0), m = get_global_id(1);
	if (n >= N || m >= M)
		return;
	global const uchar *w = (global const uchar *)(wb + wo) + (ulong)n * row_bytes;
	global const float *x = (global const float *)(xb + xo) + (ulong)m * K;
	float s = dot_f32(w, x, K);
	if (has_b)
		s += ((global const float *)(bb + bo))[n];
	((global float *)(yb + yo))[(ulong)m * N + n] = s;
}

/* y[t][o] = b[o] + sum over taps j < k and input channels c < c_in of
 * w[o][c k + j] x[t stride + j - pad][c], rows outside [0, t_in) zero
 * (torch.nn.Conv1d with zero padding; w's rows [c_in][k] as PyTorch
 * keeps them): one work item per output, devices/dev_ocl_mat.c's
 * dev__ocl_conv1d. */
kernel void conv1d_f32(global char *wb, ulong wo, global char *xb, ulong xo, global char *bb,
			ulong bo, uint has_b, global char *yb, ulong yo, uint t_in, uint c_in,
			uint c_out, uint k, uint stride, uint pad, uint t_out)
{
	uint o = get_global_id(0), t = get_global_id(1);
	if (o >= c_out || t >= t_out)
		return;
	global const float *w = AT(const float, wb, wo) + (ulong)o * c_in * k;
	global const float *x = AT(const float, xb, xo);
	float s = 0.0f;
	for (uint j = 0; j < k; j++) {
		long r = (long)t * stride + j - (long)pad;
		if (r < 0 || r >= (long)t_in)
			continue;
		global const float *xr = x + (ulong)r * c_in;
		for (uint c = 0; c < c_in; c++)
			s += w[c * k + j] * xr[c];
	}
	if (has_b)
		s += AT(const float, bb, bo)[o];
	AT(float, yb, yo)[(ulong)t * c_out + o] = s;
}
