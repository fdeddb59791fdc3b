/* dev_ops.cl - the element-wise, row and reduction ops of dev.h's compute
 * section (devices/dev_ocl_ops.c launches them), following the cpu
 * references of kernels/ref/ops.c formula for formula.
 *
 * Row kernels run one work-group per row with a power-of-two local size
 * of at most OPS_LOCAL items, which stride over the row and meet in a
 * tree reduction in local memory. Element kernels: one item per element.
 * Buffers come with their byte offsets (dev_fill.cl's conventions); the
 * reductions and AT are dev_common.cl's.
 */

/* y = x / sqrt(mean(x^2) + eps) * w per row of d (has_w 0: no weight). */
kernel void rms_norm_f32(global char *xb, ulong xo, global char *wb, ulong wo, uint has_w,
			 global char *yb, ulong yo, uint d, float eps)
{
	local float sh[OPS_LOCAL];
	ulong r = get_group_id(0);
	uint l = get_local_id(0), n = get_local_size(0);
	global const float *x = AT(const float, xb, xo) + r * d;
	global float *y = AT(float, yb, yo) + r * d;
	float s = 0.0f;
	for (uint i = l; i < d; i += n)
		s += x[i] * x[i];
	float scale = 1.0f / sqrt(ops_group_sum(s, sh) / (float)d + eps);
	global const float *w = AT(const float, wb, wo);
	for (uint i = l; i < d; i += n)
		y[i] = has_w ? x[i] * scale * w[i] : x[i] * scale;
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta per row of d. */
kernel void layer_norm_f32(global char *xb, ulong xo, global char *gb, ulong go,
			   global char *bb, ulong bo, global char *yb, ulong yo, uint d, float eps)
{
	local float sh[OPS_LOCAL];
	ulong r = get_group_id(0);
	uint l = get_local_id(0), n = get_local_size(0);
	global const float *x = AT(const float, xb, xo) + r * d;
	global float *y = AT(float, yb, yo) + r * d;
	float s = 0.0f;
	for (uint i = l; i < d; i += n)
		s += x[i];
	float mean = ops_group_sum(s, sh) / (float)d;
	float v = 0.0f;
	for (uint i = l; i < d; i += n)
		v += (x[i] - mean) * (x[i] - mean);
	float inv = 1.0f / sqrt(ops_group_sum(v, sh) / (float)d + eps);
	global const float *g = AT(const float, gb, go), *b = AT(const float, bb, bo);
	for (uint i = l; i < d; i += n)
		y[i] = (x[i] - mean) * inv * g[i] + b[i];
}

/* x = softmax(x) per row of d, max subtracted first. */
kernel void softmax_f32(global char *xb, ulong xo, uint d)
{
	local float sh[OPS_LOCAL];
	ulong r = get_group_id(0);
	uint l = get_local_id(0), n = get_local_size(0);
	global float *x = AT(float, xb, xo) + r * d;
	float m = -INFINITY;
	for (uint i = l; i < d; i += n)
		m = fmax(m, x[i]);
	m = ops_group_max(m, sh);
	float s = 0.0f;
	for (uint i = l; i < d; i += n) {
		float e = exp(x[i] - m);
		x[i] = e;
		s += e;
	}
	float inv = 1.0f / ops_group_sum(s, sh);
	for (uint i = l; i < d; i += n)
		x[i] *= inv;
}

/* out[r] = the first index of row r's largest of d floats, as the scan
 * "best = i if x[i] > x[best]" from best = 0 (a NaN never taken but at
 * index 0, where nothing beats it). */
kernel void argmax_f32(global char *xb, ulong xo, global char *ob, ulong oo, uint d)
{
	local float shv[OPS_LOCAL];
	local uint shi[OPS_LOCAL];
	ulong r = get_group_id(0);
	uint l = get_local_id(0), n = get_local_size(0);
	global const float *x = AT(const float, xb, xo) + r * d;
	/* no early return before the barriers below: every item of the group
	 * must reach them (PoCL hangs otherwise) */
	bool nan0 = isnan(x[0]);
	float bv = -INFINITY;
	uint bi = UINT_MAX;
	for (uint i = l; i < d; i += n)
		if (!isnan(x[i]) && (bi == UINT_MAX || x[i] > bv)) {
			bv = x[i];
			bi = i;
		}
	shv[l] = bv;
	shi[l] = bi;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint s = n / 2; s > 0; s /= 2) {
		if (l < s) {
			float ov = shv[l + s];
			uint oi = shi[l + s];
			if (oi != UINT_MAX &&
			    (shi[l] == UINT_MAX || ov > shv[l] || (ov == shv[l] && oi < shi[l]))) {
				shv[l] = ov;
				shi[l] = oi;
			}
		}
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	if (l == 0)
		AT(int, ob, oo)[r] = nan0 || shi[0] == UINT_MAX ? 0 : (int)shi[0];
}

kernel void add_f32(global char *yb, ulong yo, global char *xb, ulong xo, uint n)
{
	uint i = get_global_id(0);
	if (i < n)
		AT(float, yb, yo)[i] += AT(const float, xb, xo)[i];
}

kernel void scale_f32(global char *xb, ulong xo, float s, uint n)
{
	uint i = get_global_id(0);
	if (i < n)
		AT(float, xb, xo)[i] *= s;
}

kernel void softcap_f32(global char *xb, ulong xo, float cap, uint n)
{
	uint i = get_global_id(0);
	if (i < n) {
		global float *x = AT(float, xb, xo);
		x[i] = cap * tanh(x[i] / cap);
	}
}

/* gelu with erf (Whisper). */
kernel void gelu_f32(global char *xb, ulong xo, uint n)
{
	uint i = get_global_id(0);
	if (i < n) {
		global float *x = AT(float, xb, xo);
		x[i] = 0.5f * x[i] * (1.0f + erf(x[i] * 0.70710678118654752f));
	}
}

/* x rounded to binary16 (nearest even) and back. */
static float ops_round_f16(float x)
{
	ushort h; /* a half variable needs cl_khr_fp16: its bits instead */
	vstore_half_rte(x, 0, (private half *)&h);
	return vload_half(0, (private half *)&h);
}

static float ops_gelu_tanh(float x)
{
	return 0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

/* g = act(g) * u; kind as enum dev_glu: 0 SiLU, 1 tanh GELU, 2 ggml's
 * binary16 GELU table (saturating past +-10 as ggml's CPU code). */
kernel void glu_f32(global char *gb, ulong go, global char *ub, ulong uo, uint kind, uint n)
{
	uint i = get_global_id(0);
	if (i >= n)
		return;
	global float *g = AT(float, gb, go);
	float x = g[i], a;
	if (kind == 0)
		a = x / (1.0f + exp(-x));
	else if (kind == 1)
		a = ops_gelu_tanh(x);
	else
		a = x <= -10.0f ? 0.0f : x >= 10.0f ? x : ops_round_f16(ops_gelu_tanh(ops_round_f16(x)));
	g[i] = a * AT(const float, ub, uo)[i];
}

/* dev_kv_store: item i < total is element e of head g of row j of x
 * (rows ldx apart), stored at g hs + j head_dim + e of y, as float32 or
 * as binary16 (nearest even). */
kernel void kv_store(global char *yb, ulong yo, ulong hs, uint f16, global char *xb, ulong xo,
		     ulong ldx, ulong total, uint n_heads, uint head_dim)
{
	ulong i = get_global_id(0), w = (ulong)n_heads * head_dim;
	if (i >= total)
		return;
	ulong j = i / w, c = i % w, g = c / head_dim, e = c % head_dim;
	float v = AT(const float, xb, xo)[j * ldx + c];
	ulong at = g * hs + j * head_dim + e;
	if (f16)
		vstore_half_rte(v, at, AT(half, yb, yo));
	else
		AT(float, yb, yo)[at] = v;
}
