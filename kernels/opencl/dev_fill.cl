/* dev_fill.cl - the smallest kernel of the opencl back end: it proves the
 * build, the on-disk cache and a launch (tests/unit/devices/test_ocl.c).
 *
 * Conventions for every kernel in kernels/opencl/ (OpenCL C 1.2; the files
 * are concatenated into one program per device, so kernel names are
 * unique across files): a buffer argument comes with its byte offset
 * (what dev__ocl_resolve gives for a device address), element counts are
 * uint, one work item per output element, and a global size rounded up
 * past n is allowed (items at or past n do nothing).
 */

/* fill_f32 - y[i] = v for i in [0, n): y is the buffer, y_off the byte
 * offset of y[0] in it (a multiple of 4). */
kernel void fill_f32(global char *y, ulong y_off, float v, uint n)
{
	uint i = get_global_id(0);
	if (i < n)
		((global float *)(y + y_off))[i] = v;
}
