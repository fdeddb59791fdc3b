/* tests/unit/kernels/test_bf16.c - the bfloat16 product (kn_bf16.h):
 *   - kn_f32_to_bf16 (kn_half.h, the rounding the products use) against hand-worked bit patterns (ties to even,
 *     carries into the exponent, signs, infinity, NaN);
 *   - packing: every (n, k) of W lands where kn__bf16_packed_at reads it,
 *     the padding is zero;
 *   - the AVX-512 packers (rows and columns of a strided operand) against
 *     the scalar packer bit for bit, over edges of 16 / 32 and values that
 *     round to even, carry, or are infinite or NaN;
 *   - the scalar reference against a product computed here in double
 *     from the rounded inputs;
 *   - each product the CPU has (AMX TDPBF16PS, AVX512-BF16 VDPBF16PS: the
 *     float32 kn_bf16_linear and, on the same rows rounded here,
 *     kn_bf16_linear_b16) against the reference over shapes on both sides
 *     of every tile edge (M around 8 / 16 / 32, N around 16 / 32, K around 32,
 *     the Whisper shapes), with bias and without, strided x and y: the two
 *     sum the same exact products, so they differ only by float32
 *     rounding of the sums, at most K * 2^-24 * sum |x_k w_k| (+ the last
 *     rounding) per element. Columns of y past N are left as they were.
 *   - kn_attention_bf16 (with each product) against the float32
 *     kn_attention: every output
 *     within 2^-6 of the largest |v| (inputs and probabilities carry
 *     bfloat16's 2^-9 relative rounding; softmax weights sum to 1).
 *   - every kn_ops table's gemv_t_bf16 and gemv_t_f16 (a float32 row
 *     vector times a bfloat16 / binary16 matrix) against double sums of
 *     the same products, within float32 summation's bound (terms + 2)
 *     2^-24 sum |terms|;
 *   - kn_bf16_from_f32 / kn_bf16_from_f32_t (plain and transposed) against
 *     kn_f32_to_bf16 per element;
 *   - kn_kv16_pack's layout element by element (kn_kv16_pack_heads over
 *     two head ranges: the same bytes), and kn_attention_kv16
 *     over it against the float32 kn_attention over keys and values that
 *     are exactly those bfloat16 values: within 1e-5; and each head's
 *     scores before the softmax (kn_attention_scores_kv16 and
 *     kn_attention_scores, the word alignment's) against double sums.
 * The product checks run for each of the two kernels the CPU has
 * (kn__bf16_use); a CPU with neither runs none (kn_bf16_ok false, and the
 * compute types are refused: tests/integration/test_compute_types.py).
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
#include "kernels/kn_bf16.h"
#include "kernels/kn_bf16_int.h"
#include "kernels/kn_half.h"
#include "tests/unit/kernels/kn_test_rng.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rng_uniform(void)
{
	return kn_test_uniform(&rng_state);
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static double bf16_value(uint16_t h)
{
	return (double)from_bits((uint32_t)h << 16);
}

static void test_round(void **state)
{
	(void)state;
	assert_int_equal(kn_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(kn_f32_to_bf16(-2.0f), 0xc000);
	assert_int_equal(kn_f32_to_bf16(0.0f), 0x0000);
	/* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1) */
	assert_int_equal(kn_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
	/* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up */
	assert_int_equal(kn_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
	/* just above halfway rounds up, just below down */
	assert_int_equal(kn_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
	assert_int_equal(kn_f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
	/* the largest mantissa carries into the exponent: 2 - 2^-23 -> 2 */
	assert_int_equal(kn_f32_to_bf16(from_bits(0x3fffffffu)), 0x4000);
	assert_int_equal(kn_f32_to_bf16(INFINITY), 0x7f80);
	assert_int_equal(kn_f32_to_bf16(-INFINITY), 0xff80);
	uint16_t nan = kn_f32_to_bf16(NAN);
	assert_true((nan & 0x7f80) == 0x7f80 && (nan & 0x7f) != 0);
}

static void test_pack(void **state)
{
	(void)state;
	size_t N = 37, K = 45;
	float *W = malloc(N * K * sizeof(float));
	for (size_t i = 0; i < N * K; i++)
		W[i] = (float)(i + 1); /* exact in bfloat16 up to 256, then rounded */
	size_t len = kn_bf16_packed_len(N, K);
	assert_int_equal(len, 3 * 2 * 16 * 32); /* 48 columns, 64 k-values */
	uint16_t *p = malloc(len * sizeof(uint16_t));
	memset(p, 0xff, len * sizeof(uint16_t));
	kn_bf16_pack(W, N, K, p);
	size_t nonzero = 0;
	for (size_t i = 0; i < len; i++)
		nonzero += p[i] != 0;
	assert_int_equal(nonzero, N * K); /* the padding is zero */
	for (size_t n = 0; n < N; n++)
		for (size_t k = 0; k < K; k++)
			assert_int_equal(kn__bf16_packed_at(p, K, n, k), kn_f32_to_bf16(W[n * K + k]));
	free(W);
	free(p);
}

static void test_pack_simd(void **state)
{
	(void)state;
	if (!kn_bf16_ok())
		skip();
	static const size_t shapes[][2] = { { 1, 1 }, { 16, 32 }, { 17, 33 }, { 37, 45 },
					    { 64, 1500 }, { 1500, 64 }, { 15, 31 } };
	static const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
					    0x7f800000u, 0xff800000u, 0x7fc00001u, 0x00000001u };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		size_t N = shapes[s][0], K = shapes[s][1], ld = (N > K ? N : K) + 3;
		float *src = malloc(ld * ld * sizeof(float));
		for (size_t i = 0; i < ld * ld; i++)
			src[i] = i % 13 == 5 ? from_bits(special[i % 8]) : 8.0f * rng_uniform();
		size_t len = kn_bf16_packed_len(N, K);
		uint16_t *want = malloc(len * sizeof(uint16_t)), *got = malloc(len * sizeof(uint16_t));
		for (int cols = 0; cols < 2; cols++) {
			kn__bf16_pack_ref(src, cols ? 1 : ld, cols ? ld : 1, N, K, want);
			memset(got, 0xa5, len * sizeof(uint16_t));
			if (cols)
				kn__bf16_pack_cols_avx512(src, ld, N, K, got);
			else
				kn__bf16_pack_rows_avx512(src, ld, N, K, got);
			assert_memory_equal(got, want, len * sizeof(uint16_t));
		}
		/* the plain conversion, over every length up to 16 past the shape */
		uint16_t *one = malloc((N * K + 17) * sizeof(uint16_t));
		for (size_t n = N * K; n <= N * K + 16 && n <= ld * ld; n++) {
			memset(one, 0xa5, (N * K + 17) * sizeof(uint16_t));
			kn__bf16_from_f32_avx512(src, one, n);
			for (size_t i = 0; i < n; i++)
				assert_int_equal(one[i], kn_f32_to_bf16(src[i]));
			assert_int_equal(one[n], 0xa5a5);
		}
		free(one);
		free(src);
		free(want);
		free(got);
	}
}

/* Random x [M, ldx], W [N, K] packed, bias [N] or NULL. */
struct prob {
	size_t M, N, K, ldx, ldy;
	float *x, *W, *bias;
	uint16_t *Wp;
};

static void prob_make(struct prob *p, size_t M, size_t N, size_t K, size_t ldx, size_t ldy,
		      bool with_bias)
{
	*p = (struct prob){ M, N, K, ldx, ldy, NULL, NULL, NULL, NULL };
	p->x = malloc(M * ldx * sizeof(float));
	p->W = malloc(N * K * sizeof(float));
	for (size_t i = 0; i < M * ldx; i++)
		p->x[i] = 4.0f * rng_uniform();
	for (size_t i = 0; i < N * K; i++)
		p->W[i] = 0.25f * rng_uniform();
	if (with_bias) {
		p->bias = malloc(N * sizeof(float));
		for (size_t i = 0; i < N; i++)
			p->bias[i] = rng_uniform();
	}
	p->Wp = malloc(kn_bf16_packed_len(N, K) * sizeof(uint16_t));
	kn_bf16_pack(p->W, N, K, p->Wp);
}

static void prob_free(struct prob *p)
{
	free(p->x);
	free(p->W);
	free(p->bias);
	free(p->Wp);
}

/* sum_k |bf16(x) bf16(w)| for element (m, n). */
static double abs_sum(const struct prob *p, size_t m, size_t n)
{
	double s = 0;
	for (size_t k = 0; k < p->K; k++)
		s += fabs(bf16_value(kn_f32_to_bf16(p->x[m * p->ldx + k])) *
			  bf16_value(kn_f32_to_bf16(p->W[n * p->K + k])));
	return s;
}

static void test_reference(void **state)
{
	(void)state;
	struct prob p;
	prob_make(&p, 5, 19, 70, 73, 21, true);
	float *y = malloc(p.M * p.ldy * sizeof(float));
	kn__bf16_linear_ref(p.M, p.N, p.K, p.x, p.ldx, p.Wp, p.bias, y, p.ldy);
	for (size_t m = 0; m < p.M; m++)
		for (size_t n = 0; n < p.N; n++) {
			double want = 0;
			for (size_t k = 0; k < p.K; k++)
				want += bf16_value(kn_f32_to_bf16(p.x[m * p.ldx + k])) *
					bf16_value(kn_f32_to_bf16(p.W[n * p.K + k]));
			want += p.bias[n];
			assert_true(fabs(y[m * p.ldy + n] - want) <= 1e-6 * (1 + abs_sum(&p, m, n)));
		}
	free(y);
	prob_free(&p);
}

/* got against want, the reference, within float32 summation's bound. */
static void check_close(const struct prob *pp, size_t M, size_t N, size_t K, size_t ldy,
			bool with_bias, const float *got, const float *want)
{
	const struct prob *p = pp;
	for (size_t m = 0; m < M; m++)
		for (size_t n = 0; n < ldy; n++) {
			float g = got[m * ldy + n], w = want[m * ldy + n];
			if (n >= N) {
				assert_true(g == -7.0f);
				continue;
			}
			double bound = ((double)K + 2) * ldexp(1.0, -24) *
				       (abs_sum(p, m, n) + (with_bias ? fabs(p->bias[n]) : 0));
			if (!(fabs((double)g - (double)w) <= bound)) {
				printf("%s M %zu N %zu K %zu: y[%zu][%zu] = %.9g, reference %.9g\n",
				       kn_bf16_kernel_name(), M, N, K, m, n, g, w);
				fail();
			}
		}
}

/* kn_bf16_linear, and kn_bf16_linear_b16 on the rows rounded to bfloat16
 * here (in a buffer of M rounded up to 32 rows), against the reference. */
static void check_product(size_t M, size_t N, size_t K, size_t ldx, size_t ldy, bool with_bias)
{
	struct prob p;
	prob_make(&p, M, N, K, ldx, ldy, with_bias);
	float *want = malloc(M * ldy * sizeof(float)), *got = malloc(M * ldy * sizeof(float));
	for (size_t i = 0; i < M * ldy; i++)
		want[i] = got[i] = -7.0f; /* past N stays */
	uint16_t *scratch = malloc(kn_bf16_scratch_len(K) * sizeof(uint16_t));
	kn__bf16_linear_ref(M, N, K, p.x, ldx, p.Wp, p.bias, want, ldy);
	kn_bf16_linear(M, N, K, p.x, ldx, p.Wp, p.bias, got, ldy, scratch);
	check_close(&p, M, N, K, ldy, with_bias, got, want);

	size_t lda = kn_bf16_lda(K) + 32, mp = (M + 31) / 32 * 32;
	uint16_t *xb = malloc(mp * lda * sizeof(uint16_t));
	for (size_t m = 0; m < mp; m++)
		for (size_t k = 0; k < lda; k++)
			xb[m * lda + k] = m < M && k < K ? kn_f32_to_bf16(p.x[m * ldx + k])
				      : k < K ? kn_f32_to_bf16(1e30f) /* rows past M: dropped */
					      : 0;
	for (size_t i = 0; i < M * ldy; i++)
		got[i] = -7.0f;
	kn_bf16_linear_b16(M, N, K, xb, lda, p.Wp, p.bias, got, ldy);
	check_close(&p, M, N, K, ldy, with_bias, got, want);
	free(xb);
	free(want);
	free(got);
	free(scratch);
	prob_free(&p);
}

static const enum kn__bf16_kernel kernels[] = { KN__BF16_DP, KN__BF16_AMX };
#define N_KERNELS (sizeof(kernels) / sizeof(*kernels))

static void products_against_reference(void)
{
	const size_t Ms[] = { 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100 };
	const size_t Ns[] = { 1, 15, 16, 17, 32, 48, 65 };
	const size_t Ks[] = { 1, 31, 32, 33, 64, 100 };
	for (size_t a = 0; a < sizeof(Ms) / sizeof(*Ms); a++)
		for (size_t b = 0; b < sizeof(Ns) / sizeof(*Ns); b++)
			for (size_t c = 0; c < sizeof(Ks) / sizeof(*Ks); c++) {
				size_t M = Ms[a], N = Ns[b], K = Ks[c];
				check_product(M, N, K, K + (a & 1) * 3, N + (b & 1) * 5,
					      (c & 1) != 0);
			}
	/* Whisper tiny's encoder products, a block of rows each */
	check_product(96, 1152, 384, 384, 1152, true);
	check_product(64, 384, 1536, 1536, 384, true);
	check_product(40, 1536, 384, 384, 1536, false);
}

/* fn once with each product the CPU has; the best one picked again after. */
static void with_each_kernel(void (*fn)(void))
{
	int ran = 0;
	for (size_t i = 0; i < N_KERNELS; i++)
		if (kn__bf16_use(kernels[i])) {
			fn();
			ran++;
		}
	assert_true(kn__bf16_use(KN__BF16_AMX) || kn__bf16_use(KN__BF16_DP));
	assert_int_equal(ran > 0, kn_bf16_ok());
}

static void test_products_against_reference(void **state)
{
	(void)state;
	if (!kn_bf16_ok())
		skip();
	with_each_kernel(products_against_reference);
}

static void attention_against_float32(void)
{
	const size_t shapes[][4] = { { 100, 70, 2, 64 }, { 1, 1, 1, 64 }, { 200, 300, 3, 32 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++) {
		size_t n_q = shapes[s][0], n_kv = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
		size_t d = H * hd, ld = 3 * d + 5;
		float *qkv = malloc((n_q > n_kv ? n_q : n_kv) * ld * sizeof(float));
		for (size_t i = 0; i < (n_q > n_kv ? n_q : n_kv) * ld; i++)
			qkv[i] = 2.0f * rng_uniform();
		float *want = malloc(n_q * d * sizeof(float)), *got = malloc(n_q * d * sizeof(float));
		size_t sl = n_q * n_kv > kn_attention_bf16_scratch(n_kv, hd)
				    ? n_q * n_kv : kn_attention_bf16_scratch(n_kv, hd);
		float *scratch = malloc(sl * sizeof(float));
		kn_attention(n_q, n_kv, H, hd, qkv, ld, qkv + d, ld, qkv + 2 * d, ld, want, d, false, 0,
			     scratch);
		kn_attention_bf16(n_q, n_kv, H, hd, qkv, ld, qkv + d, ld, qkv + 2 * d, ld, got, d,
				  scratch);
		for (size_t i = 0; i < n_q * d; i++)
			assert_true(fabsf(got[i] - want[i]) <= 2.0f / 64.0f);
		free(qkv);
		free(want);
		free(got);
		free(scratch);
	}
}

static void test_attention_against_float32(void **state)
{
	(void)state;
	if (!kn_bf16_ok())
		skip();
	kn_init(KN_ISA_COUNT);
	with_each_kernel(attention_against_float32);
}

/* Random bfloat16 bits of values in [-2, 2). */
static void bf16_fill(uint16_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w[i] = kn_f32_to_bf16(2.0f * rng_uniform());
}

/* Random 16-bit values in [-2, 2): binary16 (f16) or bfloat16 bits. */
static uint16_t half_fill(float v, bool f16)
{
	return f16 ? kn_f32_to_f16(v) : kn_f32_to_bf16(v);
}

static double half_value(uint16_t h, bool f16)
{
	return f16 ? (double)kn_f16_to_f32(h) : bf16_value(h);
}

/* ops's gemv_t_f16 (f16) or gemv_t_bf16 against double sums. */
static void check_gemv(const struct kn_ops *ops, bool f16, size_t rows, size_t k)
{
	size_t ldw = k + 3;
	uint16_t *w = malloc((rows * ldw + 1) * sizeof(uint16_t));
	float *x = malloc((rows > k ? rows : k) * sizeof(float) + 4);
	float *y = malloc((k + 1) * sizeof(float));
	for (size_t i = 0; i < rows * ldw; i++)
		w[i] = half_fill(2.0f * rng_uniform(), f16);
	for (size_t i = 0; i < (rows > k ? rows : k); i++)
		x[i] = rng_uniform();
	y[k] = 12345.0f; /* past the end: left alone */
	/* y[c] = sum_r x[r] w[r][c] */
	(f16 ? ops->gemv_t_f16 : ops->gemv_t_bf16)(w, ldw, x, y, rows, k);
	for (size_t c = 0; c < k; c++) {
		double exact = 0, mag = 0;
		for (size_t r = 0; r < rows; r++) {
			exact += x[r] * half_value(w[r * ldw + c], f16);
			mag += fabs(x[r] * half_value(w[r * ldw + c], f16));
		}
		assert_true(fabs(y[c] - exact) <= (double)(rows + 2) * 0x1p-24 * mag + 1e-30);
	}
	assert_true(y[k] == 12345.0f);
	free(w);
	free(x);
	free(y);
}

static void test_gemv_bf16(void **state)
{
	(void)state;
	static const size_t rows[] = { 0, 1, 2, 3, 4, 5, 7, 33, 1500 };
	static const size_t ks[] = { 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1500 };
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (size_t a = 0; ops && a < sizeof(rows) / sizeof(*rows); a++)
			for (size_t b = 0; b < sizeof(ks) / sizeof(*ks); b++)
				for (int f16 = 0; f16 < 2; f16++)
					check_gemv(ops, f16, rows[a], ks[b]);
	}
}

static void test_attention_kv16(void **state)
{
	(void)state;
	kn_init(KN_ISA_COUNT);
	const size_t shapes[][4] = { { 1, 1500, 6, 64 }, { 3, 70, 2, 64 }, { 2, 33, 3, 32 },
				     { 1, 64, 1, 64 }, { 2, 129, 4, 16 } };
	for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++) {
		size_t n_q = shapes[s][0], n_kv = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
		size_t d = H * hd, ld = 2 * d + 3;
		float *q = malloc(n_q * d * sizeof(float)), *kv = malloc(n_kv * ld * sizeof(float));
		uint16_t *kv16 = malloc(n_kv * ld * sizeof(uint16_t));
		uint16_t *cache = malloc(kn_kv16_len(n_kv, H, hd) * sizeof(uint16_t));
		for (size_t i = 0; i < n_q * d; i++)
			q[i] = 2.0f * rng_uniform();
		bf16_fill(kv16, n_kv * ld);
		for (size_t i = 0; i < n_kv * ld; i++)
			kv[i] = (float)bf16_value(kv16[i]);
		/* the cache's layout, element by element (keys zero past n_kv) */
		kn_kv16_pack(kv, ld, n_kv, H, hd, cache);
		size_t nb = (n_kv + KN_KV16_BLOCK - 1) / KN_KV16_BLOCK, blk = hd * KN_KV16_BLOCK;
		for (size_t h = 0; h < H; h++)
			for (size_t j = 0; j < nb * KN_KV16_BLOCK; j++)
				for (size_t c = 0; c < hd; c++) {
					uint16_t key = cache[(h * nb + j / KN_KV16_BLOCK) * blk +
							     c * KN_KV16_BLOCK + j % KN_KV16_BLOCK];
					assert_int_equal(key, j < n_kv ? kv16[j * ld + h * hd + c] : 0);
					if (j < n_kv)
						assert_int_equal(cache[H * nb * blk + (h * n_kv + j) * hd + c],
								 kv16[j * ld + d + h * hd + c]);
				}
		/* packed in two head ranges, as threads split them: the same cache */
		size_t len = kn_kv16_len(n_kv, H, hd);
		uint16_t *split = malloc(len * sizeof(uint16_t));
		kn_kv16_pack_heads(kv, ld, n_kv, H, hd, 0, H / 2, split);
		kn_kv16_pack_heads(kv, ld, n_kv, H, hd, H / 2, H, split);
		assert_memory_equal(split, cache, len * sizeof(uint16_t));
		free(split);
		float *want = malloc(n_q * d * sizeof(float)), *got = malloc(n_q * d * sizeof(float));
		float *scratch = malloc((n_q * n_kv + KN_KV16_BLOCK) * sizeof(float));
		kn_attention(n_q, n_kv, H, hd, q, d, kv, ld, kv + d, ld, want, d, false, 0, scratch);
		/* the heads in two calls, as threads split them */
		kn_attention_kv16(n_q, n_kv, H, hd, 0, H / 2, q, d, cache, got, d, scratch);
		kn_attention_kv16(n_q, n_kv, H, hd, H / 2, H, q, d, cache, got, d, scratch);
		for (size_t i = 0; i < n_q * d; i++)
			assert_true(fabsf(got[i] - want[i]) <= 1e-5f);
		/* each head's scores before the softmax, over every key and over
		 * all but the last (a part of a block): the float32 products, and
		 * q k^T / sqrt(hd) in double */
		float *s16 = malloc(n_q * n_kv * sizeof(float)), *s32 = malloc(n_q * n_kv * sizeof(float));
		for (size_t h = 0; h < H; h++)
			for (size_t cols = n_kv; cols + 1 >= n_kv && cols; cols--) {
				kn_attention_scores_kv16(n_q, n_kv, cols, hd, h, q, d, cache, s16, cols);
				kn_attention_scores(n_q, cols, hd, q + h * hd, d, kv + h * hd, ld, s32,
						    cols);
				for (size_t i = 0; i < n_q; i++)
					for (size_t j = 0; j < cols; j++) {
						double s = 0, mag = 0;
						for (size_t c = 0; c < hd; c++) {
							double t = (double)q[i * d + h * hd + c] *
								   kv[j * ld + h * hd + c];
							s += t;
							mag += fabs(t);
						}
						/* float32 summation's bound, and the scaling */
						double tol = ((double)hd + 3) * 0x1p-24 * mag /
							     sqrt((double)hd);
						s /= sqrt((double)hd);
						assert_true(fabs(s16[i * cols + j] - s) <= tol);
						assert_true(fabs(s32[i * cols + j] - s) <= tol);
					}
			}
		free(s16);
		free(s32);
		free(q);
		free(kv);
		free(kv16);
		free(cache);
		free(want);
		free(got);
		free(scratch);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round),
		cmocka_unit_test(test_pack),
		cmocka_unit_test(test_pack_simd),
		cmocka_unit_test(test_reference),
		cmocka_unit_test(test_products_against_reference),
		cmocka_unit_test(test_attention_against_float32),
		cmocka_unit_test(test_gemv_bf16),
		cmocka_unit_test(test_attention_kv16),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
