/* tests/unit/kernels/test_attn.c - kn_attention, kn_attention_window,
 * kn_rope_angles/kn_rope_apply, kn_conv1d, kn_gemm and kn_linear against naive loops in double
 * precision.
 *
 * Attention runs once under every kn_ops table the CPU supports (its
 * softmax comes from kn_ops()), with several head counts and widths, with
 * and without the causal mask, q_pos0 > 0 (decoding with a KV cache) and
 * row strides wider than the data. Outputs are surrounded by sentinels
 * that must survive. Tolerances are stated at each check. And
 * kn_attention_window's rows the same bits however a prompt is cut.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_half.h"
#include "tests/unit/kernels/kn_test_half.h"
#include "tests/unit/kernels/kn_test_rng.h"

#define SENTINEL 12345.0f

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rng_uniform(float lo, float hi)
{
	uint64_t z = kn_test_splitmix64(&rng_state);
	return lo + (hi - lo) * (float)((double)(z >> 40) / (double)(1ull << 24));
}

static float *rand_new(size_t n, float lo, float hi)
{
	float *x = malloc((n ? n : 1) * sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = rng_uniform(lo, hi);
	return x;
}

static float *fill_new(size_t n, float v)
{
	float *x = malloc((n ? n : 1) * sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = v;
	return x;
}

/* ---- attention ---------------------------------------------------------- */

struct attn_case {
	size_t n_q, n_kv, n_heads, head_dim;
	bool causal;
	size_t q_pos0;
	size_t extra; /* added to every row stride */
};

/* out[i, h*hd + d] in double, straight from the definition. */
static void attn_naive(const struct attn_case *c, const float *q, size_t ldq, const float *k,
		       size_t ldk, const float *v, size_t ldv, double *out)
{
	size_t hd = c->head_dim, width = c->n_heads * hd;
	double *p = malloc(c->n_kv * sizeof(*p));
	assert_non_null(p);
	for (size_t h = 0; h < c->n_heads; h++)
		for (size_t i = 0; i < c->n_q; i++) {
			size_t last = c->causal ? c->q_pos0 + i : c->n_kv - 1;
			double max = -INFINITY, sum = 0.0;
			for (size_t j = 0; j <= last; j++) {
				double s = 0.0;
				for (size_t d = 0; d < hd; d++)
					s += (double)q[i * ldq + h * hd + d] *
					     k[j * ldk + h * hd + d];
				p[j] = s / sqrt((double)hd);
				max = p[j] > max ? p[j] : max;
			}
			for (size_t j = 0; j <= last; j++)
				sum += p[j] = exp(p[j] - max);
			for (size_t d = 0; d < hd; d++) {
				double o = 0.0;
				for (size_t j = 0; j <= last; j++)
					o += p[j] / sum * v[j * ldv + h * hd + d];
				out[i * width + h * hd + d] = o;
			}
		}
	free(p);
}

/* Tolerance: max |out - naive| <= 2e-6 (v in [-1, 1], so outputs are
 * O(1)); the padding between rows keeps its sentinel. Returns max error. */
static double attn_check(const struct attn_case *c)
{
	size_t width = c->n_heads * c->head_dim, ld = width + c->extra;
	float *q = rand_new(c->n_q * ld, -1.0f, 1.0f), *k = rand_new(c->n_kv * ld, -1.0f, 1.0f);
	float *v = rand_new(c->n_kv * ld, -1.0f, 1.0f), *out = fill_new(c->n_q * ld, SENTINEL);
	float *scratch = fill_new(c->n_q * c->n_kv, NAN);
	double *want = malloc((c->n_q * width + 1) * sizeof(*want)), worst = 0.0;
	assert_non_null(want);
	kn_attention(c->n_q, c->n_kv, c->n_heads, c->head_dim, q, ld, k, ld, v, ld, out, ld,
		     c->causal, c->q_pos0, scratch);
	attn_naive(c, q, ld, k, ld, v, ld, want);
	for (size_t i = 0; i < c->n_q; i++) {
		for (size_t j = 0; j < width; j++) {
			double e = fabs(out[i * ld + j] - want[i * width + j]);
			worst = e > worst || isnan(e) ? e : worst;
		}
		for (size_t j = width; j < ld; j++)
			assert_true(out[i * ld + j] == SENTINEL);
	}
	free(q);
	free(k);
	free(v);
	free(out);
	free(scratch);
	free(want);
	return worst;
}

static void test_attention(void **state)
{
	(void)state;
	static const struct attn_case cases[] = {
		{1, 1, 1, 1, false, 0, 0},    {1, 1, 1, 1, true, 0, 0},
		{5, 5, 2, 8, true, 0, 3},     {7, 13, 3, 16, false, 0, 1},
		{4, 11, 6, 64, true, 7, 5},   {1, 37, 4, 32, true, 36, 2},
		{33, 33, 6, 64, false, 0, 0}, {17, 40, 2, 24, true, 10, 7},
		{9, 9, 1, 7, true, 0, 1},     {65, 100, 6, 64, false, 0, 16},
	};
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		if (!kn_ops_for((enum kn_isa)isa))
			continue;
		const struct kn_ops *ops = kn_init((enum kn_isa)isa);
		double worst = 0.0;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			double e = attn_check(&cases[i]);
			if (!(e <= 2e-6))
				fail_msg("attention case %zu (%s): error %g", i, ops->name, e);
			worst = e > worst ? e : worst;
		}
		printf("[ kn ] attention %-6s max |err| %.3g (tol 2e-6)\n", ops->name, worst);
	}
	kn_init(KN_ISA_COUNT);
}

/* ---- sliding-window attention ---------------------------------------------- */

struct win_case {
	size_t n_q, n_kv, n_heads, head_dim;
	size_t q_pos0, window; /* window 0: causal, no window */
	float scale;
	size_t extra; /* q, k, v, out strides: width + extra, +2 extra, +3 extra, +extra+1 */
	float softcap; /* 0: none */
};

/* First key position query position p sees (kn_attn.h's rule). */
static size_t win_lo(size_t p, size_t window)
{
	return window && p + 1 > window ? p + 1 - window : 0;
}

/* out[i, h*hd + d] in double over keys [win_lo(p), p], p = q_pos0 + i. */
static void win_naive(const struct win_case *c, const float *q, size_t ldq, const float *k,
		      size_t ldk, const float *v, size_t ldv, double *out)
{
	size_t hd = c->head_dim, width = c->n_heads * hd;
	double *p = malloc((c->n_kv + 1) * sizeof(*p));
	assert_non_null(p);
	for (size_t h = 0; h < c->n_heads; h++)
		for (size_t i = 0; i < c->n_q; i++) {
			size_t last = c->q_pos0 + i, first = win_lo(last, c->window);
			double max = -INFINITY, sum = 0.0;
			for (size_t j = first; j <= last; j++) {
				double s = 0.0;
				for (size_t d = 0; d < hd; d++)
					s += (double)q[i * ldq + h * hd + d] *
					     k[j * ldk + h * hd + d];
				p[j] = s * c->scale;
				if (c->softcap > 0.0f)
					p[j] = c->softcap * tanh(p[j] / c->softcap);
				max = p[j] > max ? p[j] : max;
			}
			for (size_t j = first; j <= last; j++)
				sum += p[j] = exp(p[j] - max);
			for (size_t d = 0; d < hd; d++) {
				double o = 0.0;
				for (size_t j = first; j <= last; j++)
					o += p[j] / sum * v[j * ldv + h * hd + d];
				out[i * width + h * hd + d] = o;
			}
		}
	free(p);
}

/* x rounded to binary16 in place; the bits (n of them) returned. */
static uint16_t *to_f16(float *x, size_t n)
{
	uint16_t *h = kn_test_f16_new(x, n);
	for (size_t i = 0; i < n; i++)
		x[i] = kn_f16_to_f32(h[i]);
	return h;
}

/* Tolerance: max |out - naive| <= 2e-6 (v in [-1, 1]: outputs O(1)); the
 * padding of out keeps its sentinel; scratch is exactly n_q * n_kv NaNs
 * (ASan catches more, the GEMM's beta = 0 must ignore the NaNs), plus the
 * widened chunk for kn_attention_window_f16 (f16: keys and values rounded
 * to binary16 first, the naive sums over those values). */
static double win_check(const struct win_case *c, bool f16)
{
	size_t width = c->n_heads * c->head_dim, e = c->extra;
	size_t ldq = width + e, ldk = width + 2 * e, ldv = width + 3 * e, ldo = width + e + 1;
	float *q = rand_new(c->n_q * ldq, -1.0f, 1.0f), *k = rand_new(c->n_kv * ldk, -1.0f, 1.0f);
	float *v = rand_new(c->n_kv * ldv, -1.0f, 1.0f), *out = fill_new(c->n_q * ldo, SENTINEL);
	float *scratch = fill_new(c->n_q * c->n_kv + (f16 ? KN_WIN16_CHUNK * c->head_dim : 0), NAN);
	double *want = malloc((c->n_q * width + 1) * sizeof(*want)), worst = 0.0;
	assert_non_null(want);
	if (f16) {
		uint16_t *k16 = to_f16(k, c->n_kv * ldk), *v16 = to_f16(v, c->n_kv * ldv);
		kn_attention_window_f16(c->n_q, c->n_kv, c->n_heads, c->head_dim, q, ldq, k16, ldk,
					v16, ldv, out, ldo, c->q_pos0, c->window, c->scale,
					c->softcap, scratch);
		free(k16);
		free(v16);
	} else {
		kn_attention_window(c->n_q, c->n_kv, c->n_heads, c->head_dim, q, ldq, k, ldk, v,
				    ldv, out, ldo, c->q_pos0, c->window, c->scale, c->softcap,
				    scratch);
	}
	win_naive(c, q, ldq, k, ldk, v, ldv, want);
	for (size_t i = 0; i < c->n_q; i++) {
		for (size_t j = 0; j < width; j++) {
			double d = fabs(out[i * ldo + j] - want[i * width + j]);
			worst = d > worst || isnan(d) ? d : worst;
		}
		for (size_t j = width; j < ldo; j++)
			assert_true(out[i * ldo + j] == SENTINEL);
	}
	free(q);
	free(k);
	free(v);
	free(out);
	free(scratch);
	free(want);
	return worst;
}

/* Case c of the grid: window {0, 1, 4, 512} x q_pos0 {0, window + 23}
 * x n_q {1, 9}; head_dim 64/256 and 1, 2 or 4 heads rotate through it;
 * odd cases have 5 keys past the last query (never visible) and the
 * scale 1/sqrt(head_dim), even ones 0.7 times that. */
static struct win_case win_grid(size_t c)
{
	static const size_t windows[] = {0, 1, 4, 512}, heads[] = {1, 2, 4};
	struct win_case w = {0};
	w.window = windows[c / 4];
	w.q_pos0 = (c & 2) ? (w.window ? w.window : 300) + 23 : 0;
	w.n_q = (c & 1) ? 9 : 1;
	w.head_dim = (c / 2 + c / 4) % 2 ? 256 : 64;
	w.n_heads = heads[c % 3];
	w.n_kv = w.q_pos0 + w.n_q + ((c & 1) ? 5 : 0);
	w.scale = (float)((c & 1 ? 1.0 : 0.7) / sqrt((double)w.head_dim));
	w.extra = c % 4 + 1;
	return w;
}

static void test_attention_window(void **state)
{
	(void)state;
	/* beyond the grid: prefill blocks of many rows (several GEMM blocks,
	 * the last one partial), and a window wider than every position */
	static const struct win_case more[] = {
		{100, 100, 2, 64, 0, 4, 0.125f, 1, 0.0f}, {100, 157, 2, 64, 50, 40, 0.125f, 3, 0.0f},
		{70, 80, 3, 32, 10, 0, 0.2f, 2, 0.0f},    {33, 40, 1, 16, 7, 1000, 0.25f, 1, 0.0f},
		{64, 64, 2, 64, 0, 32, 0.125f, 0, 0.0f},
		/* gemma2's score cap, tight enough to matter (scores up to ~8) */
		{40, 50, 2, 64, 10, 0, 1.0f, 1, 2.0f}, {9, 30, 1, 32, 21, 4, 1.0f, 2, 50.0f},
	};
	size_t n_grid = 16, n_more = sizeof(more) / sizeof(more[0]);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		if (!kn_ops_for((enum kn_isa)isa))
			continue;
		const struct kn_ops *ops = kn_init((enum kn_isa)isa);
		for (int f16 = 0; f16 < 2; f16++) {
			double worst = 0.0;
			for (size_t i = 0; i < n_grid + n_more; i++) {
				struct win_case c = i < n_grid ? win_grid(i) : more[i - n_grid];
				double e = win_check(&c, f16);
				if (!(e <= 2e-6))
					fail_msg("attention_window%s case %zu (%s): error %g",
						 f16 ? "_f16" : "", i, ops->name, e);
				worst = e > worst ? e : worst;
			}
			printf("[ kn ] attention_window%-4s %-6s max |err| %.3g (tol 2e-6)\n",
			       f16 ? "_f16" : "", ops->name, worst);
		}
	}
	kn_init(KN_ISA_COUNT);
}

/* ---- rope --------------------------------------------------------------- */

struct rope_case {
	size_t n_tok, n_head, head_dim, n_rot, extra; /* ld = n_head*head_dim + extra */
	float base, freq_scale;
	bool neox;
	bool factors; /* per-pair frequency factors 1 + j % 7 (llama 3's rope_freqs) */
};

/* kn_rope_angles then kn_rope_apply, as the engine calls them. */
static void rope(float *x, size_t n_tok, size_t ld, size_t n_head, size_t head_dim, size_t n_rot,
		 const int32_t *pos, float base, float freq_scale, const float *factors, bool neox)
{
	float *cs = malloc((n_tok * n_rot + 1) * sizeof(*cs));
	assert_non_null(cs);
	kn_rope_angles(cs, n_tok, n_rot, pos, base, freq_scale, factors);
	kn_rope_apply(x, n_tok, ld, n_head, head_dim, n_rot, cs, neox);
	free(cs);
}

/* Tolerance: |x' - naive| <= 4e-7 (|x0| + |x1|) per rotated dim (float
 * cos/sin and one float multiply-add of the pair, against double);
 * dims n_rot.. of each head, the row padding and every token at
 * position 0 keep their bits. Positions: 0, 5000 and random in between. */
static double rope_check(const struct rope_case *c)
{
	size_t ld = c->n_head * c->head_dim + c->extra, n = c->n_tok * ld, half = c->n_rot / 2;
	float *x = rand_new(n, -2.0f, 2.0f), *x0 = malloc((n + 1) * sizeof(*x0));
	int32_t *pos = malloc((c->n_tok + 1) * sizeof(*pos));
	assert_true(x0 && pos);
	for (size_t t = 0; t < c->n_tok; t++)
		pos[t] = t == 0 ? 0 : t == 1 ? 5000 : (int32_t)rng_uniform(0.0f, 5000.0f);
	memcpy(x0, x, n * sizeof(*x));
	float ff[256];
	for (size_t j = 0; j < half && j < 256; j++)
		ff[j] = (float)(1 + j % 7);
	rope(x, c->n_tok, ld, c->n_head, c->head_dim, c->n_rot, pos, c->base, c->freq_scale,
	     c->factors ? ff : NULL, c->neox);
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		size_t t = i / ld, col = i % ld, h = col / c->head_dim, d = col % c->head_dim;
		if (col >= c->n_head * c->head_dim || d >= c->n_rot || pos[t] == 0) {
			assert_true(memcmp(&x[i], &x0[i], sizeof(*x)) == 0);
			continue;
		}
		size_t j = c->neox ? d % half : d / 2; /* pair index */
		bool second = c->neox ? d >= half : d % 2;
		size_t ia = t * ld + h * c->head_dim + (c->neox ? j : 2 * j);
		size_t ib = ia + (c->neox ? half : 1);
		double theta = (double)pos[t] * c->freq_scale *
			       pow((double)c->base, -2.0 * (double)j / (double)c->n_rot) /
			       (c->factors ? (double)ff[j] : 1.0);
		double a = x0[ia], b = x0[ib];
		double want =
			second ? a * sin(theta) + b * cos(theta) : a * cos(theta) - b * sin(theta);
		double e = fabs(x[i] - want) / (4e-7 * (fabs(a) + fabs(b)));
		worst = e > worst || isnan(e) ? e : worst;
	}
	free(x);
	free(x0);
	free(pos);
	return worst;
}

/* A prompt cut between forward chunks: kn_attention_window(_f16) over
 * rows [0, n) in one call, and over [0, cut) then [cut, n) (q_pos0 =
 * cut, the keys of both pieces), give the same bits at every cut,
 * float32 and binary16 cache, with and without a window, under the AVX2
 * and AVX-512 tables (our GEMM kernels; a lone row's scores took another
 * summation order before). Not the reference table: its GEMM is
 * OpenBLAS's, whose row tails sum in other orders. */
static void window_rows(bool f16, size_t n_q, size_t n_kv, const float *q, const float *k,
			const float *v, const uint16_t *k16, const uint16_t *v16, size_t ld,
			float *out, size_t q_pos0, size_t win, float *scratch)
{
	enum { HD = 64, NH = 2 };
	if (f16)
		kn_attention_window_f16(n_q, n_kv, NH, HD, q, ld, k16, ld, v16, ld, out, ld, q_pos0,
					win, 0.125f, 0.0f, scratch);
	else
		kn_attention_window(n_q, n_kv, NH, HD, q, ld, k, ld, v, ld, out, ld, q_pos0, win,
				    0.125f, 0.0f, scratch);
}

/* Every cut (every step-th) of n rows, window win, under every SIMD table. */
static void window_cuts(size_t N, size_t window, size_t step)
{
	enum { HD = 64, NH = 2 };
	size_t ld = NH * HD;
	float *q = rand_new(N * ld, -1.0f, 1.0f), *k = rand_new(N * ld, -1.0f, 1.0f);
	float *v = rand_new(N * ld, -1.0f, 1.0f), *whole = fill_new(N * ld, 0.0f);
	float *cut = fill_new(N * ld, 0.0f);
	float *scratch = fill_new(N * N + KN_WIN16_CHUNK * HD, 0.0f);
	uint16_t *k16 = kn_test_f16_new(k, N * ld), *v16 = kn_test_f16_new(v, N * ld);
	size_t windows[] = { 0, window };
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		if (isa == KN_ISA_REF || !kn_ops_for((enum kn_isa)isa))
			continue;
		kn_init((enum kn_isa)isa);
		for (int variant = 0; variant < 4; variant++) {
			bool f16 = variant & 1;
			size_t win = windows[variant >> 1];
			window_rows(f16, N, N, q, k, v, k16, v16, ld, whole, 0, win, scratch);
			for (size_t c = 1; c < N; c += step) {
				window_rows(f16, c, c, q, k, v, k16, v16, ld, cut, 0, win, scratch);
				window_rows(f16, N - c, N, q + c * ld, k, v, k16, v16, ld, cut + c * ld,
					    c, win, scratch);
				assert_memory_equal(cut, whole, N * ld * sizeof(float));
			}
		}
	}
	kn_init(KN_ISA_COUNT);
	free(q);
	free(k);
	free(v);
	free(k16);
	free(v16);
	free(whole);
	free(cut);
	free(scratch);
}

/* A window wider than a block of rows' minimum (Gemma 3's 512) too, with
 * cuts before, inside and past its reach: the values' sums met the keys in
 * other blocks of the GEMM's K when a cut moved the first key a block of
 * rows sees (1e-8 apart, enough to flip a near tie in a long prompt). */
static void test_attention_window_cut(void **state)
{
	(void)state;
	window_cuts(40, 7, 1);
	window_cuts(600, 512, 37);
}

static void test_rope(void **state)
{
	(void)state;
	static const struct rope_case cases[] = {
		{7, 3, 64, 64, 0, 10000.0f, 1.0f, false, false},
		{7, 3, 64, 64, 5, 10000.0f, 1.0f, true, false},
		{5, 2, 128, 64, 3, 1e6f, 1.0f, false, false},
		{5, 2, 128, 64, 3, 1e6f, 1.0f, true, false},
		{9, 4, 256, 256, 0, 1e6f, 1.0f, true, false},
		{9, 4, 256, 256, 1, 10000.0f, 1.0f, false, false},
		{6, 2, 96, 32, 1, 10000.0f, 0.25f, true, false},
		{6, 2, 96, 32, 1, 10000.0f, 0.25f, false, false},
		{3, 1, 2, 2, 0, 10000.0f, 1.0f, false, false},
		{3, 2, 16, 0, 2, 10000.0f, 1.0f, true, false},
		{64, 8, 128, 128, 0, 500000.0f, 1.0f, false, false},
		{6, 2, 96, 64, 1, 500000.0f, 1.0f, false, true},
		{6, 2, 96, 64, 1, 10000.0f, 0.5f, true, true},
	};
	double worst = 0.0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double e = rope_check(&cases[i]);
		if (!(e <= 1.0))
			fail_msg("rope case %zu: error / tolerance %g", i, e);
		worst = e > worst ? e : worst;
	}
	printf("[ kn ] rope worst error / tolerance %.3g (tol 4e-7 (|x0| + |x1|))\n", worst);

	/* position 0 is the identity, bit for bit, in both layouts */
	float x[2 * 64 + 3], x0[2 * 64 + 3];
	int32_t zero = 0;
	for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
		x[i] = x0[i] = rng_uniform(-100.0f, 100.0f);
	rope(x, 1, 2 * 64 + 3, 2, 64, 64, &zero, 10000.0f, 1.0f, NULL, false);
	rope(x, 1, 2 * 64 + 3, 2, 64, 48, &zero, 1e6f, 0.5f, NULL, true);
	assert_memory_equal(x, x0, sizeof(x));
}

/* ---- conv1d ------------------------------------------------------------- */

struct conv_case {
	size_t t_in, c_in, c_out, k, stride, pad;
	bool bias;
};

/* Tolerance: |y - naive| <= 1e-5 (1 + sum |w x|). Returns the worst
 * normalised error. */
static double conv_check(const struct conv_case *c)
{
	size_t t_out = kn_conv1d_out_len(c->t_in, c->k, c->stride, c->pad);
	size_t kw = c->c_in * c->k;
	float *x = rand_new(c->t_in * c->c_in, -1.0f, 1.0f);
	float *w = rand_new(c->c_out * kw, -1.0f, 1.0f), *b = rand_new(c->c_out, -1.0f, 1.0f);
	float *y = fill_new(t_out * c->c_out, NAN), *scratch = fill_new(t_out * kw, NAN);
	double worst = 0.0;
	kn_conv1d(c->t_in, c->c_in, c->c_out, c->k, c->stride, c->pad, x, w, c->bias ? b : NULL, y,
		  scratch);
	for (size_t t = 0; t < t_out; t++)
		for (size_t co = 0; co < c->c_out; co++) {
			double s = c->bias ? b[co] : 0.0, mag = 1.0;
			for (size_t ci = 0; ci < c->c_in; ci++)
				for (size_t kk = 0; kk < c->k; kk++) {
					long pos = (long)(t * c->stride + kk) - (long)c->pad;
					if (pos < 0 || pos >= (long)c->t_in)
						continue;
					double term = (double)w[co * kw + ci * c->k + kk] *
						      x[(size_t)pos * c->c_in + ci];
					s += term;
					mag += fabs(term);
				}
			double e = fabs(y[t * c->c_out + co] - s) / (1e-5 * mag);
			worst = e > worst || isnan(e) ? e : worst;
		}
	free(x);
	free(w);
	free(b);
	free(y);
	free(scratch);
	return worst;
}

static void test_conv1d(void **state)
{
	(void)state;
	assert_int_equal(kn_conv1d_out_len(3000, 3, 1, 1), 3000);
	assert_int_equal(kn_conv1d_out_len(3000, 3, 2, 1), 1500);
	assert_int_equal(kn_conv1d_out_len(17, 3, 2, 1), 9);
	assert_int_equal(kn_conv1d_out_len(1, 3, 2, 1), 1);
	assert_int_equal(kn_conv1d_out_len(3, 3, 1, 0), 1);
	assert_int_equal(kn_conv1d_out_len(2, 3, 1, 0), 0);
	static const struct conv_case cases[] = {
		{17, 5, 7, 3, 1, 1, true},    {17, 5, 7, 3, 2, 1, true},
		{33, 4, 6, 3, 2, 1, false},   {1, 3, 2, 3, 1, 1, true},
		{1, 3, 2, 3, 2, 1, true},     {2, 3, 2, 3, 2, 1, false},
		{101, 80, 16, 3, 1, 1, true}, {99, 16, 24, 3, 2, 1, true},
		{2, 3, 4, 3, 1, 0, true}, /* t_out = 0: nothing written */
	};
	double worst = 0.0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double e = conv_check(&cases[i]);
		if (!(e <= 1.0))
			fail_msg("conv1d case %zu: error / tolerance %g", i, e);
		worst = e > worst ? e : worst;
	}
	printf("[ kn ] conv1d worst error / tolerance %.3g\n", worst);
}

/* ---- gemm and linear ---------------------------------------------------- */

struct gemm_case {
	size_t M, N, K;
	bool trans_b;
	float alpha, beta;
	size_t extra; /* added to lda, ldb and ldc */
};

/* Tolerance: |C - naive| <= 1e-5 (sum |alpha a b| + |beta c|) + 1e-30;
 * beta = 0 must ignore NaN in C; the padding keeps its sentinel. */
static double gemm_check(const struct gemm_case *c)
{
	size_t lda = c->K + c->extra, ldc = c->N + c->extra;
	size_t ldb = (c->trans_b ? c->K : c->N) + c->extra, b_rows = c->trans_b ? c->N : c->K;
	float *A = rand_new(c->M * lda, -1.0f, 1.0f), *B = rand_new(b_rows * ldb, -1.0f, 1.0f);
	float *C = rand_new(c->M * ldc, -1.0f, 1.0f), *C0 = malloc((c->M * ldc + 1) * sizeof(*C0));
	double worst = 0.0;
	assert_non_null(C0);
	for (size_t i = 0; i < c->M * ldc; i++)
		C[i] = (i % ldc >= c->N) ? SENTINEL : c->beta == 0.0f ? NAN : C[i];
	memcpy(C0, C, c->M * ldc * sizeof(*C));
	kn_gemm(c->trans_b, c->M, c->N, c->K, c->alpha, A, lda, B, ldb, c->beta, C, ldc);
	for (size_t i = 0; i < c->M; i++)
		for (size_t j = 0; j < ldc; j++) {
			if (j >= c->N) {
				assert_true(C[i * ldc + j] == SENTINEL);
				continue;
			}
			double s = 0.0, mag = 0.0;
			for (size_t p = 0; p < c->K; p++) {
				float b = c->trans_b ? B[j * ldb + p] : B[p * ldb + j];
				s += (double)c->alpha * A[i * lda + p] * b;
				mag += fabs((double)c->alpha * A[i * lda + p] * b);
			}
			if (c->beta != 0.0f) {
				s += (double)c->beta * C0[i * ldc + j];
				mag += fabs((double)c->beta * C0[i * ldc + j]);
			}
			double e = fabs(C[i * ldc + j] - s) / (1e-5 * mag + 1e-30);
			worst = e > worst || isnan(e) ? e : worst;
		}
	free(A);
	free(B);
	free(C);
	free(C0);
	return worst;
}

static void test_gemm(void **state)
{
	(void)state;
	static const struct gemm_case cases[] = {
		{1, 1, 1, false, 1.0f, 0.0f, 0},     {1, 1, 1, true, 2.0f, 0.5f, 1},
		{7, 9, 13, true, 0.25f, 0.0f, 3},    {7, 9, 13, false, 1.0f, 1.0f, 0},
		{33, 17, 65, false, -1.5f, 0.0f, 5}, {64, 64, 64, true, 1.0f, 0.0f, 0},
		{5, 3, 0, false, 1.0f, 0.5f, 2},     {5, 3, 0, true, 1.0f, 0.0f, 0},
		{0, 5, 5, false, 1.0f, 0.0f, 0},     {3, 0, 5, true, 1.0f, 0.0f, 1},
		{100, 383, 65, true, 1.0f, 0.0f, 1},
	};
	double worst = 0.0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double e = gemm_check(&cases[i]);
		if (!(e <= 1.0))
			fail_msg("gemm case %zu: error / tolerance %g", i, e);
		worst = e > worst ? e : worst;
	}
	printf("[ kn ] gemm worst error / tolerance %.3g\n", worst);
}

/* Tolerance: |y - naive| <= 1e-5 (1 + sum |x w|). */
static double linear_check(size_t M, size_t N, size_t K, bool with_bias)
{
	float *x = rand_new(M * K, -1.0f, 1.0f), *W = rand_new(N * K, -1.0f, 1.0f);
	float *bias = rand_new(N, -1.0f, 1.0f), *y = fill_new(M * N, NAN);
	double worst = 0.0;
	kn_linear(M, N, K, x, W, with_bias ? bias : NULL, y);
	for (size_t i = 0; i < M; i++)
		for (size_t j = 0; j < N; j++) {
			double s = with_bias ? bias[j] : 0.0, mag = 1.0;
			for (size_t p = 0; p < K; p++) {
				s += (double)x[i * K + p] * W[j * K + p];
				mag += fabs((double)x[i * K + p] * W[j * K + p]);
			}
			double e = fabs(y[i * N + j] - s) / (1e-5 * mag);
			worst = e > worst || isnan(e) ? e : worst;
		}
	free(x);
	free(W);
	free(bias);
	free(y);
	return worst;
}

static void test_linear(void **state)
{
	(void)state;
	double worst = 0.0;
	static const size_t shapes[][3] = {
		{1, 1, 1}, {7, 11, 13}, {1, 384, 384}, {33, 65, 17}, {4, 5, 0}};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int b = 0; b < 2; b++) {
			double e = linear_check(shapes[i][0], shapes[i][1], shapes[i][2], b);
			if (!(e <= 1.0))
				fail_msg("linear shape %zu bias %d: error / tolerance %g", i, b, e);
			worst = e > worst ? e : worst;
		}
	kn_blas_set_threads(2); /* must not disturb results */
	double e = linear_check(64, 96, 80, true);
	kn_blas_set_threads(1);
	assert_true(e <= 1.0);
	printf("[ kn ] linear worst error / tolerance %.3g\n", worst);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_window),
		cmocka_unit_test(test_attention_window_cut),
		cmocka_unit_test(test_rope),	  cmocka_unit_test(test_conv1d),
		cmocka_unit_test(test_gemm),	  cmocka_unit_test(test_linear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
