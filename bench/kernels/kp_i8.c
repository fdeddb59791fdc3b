/* bench/kernels/kp_i8.c - the int8 table of kernel-peak: the Whisper tiny
 * encoder's four linears (as kp_gemm.c's table) and one decode step's
 * output projection (x[1,384] times the 51864-token embedding) through
 * every int8 variant of kernels/kn_i8.h the CPU (and INFERD_CPU_ISA) can
 * run, single-threaded, on activations already quantized (the per-call
 * quantize_rows is timed apart, as its own line). GOP/s counts 2*M*N*K
 * from the best of as many runs as fit in min_ms (at least 3); the
 * fraction is of the measured peak loop of the variant's instructions
 * (peak[kind], 0: not measured). The projection also prints the weight
 * bytes read per second: one row of activations makes it a stream over
 * 20 MB of weights, so its bound is memory, not arithmetic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_i8.h"
#include "kp_int.h"

struct i8_shape {
	const char *name;
	size_t M, N, K;
	bool u8; /* gemm_u8 on codes in [0, 127] (softmax probabilities) */
};

static const struct i8_shape i8_shapes[] = {
	{"qkv   x[1500,384] W[1152,384]^T", 1500, 1152, 384, false},
	{"out   x[1500,384] W[384,384]^T", 1500, 384, 384, false},
	{"fc1   x[1500,384] W[1536,384]^T", 1500, 1536, 384, false},
	{"fc2   x[1500,1536] W[384,1536]^T", 1500, 384, 1536, false},
	{"qk    q[96,64] k[1500,64]^T", 96, 1500, 64, false},
	{"pv    p[96,1500] v^T[64,1500]^T u8", 96, 64, 1500, true},
	{"proj  x[1,384] W[51864,384]^T", 1, 51864, 384, false},
};

enum { KP_I8_SHAPES = sizeof(i8_shapes) / sizeof(i8_shapes[0]) };

/* The quantized operands of one shape. */
struct i8_bufs {
	float *x, *y, *xs, *ws;
	int8_t *xq, *wp;
	int32_t *comp;
	struct kn_i8w w;
};

static void i8_free(struct i8_bufs *b)
{
	free(b->x);
	free(b->y);
	free(b->xs);
	free(b->ws);
	free(b->xq);
	free(b->wp);
	free(b->comp);
}

/* Uniform codes in [-127, 127] for the weights, floats in [-1, 1) for x. */
static int i8_alloc(const struct i8_shape *s, struct i8_bufs *b)
{
	size_t kp = kn_i8_kpad(s->K), np = kn_i8_npad(s->N);
	unsigned seed = 4242u;
	int8_t *wq = malloc(s->N * s->K);
	b->x = malloc(s->M * s->K * sizeof(float));
	b->y = malloc(s->M * s->N * sizeof(float));
	b->xs = malloc(s->M * sizeof(float));
	b->ws = calloc(np, sizeof(float));
	b->xq = malloc(s->M * kp);
	b->wp = malloc(np * kp);
	b->comp = malloc(np * sizeof(int32_t));
	if (!wq || !b->x || !b->y || !b->xs || !b->ws || !b->xq || !b->wp || !b->comp) {
		free(wq);
		return -1;
	}
	for (size_t i = 0; i < s->N * s->K; i++) {
		seed = seed * 1664525u + 1013904223u;
		wq[i] = (int8_t)((int)(seed >> 24) % 255 - 127);
	}
	for (size_t i = 0; i < s->M * s->K; i++) {
		seed = seed * 1664525u + 1013904223u;
		b->x[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
		if (s->u8 && b->x[i] < 0.0f)
			b->x[i] = -b->x[i];
	}
	for (size_t n = 0; n < s->N; n++)
		b->ws[n] = 1.0f / 127.0f;
	kn_i8_pack(wq, s->N, s->K, b->wp, b->comp);
	free(wq);
	b->w = (struct kn_i8w){b->wp, b->ws, b->comp, s->N, s->K};
	return 0;
}

/* Best seconds of one call of gemm (quant: of quantize_rows) on s. */
static double i8_time(const struct kn_i8_ops *ops, const struct i8_shape *s, struct i8_bufs *b,
		      bool quant, double min_ms)
{
	size_t kp = kn_i8_kpad(s->K);
	double best = 1e30, start = kp__now();
	void (*quantize)(const float *, size_t, size_t, size_t, int8_t *, size_t, float *) =
		s->u8 ? kn_i8_quantize_rows : ops->quantize_rows;
	void (*gemm)(size_t, size_t, size_t, const int8_t *, size_t, const float *,
		     const struct kn_i8w *, const float *, float *, size_t) =
		s->u8 ? ops->gemm_u8 : ops->gemm;
	quantize(b->x, s->K, s->M, s->K, b->xq, kp, b->xs);
	for (int r = 0; r < 4 || (kp__now() - start) * 1e3 < min_ms; r++) {
		double t0 = kp__now();
		if (quant)
			quantize(b->x, s->K, s->M, s->K, b->xq, kp, b->xs);
		else
			gemm(s->M, 0, s->N, b->xq, kp, b->xs, &b->w, NULL, b->y, s->N);
		double t = kp__now() - t0;
		if (r > 0 && t < best) /* the first run warms caches and TLB */
			best = t;
	}
	return best;
}

void kp__i8_table(const double *peak, double min_ms)
{
	printf("int8 products (kn_i8 gemm on quantized activations), one thread: GOP/s and %% "
	       "of the variant's peak loop\n");
	printf("  %-34s %5s %5s %5s", "product", "M", "N", "K");
	for (int k = KN_I8_AVX2; k < KN_I8_COUNT; k++)
		if (kn_i8_ops_for((enum kn_i8_kind)k))
			printf(" | %-13s", kn_i8_ops_for((enum kn_i8_kind)k)->name);
	printf("\n");
	for (size_t i = 0; i < KP_I8_SHAPES; i++) {
		const struct i8_shape *s = &i8_shapes[i];
		struct i8_bufs b = {0};
		printf("  %-34s %5zu %5zu %5zu", s->name, s->M, s->N, s->K);
		if (i8_alloc(s, &b)) {
			printf(" (out of memory)\n");
			i8_free(&b);
			continue;
		}
		double quant_s = 0.0;
		for (int k = KN_I8_AVX2; k < KN_I8_COUNT; k++) {
			const struct kn_i8_ops *ops = kn_i8_ops_for((enum kn_i8_kind)k);
			if (!ops)
				continue;
			double t = i8_time(ops, s, &b, false, min_ms);
			double g = 2.0 * (double)s->M * (double)s->N * (double)s->K / t * 1e-9;
			if (s->M == 1)
				printf(" | %5.1f GB/s   ",
				       (double)(kn_i8_npad(s->N) * kn_i8_kpad(s->K)) / t * 1e-9);
			else
				printf(" | %7.1f %4.0f%%", g, peak[k] > 0 ? 100.0 * g / peak[k] : 0.0);
			if (k == (int)kn_i8_ops()->kind)
				quant_s = i8_time(ops, s, &b, true, min_ms);
		}
		printf("  (quantize x: %.0f us)\n", quant_s * 1e6);
		i8_free(&b);
	}
}
