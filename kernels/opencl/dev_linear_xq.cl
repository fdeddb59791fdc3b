/* dev_linear_xq.cl - y[M, N] = x[M, K] W^T + b as the cpu back end's
 * scalar reference computes it (kernels/ref/quant.c, whose header documents
 * every block layout; kernels/kn_quant.h the partner formats), so that a
 * model gives the same numbers here as there and as llama.cpp's CPU back
 * end. devices/dev_ocl_mat.c runs, per dev_linear call:
 *
 *   1. a kernel that prepares x's M rows into device scratch, one work item
 *      per (x block, row), dimension 0 over blocks, 1 over rows:
 *      quantize_q8_0 / _q8_1 / _q8_K (ref's quantize_x: the partner row of
 *      K / 32 * 34, K / 32 * 36 or K / 256 * 292 bytes), or round_x_f16 /
 *      _bf16 (ref's round_x: K floats);
 *   2. linear_xq_<type> over those rows: one work item per output,
 *      dimension 0 over N, 1 over M; per weight row ref's gemv_xq (an
 *      exact integer dot per block, then its float epilogue, blocks left to
 *      right) or, for F16 / BF16, ref's gemv (float products summed left to
 *      right); then + b[n], as the cpu adds its bias.
 *
 * Bit for bit the reference: the same float operations in the same order,
 * never contracted into fma (FP_CONTRACT OFF below; the reference is C11
 * without contraction), divisions correctly rounded (the program is built
 * with -cl-fp32-correctly-rounded-divide-sqrt, devices/dev_ocl_prog.c),
 * binary16 conversions done with integer operations as kernels/kn_half.h
 * does (NaN payloads included). F32 weights keep dev_linear.cl's
 * linear_f32 (x used as is).
 *
 * Everything here has the xq_ prefix or a name of its own: the .cl files
 * are one program (devices/meson.build concatenates them).
 */

#pragma OPENCL FP_CONTRACT OFF

/* ---- fields ------------------------------------------------------------ */

/* kn_f16_to_f32: binary16 bits -> float, exact. */
static float xq_f16_to_f32(ushort h)
{
	uint sign = (uint)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	if (exp == 0) {
		float v = (float)mant * 0x1p-24f; /* exact */
		return sign ? -v : v;
	}
	if (exp == 31)
		return as_float(sign | 0x7f800000u | (mant ? (mant | 0x200u) << 13 : 0));
	return as_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

/* kn_f32_to_f16: f rounded to binary16 (nearest even), its bits. */
static ushort xq_f32_to_f16(float f)
{
	uint u = as_uint(f), a = u & 0x7fffffffu;
	ushort sign = (ushort)((u >> 16) & 0x8000u);
	if (a > 0x7f800000u)
		return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* >= 65520 (or inf): inf */
		return (ushort)(sign | 0x7c00u);
	if (a < 0x38800000u) { /* below 2^-14: units of 2^-24, half to even */
		float v = as_float(a) * 0x1p24f;
		v = (v + 0x1p23f) - 0x1p23f;
		return (ushort)(sign | (ushort)v);
	}
	uint r = a - 0x38000000u, h = r >> 13, rem = r & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
		h++;
	return (ushort)(sign | h);
}

/* kn_bf16_round: f rounded to bfloat16 (nearest even) and widened back. */
static float xq_bf16_round(float f)
{
	return as_float((uint)ops_bf16_bits(f) << 16);
}

/* Little-endian fields at any byte address. */
static float xq_half(global const uchar *p)
{
	return xq_f16_to_f32((ushort)(p[0] | (p[1] << 8)));
}

static uint xq_u32(global const uchar *p)
{
	return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

static void xq_put_half(global uchar *o, float v)
{
	ushort h = xq_f32_to_f16(v);
	o[0] = (uchar)h;
	o[1] = (uchar)(h >> 8);
}

/* ggml's nearest_int: round half to even by the 1.5 * 2^23 trick. */
static int xq_nearest_int(float v)
{
	float f = v + 12582912.0f;
	return (int)(as_uint(f) & 0x007fffffu) - 0x00400000;
}

/* ---- x rows prepared ------------------------------------------------------ */

/* ref_q8_block: *d = amax / 127, the codes round(x * (1 / d)) (half away
 * from zero, as roundf) into q8[32]; returns their sum. */
static int xq_q8_block(global const float *x, global uchar *q8, float *d)
{
	float amax = 0.0f;
	for (uint j = 0; j < 32; j++) {
		float a = fabs(x[j]);
		amax = amax > a ? amax : a; /* as ref: a NaN wins */
	}
	*d = amax / 127.0f;
	float id = *d != 0.0f ? 1.0f / *d : 0.0f;
	int sum = 0;
	for (uint j = 0; j < 32; j++) {
		char q = (char)round(x[j] * id);
		q8[j] = (uchar)q;
		sum += q;
	}
	return sum;
}

/* The x block and partner block of work item (block, row). */
#define XQ_PREP(ELEMS, BYTES)                                                               \
	uint i = get_global_id(0), r = get_global_id(1);                                     \
	global const float *x = (global const float *)(xb + xo) + (ulong)r * K + ELEMS * i; \
	global uchar *o = (global uchar *)(qb + qo) + ((ulong)r * (K / ELEMS) + i) * BYTES

/* Q8_0 (34 B): d fp16 @0, qs[32] @2 (quantize_row_q8_0_ref). */
kernel void quantize_q8_0(global char *xb, ulong xo, global char *qb, ulong qo, uint K)
{
	XQ_PREP(32, 34);
	float d;
	xq_q8_block(x, o + 2, &d);
	xq_put_half(o, d);
}

/* Q8_1 (36 B): Q8_0's d @0, s = fp16(d * sum qs) @2, qs[32] @4. */
kernel void quantize_q8_1(global char *xb, ulong xo, global char *qb, ulong qo, uint K)
{
	XQ_PREP(32, 36);
	float d;
	int sum = xq_q8_block(x, o + 4, &d);
	xq_put_half(o, d);
	xq_put_half(o + 2, (float)sum * d);
}

/* Q8_K (292 B): float d @0, qs[256] @4, int16 bsums[16] @260
 * (quantize_row_q8_K_ref: max the first element of largest |x|, iscale =
 * -127 / max, q = min(127, nearest_int(iscale x)), d = 1 / iscale; an
 * all-zero block is all zero bytes). */
kernel void quantize_q8_K(global char *xb, ulong xo, global char *qb, ulong qo, uint K)
{
	XQ_PREP(256, 292);
	float amax = 0.0f, mx = 0.0f;
	for (uint j = 0; j < 256; j++) {
		float a = fabs(x[j]);
		if (a > amax) {
			amax = a;
			mx = x[j];
		}
	}
	if (amax == 0.0f) {
		for (uint j = 0; j < 292; j++)
			o[j] = 0;
		return;
	}
	float iscale = -127.0f / mx;
	for (uint g = 0; g < 16; g++) {
		int sum = 0;
		for (uint l = 16 * g; l < 16 * g + 16; l++) {
			int v = xq_nearest_int(iscale * x[l]);
			v = v < 127 ? v : 127;
			o[4 + l] = (uchar)v;
			sum += (char)v;
		}
		o[260 + 2 * g] = (uchar)sum;
		o[261 + 2 * g] = (uchar)((uint)sum >> 8);
	}
	uint d = as_uint(1.0f / iscale);
	for (uint j = 0; j < 4; j++)
		o[j] = (uchar)(d >> (8 * j));
}

/* x rounded to binary16 / bfloat16 and widened back (one element each). */
kernel void round_x_f16(global char *xb, ulong xo, global char *qb, ulong qo, uint K)
{
	ulong at = (ulong)get_global_id(1) * K + get_global_id(0);
	float v = ((global const float *)(xb + xo))[at];
	((global float *)(qb + qo))[at] = xq_f16_to_f32(xq_f32_to_f16(v));
}

kernel void round_x_bf16(global char *xb, ulong xo, global char *qb, ulong qo, uint K)
{
	ulong at = (ulong)get_global_id(1) * K + get_global_id(0);
	float v = ((global const float *)(xb + xo))[at];
	((global float *)(qb + qo))[at] = xq_bf16_round(v);
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ------------------------------ */

/* Element j's 4-bit code of qs[16]: low nibbles 0-15, high 16-31. */
static int xq_nib(global const uchar *qs, uint j)
{
	return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

/* Element j's fifth bit from a q5 type's 4 bytes qh. */
static int xq_hi(global const uchar *qh, uint j)
{
	return (int)((xq_u32(qh) >> j) & 1) << 4;
}

/* The IQ4_NL / IQ4_XS codebook (ggml's kvalues_iq4nl). */
constant char xq_iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				      1,    13,   25,  38,  53,  69,  89,  113 };

/* Each type's exact integer dot of block b's codes with x's codes q (ref_code_<type>). */
static int xq_isum_q4_0(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += (xq_nib(b + 2, j) - 8) * q[j];
	return s;
}

static int xq_isum_q5_0(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += ((xq_nib(b + 6, j) | xq_hi(b + 2, j)) - 16) * q[j];
	return s;
}

static int xq_isum_q8_0(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += (char)b[2 + j] * q[j];
	return s;
}

static int xq_isum_iq4_nl(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += xq_iq4nl_values[xq_nib(b + 2, j)] * q[j];
	return s;
}

static int xq_isum_q4_1(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += xq_nib(b + 4, j) * q[j];
	return s;
}

static int xq_isum_q5_1(global const uchar *b, global const char *q)
{
	int s = 0;
	for (uint j = 0; j < 32; j++)
		s += (xq_nib(b + 8, j) | xq_hi(b + 4, j)) * q[j];
	return s;
}

/* ggml_vec_dot_<type>_q8_0: per block sumf += isum (d_w d_x). */
#define XQ_ROW0(T, BYTES)                                                                    \
	static float xq_row_##T(global const uchar *w, global const uchar *x, uint K)      \
	{                                                                                    \
		float sumf = 0.0f;                                                           \
		for (uint i = 0; i < K / 32; i++, w += BYTES, x += 34)                       \
			sumf += (float)xq_isum_##T(w, (global const char *)(x + 2)) *        \
				(xq_half(w) * xq_half(x));                                   \
		return sumf;                                                                 \
	}

/* ggml_vec_dot_<type>_q8_1: per block sumf += (d_w d_x) isum + m_w s_x. */
#define XQ_ROW1(T, BYTES)                                                                    \
	static float xq_row_##T(global const uchar *w, global const uchar *x, uint K)      \
	{                                                                                    \
		float sumf = 0.0f;                                                           \
		for (uint i = 0; i < K / 32; i++, w += BYTES, x += 36)                       \
			sumf += (xq_half(w) * xq_half(x)) *                                  \
					(float)xq_isum_##T(w, (global const char *)(x + 4)) + \
				xq_half(w + 2) * xq_half(x + 2);                             \
		return sumf;                                                                 \
	}

XQ_ROW0(q4_0, 18)
XQ_ROW0(q5_0, 22)
XQ_ROW0(q8_0, 34)
XQ_ROW0(iq4_nl, 18)
XQ_ROW1(q4_1, 20)
XQ_ROW1(q5_1, 24)

/* ---- 256-element blocks against Q8_K ------------------------------------- */

static float xq_q8k_d(global const uchar *xi)
{
	return as_float(xq_u32(xi));
}

static int xq_bsum(global const uchar *xi, uint g)
{
	return (short)(xi[260 + 2 * g] | (xi[261 + 2 * g] << 8));
}

/* kn__scale_min_k4: the j-th 6-bit scale and min of 12 packed bytes. */
static void xq_scale_min_k4(uint j, global const uchar *q, int *sc, int *m)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* ggml_vec_dot_q4_K_q8_K / q5_K (has_qh for q5_K): isum = sum_s sc_s
 * (q_s . x_s), msum = sum_s m_s (bsum_2s + bsum_2s+1). */
static float xq_dot_k45(global const uchar *b, int has_qh, global const uchar *xi)
{
	global const uchar *qh = b + 16, *qs = b + (has_qh ? 48 : 16);
	global const char *q8 = (global const char *)(xi + 4);
	int isum = 0, msum = 0;
	for (uint s = 0; s < 8; s++) {
		int sc, m, dot = 0;
		xq_scale_min_k4(s, b + 4, &sc, &m);
		global const uchar *q = qs + 32 * (s / 2);
		for (uint l = 0; l < 32; l++) {
			int v = (s & 1) ? q[l] >> 4 : q[l] & 15;
			if (has_qh)
				v |= ((qh[l] >> s) & 1) << 4;
			dot += v * q8[32 * s + l];
		}
		isum += sc * dot;
		msum += m * (xq_bsum(xi, 2 * s) + xq_bsum(xi, 2 * s + 1));
	}
	float xd = xq_q8k_d(xi);
	float d = xq_half(b) * xd, dmin = xq_half(b + 2) * xd;
	return d * (float)isum - dmin * (float)msum;
}

static float xq_dot_q4_K(global const uchar *b, global const uchar *xi)
{
	return xq_dot_k45(b, 0, xi);
}

static float xq_dot_q5_K(global const uchar *b, global const uchar *xi)
{
	return xq_dot_k45(b, 1, xi);
}

/* ggml_vec_dot_q6_K_q8_K: isum = sum over 16-element groups of sc_g sum
 * (q - 32) x. */
static float xq_dot_q6_K(global const uchar *b, global const uchar *xi)
{
	global const char *sc = (global const char *)(b + 192), *q8 = (global const char *)(xi + 4);
	int isum = 0;
	for (uint h = 0; h < 2; h++)
		for (uint t = 0; t < 4; t++)
			for (uint g = 0; g < 2; g++) {
				int dot = 0;
				for (uint l = 16 * g; l < 16 * g + 16; l++) {
					int lo = (b[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1))) & 15;
					int hi = (b[128 + 32 * h + l] >> (2 * t)) & 3;
					dot += ((lo | hi << 4) - 32) * q8[128 * h + 32 * t + l];
				}
				isum += sc[8 * h + 2 * t + g] * dot;
			}
	return (xq_half(b + 208) * xq_q8k_d(xi)) * (float)isum;
}

/* Element e of a q2_K / q3_K block: its 2 low bits, its 16-element group. */
static int xq_k23_lo(global const uchar *qs, uint e)
{
	uint h = e / 128, t = (e % 128) / 32, l = e % 32;
	return (qs[32 * h + l] >> (2 * t)) & 3;
}

static uint xq_k23_group(uint e)
{
	return 8 * (e / 128) + 2 * ((e % 128) / 32) + (e % 32) / 16;
}

/* ggml_vec_dot_q2_K_q8_K: isum = sum_g sc_g (q_g . x_g), msum = sum_g m_g
 * bsum_g over the sixteen 16-element groups. */
static float xq_dot_q2_K(global const uchar *b, global const uchar *xi)
{
	global const char *q8 = (global const char *)(xi + 4);
	int isum = 0, msum = 0;
	for (uint g = 0; g < 16; g++)
		msum += (b[g] >> 4) * xq_bsum(xi, g);
	for (uint e = 0; e < 256; e++)
		isum += (b[xq_k23_group(e)] & 15) * xq_k23_lo(b + 16, e) * q8[e];
	float xd = xq_q8k_d(xi);
	float d = xq_half(b + 80) * xd, dmin = xq_half(b + 82) * xd;
	return d * (float)isum - dmin * (float)msum;
}

/* ggml_vec_dot_q3_K_q8_K: isum = sum_g (sc_g - 32) (q_g . x_g); scale j's
 * low 4 bits are nibble j / 8 of scales[j % 8], its high 2 bits bits
 * 2 (j / 4) of scales[8 + j % 4]; q the 2 low bits less 4 where bit
 * 4 h + t of hmask[l] is clear. */
static float xq_dot_q3_K(global const uchar *b, global const uchar *xi)
{
	global const uchar *scales = b + 96;
	global const char *q8 = (global const char *)(xi + 4);
	int isum = 0;
	for (uint e = 0; e < 256; e++) {
		uint j = xq_k23_group(e), h = e / 128, t = (e % 128) / 32, l = e % 32;
		int sc = ((scales[j % 8] >> (4 * (j / 8))) & 15) |
			 (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
		int q = xq_k23_lo(b + 32, e) - (((b[l] >> (4 * h + t)) & 1) ? 0 : 4);
		isum += (sc - 32) * q * q8[e];
	}
	return (xq_half(b + 108) * xq_q8k_d(xi)) * (float)isum;
}

/* ggml_vec_dot_iq4_xs_q8_K: isum = sum_s (ls_s - 32) (v[q_s] . x_s), ls_s
 * nibble s % 2 of scales_l[s / 2] | bits 2s, 2s + 1 of scales_h << 4. */
static float xq_dot_iq4_xs(global const uchar *b, global const uchar *xi)
{
	global const char *q8 = (global const char *)(xi + 4);
	uint sh = (uint)b[2] | ((uint)b[3] << 8);
	int isum = 0;
	for (uint s = 0; s < 8; s++) {
		global const uchar *qs = b + 8 + 16 * s;
		int dot = 0;
		for (uint j = 0; j < 16; j++)
			dot += xq_iq4nl_values[qs[j] & 15] * q8[32 * s + j] +
			       xq_iq4nl_values[qs[j] >> 4] * q8[32 * s + j + 16];
		int ls = ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4);
		isum += (ls - 32) * dot;
	}
	return (xq_half(b) * xq_q8k_d(xi)) * (float)isum;
}

/* ref_gemv_xq_k: sumf += the block's float, blocks left to right. */
#define XQ_ROWK(T, BYTES)                                                                    \
	static float xq_row_##T(global const uchar *w, global const uchar *x, uint K)      \
	{                                                                                    \
		float sumf = 0.0f;                                                           \
		for (uint i = 0; i < K / 256; i++, w += BYTES, x += 292)                     \
			sumf += xq_dot_##T(w, x);                                            \
		return sumf;                                                                 \
	}

XQ_ROWK(q2_K, 84)
XQ_ROWK(q3_K, 110)
XQ_ROWK(q4_K, 144)
XQ_ROWK(q5_K, 176)
XQ_ROWK(q6_K, 210)
XQ_ROWK(iq4_xs, 136)

/* ---- F16 / BF16 against rounded x: ref_gemv, products summed in order ---- */

static float xq_row_f16(global const uchar *w, global const uchar *xr, uint K)
{
	global const float *x = (global const float *)xr;
	float sum = 0.0f;
	for (uint k = 0; k < K; k++)
		sum += xq_half(w + 2 * k) * x[k];
	return sum;
}

static float xq_row_bf16(global const uchar *w, global const uchar *xr, uint K)
{
	global const float *x = (global const float *)xr;
	float sum = 0.0f;
	for (uint k = 0; k < K; k++)
		sum += as_float((uint)(w[2 * k] | (w[2 * k + 1] << 8)) << 16) * x[k];
	return sum;
}

/* ---- DEV_TYPE_I8R (CTranslate2's int8) against float x ------------------ */

/* The float product of the codes (the row's scale, then its codes) with x,
 * times the scale: the dequantized weights, x not quantized. */
static float xq_row_i8r(global const uchar *w, global const uchar *xr, uint K)
{
	global const float *x = (global const float *)xr;
	float sum = 0.0f;
	for (uint k = 0; k < K; k++)
		sum += (float)(char)w[4 + k] * x[k];
	return sum * as_float(xq_u32(w));
}

/* One kernel per type around its row product; XROW(K): bytes of one
 * prepared x row. The arguments are dev_linear.cl's linear_<type>'s. */
#define XQ_KERNEL(T, XROW)                                                                    \
	kernel void linear_xq_##T(global char *wb, ulong wo, ulong row_bytes, global char *xb, \
				  ulong xo, global char *bb, ulong bo, uint has_b,             \
				  global char *yb, ulong yo, uint M, uint N, uint K)           \
	{                                                                                     \
		uint n = get_global_id(0), m = get_global_id(1);                                 \
		if (n >= N || m >= M)                                                            \
			return;                                                                  \
		global const uchar *w = (global const uchar *)(wb + wo) + (ulong)n * row_bytes; \
		global const uchar *x = (global const uchar *)(xb + xo) + (ulong)m * (XROW);    \
		float s = xq_row_##T(w, x, K);                                                   \
		if (has_b)                                                                       \
			s += ((global const float *)(bb + bo))[n];                               \
		((global float *)(yb + yo))[(ulong)m * N + n] = s;                              \
	}

XQ_KERNEL(f16, (ulong)K * 4)
XQ_KERNEL(bf16, (ulong)K * 4)
XQ_KERNEL(i8r, (ulong)K * 4)
XQ_KERNEL(q4_0, K / 32 * 34)
XQ_KERNEL(q5_0, K / 32 * 34)
XQ_KERNEL(q8_0, K / 32 * 34)
XQ_KERNEL(iq4_nl, K / 32 * 34)
XQ_KERNEL(q4_1, K / 32 * 36)
XQ_KERNEL(q5_1, K / 32 * 36)
XQ_KERNEL(q2_K, K / 256 * 292)
XQ_KERNEL(q3_K, K / 256 * 292)
XQ_KERNEL(q4_K, K / 256 * 292)
XQ_KERNEL(q5_K, K / 256 * 292)
XQ_KERNEL(q6_K, K / 256 * 292)
XQ_KERNEL(iq4_xs, K / 256 * 292)

/* The .cl files that follow in the program keep OpenCL's default. */
#pragma OPENCL FP_CONTRACT ON
