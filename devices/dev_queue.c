/* dev_queue.c - in-order work queues (dev.h), for every back end.
 *
 * cpu: a queue is one host thread pinned to the device's first core plus
 * a dev_pool whose workers are pinned to the next threads - 1 cores; the
 * queue thread is the pool's ith 0 (it is the one that calls
 * dev_pool_run inside items), so a queue has exactly `threads` compute
 * threads and never more than the device has cores. Other back ends: one
 * host thread, unpinned, with no pool (threads is 1: the device computes),
 * and the back end's stream (its queue_open) in impl.
 *
 * Items are a FIFO list under mu. Tickets make sync exact: n_submitted
 * counts items accepted, n_done items returned, and both only grow, so
 * "everything submitted before my call" is n_done >= the n_submitted read
 * at the call. q->thread is stored under mu before the queue thread can
 * take mu, so comparing it with pthread_self() under mu is race free.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"
#include "devices/dev_pool.h"

struct dev_item {
	dev_work_fn fn;
	void *arg;
	struct dev_item *next; /* later item, NULL at the tail */
};

struct dev_queue {
	struct dev *dev;	/* borrowed: outlives the queue */
	int threads;		/* compute threads: the queue thread + pool workers */
	struct dev_pool *pool;	/* threads - 1 workers; ith 0 is the queue thread */
	pthread_t thread;	/* the queue thread, set under mu */
	pthread_mutex_t mu;	/* guards everything below */
	pthread_cond_t cv_work; /* an item arrived, or closing */
	pthread_cond_t cv_done; /* n_done moved */
	struct dev_item *head;	/* next item to run; NULL when empty */
	struct dev_item *tail;	/* last item, where submit appends */
	uint64_t n_submitted;	/* items accepted so far */
	uint64_t n_done;	/* items that have returned */
	bool closing;		/* destroy began: nothing new accepted */
	void *impl;		/* the back end's stream (dev__queue_impl) */
};

void dev_queue_parallel(struct dev_queue *q, dev_host_fn fn, void *arg)
{
	dev_pool_run(q->pool, fn, arg);
}

struct dev_pool *dev__queue_pool(const struct dev_queue *q)
{
	return q->pool;
}

void *dev__queue_impl(const struct dev_queue *q)
{
	return q->impl;
}

void dev__queue_set_impl(struct dev_queue *q, void *impl)
{
	q->impl = impl;
}

/* Wait for the next item and unlink it; NULL when closing and drained.
 * Called and returns with mu held. */
static struct dev_item *dev_queue_pop(struct dev_queue *q)
{
	while (!q->head && !q->closing)
		pthread_cond_wait(&q->cv_work, &q->mu);
	struct dev_item *it = q->head;
	if (it) {
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
	}
	return it;
}

static void *dev_queue_main(void *arg)
{
	struct dev_queue *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct dev_item *it = dev_queue_pop(q);
		if (!it)
			break;
		pthread_mutex_unlock(&q->mu);
		dev_work_fn fn = it->fn;
		void *fn_arg = it->arg;
		mem_free(it);
		fn(fn_arg, q->pool);
		pthread_mutex_lock(&q->mu);
		q->n_done++;
		pthread_cond_broadcast(&q->cv_done);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Start the queue thread pinned to cpu from its first instruction (cpu
 * < 0: unpinned). */
static int dev_queue_start(struct dev_queue *q, int cpu)
{
	pthread_attr_t attr;
	if (pthread_attr_init(&attr))
		return -ST_IO;
	cpu_set_t set;
	CPU_ZERO(&set);
	int rc = 0;
	if (cpu >= 0) {
		CPU_SET(cpu, &set);
		rc = pthread_attr_setaffinity_np(&attr, sizeof(set), &set) ? -ST_IO : 0;
	}
	pthread_mutex_lock(&q->mu); /* the thread first waits here for q->thread */
	if (!rc && pthread_create(&q->thread, &attr, dev_queue_main, q))
		rc = -ST_IO;
	pthread_mutex_unlock(&q->mu);
	pthread_attr_destroy(&attr);
	return rc;
}

static void dev_queue_free(struct dev_queue *q)
{
	if (q->dev->be->queue_close)
		q->dev->be->queue_close(q);
	dev_pool_destroy(q->pool);
	pthread_cond_destroy(&q->cv_done);
	pthread_cond_destroy(&q->cv_work);
	pthread_mutex_destroy(&q->mu);
	mem_free(q);
}

int dev_queue_create(struct dev *d, int threads, struct dev_queue **out, char *err, size_t errlen)
{
	*out = NULL;
	int n_cpus = d->n_cpus, max = n_cpus ? n_cpus : 1;
	const int *cpus = d->cpus;
	if (threads < 1 || threads > max)
		return n_cpus ? st_errf(-ST_INVAL, err, errlen,
					"%d threads on %s: it has %d cores (1..%d)", threads,
					d->caps.name, max, max)
			      : st_errf(-ST_INVAL, err, errlen,
					"%d threads on %s: a queue of this device has one host "
					"thread (threads 1)",
					threads, d->caps.name);
	struct dev_queue *q = mem_calloc(1, sizeof(*q));
	if (!q)
		return st_errf(-ST_NOMEM, err, errlen, "queue on %s: out of memory",
			       d->caps.name);
	q->dev = d;
	q->threads = threads;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv_work, NULL);
	pthread_cond_init(&q->cv_done, NULL);
	int rc = n_cpus ? dev_pool_create(threads, cpus, &q->pool) : 0;
	if (rc) {
		st_errf(0, err, errlen, "queue on %s with %d threads: %s", d->caps.name,
			threads, rc == -ST_NOMEM ? "out of memory" : "cannot start a thread");
		goto out_free;
	}
	if (d->be->queue_open) {
		rc = d->be->queue_open(q, err, errlen);
		if (rc)
			goto out_free;
	}
	rc = dev_queue_start(q, n_cpus ? cpus[0] : -1);
	if (rc) {
		st_errf(0, err, errlen, "queue on %s with %d threads: cannot start a thread",
			d->caps.name, threads);
		goto out_free;
	}
	*out = q;
	return 0;
out_free:
	dev_queue_free(q);
	return rc;
}

void dev_queue_destroy(struct dev_queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->closing = true;
	pthread_cond_broadcast(&q->cv_work);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thread, NULL); /* it drains the list before it returns */
	dev_queue_free(q);
}

int dev_queue_submit(struct dev_queue *q, dev_work_fn fn, void *arg)
{
	struct dev_item *it = mem_alloc(sizeof(*it));
	if (!it)
		return -ST_NOMEM;
	*it = (struct dev_item){.fn = fn, .arg = arg};
	pthread_mutex_lock(&q->mu);
	int rc = q->closing ? -ST_CLOSED : 0;
	if (!rc) {
		if (q->tail)
			q->tail->next = it;
		else
			q->head = it;
		q->tail = it;
		q->n_submitted++;
		pthread_cond_signal(&q->cv_work);
	}
	pthread_mutex_unlock(&q->mu);
	if (rc)
		mem_free(it);
	return rc;
}

int dev_queue_sync(struct dev_queue *q)
{
	pthread_mutex_lock(&q->mu);
	int rc = pthread_equal(pthread_self(), q->thread) ? -ST_INVAL : 0;
	uint64_t ticket = q->n_submitted;
	while (!rc && q->n_done < ticket)
		pthread_cond_wait(&q->cv_done, &q->mu);
	pthread_mutex_unlock(&q->mu);
	if (!rc && q->dev->be->queue_finish)
		rc = q->dev->be->queue_finish(q);
	return rc;
}

int dev_queue_threads(const struct dev_queue *q)
{
	return q->threads;
}

struct dev *dev_queue_device(const struct dev_queue *q)
{
	return q->dev;
}
