/* dev_linear.cl - y[M, N] = x[M, K] W^T + b for weights in their GGUF
 * block formats (ggml-common.h's block_* structs, read byte by byte so a
 * block needs no alignment), dequantized in registers as kernels/ref/quant.c
 * does (its header documents every layout) and multiplied in float32: one
 * work item per output, dimension 0 over N, 1 over M.
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

/* The j-th 6-bit scale and min of q4_K / q5_K's 12 packed bytes q
 * (ggml get_scale_min_k4, kernels/kn_int.h kn__scale_min_k4). */
static void lin_scale_min_k4(uint j, global const uchar *q, uint *sc, uint *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* block_q4_K: d, dmin, scales[12] @4, qs[128] @16. Sub-block s of 32
 * takes the low (s even) or high (s odd) nibbles of qs[32 (s / 2) ..];
 * w = (d sc) q - (dmin m). */
static float dot_q4_K(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 144, x += 256) {
		float d = lin_half(w), dmin = lin_half(w + 2);
		for (uint sb = 0; sb < 8; sb++) {
			uint sc, m;
			lin_scale_min_k4(sb, w + 4, &sc, &m);
			float d1 = d * (float)sc, m1 = dmin * (float)m;
			global const uchar *q = w + 16 + 32 * (sb / 2);
			uint sh = 4 * (sb & 1);
			for (uint l = 0; l < 32; l++)
				s += (d1 * (float)((q[l] >> sh) & 15) - m1) * x[32 * sb + l];
		}
	}
	return s;
}

/* block_q5_K: d, dmin, scales[12] as q4_K, qh[32] @16, qs[128] @48; bit
 * sb of qh[l] is bit 4 of element l of sub-block sb. */
static float dot_q5_K(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 176, x += 256) {
		float d = lin_half(w), dmin = lin_half(w + 2);
		for (uint sb = 0; sb < 8; sb++) {
			uint sc, m;
			lin_scale_min_k4(sb, w + 4, &sc, &m);
			float d1 = d * (float)sc, m1 = dmin * (float)m;
			global const uchar *q = w + 48 + 32 * (sb / 2);
			uint sh = 4 * (sb & 1);
			for (uint l = 0; l < 32; l++) {
				uint v = ((q[l] >> sh) & 15) | (((w[16 + l] >> sb) & 1) << 4);
				s += (d1 * (float)v - m1) * x[32 * sb + l];
			}
		}
	}
	return s;
}

/* block_q6_K: ql[128] @0, qh[64] @128, int8 scales[16] @192, d @208.
 * Element 32 t + l of half h: low nibble of ql[64 h + 32 (t & 1) + l]
 * (high nibble for t >= 2), bits 4-5 from qh[32 h + l] >> 2t, scale
 * scales[8 h + 2 t + l / 16]; w = (d sc) (q - 32). */
static float dot_q6_K(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 210, x += 256) {
		float d = lin_half(w + 208);
		for (uint h = 0; h < 2; h++)
			for (uint t = 0; t < 4; t++)
				for (uint l = 0; l < 32; l++) {
					uint lo = (w[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1))) & 15;
					uint hi = (w[128 + 32 * h + l] >> (2 * t)) & 3;
					float ds = d * (float)(char)w[192 + 8 * h + 2 * t + l / 16];
					s += ds * (float)((int)(lo | (hi << 4)) - 32) *
					     x[128 * h + 32 * t + l];
				}
	}
	return s;
}

/* block_q2_K: scales[16] @0 (scale in the low nibble, min in the high, per
 * 16 elements), qs[64] @16, d @80, dmin @82. Element 32 t + l of half h is
 * bits 2t, 2t + 1 of qs[32 h + l], group 8 h + 2 t + l / 16;
 * w = (d sc) q - (dmin m). */
static float dot_q2_K(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 84, x += 256) {
		float d = lin_half(w + 80), dmin = lin_half(w + 82);
		for (uint h = 0; h < 2; h++)
			for (uint t = 0; t < 4; t++)
				for (uint l = 0; l < 32; l++) {
					uint sc = w[8 * h + 2 * t + l / 16];
					float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
					uint q = (w[16 + 32 * h + l] >> (2 * t)) & 3;
					s += (dl * (float)q - ml) * x[128 * h + 32 * t + l];
				}
	}
	return s;
}

/* block_q3_K: hmask[32] @0, qs[64] @32, scales[12] @96, d @108. Scale j's
 * low 4 bits are nibble j / 8 of scales[j % 8], its high 2 bits bits
 * 2 (j / 4) of scales[8 + j % 4]. Element 32 t + l of half h: bits 2t,
 * 2t + 1 of qs[32 h + l], less 4 where bit 4 h + t of hmask[l] is clear;
 * group as q2_K; w = (d (sc - 32)) q. */
static float dot_q3_K(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 110, x += 256) {
		float d = lin_half(w + 108);
		for (uint h = 0; h < 2; h++)
			for (uint t = 0; t < 4; t++)
				for (uint l = 0; l < 32; l++) {
					uint j = 8 * h + 2 * t + l / 16;
					uint sc = ((w[96 + j % 8] >> (4 * (j / 8))) & 15) |
						  (((w[104 + j % 4] >> (2 * (j / 4))) & 3) << 4);
					float dl = d * (float)((int)sc - 32);
					int q = (int)((w[32 + 32 * h + l] >> (2 * t)) & 3) -
						(((w[l] >> (4 * h + t)) & 1) ? 0 : 4);
					s += dl * (float)q * x[128 * h + 32 * t + l];
				}
	}
	return s;
}

/* The IQ4_NL / IQ4_XS codebook (ggml's kvalues_iq4nl). */
constant char lin_iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				       1,    13,   25,  38,  53,  69,  89,  113 };

/* block_iq4_nl: d, 16 bytes of nibbles as q4_0; w = d v[q]. */
static float dot_iq4_nl(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 32; b++, w += 18, x += 32) {
		float d = lin_half(w);
		for (uint j = 0; j < 16; j++) {
			uchar q = w[2 + j];
			s += d * (float)lin_iq4nl_values[q & 15] * x[j] +
			     d * (float)lin_iq4nl_values[q >> 4] * x[j + 16];
		}
	}
	return s;
}

/* block_iq4_xs: d @0, scales_h (u16) @2, scales_l[4] @4, qs[128] @8.
 * Sub-block sb (32 elements) has the 6-bit scale nibble sb % 2 of
 * scales_l[sb / 2] | bits 2 sb, 2 sb + 1 of scales_h << 4, and takes
 * qs[16 sb ..] as q4_0 does; w = (d (ls - 32)) v[q]. */
static float dot_iq4_xs(global const uchar *w, global const float *x, uint K)
{
	float s = 0.0f;
	for (uint b = 0; b < K / 256; b++, w += 136, x += 256) {
		float d = lin_half(w);
		uint sh = (uint)w[2] | ((uint)w[3] << 8);
		for (uint sb = 0; sb < 8; sb++) {
			uint ls = ((w[4 + sb / 2] >> (4 * (sb % 2))) & 15) | (((sh >> (2 * sb)) & 3) << 4);
			float dl = d * (float)((int)ls - 32);
			global const uchar *q = w + 8 + 16 * sb;
			global const float *xs = x + 32 * sb;
			for (uint j = 0; j < 16; j++)
				s += dl * (float)lin_iq4nl_values[q[j] & 15] * xs[j] +
				     dl * (float)lin_iq4nl_values[q[j] >> 4] * xs[j + 16];
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
LINEAR_KERNEL(q2_K)
LINEAR_KERNEL(q3_K)
LINEAR_KERNEL(q4_K)
LINEAR_KERNEL(q5_K)
LINEAR_KERNEL(q6_K)
LINEAR_KERNEL(iq4_nl)
LINEAR_KERNEL(iq4_xs)
