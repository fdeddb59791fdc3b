/* tests/unit/kernels/test_sgemm.c - the float32 matrix product kernels of
 * kn_int.h (kn__sgemm_*):
 *   - the scalar reference against a double-precision product (it is a
 *     correct product, within 1e-5 of the sum of |terms|);
 *   - the AVX2 and AVX-512 kernels against the reference bit for bit (all
 *     follow one order of operations), over shapes on both sides of every
 *     blocking edge (AVX2 MR 6 / NR 16, AVX-512 MR 12 / NR 32, MC 96,
 *     KC 256, NC 512), both layouts of B, alpha/beta variants (beta 0 with
 *     NaN in C: C must not be read), leading dimensions wider than the
 *     matrices and pointers off vector alignment;
 *   - row and column independence: a block of rows or columns computed
 *     alone equals the same block inside a larger product, bit for bit
 *     (batched requests get the results they get alone);
 *   - kn_gemm with the AVX2 or AVX-512 table chosen takes that kernel, and
 *     the two give the same bits.
 * Each ISA's checks run where the CPU has it (kn_ops_for).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_blas.h"
#include "kernels/kn_int.h"
#include "tests/unit/kernels/kn_test_rng.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rng_uniform(void)
{
	return kn_test_uniform(&rng_state);
}

/* n floats, one float past a malloc'd block's start (off vector alignment);
 * *base is what to free. */
static float *rand_new(size_t n, float **base)
{
	*base = malloc((n + 1) * sizeof(float));
	assert_non_null(*base);
	for (size_t i = 0; i < n + 1; i++)
		(*base)[i] = rng_uniform();
	return *base + 1;
}

struct shape {
	size_t M, N, K;
	bool trans_b;
	float alpha, beta;
	size_t pad; /* extra leading-dimension columns */
};

typedef void sgemm_fn(bool, size_t, size_t, size_t, float, const float *, size_t,
		      const float *, size_t, float, float *, size_t, float *);

struct prob {
	size_t lda, ldb, ldc;
	float *A, *B, *C0, *a_base, *b_base, *c_base;
};

static void prob_new(const struct shape *s, struct prob *p)
{
	p->lda = s->K + s->pad;
	p->ldb = (s->trans_b ? s->K : s->N) + s->pad;
	p->ldc = s->N + s->pad;
	p->A = rand_new(s->M * p->lda, &p->a_base);
	p->B = rand_new((s->trans_b ? s->N : s->K) * p->ldb, &p->b_base);
	p->C0 = rand_new(s->M * p->ldc, &p->c_base);
	if (s->beta == 0.0f)
		for (size_t i = 0; i < s->M * p->ldc; i++)
			p->C0[i] = NAN; /* must not be read */
}

static void prob_free(struct prob *p)
{
	free(p->a_base);
	free(p->b_base);
	free(p->c_base);
}

/* C = a copy of C0 multiplied by fn; caller frees. */
static float *run(sgemm_fn *fn, const struct shape *s, const struct prob *p, float *pack)
{
	float *C = malloc(s->M * p->ldc * sizeof(float));
	assert_non_null(C);
	memcpy(C, p->C0, s->M * p->ldc * sizeof(float));
	fn(s->trans_b, s->M, s->N, s->K, s->alpha, p->A, p->lda, p->B, p->ldb, s->beta, C, p->ldc,
	   pack);
	return C;
}

static const struct shape shapes[] = {
	{1, 1, 1, false, 1.0f, 0.0f, 0},      {1, 1, 1, true, 2.0f, 0.5f, 1},
	{2, 33, 7, true, 1.0f, 0.0f, 0},      {11, 31, 255, false, 0.5f, 1.0f, 3},
	{12, 32, 256, true, 1.0f, 1.0f, 0},   {13, 33, 257, true, -1.25f, 0.0f, 2},
	{25, 64, 512, false, 1.0f, 0.0f, 1},  {97, 513, 300, true, 1.0f, 0.0f, 5},
	{97, 520, 40, false, 0.125f, 2.0f, 0}, {150, 100, 600, true, 1.0f, 1.0f, 16},
	{5, 1030, 64, false, 1.0f, 0.0f, 0},  {200, 40, 1500, false, 1.0f, 0.0f, 0},
	{6, 16, 1, false, 1.0f, 0.0f, 0},     {7, 17, 9, true, 1.0f, 0.5f, 1},
	{5, 15, 256, false, 1.0f, 1.0f, 0},   {96, 8, 257, true, 2.0f, 0.0f, 0},
	{103, 9, 33, false, 1.0f, -3.0f, 7},  {19, 1500, 64, true, 0.125f, 0.0f, 0},
	{96, 64, 1500, false, 1.0f, 0.0f, 4}, {1, 64, 1500, false, 1.0f, 0.0f, 0},
	{3, 70, 600, false, 0.5f, 1.0f, 2},   {4, 200, 513, false, 1.0f, -0.5f, 0},
	{1, 1030, 64, false, 1.0f, 1.0f, 0},
};
#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* The reference is a correct product: |C - exact| <= 1e-5 (1 + sum |terms|)
 * with exact = alpha * A op(B) + beta * C0 in double. */
static void test_ref_vs_double(void **state)
{
	(void)state;
	double worst = 0.0;
	for (size_t t = 0; t < N_SHAPES; t++) {
		const struct shape *s = &shapes[t];
		struct prob p;
		prob_new(s, &p);
		float *C = run(kn__sgemm_ref, s, &p, NULL);
		for (size_t i = 0; i < s->M; i++)
			for (size_t j = 0; j < s->N; j++) {
				double sum = 0.0, mag = 1.0;
				for (size_t k = 0; k < s->K; k++) {
					double b = s->trans_b ? p.B[j * p.ldb + k] : p.B[k * p.ldb + j];
					sum += (double)p.A[i * p.lda + k] * b;
					mag += fabs((double)p.A[i * p.lda + k] * b);
				}
				double want = s->alpha * sum;
				if (s->beta != 0.0f) {
					want += (double)s->beta * p.C0[i * p.ldc + j];
					mag += fabs((double)s->beta * p.C0[i * p.ldc + j]);
				}
				double e = fabs(C[i * p.ldc + j] - want) / (1e-5 * mag * fabs(s->alpha > 1 ? s->alpha : 1));
				if (!(e <= 1.0))
					fail_msg("shape %zu (%zu,%zu,%zu) C[%zu][%zu] %g, want %g", t, s->M,
						 s->N, s->K, i, j, C[i * p.ldc + j], want);
				worst = e > worst ? e : worst;
			}
		/* the padding columns of C are untouched */
		for (size_t i = 0; i < s->M; i++)
			for (size_t j = s->N; j < p.ldc; j++)
				assert_memory_equal(&C[i * p.ldc + j], &p.C0[i * p.ldc + j], sizeof(float));
		free(C);
		prob_free(&p);
	}
	printf("[ kn ] sgemm ref worst error / tolerance %.3g\n", worst);
}

static float *pack_new(void)
{
	float *pack = malloc(KN__SGEMM_PACK * sizeof(float));
	assert_non_null(pack);
	return pack;
}

/* The SIMD kernels, each with the ISA kn_ops_for must grant. */
static const struct {
	const char *name;
	enum kn_isa isa;
	sgemm_fn *fn;
} kernels[] = {
	{"AVX2", KN_ISA_AVX2, kn__sgemm_avx2},
	{"AVX-512", KN_ISA_AVX512, kn__sgemm_avx512},
};
#define N_KERNELS (sizeof(kernels) / sizeof(kernels[0]))

static void simd_vs_ref(size_t kn)
{
	if (!kn_ops_for(kernels[kn].isa)) {
		printf("[ kn ] no %s on this CPU: its kernel is not checked\n", kernels[kn].name);
		return;
	}
	float *pack = pack_new();
	for (size_t t = 0; t < N_SHAPES; t++) {
		const struct shape *s = &shapes[t];
		struct prob p;
		prob_new(s, &p);
		float *want = run(kn__sgemm_ref, s, &p, NULL);
		float *got = run(kernels[kn].fn, s, &p, pack);
		for (size_t i = 0; i < s->M * p.ldc; i++)
			if (memcmp(&want[i], &got[i], sizeof(float)) != 0)
				fail_msg("%s shape %zu (%zu,%zu,%zu trans_b %d): C[%zu][%zu] %.9g, ref %.9g",
					 kernels[kn].name, t, s->M, s->N, s->K, s->trans_b, i / p.ldc,
					 i % p.ldc, got[i], want[i]);
		free(want);
		free(got);
		prob_free(&p);
	}
	free(pack);
}

static void test_avx2_vs_ref(void **state)
{
	(void)state;
	simd_vs_ref(0);
}

static void test_avx512_vs_ref(void **state)
{
	(void)state;
	simd_vs_ref(1);
}

/* Rows [r0, r0+m) and columns [c0, c0+n) computed alone equal the same
 * block of the whole product (beta 0 and beta 1, both layouts). */
static void block_independence(sgemm_fn *fn, float *pack)
{
	for (int tb = 0; tb < 2; tb++)
		for (int bt = 0; bt < 2; bt++) {
			struct shape s = {61, 150, 700, tb, 1.0f, (float)bt, 3};
			struct prob p;
			prob_new(&s, &p);
			float *whole = run(fn, &s, &p, pack);
			static const size_t blocks[][4] = {
				{0, 1, 0, 150}, {5, 2, 0, 150}, {13, 30, 17, 40}, {60, 1, 149, 1},
				{24, 37, 64, 86},
			};
			for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
				size_t r0 = blocks[b][0], m = blocks[b][1];
				size_t c0 = blocks[b][2], n = blocks[b][3];
				float *C = malloc(s.M * p.ldc * sizeof(float));
				assert_non_null(C);
				memcpy(C, p.C0, s.M * p.ldc * sizeof(float));
				const float *B = tb ? p.B + c0 * p.ldb : p.B + c0;
				fn(s.trans_b, m, n, s.K, s.alpha, p.A + r0 * p.lda, p.lda, B, p.ldb,
				   s.beta, C + r0 * p.ldc + c0, p.ldc, pack);
				for (size_t i = r0; i < r0 + m; i++)
					assert_memory_equal(C + i * p.ldc + c0, whole + i * p.ldc + c0,
							    n * sizeof(float));
				free(C);
			}
			free(whole);
			prob_free(&p);
		}
}

static void test_block_independence(void **state)
{
	(void)state;
	float *pack = pack_new();
	for (size_t kn = 0; kn < N_KERNELS; kn++)
		if (kn_ops_for(kernels[kn].isa))
			block_independence(kernels[kn].fn, pack);
	free(pack);
}

/* kn_gemm under the AVX2 and AVX-512 tables gives that kernel's bits for
 * two or more rows (one row stays sgemv), the two kernels' bits are the
 * same, and OpenBLAS under the reference table stays within the product
 * tolerance of them. */
static void test_kn_gemm_dispatch(void **state)
{
	(void)state;
	float *pack = pack_new();
	struct shape s = {40, 70, 300, true, 1.0f, 0.0f, 0};
	struct prob p;
	prob_new(&s, &p);
	float *want = run(kn__sgemm_ref, &s, &p, NULL);
	float *got = malloc(s.M * p.ldc * sizeof(float));
	assert_non_null(got);
	for (size_t kn = 0; kn < N_KERNELS; kn++) {
		if (!kn_init(kernels[kn].isa) || kn_ops()->isa != kernels[kn].isa)
			continue;
		float *direct = run(kernels[kn].fn, &s, &p, pack);
		assert_memory_equal(direct, want, s.M * p.ldc * sizeof(float));
		memset(got, 0xff, s.M * p.ldc * sizeof(float));
		kn_gemm(true, s.M, s.N, s.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, got, p.ldc);
		assert_memory_equal(got, want, s.M * p.ldc * sizeof(float));
		free(direct);
	}
	kn_init(KN_ISA_REF);
	kn_gemm(true, s.M, s.N, s.K, 1.0f, p.A, p.lda, p.B, p.ldb, 0.0f, got, p.ldc);
	for (size_t i = 0; i < s.M * p.ldc; i++)
		assert_true(fabsf(got[i] - want[i]) <= 1e-5f * (float)s.K);
	kn_init(KN_ISA_COUNT);
	free(got);
	free(want);
	prob_free(&p);
	free(pack);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ref_vs_double),
		cmocka_unit_test(test_avx2_vs_ref),
		cmocka_unit_test(test_avx512_vs_ref),
		cmocka_unit_test(test_block_independence),
		cmocka_unit_test(test_kn_gemm_dispatch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
