/* dev_common.cl - what the other kernels/opencl/ files share: first in
 * the program (devices/meson.build lists it first), so every later file
 * may use it.
 *
 * Work-group reductions: every item of the group must call them (they
 * hold barriers), with a local buffer of at least the group's size;
 * every item gets the result.
 */

#define OPS_LOCAL 256 /* the largest work-group the row kernels use */
#define AT(T, b, off) ((global T *)((global char *)(b) + (off)))

/* Sum of v over the work-group; sh has OPS_LOCAL floats. */
static float ops_group_sum(float v, local float *sh)
{
	uint l = get_local_id(0), n = get_local_size(0);
	sh[l] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint s = n / 2; s > 0; s /= 2) {
		if (l < s)
			sh[l] += sh[l + s];
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	float r = sh[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

/* The largest v over the work-group (fmax: NaN only when all are). */
static float ops_group_max(float v, local float *sh)
{
	uint l = get_local_id(0), n = get_local_size(0);
	sh[l] = v;
	barrier(CLK_LOCAL_MEM_FENCE);
	for (uint s = n / 2; s > 0; s /= 2) {
		if (l < s)
			sh[l] = fmax(sh[l], sh[l + s]);
		barrier(CLK_LOCAL_MEM_FENCE);
	}
	float r = sh[0];
	barrier(CLK_LOCAL_MEM_FENCE);
	return r;
}

/* f rounded to bfloat16, nearest even (a NaN kept quiet): its 16 bits, as
 * kernels/kn_half.h's kn_f32_to_bf16. */
static ushort ops_bf16_bits(float f)
{
	uint u = as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (ushort)((u | 0x00400000u) >> 16);
	return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
