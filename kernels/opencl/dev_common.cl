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
