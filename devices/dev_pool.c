/* dev_pool.c - worker team with a generation counter: a run publishes
 * (fn, arg) and bumps the generation; workers notice it by spinning (then
 * by sleeping on a condition variable), run their slice and count down. */
#include "devices/dev_pool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/mem.h"
#include "common/st.h"

#define DEV_POOL_SPINS 20000       /* pause loops before a worker sleeps */
#define DEV_POOL_RUNNER_SPINS 2000 /* pause loops before the runner yields its core */

struct dev_worker {
	struct dev_pool *pool;
	pthread_t thread;
	int ith;
};

struct dev_pool {
	int nth;
	struct dev_worker *workers;   /* [nth - 1] */
	int n_started;                /* workers whose thread exists */
	_Atomic unsigned generation;  /* bumped by every run (and by destroy) */
	_Atomic int pending;          /* workers still running this generation */
	_Atomic bool stop;
	dev_task_fn fn;               /* this generation's task */
	void *arg;
	_Atomic unsigned bar_count;   /* threads at the barrier of this phase */
	_Atomic unsigned bar_phase;   /* bumped when the last one arrives */
	pthread_mutex_t mu;           /* for sleeping workers only */
	pthread_cond_t cv;
	int n_sleeping;               /* under mu */
};

static inline void dev_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Wait until the generation moves past seen; returns the new value. */
static unsigned dev_wait_generation(struct dev_pool *p, unsigned seen)
{
	for (int i = 0; i < DEV_POOL_SPINS; i++) {
		if (i && i % 1024 == 0)
			sched_yield(); /* let a descheduled runner publish */
		unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
		if (g != seen)
			return g;
		dev_pause();
	}
	pthread_mutex_lock(&p->mu);
	p->n_sleeping++;
	unsigned g;
	while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
		pthread_cond_wait(&p->cv, &p->mu);
	p->n_sleeping--;
	pthread_mutex_unlock(&p->mu);
	return g;
}

static void *dev_worker_main(void *arg)
{
	struct dev_worker *w = arg;
	struct dev_pool *p = w->pool;
	unsigned seen = 0;
	for (;;) {
		seen = dev_wait_generation(p, seen);
		if (atomic_load(&p->stop))
			return NULL;
		p->fn(p->arg, w->ith, p->nth);
		atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
	}
}

static int dev_pin(pthread_t t, int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(t, sizeof(set), &set) ? -ST_IO : 0;
}

int dev_pool_create(int n_threads, const int *cpus, struct dev_pool **out)
{
	*out = NULL;
	if (n_threads < 1 || n_threads > 256)
		return -ST_INVAL;
	struct dev_pool *p = mem_calloc(1, sizeof(*p));
	if (!p)
		return -ST_NOMEM;
	p->nth = n_threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->workers = mem_calloc((size_t)n_threads, sizeof(*p->workers));
	int rc = p->workers ? 0 : -ST_NOMEM;
	for (int i = 1; !rc && i < n_threads; i++) {
		struct dev_worker *w = &p->workers[i - 1];
		*w = (struct dev_worker){ .pool = p, .ith = i };
		if (pthread_create(&w->thread, NULL, dev_worker_main, w)) {
			rc = -ST_IO;
			break;
		}
		p->n_started++;
		if (cpus)
			dev_pin(w->thread, cpus[i]); /* best effort: the mask may forbid it */
	}
	if (rc) {
		dev_pool_destroy(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* Publish a new generation and wake sleepers. */
static void dev_publish(struct dev_pool *p)
{
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_acq_rel);
	if (p->n_sleeping)
		pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void dev_pool_destroy(struct dev_pool *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	dev_publish(p);
	for (int i = 0; i < p->n_started; i++)
		pthread_join(p->workers[i].thread, NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	mem_free(p->workers);
	mem_free(p);
}

int dev_pool_size(const struct dev_pool *p)
{
	return p ? p->nth : 1;
}

void dev_pool_run(struct dev_pool *p, dev_task_fn fn, void *arg)
{
	if (!p || p->nth == 1) {
		fn(arg, 0, 1);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	atomic_store_explicit(&p->pending, p->nth - 1, memory_order_release);
	dev_publish(p);
	fn(arg, 0, p->nth);
	/* Spin while the workers are likely running; yield after that so an
	 * oversubscribed machine (more threads than free cores) still moves. */
	for (unsigned spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
		if (spins < DEV_POOL_RUNNER_SPINS)
			dev_pause();
		else
			sched_yield();
	}
}

void dev_pool_barrier(struct dev_pool *p)
{
	if (!p || p->nth == 1)
		return;
	unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
	if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) ==
	    (unsigned)p->nth - 1) {
		/* the last one in: reset for the next barrier, then release */
		atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&p->bar_phase, 1, memory_order_acq_rel);
		return;
	}
	for (unsigned spins = 0;
	     atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase; spins++) {
		if (spins < DEV_POOL_RUNNER_SPINS)
			dev_pause();
		else
			sched_yield();
	}
}

void dev_split(long n, int ith, int nth, long align, long *begin, long *end)
{
	if (align < 1)
		align = 1;
	long blocks = (n + align - 1) / align;
	long per = blocks / nth, extra = blocks % nth;
	long b0 = ith * per + (ith < extra ? ith : extra);
	long b1 = b0 + per + (ith < extra ? 1 : 0);
	*begin = b0 * align < n ? b0 * align : n;
	*end = b1 * align < n ? b1 * align : n;
}
