/* tests/unit/kernels/test_ops.c - the kn_ops dispatch table: which
 * variant kn_init picks, every SIMD variant against the scalar reference
 * (kernels/ref/ops.c) directly on one random input per op, and, with
 * KN_BENCH=1, a micro-benchmark of every op per ISA.
 *
 * The ops one by one, against the reference and double-precision
 * formulas on random inputs and edge sizes with unaligned pointers, are in
 * test_ops_half.c (f16_to_f32, kn_half.h), test_ops_norm.c (layer_norm,
 * rms_norm), test_ops_act.c (gelu and the gated activations),
 * test_ops_softmax.c (softmax, logsumexp, argmax) and test_ops_vec.c (add,
 * scale_add, the dot products, gemv_f16).
 */
#include <string.h>
#include <time.h>

#include "tests/unit/kernels/kn_test_ops.h"

/* ---- dispatch --------------------------------------------------------- */

static void test_dispatch(void **state)
{
	(void)state;
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	assert_non_null(ref);
	assert_string_equal(ref->name, "ref");
	assert_null(kn_ops_for(KN_ISA_COUNT));
	assert_ptr_equal(kn_init(KN_ISA_REF), ref);
	assert_ptr_equal(kn_ops(), ref);

	const struct kn_ops *best = kn_init(KN_ISA_COUNT);
	for (int isa = KN_ISA_COUNT - 1; isa >= 0; isa--)
		if (kn_ops_for((enum kn_isa)isa)) {
			assert_int_equal(best->isa, isa);
			break;
		}
	assert_ptr_equal(kn_ops(), best);
	for (int isa = 0; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		/* a forced ISA the CPU lacks falls back to the best */
		assert_ptr_equal(kn_init((enum kn_isa)isa), ops ? ops : best);
		printf("[ kn ] isa %d %s\n", isa, ops ? ops->name : "(not supported by this CPU)");
	}
	kn_init(KN_ISA_COUNT);
}

/* ---- each SIMD variant against the reference, directly ----------------- */

/* n = 1500 random inputs through ref and the variant; max |variant - ref|,
 * divided by |ref| for softmax, by 1 + |x| for gelu, by |y a| + |b| for
 * scale_add and by sum |x y| for dot. Tolerances: layer_norm 1e-5 abs
 * (outputs are O(1)), gelu 1e-5, softmax 4e-6, scale_add 2^-22 (fused vs
 * unfused multiply-add: one rounding apart), dot 1e-6. */
enum { VS_LN, VS_GELU, VS_SOFTMAX, VS_SCALE, VS_DOT, VS_COUNT };
static const char *const vs_names[VS_COUNT] = {"layer_norm", "gelu", "softmax", "scale_add", "dot"};
static const double vs_tol[VS_COUNT] = {1e-5, 1e-5, 4e-6, 0x1p-22, 1e-6};

static double vs_ref_one(const struct kn_ops *ops, int op, const float *in, const float *in2,
			 float *a, float *b, size_t n)
{
	const struct kn_ops *ref = kn_ops_for(KN_ISA_REF);
	memcpy(a, in, n * sizeof(*a));
	memcpy(b, in, n * sizeof(*b));
	switch (op) {
	case VS_LN:
		ops->layer_norm(in, in2, in2, a, n, 1e-5f);
		ref->layer_norm(in, in2, in2, b, n, 1e-5f);
		break;
	case VS_GELU:
		ops->gelu(a, n);
		ref->gelu(b, n);
		break;
	case VS_SOFTMAX:
		ops->softmax(a, n);
		ref->softmax(b, n);
		break;
	case VS_SCALE:
		ops->scale_add(a, 0.3f, in2, n);
		ref->scale_add(b, 0.3f, in2, n);
		break;
	default: {
		double d = ops->dot(in, in2, n), e = ref->dot(in, in2, n), mag = 0.0;
		for (size_t i = 0; i < n; i++)
			mag += fabs((double)in[i] * in2[i]);
		return fabs(d - e) / mag;
	}
	}
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - b[i]);
		if (op == VS_SOFTMAX)
			d /= b[i];
		else if (op == VS_GELU)
			d /= 1.0 + fabs(in[i]);
		else if (op == VS_SCALE)
			d /= fabs(in[i] * 0.3) + fabs(in2[i]);
		worst = d > worst ? d : worst;
	}
	return worst;
}

static void test_vs_ref(void **state)
{
	(void)state;
	enum { N = 1500 };
	float *in = malloc(N * sizeof(*in)), *in2 = malloc(N * sizeof(*in2));
	float *a = malloc(N * sizeof(*a)), *b = malloc(N * sizeof(*b));
	assert_true(in && in2 && a && b);
	fill(in, N, -8.0f, 8.0f);
	fill(in2, N, 0.5f, 1.5f);
	for (int isa = 1; isa < KN_ISA_COUNT; isa++) {
		const struct kn_ops *ops = kn_ops_for((enum kn_isa)isa);
		for (int op = 0; ops && op < VS_COUNT; op++) {
			double e = vs_ref_one(ops, op, in, in2, a, b, N);
			printf("[ kn ] vs ref %-10s %-6s max err %.3g (tol %.3g)\n", vs_names[op],
			       ops->name, e, vs_tol[op]);
			assert_true(e <= vs_tol[op]);
		}
	}
	free(in);
	free(in2);
	free(a);
	free(b);
}

/* ---- micro-benchmark (KN_BENCH=1) --------------------------------------- */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum {
	BENCH_F16,
	BENCH_LN,
	BENCH_GELU,
	BENCH_SOFTMAX,
	BENCH_ADD,
	BENCH_SCALE,
	BENCH_DOT,
	BENCH_RMS,
	BENCH_GELU_TANH,
	BENCH_SILU,
	BENCH_COUNT
};
static const char *const bench_names[BENCH_COUNT] = {
	"f16_to_f32", "layer_norm", "gelu",	"softmax",	 "add",
	"scale_add",  "dot",	    "rms_norm", "gelu_tanh_mul", "silu_mul"};

static volatile float bench_sink;

/* Buffers: a in/out, b and c second operands (gamma/beta, rms_norm's w,
 * the gated ops' up), g a gelu/gated source in [-4, 4] copied into a
 * before each such call (the copy is timed too: in-place gelu repeated
 * would decay towards 0 and subnormals), h halves for f16_to_f32. */
struct bench_bufs {
	float *a, *b, *c, *g;
	uint16_t *h;
};

static void bench_run(const struct kn_ops *ops, int op, const struct bench_bufs *m, size_t n)
{
	switch (op) {
	case BENCH_F16:
		ops->f16_to_f32(m->h, m->a, n);
		break;
	case BENCH_LN:
		ops->layer_norm(m->a, m->b, m->c, m->a, n, 1e-5f);
		break;
	case BENCH_GELU:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->gelu(m->a, n);
		break;
	case BENCH_SOFTMAX:
		ops->softmax(m->a, n);
		break;
	case BENCH_ADD:
		ops->add(m->a, m->b, n);
		break;
	case BENCH_SCALE:
		ops->scale_add(m->a, 0.5f, m->b, n);
		break;
	case BENCH_RMS:
		ops->rms_norm(m->a, m->b, m->a, n, 1e-6f);
		break;
	case BENCH_GELU_TANH:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->gelu_tanh_mul(m->a, m->b, n);
		break;
	case BENCH_SILU:
		memcpy(m->a, m->g, n * sizeof(*m->a));
		ops->silu_mul(m->a, m->b, n);
		break;
	default:
		bench_sink = ops->dot(m->a, m->b, n);
		break;
	}
}

/* Best of 3 rounds of ~20M elements each; prints ns per call. */
static void bench_one(const struct kn_ops *ops, int op, size_t n)
{
	struct bench_bufs m = {malloc(n * sizeof(float)), malloc(n * sizeof(float)),
			       malloc(n * sizeof(float)), malloc(n * sizeof(float)),
			       malloc(n * sizeof(uint16_t))};
	assert_true(m.a && m.b && m.c && m.g && m.h);
	fill(m.b, n, 0.5f, 1.0f);
	fill(m.c, n, -0.1f, 0.1f);
	fill(m.g, n, -4.0f, 4.0f);
	for (size_t i = 0; i < n; i++)
		m.h[i] = (uint16_t)(0x3000 + (rng_u64() & 0x0fff));
	size_t reps = 20000000 / n + 10;
	double best = INFINITY;
	for (int round = 0; round < 3; round++) {
		fill(m.a, n, -1.0f, 1.0f);
		double t0 = now_ns();
		for (size_t r = 0; r < reps; r++)
			bench_run(ops, op, &m, n);
		double t = (now_ns() - t0) / (double)reps;
		best = t < best ? t : best;
	}
	printf("[bench] %-13s %-6s n=%-5zu %9.1f ns/call %7.2f Gelem/s\n", bench_names[op],
	       ops->name, n, best, (double)n / best);
	free(m.a);
	free(m.b);
	free(m.c);
	free(m.g);
	free(m.h);
}

/* The micro-benchmark: a separate group that runs only with KN_BENCH=1. */
static void test_bench(void **state)
{
	(void)state;
	static const size_t bench_n[] = {384, 1500};
	for (int op = 0; op < BENCH_COUNT; op++)
		for (size_t s = 0; s < 2; s++)
			for (int isa = 0; isa < KN_ISA_COUNT; isa++)
				if (kn_ops_for((enum kn_isa)isa))
					bench_one(kn_ops_for((enum kn_isa)isa), op, bench_n[s]);
}

int main(void)
{
	kn_init(KN_ISA_COUNT);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch),
		cmocka_unit_test(test_vs_ref),
	};
	const struct CMUnitTest bench[] = {cmocka_unit_test(test_bench)};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	const char *env = getenv("KN_BENCH");
	if (env && !strcmp(env, "1"))
		failed += cmocka_run_group_tests(bench, NULL, NULL);
	return failed;
}
