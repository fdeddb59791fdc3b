/* bench/kernels/kp_bw.c - read bandwidth of several cores at once: what
 * bounds a decode step, which reads every weight once per token on all the
 * cores a replica runs on (bench/generate-vs-peers prints the bound from
 * it). Each of n threads is pinned to its own CPU of the process's
 * affinity mask and reads its own slice of one buffer with kp__read_ymm;
 * a pass is timed from a barrier that releases them all to the last
 * thread's end (joined), best of the passes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "kp_int.h"

struct kp_bw_part {
	const unsigned char *p;
	size_t n;
	int cpu; /* -1: not pinned */
	pthread_barrier_t *go;
	uint32_t sum;
};

static void *kp_bw_reader(void *arg)
{
	struct kp_bw_part *t = arg;
	if (t->cpu >= 0) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(t->cpu, &one);
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
	}
	pthread_barrier_wait(t->go);
	t->sum = kp__read_ymm(t->p, t->n);
	return NULL;
}

/* The i-th CPU (0-based) of this process's affinity mask, or -1. */
static int kp_bw_cpu(int i)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set) && i-- == 0)
			return c;
	return -1;
}

/* One timed pass of n_threads readers over buf; seconds, or -1 when a
 * thread could not be started. */
static double kp_bw_pass(const unsigned char *buf, size_t size_bytes, int n_threads,
			 struct kp_bw_part *parts, pthread_t *tids)
{
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, (unsigned)n_threads + 1);
	size_t slice = size_bytes / (size_t)n_threads / 256 * 256;
	int started = 0;
	for (; started < n_threads; started++) {
		parts[started] = (struct kp_bw_part){buf + (size_t)started * slice, slice,
						     kp_bw_cpu(started), &go, 0};
		if (pthread_create(&tids[started], NULL, kp_bw_reader, &parts[started]) != 0)
			break;
	}
	double t = -1.0;
	if (started == n_threads) {
		pthread_barrier_wait(&go);
		double t0 = kp__now();
		for (int i = 0; i < n_threads; i++)
			pthread_join(tids[i], NULL);
		t = kp__now() - t0;
	} else { /* release and reap the ones started, then give up */
		for (int i = started; i < n_threads; i++)
			pthread_barrier_wait(&go);
		for (int i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
	}
	pthread_barrier_destroy(&go);
	return t;
}

double kp__read_bw_cores(size_t size_bytes, int reps, int n_threads)
{
	if (n_threads < 1 || n_threads > 256)
		return 0.0;
	unsigned char *buf = aligned_alloc(64, size_bytes);
	struct kp_bw_part *parts = calloc((size_t)n_threads, sizeof(*parts));
	pthread_t *tids = calloc((size_t)n_threads, sizeof(*tids));
	double best = 1e30;
	if (!buf || !parts || !tids)
		goto out;
	memset(buf, 1, size_bytes); /* touch every page: no zero-page reads */
	for (int r = 0; r < reps + 1; r++) {
		double t = kp_bw_pass(buf, size_bytes, n_threads, parts, tids);
		if (t < 0) {
			best = 1e30;
			break;
		}
		if (r > 0 && t < best) /* the first pass warms caches and TLB */
			best = t;
	}
out:
	free(tids);
	free(parts);
	free(buf);
	size_t read = size_bytes / (size_t)n_threads / 256 * 256 * (size_t)n_threads;
	return best < 1e30 ? (double)read / best * 1e-9 : 0.0;
}
