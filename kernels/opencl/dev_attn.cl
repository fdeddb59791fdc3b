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

/* Element e of key j (is_v 0) or of its value (1) for head h: kv 0
 * float32 or 1 binary16 rows ld elements apart at base (which points at
 * the head's KV column), widened exactly; kv 2 a kn_kv16_pack cache of
 * n_kv keys of n_head heads at base (keys per head in blocks of 64, each
 * [head_dim][64]; then values per head [n_kv][head_dim]; bfloat16). */
static float att_kv(global const char *base, ulong ld, ulong j, uint e, uint kv, uint is_v,
		    uint h, uint n_head, uint head_dim, ulong n_kv)
{
	if (kv == 2) {
		ulong nb = (n_kv + 63) / 64, blk = (ulong)head_dim * 64;
		ulong at = is_v ? n_head * nb * blk + ((ulong)h * n_kv + j) * head_dim + e
				: ((ulong)h * nb + j / 64) * blk + (ulong)e * 64 + j % 64;
		return as_float((uint)((global const ushort *)base)[at] << 16);
	}
	return kv ? vload_half(j * ld + e, (global const half *)base)
		  : ((global const float *)base)[j * ld + e];
}

/* A kn_kv16_pack cache (att_kv's kv 2) at cb from float32 rows kv (key j's
 * row at j ldkv: keys at columns [0, d), values at [d, 2d), d = n_heads
 * head_dim), rounded to nearest even: one item per (column c < d, key j <
 * the blocks' 64 nb); keys past n_kv are zero. */
kernel void kv16_pack(global char *kb, ulong ko, ulong ldkv, global char *cb, ulong co,
		      uint n_kv, uint n_heads, uint head_dim)
{
	uint c = get_global_id(0), d = n_heads * head_dim;
	ulong j = get_global_id(1), nb = ((ulong)n_kv + 63) / 64, blk = (ulong)head_dim * 64;
	if (c >= d)
		return;
	uint h = c / head_dim, e = c % head_dim;
	global const float *kv = AT(const float, kb, ko) + j * ldkv;
	global ushort *cache = AT(ushort, cb, co);
	cache[((ulong)h * nb + j / 64) * blk + (ulong)e * 64 + j % 64] =
		j < n_kv ? ops_bf16_bits(kv[c]) : (ushort)0;
	if (j < n_kv)
		cache[n_heads * nb * blk + ((ulong)h * n_kv + j) * head_dim + e] =
			ops_bf16_bits(kv[d + c]);
}

/* One work-group per (query row i, head h) of one sequence: row i at
 * position pos0 + i sees keys [lo, pos0 + i] (full: every row all n_kv
 * keys, no mask); scores (scaled, soft-capped
 * when softcap > 0) go to its strip of the scratch sc (n_kv floats per
 * (row, head)), then their softmax weights the values. The cache's KV
 * head g = h / group sits at column g head_dim; k and v point at key 0. */
kernel void attn_window(global char *qb, ulong qo, ulong ldq, global char *kb, ulong ko,
			global char *vb, ulong vo, ulong ldk, ulong ldv, ulong hs, uint kv,
			global char *ob, ulong oo, ulong ldo, global char *sb, ulong so, uint n_kv,
			uint head_dim, uint group, ulong pos0, ulong window, float scale,
			float softcap, uint full)
{
	local float sh[OPS_LOCAL];
	ulong i = get_group_id(0);
	uint h = get_group_id(1), n_head = get_num_groups(1);
	uint l = get_local_id(0), L = get_local_size(0);
	ulong p = full ? n_kv - 1 : pos0 + i, lo = window && p + 1 > window ? p + 1 - window : 0;
	ulong g0 = (ulong)(h / group) * hs;
	global const float *q = AT(const float, qb, qo) + i * ldq + (ulong)h * head_dim;
	ulong at0 = kv == 2 ? 0 : g0 * (kv ? 2 : 4); /* a packed cache's heads are inside */
	global const char *k = kb + ko + at0;
	global const char *v = vb + vo + at0;
	global float *sc = AT(float, sb, so) + (i * n_head + h) * (ulong)n_kv;
	float m = -INFINITY;
	for (ulong j = lo + l; j <= p; j += L) {
		float s = 0.0f;
		for (uint e = 0; e < head_dim; e++)
			s += q[e] * att_kv(k, ldk, j, e, kv, 0, h, n_head, head_dim, n_kv);
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
			acc += sc[j] * att_kv(v, ldv, j, e, kv, 1, h, n_head, head_dim, n_kv);
		o[e] = acc / sum;
	}
}

/* One item per (key j < n_cols, query row i): head h's score (q_i . k_j)
 * / sqrt(head_dim) before the softmax, keys as att_kv reads them (kv 0:
 * float32 rows ldk apart from key 0, column 0; 2: a packed cache of n_kv
 * keys of n_head heads). */
kernel void attn_scores(global char *qb, ulong qo, ulong ldq, global char *kb, ulong ko,
			ulong ldk, uint kv, global char *ob, ulong oo, ulong ldo, uint n_cols,
			uint head_dim, uint h, uint n_head, ulong n_kv)
{
	uint j = get_global_id(0);
	ulong i = get_global_id(1);
	if (j >= n_cols)
		return;
	global const float *q = AT(const float, qb, qo) + i * ldq + (ulong)h * head_dim;
	global const char *k = kb + ko + (kv == 2 ? 0 : (ulong)h * head_dim * 4);
	float s = 0.0f;
	for (uint e = 0; e < head_dim; e++)
		s += q[e] * att_kv(k, ldk, j, e, kv, 0, h, n_head, head_dim, n_kv);
	AT(float, ob, oo)[i * ldo + j] = s * (1.0f / sqrt((float)head_dim));
}
