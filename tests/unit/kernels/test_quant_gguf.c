/* tests/unit/kernels/test_quant_gguf.c - the quantized-weight kernels
 * (kernels/kn_quant.h) on the real default model,
 * $INFERD_MODELS/gemma-3-270m-q4_k_m.gguf, read with the GGUF reader
 * (engine/format/eng_gguf.h; this is why the test is apart from test_quant.c,
 * which stays engine-free).
 *
 * For one tensor of each type the file holds (token_embd.weight for Q8_0,
 * otherwise the first tensor of that type in file order), on its first
 * rows: the reference dequantization is finite and of a plausible
 * magnitude (max |w| <= 1e3, rms in [1e-4, 100]: gemma's norm weights are
 * O(100), its matrices O(0.03); the measured numbers are printed), every
 * SIMD variant's dequant equals it bit for bit, and every variant's gemv
 * agrees with a double dot over the dequantized weights to 4e-6 of
 * sum |w x| (the tolerance of test_quant.c).
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

#include "engine/format/eng_gguf.h"
#include "kernels/kn_quant.h"

#define GEMMA "gemma-3-270m-q4_k_m.gguf"
#define N_ROWS 9 /* first rows checked: two passes of four and a tail row */
#define GEMV_TOL 4e-6

static const int checked_types[] = {KN_Q_Q8_0, KN_Q_Q5_0, KN_Q_Q4_K, KN_Q_Q6_K, KN_Q_F32,
				    KN_Q_F16,  KN_Q_BF16, KN_Q_Q4_0, KN_Q_Q5_K};

static const char *const isa_names[KN_ISA_COUNT] = {"ref", "avx2", "avx512"};

static int setup(void **state)
{
	char path[4096], err[512];
	const char *dir = getenv("INFERD_MODELS");
	struct eng_gguf *g = NULL;
	snprintf(path, sizeof(path), "%s/" GEMMA, dir ? dir : "models");
	if (eng_gguf_open(path, &g, err, sizeof(err))) {
		printf("%s\n", err);
		return -1;
	}
	*state = g;
	return 0;
}

static int teardown(void **state)
{
	eng_gguf_close(*state);
	return 0;
}

/* token_embd.weight for Q8_0, else the first tensor of type in the file. */
static const struct eng_gguf_tensor *pick_tensor(const struct eng_gguf *g, int type)
{
	const struct eng_gguf_tensor *t = eng_gguf_tensor_find(g, "token_embd.weight");
	if (t && (int)t->type == type)
		return t;
	for (size_t i = 0; i < eng_gguf_n_tensors(g); i++) {
		t = eng_gguf_tensor_at(g, i);
		if ((int)t->type == type)
			return t;
	}
	return NULL;
}

/* Reference dequant of the first rows: finite, plausible; prints stats. */
static void check_values(const struct eng_gguf_tensor *t, const float *w, size_t n)
{
	double max = 0.0, ss = 0.0;
	for (size_t i = 0; i < n; i++) {
		assert_true(isfinite(w[i]));
		max = fabs(w[i]) > max ? fabs(w[i]) : max;
		ss += (double)w[i] * w[i];
	}
	double rms = sqrt(ss / (double)n);
	printf("[ kn ] %-5s %-28s k=%-5llu rows=%-6llu max|w| %.4g rms %.4g\n",
	       kn_qtype_get((int)t->type)->name, t->name, (unsigned long long)t->dims[0],
	       (unsigned long long)(t->size_bytes / kn_qtype_row_bytes((int)t->type, t->dims[0])),
	       max, rms);
	assert_true(max <= 1e3);
	assert_true(rms >= 1e-4 && rms <= 100.0);
}

/* Every variant: dequant bit-exact with ref, gemv within GEMV_TOL. */
static void check_variants(const struct eng_gguf_tensor *t, size_t rows, const float *wf,
			   const float *x)
{
	size_t k = t->dims[0], rb = kn_qtype_row_bytes((int)t->type, k);
	float *got = malloc(rows * k * sizeof(float)), y[N_ROWS];
	assert_non_null(got);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_qops *q = kn_qops_for((enum kn_isa)isa, (int)t->type);
		if (!q)
			continue;
		q->dequant(t->data, got, rows * k);
		assert_memory_equal(got, wf, rows * k * sizeof(float));
		q->gemv(t->data, rb, x, y, rows, k);
		double worst = 0.0;
		for (size_t r = 0; r < rows; r++) {
			double exact = 0.0, mag = 0.0;
			for (size_t i = 0; i < k; i++) {
				exact += (double)wf[r * k + i] * x[i];
				mag += fabs((double)wf[r * k + i] * x[i]);
			}
			double e = fabs(y[r] - exact) / (mag + 1e-300);
			worst = e > worst || isnan(e) ? e : worst;
		}
		printf("[ kn ]       %-6s dequant bit-exact, gemv err / sum|wx| %.3g\n",
		       isa_names[isa], worst);
		assert_true(worst <= GEMV_TOL);
	}
	free(got);
}

static void test_real_tensors(void **state)
{
	const struct eng_gguf *g = *state;
	int found = 0;
	for (size_t ti = 0; ti < sizeof(checked_types) / sizeof(checked_types[0]); ti++) {
		const struct eng_gguf_tensor *t = pick_tensor(g, checked_types[ti]);
		if (!t)
			continue;
		found++;
		size_t k = t->dims[0], rb = kn_qtype_row_bytes((int)t->type, k);
		assert_true(rb > 0);
		size_t rows = t->size_bytes / rb < N_ROWS ? t->size_bytes / rb : N_ROWS;
		float *wf = malloc(rows * k * sizeof(float)), *x = malloc(k * sizeof(float));
		assert_true(wf && x);
		for (size_t i = 0; i < k; i++) /* a deterministic activation-like x */
			x[i] = (float)sin(0.37 * (double)i + 0.1) * (1.0f + (float)(i % 7));
		kn_qops_for(KN_ISA_REF, (int)t->type)->dequant(t->data, wf, rows * k);
		check_values(t, wf, rows * k);
		check_variants(t, rows, wf, x);
		free(wf);
		free(x);
	}
	/* the default model holds at least Q8_0, Q5_0, Q4_K, Q6_K and F32 */
	assert_true(found >= 5);
	assert_non_null(pick_tensor(g, KN_Q_Q8_0));
	assert_non_null(pick_tensor(g, KN_Q_Q4_K));
	assert_non_null(pick_tensor(g, KN_Q_Q6_K));
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_real_tensors, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
