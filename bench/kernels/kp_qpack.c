/* bench/kernels/kp_qpack.c - the packed GGUF table of kernel-peak: the
 * LLM weight products of kernels/kn_quant.h's packed layouts (struct
 * kn_qpack: Q8_0, Q5_0, Q4_1, Q4_K) through every ISA variant the CPU (and
 * INFERD_CPU_ISA) can run, single-threaded, called as
 * devices/dev_par_q.c calls them: 64 weight rows at a time into a staged
 * block of results, against x rows already quantized to the type's
 * partner format. Weight rows of 640 columns (1024 for Q4_K: whole
 * 256-element blocks): 131 072 of them (75-89 MB, beyond any L3) against
 * 1 x row (a decode step's gemv: weight GB/s, its bound is memory), 16 384
 * against 16 (16 streams' decode step: GOP/s, 2*M*N*K, and the fraction
 * of the measured peak loop of the ISA's int8 instructions: AVX2
 * vpmaddubsw + vpmaddwd + vpaddd, AVX-512 vpdpbusd zmm). Best of as many
 * runs as fit in min_ms (at least 3). Weights are random bytes with every
 * block's scales 1.0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn.h"
#include "kernels/kn_quant.h"
#include "kp_int.h"

enum { QP_N1 = 131072, QP_N = 16384, QP_TILE = 64, QP_MAX_X = 16 };

static const int qp_types[] = { KN_Q_Q8_0, KN_Q_Q5_0, KN_Q_Q4_1, KN_Q_Q4_K };

/* One call of the product the way dev_par_q.c's ep_q_cols makes it. */
static void qp_run(const struct kn_qops *q, const unsigned char *w, size_t rb, size_t k,
		   const unsigned char *xq, size_t xb, size_t m, float *stage)
{
	for (size_t c = 0; c < (m == 1 ? QP_N1 : QP_N); c += QP_TILE) {
		if (m == 1)
			q->gemv_xq(w + c * rb, rb, xq, stage, QP_TILE, k);
		else
			q->gemm_xq(w + c * rb, rb, xq, xb, m, stage, QP_TILE, QP_TILE, k);
	}
}

/* Seconds of the best run of the product with m x rows. */
static double qp_time(const struct kn_qops *q, const unsigned char *w, size_t rb, size_t k,
		      const unsigned char *xq, size_t xb, size_t m, float *stage, double min_ms)
{
	double best = 1e30, start = kp__now();
	for (int runs = 0; runs < 3 || (kp__now() - start) * 1e3 < min_ms; runs++) {
		double t0 = kp__now();
		qp_run(q, w, rb, k, xq, xb, m, stage);
		double t = kp__now() - t0;
		best = t < best ? t : best;
	}
	return best;
}

/* QP_N1 plain rows of type (random codes, scales 1.0) packed by p; NULL
 * if out of memory. */
static unsigned char *qp_weights(const struct kn_qpack *p, int type, size_t k, size_t *rb)
{
	const struct kn_qtype_info *t = kn_qtype_get(type);
	size_t bb = (size_t)t->block_bytes, nb = QP_N1 * (k / (size_t)t->block_elems);
	unsigned char *plain = malloc(nb * bb), *packed = malloc(nb * bb);
	if (!plain || !packed) {
		free(plain);
		free(packed);
		return NULL;
	}
	unsigned seed = 4242u;
	for (size_t i = 0; i < nb * bb; i++) {
		seed = seed * 1664525u + 1013904223u;
		plain[i] = (unsigned char)(seed >> 24);
	}
	/* d (and Q4_1's m, Q4_K's dmin) first in every block: fp16 1.0 */
	int halves = type == KN_Q_Q4_1 || type == KN_Q_Q4_K ? 2 : 1;
	for (size_t b = 0; b < nb; b++)
		for (int h = 0; h < halves; h++) {
			plain[b * bb + 2 * (size_t)h] = 0x00;
			plain[b * bb + 2 * (size_t)h + 1] = 0x3c;
		}
	*rb = k / (size_t)t->block_elems * bb;
	p->pack(plain, *rb, QP_N1, k, packed);
	free(plain);
	return packed;
}

void kp__qpack_table(double peak_avx2, double peak_avx512, double min_ms)
{
	static const enum kn_isa isas[] = { KN_ISA_AVX2, KN_ISA_AVX512 };
	const double peak[] = { peak_avx2, peak_avx512 };
	printf("packed GGUF products (kn_qpack, 64 rows a call), one thread: 1 x row over 131072 "
	       "rows in weight GB/s, 16 over 16384 in GOP/s and %% of the ISA's int8 peak loop\n");
	printf("  %-6s %5s", "type", "K");
	for (size_t v = 0; v < 2; v++)
		if (kn_ops_for(isas[v]))
			printf(" | %-6s 1 row  16 rows     ", isas[v] == KN_ISA_AVX2 ? "avx2" : "avx512");
	printf("\n");
	float *x = malloc(QP_MAX_X * 1024 * sizeof(float));
	float *stage = malloc(QP_MAX_X * QP_TILE * sizeof(float));
	unsigned seed = 777u;
	for (size_t i = 0; x && i < QP_MAX_X * 1024; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
	}
	for (size_t ti = 0; x && stage && ti < sizeof(qp_types) / sizeof(qp_types[0]); ti++) {
		int type = qp_types[ti];
		size_t k = type == KN_Q_Q4_K ? 1024 : 640;
		printf("  %-6s %5zu", kn_qtype_get(type)->name, k);
		for (size_t v = 0; v < 2; v++) {
			if (!kn_ops_for(isas[v]))
				continue;
			const struct kn_qpack *p = kn_qpack_for(isas[v], type);
			size_t rb = 0;
			unsigned char *w = p ? qp_weights(p, type, k, &rb) : NULL;
			size_t xb = p ? p->ops->xq_bytes(k) : 0;
			unsigned char *xq = p ? malloc(QP_MAX_X * xb) : NULL;
			if (!w || !xq) {
				printf(" | %-27s", p ? "(out of memory)" : "(none)");
				free(w);
				free(xq);
				continue;
			}
			for (size_t j = 0; j < QP_MAX_X; j++)
				p->ops->quantize_x(x + j * k, xq + j * xb, k);
			double t1 = qp_time(p->ops, w, rb, k, xq, xb, 1, stage, min_ms);
			double t16 = qp_time(p->ops, w, rb, k, xq, xb, QP_MAX_X, stage, min_ms);
			double g = 2.0 * QP_MAX_X * QP_N * (double)k / t16 * 1e-9;
			printf(" | %12.1f %7.1f %4.0f%%", (double)(QP_N1 * rb) / t1 * 1e-9, g,
			       peak[v] > 0 ? 100.0 * g / peak[v] : 0.0);
			free(w);
			free(xq);
		}
		printf("\n");
	}
	free(x);
	free(stage);
}
