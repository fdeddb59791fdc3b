/* test_attn_dec.c - kn_attention_decode and kn_attention_decode_merge
 * (kernels/kn_attn_dec.c) against kn_attention_window(_f16), the kernel
 * they stand in for at a decode step: one query row at position p over
 * keys [lo, p] of a float32 or binary16 cache, a group of query heads per
 * KV head, with and without a window and a soft cap.
 *  - One part (at most KN_DEC_PART keys): within 2e-6 (its scores
 *    summed in another order), float32 or binary16 cache.
 *  - The parts kn_dec_part cuts (at most KN_DEC_PART keys each) merged:
 *    within float rounding of the whole (1e-5 absolute: outputs are
 *    averages of values in [-1, 1]).
 *  - The log-sum-exp kept per part is the double sum over its scores.
 *  - kn_attention_decode_parts over runs of parts: the bits of the
 *    part-by-part calls.
 * And the kn_ops kernels of the float32 path, dot_rows_g and gemv_t_g,
 * the float16 one's dot_rows_g_f16, and both's softmax_lse, on every
 * ISA.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_attn.h"
#include "kernels/kn_half.h"
#include "tests/unit/kernels/kn_test_half.h"
#include "tests/unit/kernels/kn_test_rng.h"

enum { G = 3, HD = 40, LD = 2 * HD + 5, CTX = 700 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float *rnd(size_t n, float a)
{
	float *x = malloc(n * sizeof(*x));
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = a * kn_test_uniform(&rng);
	return x;
}

/* Head h's row of kn_attention_window(_f16) for position p (the cache at
 * column 0 of the KV head). */
static void window_row(const struct kn_dec *d, size_t h, size_t p, size_t window, float *out)
{
	float *scratch = malloc(((p + 1) + KN_WIN16_CHUNK * HD) * sizeof(float));
	assert_non_null(scratch);
	if (d->k16)
		kn_attention_window_f16(1, p + 1, 1, HD, d->q + h * HD, HD, d->k16, d->ldk, d->v16,
					d->ldv, out, HD, p, window, d->scale, d->softcap, scratch);
	else
		kn_attention_window(1, p + 1, 1, HD, d->q + h * HD, HD, d->k, d->ldk, d->v, d->ldv,
				    out, HD, p, window, d->scale, d->softcap, scratch);
	free(scratch);
}

/* Every part of position p's keys, merged. */
static void decode_parts(const struct kn_dec *d, size_t p, size_t window, float *out)
{
	size_t lo = window && p + 1 > window ? p + 1 - window : 0;
	size_t np = kn_dec_parts(p + 1 - lo);
	float *parts = malloc(np * G * HD * sizeof(float)), *lse = malloc(np * G * sizeof(float));
	float *scratch = malloc(kn_attention_decode_scratch(G) * sizeof(float));
	assert_true(parts && lse && scratch);
	for (size_t i = 0; i < np; i++) {
		size_t a, b;
		kn_dec_part(p + 1 - lo, i, &a, &b);
		assert_true(b > a && b - a <= KN_DEC_PART);
		a += lo;
		b += lo;
		kn_attention_decode(d, a, b, parts + i * G * HD, lse + i * G, scratch);
		for (size_t h = 0; h < G; h++) { /* the part's weight, in double */
			float *s = malloc((b - a) * sizeof(float));
			assert_non_null(s);
			double m = -INFINITY, sum = 0.0;
			for (size_t j = a; j < b; j++) {
				float acc = 0.0f;
				for (size_t e = 0; e < HD; e++)
					acc += d->q[h * HD + e] *
					       (d->k ? d->k[j * d->ldk + e]
						     : kn_f16_to_f32(d->k16[j * d->ldk + e]));
				s[j - a] = acc * d->scale;
				if (d->softcap > 0.0f)
					s[j - a] = tanhf(s[j - a] / d->softcap) * d->softcap;
				m = s[j - a] > m ? s[j - a] : m;
			}
			for (size_t j = a; j < b; j++)
				sum += exp(s[j - a] - m);
			assert_true(fabs(lse[i * G + h] - (m + log(sum))) < 1e-3);
			free(s);
		}
	}
	/* kn_attention_decode_parts over runs of 1 .. KN_DEC_GROUP parts:
	 * the same bits as the part-by-part calls */
	float *parts2 = malloc(np * G * HD * sizeof(float)), *lse2 = malloc(np * G * sizeof(float));
	assert_true(parts2 && lse2);
	for (size_t m = 1; m <= KN_DEC_GROUP; m += 3) {
		memset(parts2, 0, np * G * HD * sizeof(float));
		for (size_t p0 = 0; p0 < np; p0 += m) {
			size_t run = np - p0 < m ? np - p0 : m;
			kn_attention_decode_parts(d, lo, p + 1 - lo, p0, run, parts2 + p0 * G * HD,
						  lse2 + p0 * G, scratch);
		}
		assert_memory_equal(parts2, parts, np * G * HD * sizeof(float));
		assert_memory_equal(lse2, lse, np * G * sizeof(float));
	}
	if (np == 1)
		memcpy(out, parts, G * HD * sizeof(float));
	else
		kn_attention_decode_merge(G, HD, np, parts, lse, out);
	free(parts);
	free(lse);
	free(parts2);
	free(lse2);
	free(scratch);
}

static void test_decode(void **state)
{
	(void)state;
	float *q = rnd(G * HD, 1.0f), *k = rnd(CTX * LD, 1.0f), *v = rnd(CTX * LD, 1.0f);
	uint16_t *k16 = kn_test_f16_new(k, CTX * LD), *v16 = kn_test_f16_new(v, CTX * LD);
	static const size_t pos[] = { 0, 7, 255, 256, 300, 511, 699 };
	float got[G * HD], want[HD];
	for (int variant = 0; variant < 8; variant++) {
		int f16 = variant & 1;
		size_t window = variant & 2 ? 300 : 0;
		struct kn_dec d = { .g = G, .head_dim = HD, .q = q, .ldk = LD, .ldv = LD,
				    .scale = 0.2f, .softcap = variant & 4 ? 4.0f : 0.0f };
		if (f16)
			d.k16 = k16, d.v16 = v16;
		else
			d.k = k, d.v = v;
		for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
			size_t p = pos[i], lo = window && p + 1 > window ? p + 1 - window : 0;
			decode_parts(&d, p, window, got);
			for (size_t h = 0; h < G; h++) {
				window_row(&d, h, p, window, want);
				float tol = p + 1 - lo <= KN_DEC_PART ? 2e-6f : 1e-5f;
				for (size_t e = 0; e < HD; e++)
					assert_true(fabsf(got[h * HD + e] - want[e]) < tol);
			}
		}
	}
	free(q);
	free(k);
	free(v);
	free(k16);
	free(v16);
}

/* *e = sum of a[i sa] b[i sb] over i < n in double, *mag = the sum of
 * the terms' magnitudes. */
static void dsum(const float *a, size_t sa, const float *b, size_t sb, size_t n, double *e,
		 double *mag)
{
	*e = *mag = 0.0;
	for (size_t i = 0; i < n; i++) {
		double t = (double)a[i * sa] * b[i * sb];
		*e += t;
		*mag += fabs(t);
	}
}

/* kn_ops dot_rows_g of every ISA: g = 1 .. 7 rows of x (passes of 3 and
 * what is left) against n rows of k (a masked tail, head widths 64 and
 * 256), all at odd strides; each y within dot's tolerance of the double
 * dot times alpha (1e-6 of the sum of |x b|), and y's gaps untouched;
 * widths from DR_SEQ_K (128) take the rows one after the other. */
static void test_dot_rows_g(void **state)
{
	(void)state;
	static const size_t ns[] = { 1, 3, 4, 5, 37, 128 }, ks[] = { 9, 64, 70, 133, 256 };
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t a = 0; ops && a < sizeof(ns) / sizeof(ns[0]); a++)
			for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
				for (size_t g = 1; g <= 7; g++) {
					size_t n = ns[a], k = ks[b], ldx = k + 1, ldb = k + 3, ldy = n + 2;
					float *x = rnd(g * ldx, 1.0f), *B = rnd(n * ldb, 1.0f);
					float *y = malloc(g * ldy * sizeof(float));
					assert_non_null(y);
					for (size_t i = 0; i < g * ldy; i++)
						y[i] = -7.0f;
					ops->dot_rows_g(x, ldx, g, B, ldb, n, k, 0.125f, y, ldy);
					for (size_t h = 0; h < g; h++) {
						for (size_t i = 0; i < n; i++) {
							double e, mag;
							dsum(x + h * ldx, 1, B + i * ldb, 1, k, &e, &mag);
							assert_true(fabs(y[h * ldy + i] - 0.125 * e) <=
								    0.125 * 1e-6 * mag + 1e-30);
						}
						for (size_t i = n; i < ldy; i++)
							assert_true(y[h * ldy + i] == -7.0f);
					}
					free(x);
					free(B);
					free(y);
				}
	}
}

/* kn_ops gemv_t_g of every ISA: g = 1 .. 7 rows of weights over n rows
 * of B of k columns (chunk edges and masked tails of both forms: 9, 33,
 * 40, 64, 70, 100, 128, 256; blocks of 32 rows whole and not), odd
 * strides; the reference's bits (each element's FMA chain over the rows
 * in order), the reference within float rounding of double sums, and
 * y's gaps untouched. */
static void test_gemv_t_g(void **state)
{
	(void)state;
	static const size_t ns[] = { 1, 3, 37, 128 },
			    ks[] = { 9, 33, 40, 64, 70, 100, 128, 256 };
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
			for (size_t g = 1; g <= 7; g++) {
				size_t n = ns[a], k = ks[b], ldp = n + 1, ldb = k + 3, ldy = k + 5;
				float *p = rnd(g * ldp, 1.0f), *B = rnd(n * ldb, 1.0f);
				float *want = malloc(g * ldy * sizeof(float));
				float *got = malloc(g * ldy * sizeof(float));
				assert_true(want && got);
				ref->gemv_t_g(p, ldp, g, B, ldb, n, k, want, ldy);
				for (size_t h = 0; h < g; h++)
					for (size_t j = 0; j < k; j++) {
						double e, mag;
						dsum(p + h * ldp, 1, B + j, ldb, n, &e, &mag);
						assert_true(fabs(want[h * ldy + j] - e) <=
							    (double)n * 1.2e-7 * mag + 1e-30);
					}
				for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
					const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
					if (!ops)
						continue;
					for (size_t i = 0; i < g * ldy; i++)
						got[i] = -7.0f;
					ops->gemv_t_g(p, ldp, g, B, ldb, n, k, got, ldy);
					for (size_t h = 0; h < g; h++) {
						assert_memory_equal(got + h * ldy, want + h * ldy,
								    k * sizeof(float));
						for (size_t j = k; j < ldy; j++)
							assert_true(got[h * ldy + j] == -7.0f);
					}
				}
				free(p);
				free(B);
				free(want);
				free(got);
			}
}

/* kn_ops dot_rows_g_f16 of every ISA (the float16 cache's scores): g =
 * 1 .. 7 rows of x against n rows of binary16 W of k columns (rows in
 * fours and what is left, chunk edges and tails: 9, 40, 64, 70, 133,
 * 256), odd strides; row h the bits of the same table's gemv_f16 of x's
 * row h, and y's gaps untouched. */
static void test_dot_rows_g_f16(void **state)
{
	(void)state;
	static const size_t ns[] = { 1, 3, 4, 5, 37, 128 }, ks[] = { 9, 40, 64, 70, 133, 256 };
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t a = 0; ops && a < sizeof(ns) / sizeof(ns[0]); a++)
			for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++)
				for (size_t g = 1; g <= 7; g++) {
					size_t n = ns[a], k = ks[b], ldw = k + 3, ldx = k + 1, ldy = n + 2;
					float *x = rnd(g * ldx, 1.0f), *wf = rnd(n * ldw, 1.0f);
					uint16_t *w = kn_test_f16_new(wf, n * ldw);
					float *want = malloc(n * sizeof(float));
					float *got = malloc(g * ldy * sizeof(float));
					assert_true(want && got);
					for (size_t i = 0; i < g * ldy; i++)
						got[i] = -7.0f;
					ops->dot_rows_g_f16(x, ldx, g, w, ldw, n, k, got, ldy);
					for (size_t h = 0; h < g; h++) {
						ops->gemv_f16(w, ldw, x + h * ldx, want, n, k);
						assert_memory_equal(got + h * ldy, want, n * sizeof(float));
						for (size_t i = n; i < ldy; i++)
							assert_true(got[h * ldy + i] == -7.0f);
					}
					free(x);
					free(wf);
					free(w);
					free(want);
					free(got);
				}
	}
}

/* kn_ops softmax_lse (a decode part's weights and log-sum-exp): the
 * reference against double sums (weights within 1e-6 relative, the lse
 * within 1e-5), every ISA within 1e-6 relative of the reference's
 * weights and 1e-5 of its lse, at lengths around the vector widths and
 * a part's (1 .. 133), and the float after the row untouched (the masked
 * tails). */
static void test_softmax_lse(void **state)
{
	(void)state;
	static const size_t ns[] = { 1, 2, 5, 7, 8, 9, 15, 16, 17, 31, 33, 120, 128, 133 };
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		size_t n = ns[a];
		float *x = rnd(n, 8.0f), *want = malloc((n + 1) * sizeof(float));
		float *got = malloc((n + 1) * sizeof(float));
		assert_true(want && got);
		double m = -INFINITY, sum = 0.0;
		for (size_t i = 0; i < n; i++)
			m = x[i] > m ? x[i] : m;
		for (size_t i = 0; i < n; i++)
			sum += exp((double)x[i] - m);
		memcpy(want, x, n * sizeof(float));
		float lse = ref->softmax_lse(want, n);
		assert_true(fabs(lse - (m + log(sum))) < 1e-5);
		for (size_t i = 0; i < n; i++) {
			double e = exp((double)x[i] - m) / sum;
			assert_true(fabs(want[i] - e) <= 1e-6 * e + 1e-30);
		}
		for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
			const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
			if (!ops)
				continue;
			memcpy(got, x, n * sizeof(float));
			got[n] = -7.0f;
			float l = ops->softmax_lse(got, n);
			assert_true(fabsf(l - lse) < 1e-5f);
			for (size_t i = 0; i < n; i++)
				assert_true(fabsf(got[i] - want[i]) <= 1e-6f * want[i]);
			assert_true(got[n] == -7.0f);
		}
		free(x);
		free(want);
		free(got);
	}
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_decode),
					    cmocka_unit_test(test_dot_rows_g),
					    cmocka_unit_test(test_gemv_t_g),
					    cmocka_unit_test(test_dot_rows_g_f16),
					    cmocka_unit_test(test_softmax_lse) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
