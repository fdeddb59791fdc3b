/* dev_attn.cl - rotary embedding and attention over a KV cache (causal,
 * or full)
 * (dev.h dev_rope, dev_attention; devices/dev_ocl_attn.c launches them),
 * following kernels/kn_attn.c's kn_rope_apply and kn_attention_window;
 * the reductions and AT are dev_common.cl's.
 */

/* One item per (pair j, head h, token t): the pair rotated by cs's angle. */
kernel void rope_f32(global char *xb, ulong xo, ulong ld, uint head_dim, uint n_rot,
		     global char *cb, ulong co, uint neox)
{
	uint j = get_global_id(0), h = get_global_id(1);
	ulong t = get_global_id(2);
	uint half_rot = n_rot / 2;
	if (j >= half_rot)
		return;
	global float *x = AT(float, xb, xo) + t * ld + (ulong)h * head_dim;
	global const float *cs = AT(const float, cb, co) + t * n_rot + 2 * j;
	uint ia = neox ? j : 2 * j, ib = neox ? j + half_rot : 2 * j + 1;
	float c = cs[0], s = cs[1], x0 = x[ia], x1 = x[ib];
	x[ia] = x0 * c - x1 * s;
	x[ib] = x0 * s + x1 * c;
}

/* Element e of cached row j: float32, or binary16 widened exactly. */
static float att_kv(global const char *base, ulong row, ulong e, uint f16)
{
	return f16 ? vload_half(row + e, (global const half *)base)
		   : ((global const float *)base)[row + e];
}

/* One work-group per (query row i, head h) of one sequence: row i at
 * position pos0 + i sees keys [lo, pos0 + i] (full: every row all n_kv
 * keys, no mask); scores (scaled, soft-capped
 * when softcap > 0) go to its strip of the scratch sc (n_kv floats per
 * (row, head)), then their softmax weights the values. The cache's KV
 * head g = h / group sits at column g head_dim; k and v point at key 0. */
kernel void attn_window(global char *qb, ulong qo, ulong ldq, global char *kb, ulong ko,
			global char *vb, ulong vo, ulong ldk, ulong ldv, uint kv_f16,
			global char *ob, ulong oo, ulong ldo, global char *sb, ulong so, uint n_kv,
			uint head_dim, uint group, ulong pos0, ulong window, float scale,
			float softcap, uint full)
{
	local float sh[OPS_LOCAL];
	ulong i = get_group_id(0);
	uint h = get_group_id(1), n_head = get_num_groups(1);
	uint l = get_local_id(0), L = get_local_size(0);
	ulong p = full ? n_kv - 1 : pos0 + i, lo = window && p + 1 > window ? p + 1 - window : 0;
	ulong g0 = (ulong)(h / group) * head_dim;
	global const float *q = AT(const float, qb, qo) + i * ldq + (ulong)h * head_dim;
	global const char *k = kb + ko + g0 * (kv_f16 ? 2 : 4);
	global const char *v = vb + vo + g0 * (kv_f16 ? 2 : 4);
	global float *sc = AT(float, sb, so) + (i * n_head + h) * (ulong)n_kv;
	float m = -INFINITY;
	for (ulong j = lo + l; j <= p; j += L) {
		float s = 0.0f;
		for (uint e = 0; e < head_dim; e++)
			s += q[e] * att_kv(k, j * ldk, e, kv_f16);
		s *= scale;
		if (softcap > 0.0f)
			s = softcap * tanh(s / softcap);
		sc[j] = s;
		m = fmax(m, s);
	}
	m = ops_group_max(m, sh);
	float sum = 0.0f;
	for (ulong j = lo + l; j <= p; j += L) {
		float e = exp(sc[j] - m);
		sc[j] = e;
		sum += e;
	}
	sum = ops_group_sum(sum, sh);
	barrier(CLK_GLOBAL_MEM_FENCE); /* every item's weights written before all read them */
	global float *o = AT(float, ob, oo) + i * ldo + (ulong)h * head_dim;
	for (uint e = l; e < head_dim; e += L) {
		float acc = 0.0f;
		for (ulong j = lo; j <= p; j++)
			acc += sc[j] * att_kv(v, j * ldv, e, kv_f16);
		o[e] = acc / sum;
	}
}
