/* test_dev_ops.c - every op of dev.h's compute section on the opencl back
 * end (PoCL here: the CPU as an OpenCL device) against the cpu back end,
 * whose ops are the kernels of kernels/kn.h the forward passes use.
 *
 * Random inputs of odd sizes (rows that are not a multiple of any work-
 * group, widths past one work-group and below it) are uploaded to the
 * OpenCL device, the op runs there and on host copies through the cpu
 * back end, and the results are compared within each op's stated bound:
 *  - exact where both compute the same IEEE operations (add, scale, the
 *    binary16 rounding, argmax);
 *  - a relative 2e-5 where only the order of a sum differs (RMSNorm,
 *    LayerNorm over up to 1500 floats: float32 sums in a tree against the
 *    cpu's sequential or double sums; softmax);
 *  - a few float32 ulps where the math library's tanh / erf / exp may
 *    differ (soft cap, GELU: 1e-6 absolute plus 1e-5 relative; SiLU and
 *    tanh GELU times the up value: 1e-5 absolute, as 0.5 x (1 + tanh)
 *    cancels near x = -20 where tanh is -1 within ulps);
 *  - one binary16 ulp for ggml's binary16 GELU (a tanh one ulp apart can
 *    round the other way).
 * Full attention (Whisper's) is also held to the kernels the cpu names,
 * bit for bit, in each precision. An op with an address outside the
 * device's memory is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_bf16.h"
#include "kernels/kn_half.h"
#include "tests/unit/devices/dev_pair.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* Uniform in [-a, a) (xorshift64*). */
static float rnd(float a)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	uint64_t v = rng * 0x2545f4914f6cdd1dull;
	return a * ((float)(v >> 40) / (float)(1u << 23) - 1.0f);
}

static float *rnd_vec(size_t n, float a)
{
	float *v = malloc(n * sizeof(float) + 1);
	for (size_t i = 0; i < n; i++)
		v[i] = rnd(a);
	return v;
}

/* host copy -> a new allocation on the OpenCL device. */
static void *up(struct pair *p, const void *host, size_t bytes)
{
	void *d = dev_alloc(p->ocl, bytes);
	assert_non_null(d);
	assert_int_equal(dev_upload(p->qo, d, host, bytes), 0);
	return d;
}

/* The device's n floats, downloaded, then freed there. */
static float *down(struct pair *p, void *d, size_t n)
{
	float *h = malloc(n * sizeof(float) + 1);
	assert_int_equal(dev_download(p->qo, h, d, n * sizeof(float)), 0);
	dev_free(p->ocl, d);
	return h;
}

/* |got - want| <= abs + rel |want| for all n; NaN only where both are. */
static void near(const float *got, const float *want, size_t n, float abs_b, float rel_b,
		 const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (isnan(want[i]) && isnan(got[i]))
			continue;
		float e = fabsf(got[i] - want[i]);
		if (!(e <= abs_b + rel_b * fabsf(want[i]))) {
			fprintf(stderr, "%s: [%zu] opencl %.9g cpu %.9g\n", what, i, got[i], want[i]);
			fail();
		}
	}
}

static const size_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 5, 384 }, { 2, 1500 }, { 17, 65 } };
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

static void test_norms(void **state)
{
	struct pair *p = *state;
	for (size_t s = 0; s < N_SHAPES; s++) {
		size_t rows = shapes[s][0], d = shapes[s][1], n = rows * d;
		float *x = rnd_vec(n, 3.0f), *w = rnd_vec(d, 1.5f), *b = rnd_vec(d, 0.5f);
		float *y = malloc(n * sizeof(float));
		for (int with_w = 0; with_w < 2; with_w++) {
			void *dx = up(p, x, n * 4), *dw = up(p, w, d * 4), *dy = dev_alloc(p->ocl, n * 4);
			assert_int_equal(dev_rms_norm(p->qc, x, with_w ? w : NULL, y, rows, d, 1e-6f), 0);
			assert_int_equal(dev_rms_norm(p->qo, dx, with_w ? dw : NULL, dy, rows, d, 1e-6f), 0);
			float *got = down(p, dy, n);
			near(got, y, n, 1e-6f, 2e-5f, "rms_norm");
			free(got);
			dev_free(p->ocl, dw);
			/* in place */
			assert_int_equal(dev_rms_norm(p->qo, dx, NULL, dx, rows, d, 1e-6f), 0);
			assert_int_equal(dev_rms_norm(p->qc, x, NULL, y, rows, d, 1e-6f), 0);
			got = down(p, dx, n);
			near(got, y, n, 1e-6f, 2e-5f, "rms_norm in place");
			free(got);
		}
		void *dx = up(p, x, n * 4), *dg = up(p, w, d * 4), *db = up(p, b, d * 4);
		void *dy = dev_alloc(p->ocl, n * 4);
		assert_int_equal(dev_layer_norm(p->qc, x, w, b, y, rows, d, 1e-5f), 0);
		assert_int_equal(dev_layer_norm(p->qo, dx, dg, db, dy, rows, d, 1e-5f), 0);
		float *got = down(p, dy, n);
		near(got, y, n, 1e-5f, 2e-5f, "layer_norm");
		free(got);
		dev_free(p->ocl, dx);
		dev_free(p->ocl, dg);
		dev_free(p->ocl, db);
		free(x);
		free(w);
		free(b);
		free(y);
	}
}

static const size_t lens[] = { 1, 63, 64, 1000, 70001 };
#define N_LENS (sizeof(lens) / sizeof(lens[0]))

static void test_elementwise(void **state)
{
	struct pair *p = *state;
	for (size_t s = 0; s < N_LENS; s++) {
		size_t n = lens[s];
		float *x = rnd_vec(n, 20.0f), *u = rnd_vec(n, 2.0f);
		float *y = malloc(n * sizeof(float));
		/* y += x, exact */
		memcpy(y, u, n * 4);
		void *dy = up(p, u, n * 4), *dx = up(p, x, n * 4);
		assert_int_equal(dev_add(p->qc, y, x, n), 0);
		assert_int_equal(dev_add(p->qo, dy, dx, n), 0);
		float *got = down(p, dy, n);
		near(got, y, n, 0.0f, 0.0f, "add");
		free(got);
		/* x *= s, exact */
		memcpy(y, x, n * 4);
		dy = up(p, x, n * 4);
		assert_int_equal(dev_scale(p->qc, y, 0.37f, n), 0);
		assert_int_equal(dev_scale(p->qo, dy, 0.37f, n), 0);
		got = down(p, dy, n);
		near(got, y, n, 0.0f, 0.0f, "scale");
		free(got);
		/* soft cap and erf GELU: the math library's tanh / erf */
		memcpy(y, x, n * 4);
		dy = up(p, x, n * 4);
		assert_int_equal(dev_softcap(p->qc, y, n, 15.0f), 0);
		assert_int_equal(dev_softcap(p->qo, dy, n, 15.0f), 0);
		got = down(p, dy, n);
		near(got, y, n, 1e-6f, 1e-5f, "softcap");
		free(got);
		memcpy(y, x, n * 4);
		dy = up(p, x, n * 4);
		assert_int_equal(dev_gelu(p->qc, y, n), 0);
		assert_int_equal(dev_gelu(p->qo, dy, n), 0);
		got = down(p, dy, n);
		near(got, y, n, 1e-6f, 1e-5f, "gelu");
		free(got);
		/* gated activations */
		for (int k = DEV_GLU_SILU; k <= DEV_GLU_GELU_F16; k++) {
			memcpy(y, x, n * 4);
			dy = up(p, x, n * 4);
			void *du = up(p, u, n * 4);
			assert_int_equal(dev_glu(p->qc, (enum dev_glu)k, y, u, n), 0);
			assert_int_equal(dev_glu(p->qo, (enum dev_glu)k, dy, du, n), 0);
			got = down(p, dy, n);
			dev_free(p->ocl, du);
			if (k == DEV_GLU_GELU_F16)
				/* one binary16 ulp of act (2^-10 relative), times |u| <= 2 */
				near(got, y, n, 1e-6f, 1.0f / 1024.0f, "glu gelu_f16");
			else /* near act = 0 the tanh is -1 within ulps, times |x u| <= 40 */
				near(got, y, n, 1e-5f, 1e-5f, k == DEV_GLU_SILU ? "glu silu" : "glu gelu_tanh");
			free(got);
		}
		dev_free(p->ocl, dx);
		free(x);
		free(u);
		free(y);
	}
}

static void test_softmax_argmax(void **state)
{
	struct pair *p = *state;
	for (size_t s = 0; s < N_SHAPES; s++) {
		size_t rows = shapes[s][0], d = shapes[s][1], n = rows * d;
		float *x = rnd_vec(n, 8.0f);
		int32_t *ic = malloc(rows * 4), *io = malloc(rows * 4);
		void *dx = up(p, x, n * 4);
		assert_int_equal(dev_argmax(p->qc, x, rows, d, ic), 0);
		assert_int_equal(dev_argmax(p->qo, dx, rows, d, io), 0);
		assert_memory_equal(io, ic, rows * 4);
		assert_int_equal(dev_softmax(p->qc, x, rows, d), 0);
		assert_int_equal(dev_softmax(p->qo, dx, rows, d), 0);
		float *got = down(p, dx, n);
		near(got, x, n, 1e-7f, 2e-5f, "softmax");
		free(got);
		free(x);
		free(ic);
		free(io);
	}
	/* argmax's rule: the first of equals; NaN never taken but at 0 */
	enum { D = 300 };
	float rows[4][D];
	for (int r = 0; r < 4; r++)
		for (int i = 0; i < D; i++)
			rows[r][i] = -1.0f;
	rows[0][7] = rows[0][250] = 5.0f;			 /* tie: 7 */
	rows[1][0] = NAN, rows[1][9] = 3.0f;			 /* NaN first: 0 */
	rows[2][3] = NAN, rows[2][200] = 2.0f;			 /* NaN skipped: 200 */
	for (int i = 0; i < D; i++)
		rows[3][i] = -INFINITY;				 /* all -inf: 0 */
	int32_t ic[4], io[4];
	void *dx = up(p, rows, sizeof(rows));
	assert_int_equal(dev_argmax(p->qc, &rows[0][0], 4, D, ic), 0);
	assert_int_equal(dev_argmax(p->qo, dx, 4, D, io), 0);
	assert_int_equal(ic[0], 7);
	assert_int_equal(ic[1], 0);
	assert_int_equal(ic[2], 200);
	assert_int_equal(ic[3], 0);
	assert_memory_equal(io, ic, sizeof(ic));
	dev_free(p->ocl, dx);
}

/* RoPE: the angles are the host's on both (exact); the rotation may
 * differ by a contracted multiply-add: 1e-6 absolute plus 1e-5 relative. */
static void test_rope(void **state)
{
	struct pair *p = *state;
	enum { T = 5, H = 3, HD = 16, LD = 56, ROT = 12 };
	int32_t pos[T] = { 0, 1, 7, 300, 40000 };
	float ff[ROT / 2];
	for (int j = 0; j < ROT / 2; j++)
		ff[j] = 1.0f + (float)j / 3.0f;
	for (int variant = 0; variant < 4; variant++) {
		bool neox = variant & 1, factors = variant & 2;
		float *x = rnd_vec(T * LD, 2.0f), *cs = malloc(T * ROT * sizeof(float));
		void *dx = up(p, x, sizeof(float) * T * LD);
		float *dcs = dev_alloc(p->ocl, T * ROT * sizeof(float));
		assert_int_equal(dev_rope_angles(p->qc, cs, T, ROT, pos, 10000.0f, 0.5f,
						 factors ? ff : NULL), 0);
		assert_int_equal(dev_rope_angles(p->qo, dcs, T, ROT, pos, 10000.0f, 0.5f,
						 factors ? ff : NULL), 0);
		float *got = down(p, dcs, T * ROT);
		near(got, cs, T * ROT, 0.0f, 0.0f, "rope angles");
		free(got);
		dcs = up(p, cs, T * ROT * sizeof(float));
		assert_int_equal(dev_rope(p->qc, x, T, LD, H, HD, ROT, cs, neox), 0);
		assert_int_equal(dev_rope(p->qo, dx, T, LD, H, HD, ROT, dcs, neox), 0);
		got = down(p, dx, T * LD);
		near(got, x, T * LD, 1e-6f, 1e-5f, neox ? "rope neox" : "rope");
		free(got);
		dev_free(p->ocl, dcs);
		free(x);
		free(cs);
	}
}

/* A KV cache's new rows into its blocks per head (dev_kv_store): 5 rows
 * of 3 heads of 7 at a stride of 25 into blocks 45 apart, then 1 row at
 * position 5, float32 and binary16. Both back ends give the bits of the
 * direct loop (kn_f32_to_f16's nearest even), elements outside the new
 * rows untouched; a stride under the rows' width, or blocks that overlap,
 * are refused. */
static void test_kv_store(void **state)
{
	struct pair *p = *state;
	enum { NH = 3, HD = 7, LDX = 25, N = 5, HS = 45, LEN = NH * HS };
	float *x = rnd_vec((N + 1) * LDX, 2.0f);
	void *dx = up(p, x, (N + 1) * LDX * 4);
	for (int f16 = 0; f16 < 2; f16++) {
		size_t esz = f16 ? 2 : 4;
		unsigned char *want = malloc(LEN * esz), *got = malloc(LEN * esz);
		unsigned char *host = malloc(LEN * esz);
		memset(want, 0xa5, LEN * esz);
		for (size_t j = 0; j < N + 1; j++)
			for (size_t g = 0; g < NH; g++)
				for (size_t e = 0; e < HD; e++) {
					float v = x[j * LDX + g * HD + e];
					size_t at = g * HS + j * HD + e;
					if (f16) {
						uint16_t h = kn_f32_to_f16(v);
						memcpy(want + at * 2, &h, 2);
					} else {
						memcpy(want + at * 4, &v, 4);
					}
				}
		memset(host, 0xa5, LEN * esz);
		void *dy = up(p, host, LEN * esz);
		assert_int_equal(dev_kv_store(p->qc, host, HS, f16, x, LDX, N, NH, HD), 0);
		assert_int_equal(dev_kv_store(p->qc, host + N * HD * esz, HS, f16, x + N * LDX, LDX,
					      1, NH, HD), 0);
		assert_memory_equal(host, want, LEN * esz);
		assert_int_equal(dev_kv_store(p->qo, dy, HS, f16, dx, LDX, N, NH, HD), 0);
		assert_int_equal(dev_kv_store(p->qo, (unsigned char *)dy + N * HD * esz, HS, f16,
					      (float *)dx + N * LDX, LDX, 1, NH, HD), 0);
		assert_int_equal(dev_download(p->qo, got, dy, LEN * esz), 0);
		assert_memory_equal(got, want, LEN * esz);
		assert_int_equal(dev_kv_store(p->qc, host, HS, f16, x, NH * HD - 1, N, NH, HD),
				 -ST_INVAL);
		assert_int_equal(dev_kv_store(p->qc, host, HD - 1, f16, x, LDX, N, NH, HD),
				 -ST_INVAL);
		dev_free(p->ocl, dy);
		free(want);
		free(got);
		free(host);
	}
	dev_free(p->ocl, dx);
	free(x);
}

/* The caches of test_attention in binary16 (kn_f32_to_f16, as
 * dev_kv_store rounds). */
static uint16_t *to_f16(const float *x, size_t n)
{
	uint16_t *h = malloc(n * sizeof(*h));
	assert_non_null(h);
	for (size_t i = 0; i < n; i++)
		h[i] = kn_f32_to_f16(x[i]);
	return h;
}

/* x [CTX rows of nkv heads of hd] as one block of CTX rows per head. */
static float *to_blocks(const float *x, size_t ctx, size_t nkv, size_t hd)
{
	float *b = malloc(ctx * nkv * hd * sizeof(*b));
	assert_non_null(b);
	for (size_t j = 0; j < ctx; j++)
		for (size_t g = 0; g < nkv; g++)
			memcpy(b + (g * ctx + j) * hd, x + (j * nkv + g) * hd, hd * sizeof(*b));
	return b;
}

/* Attention of three sequences at different points over float32 and
 * binary16 caches, grouped-query heads, with and without a window and a
 * soft cap, the heads side by side in each row or in blocks (variant 8,
 * dev_attn_seq's hs): sums in another order, 1e-6 absolute plus 2e-5
 * relative; on the cpu the blocks give the side-by-side bits. */
static void test_attention(void **state)
{
	struct pair *p = *state;
	enum { NH = 4, NKV = 2, HD = 16, CTX = 80, ROWS = 14 };
	size_t kvw = NKV * HD, qw = NH * HD;
	struct dev_attn_seq seqs[3] = { { 0, 1, 40, 0, 0, 0, 0, false }, { 1, 9, 0, 0, 0, 0, 0, false },
					{ 10, 4, 70, 0, 0, 0, 0, false } };
	float *qh = rnd_vec(ROWS * qw, 1.0f);
	void *dq = up(p, qh, ROWS * qw * 4);
	for (int variant = 0; variant < 16; variant++) {
		int f16 = variant & 1, blocks = variant & 8;
		size_t esz = f16 ? 2 : 4;
		struct dev_attn a = { NH, NKV, HD, qh, qw, NULL, qw, kvw, kvw, f16,
				      variant & 2 ? 5 : 0, 0.25f, variant & 4 ? 3.0f : 0.0f,
				      false, DEV_ATTN_F32, false };
		void *hk[3], *hv[3], *dk[3], *dv[3], *rk[3], *rv[3];
		struct dev_attn_seq so[3], rows[3];
		for (int s = 0; s < 3; s++) {
			float *k = rnd_vec(CTX * kvw, 1.5f), *v = rnd_vec(CTX * kvw, 1.0f);
			float *kb = blocks ? to_blocks(k, CTX, NKV, HD) : NULL;
			float *vb = blocks ? to_blocks(v, CTX, NKV, HD) : NULL;
			rk[s] = f16 ? (void *)to_f16(k, CTX * kvw) : (void *)k;
			rv[s] = f16 ? (void *)to_f16(v, CTX * kvw) : (void *)v;
			hk[s] = !blocks ? rk[s] : f16 ? (void *)to_f16(kb, CTX * kvw) : (void *)kb;
			hv[s] = !blocks ? rv[s] : f16 ? (void *)to_f16(vb, CTX * kvw) : (void *)vb;
			if (f16) {
				free(k);
				free(v);
			}
			if (f16 && blocks) {
				free(kb);
				free(vb);
			}
			rows[s] = seqs[s];
			rows[s].k = rk[s], rows[s].v = rv[s], rows[s].hs = 0;
			seqs[s].hs = blocks ? CTX * HD : 0;
			dk[s] = up(p, hk[s], CTX * kvw * esz);
			dv[s] = up(p, hv[s], CTX * kvw * esz);
			seqs[s].k = hk[s], seqs[s].v = hv[s];
			so[s] = seqs[s];
			so[s].k = dk[s], so[s].v = dv[s];
		}
		float *out = calloc(ROWS * qw, sizeof(float));
		float *dout = dev_alloc(p->ocl, ROWS * qw * 4);
		if (blocks) { /* the cpu's side-by-side bits first */
			a.out = calloc(ROWS * qw, sizeof(float));
			assert_int_equal(dev_attention(p->qc, &a, rows, 3), 0);
			a.ldk = a.ldv = HD;
		}
		float *side = a.out;
		a.out = out;
		assert_int_equal(dev_attention(p->qc, &a, seqs, 3), 0);
		if (blocks) {
			assert_memory_equal(out, side, ROWS * qw * sizeof(float));
			free(side);
		}
		a.q = dq, a.out = dout;
		assert_int_equal(dev_attention(p->qo, &a, so, 3), 0);
		float *got = down(p, dout, ROWS * qw);
		near(got, out, ROWS * qw, 1e-6f, 2e-5f, "attention");
		free(got);
		free(out);
		for (int s = 0; s < 3; s++) {
			dev_free(p->ocl, dk[s]);
			dev_free(p->ocl, dv[s]);
			if (hk[s] != rk[s]) {
				free(hk[s]);
				free(hv[s]);
			}
			free(rk[s]);
			free(rv[s]);
		}
		a.q = qh;
	}
	dev_free(p->ocl, dq);
	free(qh);
}

/* Full (unmasked) attention as Whisper uses it: an encoder window's
 * self-attention (7 rows over their 7 keys) and a decoder's cross-
 * attention (3 rows over 37 encoder keys) in one call. The cpu computes
 * each precision with the kernel the encoder calls (kn_attention,
 * kn_attention_bf16, kn_attention_i8 over all heads: the same bits);
 * opencl computes float32 whatever the precision, held to the cpu's
 * float32 within sum order (1e-6 + 2e-5 relative); the cpu's int8 and
 * bfloat16 results stay within their rounding of it (0.05: weights of at
 * most 1, values of at most 1, 2^-8 and 1/127 steps). */
static void test_attention_full(void **state)
{
	struct pair *p = *state;
	enum { NH = 3, HD = 64, W = NH * HD, ROWS = 10, KV = 37 };
	float *qh = rnd_vec(ROWS * W, 1.0f), *kh = rnd_vec(KV * W, 1.5f), *vh = rnd_vec(KV * W, 1.0f);
	float *dq = up(p, qh, ROWS * W * 4), *dk = up(p, kh, KV * W * 4);
	float *dv = up(p, vh, KV * W * 4);
	struct dev_attn_seq seqs[2] = { { 0, 7, 99, kh, vh, 7, 0, false }, { 7, 3, 0, kh, vh, KV, 0, false } };
	struct dev_attn_seq so[2] = { { 0, 7, 99, dk, dv, 7, 0, false }, { 7, 3, 0, dk, dv, KV, 0, false } };
	float *f32 = calloc(ROWS * W, 4);
	for (int prec = DEV_ATTN_F32; prec <= DEV_ATTN_I8; prec++) {
		struct dev_attn a = { NH, NH, HD, qh, W, NULL, W, W, W, 0, 0,
				      1.0f / sqrtf((float)HD), 0.0f, true, (enum dev_attn_prec)prec, false };
		float *out = calloc(ROWS * W, 4), *want = calloc(ROWS * W, 4);
		a.out = out;
		int rc = dev_attention(p->qc, &a, seqs, 2);
		if (prec == DEV_ATTN_BF16 && !kn_bf16_ok()) {
			assert_int_equal(rc, -ST_UNSUPPORTED);
			free(out);
			free(want);
			continue;
		}
		assert_int_equal(rc, 0);
		for (int s = 0; s < 2; s++) {
			size_t n = seqs[s].n, n_kv = seqs[s].n_kv, r0 = seqs[s].r0;
			void *sc = malloc(64 * n * n_kv + kn_attention_i8_scratch(n_kv, HD) +
					  4 * kn_attention_bf16_scratch(n_kv, HD));
			if (prec == DEV_ATTN_F32)
				kn_attention(n, n_kv, NH, HD, qh + r0 * W, W, kh, W, vh, W,
					     want + r0 * W, W, false, 0, sc);
			else if (prec == DEV_ATTN_BF16)
				kn_attention_bf16(n, n_kv, NH, HD, qh + r0 * W, W, kh, W, vh, W,
						  want + r0 * W, W, sc);
			else
				kn_attention_i8(n, n_kv, NH, HD, qh + r0 * W, W, kh, W, vh, W,
						want + r0 * W, W, sc);
			free(sc);
		}
		assert_memory_equal(out, want, ROWS * W * 4);
		if (prec == DEV_ATTN_F32)
			memcpy(f32, out, ROWS * W * 4);
		else
			near(out, f32, ROWS * W, 0.05f, 0.0f, "cpu attention in its precision");
		float *dout = dev_alloc(p->ocl, ROWS * W * 4);
		a.q = dq, a.out = dout;
		assert_int_equal(dev_attention(p->qo, &a, so, 2), 0);
		float *got = down(p, dout, ROWS * W);
		near(got, f32, ROWS * W, 1e-6f, 2e-5f, "full attention");
		free(got);
		free(out);
		free(want);
	}
	/* refused: grouped heads, a window, a soft cap, another scale, a
	 * binary16 cache, no keys; causal attention in a lower precision */
	struct dev_attn ok = { NH, NH, HD, qh, W, f32, W, W, W, 0, 0, 1.0f / sqrtf((float)HD),
			       0.0f, true, DEV_ATTN_F32, false };
	struct dev_attn bad[6] = { ok, ok, ok, ok, ok, ok };
	bad[0].n_head_kv = 1;
	bad[1].window = 4;
	bad[2].softcap = 5.0f;
	bad[3].scale = 0.5f;
	bad[4].kv_type = 1;
	bad[5].full = false, bad[5].prec = DEV_ATTN_I8;
	for (int i = 0; i < 6; i++)
		assert_int_equal(dev_attention(p->qc, &bad[i], seqs, 2), -ST_INVAL);
	struct dev_attn_seq none = { 0, 1, 0, kh, vh, 0, 0, false };
	assert_int_equal(dev_attention(p->qc, &ok, &none, 1), -ST_INVAL);
	dev_free(p->ocl, dq);
	dev_free(p->ocl, dk);
	dev_free(p->ocl, dv);
	free(qh);
	free(kh);
	free(vh);
	free(f32);
}

/* Causal attention with ct2 (Whisper's decoder self-attention): two
 * sequences over float32 caches (1 row at position 5, 4 rows from 0);
 * the cpu bit for bit kn_attention with its causal mask per sequence,
 * opencl within sum order (1e-6 + 2e-5 relative); refused with grouped
 * heads, a window, a soft cap, another scale or a binary16 cache. */
static void test_attention_ct2(void **state)
{
	struct pair *p = *state;
	enum { NH = 2, HD = 32, W = NH * HD, ROWS = 5, CTX = 9 };
	float *qh = rnd_vec(ROWS * W, 1.0f), *kh = rnd_vec(2 * CTX * W, 1.5f);
	float *vh = rnd_vec(2 * CTX * W, 1.0f);
	float *dq = up(p, qh, ROWS * W * 4), *dk = up(p, kh, 2 * CTX * W * 4);
	float *dv = up(p, vh, 2 * CTX * W * 4);
	struct dev_attn_seq seqs[2] = { { 0, 1, 5, kh, vh, 0, 0, false },
					{ 1, 4, 0, kh + CTX * W, vh + CTX * W, 0, 0, false } };
	struct dev_attn_seq so[2] = { { 0, 1, 5, dk, dv, 0, 0, false },
				      { 1, 4, 0, dk + CTX * W, dv + CTX * W, 0, 0, false } };
	struct dev_attn a = { NH, NH, HD, qh, W, NULL, W, W, W, 0, 0, 1.0f / sqrtf((float)HD),
			      0.0f, false, DEV_ATTN_F32, true };
	float *out = calloc(ROWS * W, 4), *want = calloc(ROWS * W, 4), *sc = malloc(ROWS * CTX * 4);
	a.out = out;
	assert_int_equal(dev_attention(p->qc, &a, seqs, 2), 0);
	for (int s = 0; s < 2; s++) {
		const struct dev_attn_seq *sg = &seqs[s];
		kn_attention(sg->n, sg->pos0 + sg->n, NH, HD, qh + sg->r0 * W, W, sg->k, W, sg->v, W,
			     want + sg->r0 * W, W, true, sg->pos0, sc);
	}
	assert_memory_equal(out, want, ROWS * W * 4);
	float *dout = dev_alloc(p->ocl, ROWS * W * 4);
	a.q = dq, a.out = dout;
	assert_int_equal(dev_attention(p->qo, &a, so, 2), 0);
	float *got = down(p, dout, ROWS * W);
	near(got, want, ROWS * W, 1e-6f, 2e-5f, "ct2 causal attention");
	a.q = qh, a.out = out;
	struct dev_attn bad[5] = { a, a, a, a, a };
	bad[0].n_head_kv = 1;
	bad[1].window = 4;
	bad[2].softcap = 5.0f;
	bad[3].scale = 0.5f;
	bad[4].kv_type = 1;
	for (int i = 0; i < 5; i++)
		assert_int_equal(dev_attention(p->qc, &bad[i], seqs, 2), -ST_INVAL);
	dev_free(p->ocl, dq);
	dev_free(p->ocl, dk);
	dev_free(p->ocl, dv);
	dev_free(p->ocl, dout);
	free(got);
	free(qh);
	free(kh);
	free(vh);
	free(out);
	free(want);
	free(sc);
}

/* A bfloat16 cross-attention cache: dev_kv16_pack writes kn_kv16_pack's
 * bits on both back ends (70 keys: a partial block of 64; rows wider than
 * 2d), and full attention over it (two sequences' caches, 1 and 4 query
 * rows) is kn_attention_kv16 on the cpu bit for bit, opencl within the
 * order of its sums (1e-6 + 2e-5 relative), and both within bfloat16's
 * rounding (0.05) of the float32 attention over the same keys. One head's
 * scores (dev_attention_scores) over the float32 keys and over the cache:
 * kn_attention_scores(_kv16) on the cpu, opencl within sum order. */
static void test_attention_kv16(void **state)
{
	struct pair *p = *state;
	enum { NH = 3, HD = 64, W = NH * HD, LD = 2 * W + 5, KV = 70, ROWS = 5 };
	size_t len = dev_kv16_len(KV, NH, HD);
	float *kv = rnd_vec(KV * LD, 1.5f), *qh = rnd_vec(ROWS * W, 1.0f);
	uint16_t *cache = malloc(len * 2), *want = malloc(len * 2);
	kn_kv16_pack(kv, LD, KV, NH, HD, want);
	assert_int_equal(dev_kv16_pack(p->qc, kv, LD, KV, NH, HD, cache), 0);
	assert_memory_equal(cache, want, len * 2);
	void *dkv = up(p, kv, KV * LD * 4), *dc = dev_alloc(p->ocl, len * 2);
	assert_int_equal(dev_kv16_pack(p->qo, dkv, LD, KV, NH, HD, dc), 0);
	uint16_t *got16 = malloc(len * 2);
	assert_int_equal(dev_download(p->qo, got16, dc, len * 2), 0);
	assert_memory_equal(got16, want, len * 2);
	/* attention: sequence 0 over the first 9 keys' own cache, 1 over all */
	size_t len9 = dev_kv16_len(9, NH, HD);
	uint16_t *c9 = malloc(len9 * 2);
	kn_kv16_pack(kv, LD, 9, NH, HD, c9);
	void *dc9 = up(p, c9, len9 * 2), *dq = up(p, qh, ROWS * W * 4);
	struct dev_attn_seq seqs[2] = { { 0, 1, 0, c9, NULL, 9, 0, false }, { 1, 4, 0, cache, NULL, KV, 0, false } };
	struct dev_attn_seq so[2] = { { 0, 1, 0, dc9, NULL, 9, 0, false }, { 1, 4, 0, dc, NULL, KV, 0, false } };
	struct dev_attn a = { NH, NH, HD, qh, W, NULL, W, 0, 0, 2, 0, 1.0f / sqrtf((float)HD),
			      0.0f, true, DEV_ATTN_F32, false };
	float *out = calloc(ROWS * W, 4), *ref = calloc(ROWS * W, 4), *f32 = calloc(ROWS * W, 4);
	float *sc = malloc(kn_kv16_scratch(KV) * 4 + 64 * ROWS * KV);
	a.out = out;
	assert_int_equal(dev_attention(p->qc, &a, seqs, 2), 0);
	kn_attention_kv16(1, 9, NH, HD, 0, NH, qh, W, c9, ref, W, sc);
	kn_attention_kv16(4, KV, NH, HD, 0, NH, qh + W, W, cache, ref + W, W, sc);
	assert_memory_equal(out, ref, ROWS * W * 4);
	kn_attention(1, 9, NH, HD, qh, W, kv, LD, kv + W, LD, f32, W, false, 0, sc);
	kn_attention(4, KV, NH, HD, qh + W, W, kv, LD, kv + W, LD, f32 + W, W, false, 0, sc);
	near(out, f32, ROWS * W, 0.05f, 0.0f, "bfloat16 cache against float32");
	float *dout = dev_alloc(p->ocl, ROWS * W * 4);
	a.q = dq, a.out = dout;
	assert_int_equal(dev_attention(p->qo, &a, so, 2), 0);
	float *got = down(p, dout, ROWS * W);
	near(got, ref, ROWS * W, 1e-6f, 2e-5f, "attention over a bfloat16 cache");
	/* head 1's scores before the softmax over 50 of the keys, from the
	 * float32 rows and from the packed cache */
	for (int kvt = 0; kvt <= 2; kvt += 2) {
		enum { COLS = 50 };
		struct dev_scores sc_h = { 4, COLS, HD, 1, NH, qh, W, kvt, kvt ? (void *)cache : kv,
					   LD, KV, ref, COLS };
		assert_int_equal(dev_attention_scores(p->qc, &sc_h), 0);
		if (kvt)
			kn_attention_scores_kv16(4, KV, COLS, HD, 1, qh, W, cache, f32, COLS);
		else
			kn_attention_scores(4, COLS, HD, qh + HD, W, kv + HD, LD, f32, COLS);
		assert_memory_equal(ref, f32, 4 * COLS * 4);
		float *ds = dev_alloc(p->ocl, 4 * COLS * 4);
		sc_h.q = dq, sc_h.k = kvt ? dc : dkv, sc_h.out = ds;
		assert_int_equal(dev_attention_scores(p->qo, &sc_h), 0);
		float *gs = down(p, ds, 4 * COLS);
		near(gs, ref, 4 * COLS, 1e-6f, 2e-5f, "attention scores");
		free(gs);
		sc_h.q = qh, sc_h.out = ref, sc_h.h = NH; /* no such head */
		assert_int_equal(dev_attention_scores(p->qc, &sc_h), -ST_INVAL);
	}
	/* refused: a packed cache in causal attention or another precision */
	a.q = qh, a.out = out;
	a.prec = DEV_ATTN_I8;
	assert_int_equal(dev_attention(p->qc, &a, seqs, 2), -ST_INVAL);
	a.prec = DEV_ATTN_F32, a.full = false;
	assert_int_equal(dev_attention(p->qc, &a, seqs, 2), -ST_INVAL);
	assert_int_equal(dev_kv16_pack(p->qc, kv, 2 * W - 1, KV, NH, HD, cache), -ST_INVAL);
	dev_free(p->ocl, dkv);
	dev_free(p->ocl, dc);
	dev_free(p->ocl, dc9);
	dev_free(p->ocl, dq);
	free(kv);
	free(qh);
	free(cache);
	free(want);
	free(got16);
	free(c9);
	free(out);
	free(ref);
	free(f32);
	free(sc);
	free(got);
}

/* dev_memcpy in order with the queue's other ops: a copy taken between
 * two scales sees the first only. */
static void test_memcpy(void **state)
{
	struct pair *p = *state;
	enum { N = 1000 };
	float *x = rnd_vec(N, 1.0f), *want = malloc(N * sizeof(float));
	float *d = up(p, x, N * 4), *e = dev_alloc(p->ocl, N * 4);
	assert_int_equal(dev_scale(p->qo, d, 2.0f, N), 0);
	assert_int_equal(dev_memcpy(p->qo, e, d, N * 4), 0);
	assert_int_equal(dev_scale(p->qo, d, 3.0f, N), 0);
	for (int i = 0; i < N; i++)
		want[i] = x[i] * 2.0f;
	float *got = down(p, e, N);
	near(got, want, N, 0.0f, 0.0f, "memcpy");
	free(got);
	float *h = malloc(N * sizeof(float));
	assert_int_equal(dev_memcpy(p->qc, h, x, N * 4), 0);
	assert_memory_equal(h, x, N * 4);
	assert_int_equal(dev_memcpy(p->qo, d, d + 10, N * 4), -ST_INVAL); /* past the end */
	dev_free(p->ocl, d);
	free(h);
	free(x);
	free(want);
}

/* Sizes the ops refuse, and an address range past the allocation. */
static void test_refused(void **state)
{
	struct pair *p = *state;
	float *d = dev_alloc(p->ocl, 64 * sizeof(float));
	int32_t out[2];
	assert_int_equal(dev_rms_norm(p->qo, d, NULL, d, 1, 0, 1e-6f), -ST_INVAL);
	assert_int_equal(dev_softmax(p->qo, d, 1, 0), -ST_INVAL);
	assert_int_equal(dev_argmax(p->qo, d, 1, 0, out), -ST_INVAL);
	assert_int_equal(dev_softcap(p->qo, d, 4, 0.0f), -ST_INVAL);
	assert_int_equal(dev_glu(p->qo, (enum dev_glu)7, d, d, 4), -ST_INVAL);
	assert_int_equal(dev_add(p->qo, d, d + 32, 64), -ST_INVAL); /* x runs past the end */
	assert_int_equal(dev_scale(p->qo, d, 2.0f, 0), 0);	     /* nothing to do */
	dev_free(p->ocl, d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_norms),
		cmocka_unit_test(test_elementwise),
		cmocka_unit_test(test_softmax_argmax),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_kv_store),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_attention_full),
		cmocka_unit_test(test_attention_ct2),
		cmocka_unit_test(test_attention_kv16),
		cmocka_unit_test(test_memcpy),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
