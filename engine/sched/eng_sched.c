/* eng_sched.c - replicas on device queues and the queue that feeds them
 * (eng_sched.h). The task loops live in gen/eng_gen_replica.c and
 * asr/eng_asr_replica.c. */
#include "engine/sched/eng_sched.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/mem.h"
#include "common/sched_defaults.h"
#include "common/st.h"
#include "devices/dev.h"


int eng__req_expired(const struct eng__req *r, double now_ms)
{
	if (r->cancel && *r->cancel)
		return -ST_CANCELED;
	if (r->t_deadline > 0 && now_ms >= r->t_deadline)
		return -ST_TIMEDOUT;
	return 0;
}

static int es_def(int v, int def)
{
	return v > 0 ? v : def;
}

/* --- placement ------------------------------------------------------------ */

/* The device spec of replica i of n spread over the available cores: a
 * contiguous share of the (ascending) id list, the first n % C shares one
 * core bigger. */
static int es_spread(int i, int n, const int *cpus, int n_cpus, char *spec, size_t cap)
{
	int base = n_cpus / n, extra = n_cpus % n;
	int first = i * base + (i < extra ? i : extra), count = base + (i < extra);
	size_t o = (size_t)snprintf(spec, cap, "cpu:");
	for (int k = 0; k < count && o < cap; k++)
		o += (size_t)snprintf(spec + o, cap - o, "%s%d", k ? "," : "", cpus[first + k]);
	return o < cap ? 0 : -ST_TOOBIG;
}

static int es_open_replica(struct eng_sched *s, int i, const char *spec, int threads,
			   const struct eng__family *fam, char *err, size_t errlen)
{
	struct eng__replica *rp = &s->reps[i];
	char msg[256];
	rp->s = s;
	rp->index = i;
	int rc = dev_open(spec, &rp->dev, msg, sizeof(msg));
	if (rc)
		return st_errf(rc, err, errlen, "replica %d: %s", i, msg);
	const struct dev_caps *caps = dev_caps(rp->dev);
	/* a cpu queue computes on its threads; another device's queue has
	 * one host thread that enqueues the device's work */
	rc = fam->hold(s->m, rp->dev, &rp->weights, msg, sizeof(msg));
	if (rc)
		return st_errf(rc, err, errlen, "replica %d on %s: %s", i, caps->name, msg);
	rp->threads = threads > 0 ? threads : caps->kind == DEV_KIND_CPU ? caps->n_cores : 1;
	rc = dev_queue_create(rp->dev, rp->threads, &rp->q, msg, sizeof(msg));
	if (rc)
		return st_errf(rc, err, errlen, "replica %d: %s", i, msg);
	snprintf(rp->st.device, sizeof(rp->st.device), "%s", caps->name);
	rp->st.threads = rp->threads;
	rp->st.started_ms = st_now_ms();
	rc = dev_queue_submit(rp->q, fam->loop, rp);
	if (rc)
		return st_errf(rc, err, errlen, "replica %d: cannot start (%s)", i, st_str(rc));
	return 0;
}

static int es_open_all(struct eng_sched *s, const struct eng_model_spec *spec,
		       const struct eng__family *fam, char *err, size_t errlen)
{
	if (spec->n_replicas) {
		for (int i = 0; i < s->n_reps; i++) {
			int rc = es_open_replica(s, i, spec->replicas[i].device,
						 spec->replicas[i].threads, fam, err, errlen);
			if (rc)
				return rc;
		}
		return 0;
	}
	int cpus[DEV_MAX_CPUS];
	int n_cpus = dev_cpus_available(cpus, DEV_MAX_CPUS);
	if (n_cpus < 0)
		return st_errf(n_cpus, err, errlen, "cannot list the cores");
	if (s->n_reps > n_cpus)
		return st_errf(-ST_INVAL, err, errlen,
			       "%d replicas need at least %d cores; this process may use %d "
			       "(a replica's threads never share a core)",
			       s->n_reps, s->n_reps, n_cpus);
	for (int i = 0; i < s->n_reps; i++) {
		char dspec[DEV_NAME_MAX * 4];
		int rc = es_spread(i, s->n_reps, cpus, n_cpus, dspec, sizeof(dspec));
		if (!rc)
			rc = es_open_replica(s, i, dspec, 0, fam, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* --- life ------------------------------------------------------------------ */

int eng__sched_create(struct eng_model *m, const struct eng_model_spec *spec,
		      const struct eng__family *fam,
		      struct eng_sched **out, char *err, size_t errlen)
{
	*out = NULL;
	int n = spec->n_replicas ? (int)spec->n_replicas : es_def(spec->replica_count, ST_SCHED_DEF_REPLICAS);
	struct eng_sched *s = mem_calloc(1, sizeof(*s));
	if (!s)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	s->m = m;
	s->max_batch_size = es_def(spec->max_batch_size, ST_SCHED_DEF_MAX_BATCH_SIZE);
	s->max_queue_delay_ms = spec->max_queue_delay_ms > 0 ? spec->max_queue_delay_ms
				: spec->max_queue_delay_ms < 0 ? 0
				: ST_SCHED_DEF_MAX_QUEUE_DELAY_MS;
	s->max_queue_size = es_def(spec->max_queue_size, ST_SCHED_DEF_MAX_QUEUE_SIZE);
	s->max_num_seqs = es_def(spec->max_num_seqs, ST_SCHED_DEF_MAX_NUM_SEQS);
	s->max_batch_tokens = es_def(spec->max_batch_tokens, ST_SCHED_DEF_MAX_BATCH_TOKENS);
	s->prefix_cache_bytes = (size_t)(spec->prefix_cache_mb > 0   ? spec->prefix_cache_mb
					 : spec->prefix_cache_mb < 0 ? 0
								     : ST_SCHED_DEF_PREFIX_CACHE_MB)
				<< 20;
	s->timeout_ms = spec->timeout_ms > 0 ? spec->timeout_ms : ST_SCHED_DEF_TIMEOUT_MS;
	s->slow_factor = spec->slow_replica_factor > 0	 ? spec->slow_replica_factor
			 : spec->slow_replica_factor < 0 ? 0
							 : ST_SCHED_DEF_SLOW_REPLICA_FACTOR;
	eng_model_stats_init(&s->st);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->reps = mem_calloc((size_t)n, sizeof(*s->reps));
	if (!s->reps) {
		eng__sched_destroy(s);
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	}
	s->n_reps = n;
	s->fam = fam;
	int rc = es_open_all(s, spec, fam, err, errlen);
	if (rc) {
		eng__sched_destroy(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* The queue a priority waits in: higher ranks are taken first. */
static int es_rank(enum eng_priority p)
{
	return p == ENG_PRIORITY_BATCH ? 0 : (int)p + 1;
}

/* Detach every waiting request (under mu); the caller ends them. */
static struct eng__req *es_detach_waiting(struct eng_sched *s)
{
	struct eng__req *all = NULL;
	for (int p = ENG_PRIORITY_COUNT - 1; p >= 0; p--) {
		while (s->queue[p]) {
			struct eng__req *r = s->queue[p];
			s->queue[p] = r->next;
			r->next = all;
			all = r;
		}
		s->tail[p] = NULL;
	}
	s->n_waiting = 0;
	s->n_waiting_batch = 0;
	s->n_waiting_groups = 0;
	return all;
}

void eng__sched_destroy(struct eng_sched *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->closing = true;
	struct eng__req *left = es_detach_waiting(s);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	while (left) {
		struct eng__req *r = left;
		left = r->next;
		r->end(r, -ST_CLOSED, "the server is shutting down");
	}
	for (int i = 0; s->reps && i < s->n_reps; i++) {
		dev_queue_destroy(s->reps[i].q); /* waits for the loop to return */
		if (s->reps[i].weights)
			s->fam->release(s->m, s->reps[i].weights);
		dev_close(s->reps[i].dev);
	}
	mem_free(s->reps);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	mem_free(s);
}

/* --- requests ----------------------------------------------------------------- */

int eng__sched_submit(struct eng_sched *s, struct eng__req *const *rs, size_t n,
		      const struct eng_req_opts *o)
{
	int timeout = s->timeout_ms;
	if (o && o->timeout_ms > 0 && (!timeout || o->timeout_ms < timeout))
		timeout = o->timeout_ms; /* a request may shorten the model's deadline */
	double now = st_now_ms();
	enum eng_priority prio = o && o->priority > 0 && o->priority < ENG_PRIORITY_COUNT
					 ? o->priority
					 : ENG_PRIORITY_NORMAL;
	int p = es_rank(prio);
	/* batch requests (their number bounded by the Batch API's runners)
	 * do not count against max_queue_size: they never make an
	 * interactive request wait with 429 */
	bool batch = prio == ENG_PRIORITY_BATCH;
	for (size_t i = 0; i < n; i++) {
		rs[i]->priority = prio;
		rs[i]->t_submit = now;
		rs[i]->t_deadline = timeout > 0 ? now + timeout : 0;
		rs[i]->next = NULL;
		rs[i]->counts = i == 0 && !batch;
	}
	pthread_mutex_lock(&s->mu);
	if (s->closing) {
		pthread_mutex_unlock(&s->mu);
		return -ST_CLOSED;
	}
	if (!batch && s->n_waiting_groups + 1 > (size_t)s->max_queue_size) {
		s->st.rejected += n;
		pthread_mutex_unlock(&s->mu);
		return -ST_BUSY;
	}
	for (size_t i = 0; i < n; i++) {
		if (s->tail[p])
			s->tail[p]->next = rs[i];
		else
			s->queue[p] = rs[i];
		s->tail[p] = rs[i];
	}
	s->n_waiting += n;
	s->n_waiting_batch += batch ? n : 0;
	s->n_waiting_groups += !batch;
	s->st.submitted += n;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* Under mu: may rp take a waiting request? Not while another replica runs
 * fewer (one with none is waiting to take it); nor while one at least
 * slow_replica_factor times faster (default 4: replicas on equal devices
 * differ by less - batching, the lengths of the requests each drew -,
 * PoCL's OpenCL against a cpu core by about 30; both paces measured:
 * ms_per_work) would end one
 * more request sooner, (its running + 1) times its pace below rp's. So a
 * model on a fast and a slow device gives the slow one only what the fast
 * one cannot take in time; a replica not measured yet takes its turn. */
static bool es_eligible(const struct eng__replica *rp)
{
	const struct eng_sched *s = rp->s;
	double mine = rp->st.ms_per_work;
	for (int i = 0; i < s->n_reps; i++) {
		const struct eng__replica *o = &s->reps[i];
		double pace = o->st.ms_per_work;
		if (o->running < rp->running)
			return false;
		if (s->slow_factor && pace > 0 && mine > s->slow_factor * pace &&
		    (double)(o->running + 1) * pace < (double)(rp->running + 1) * mine)
			return false;
	}
	return true;
}

/* Under mu: wait on s->cv for at most ms milliseconds; ETIMEDOUT or 0. */
static int es_wait_ms(struct eng_sched *s, double ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long ns = (long long)ts.tv_nsec + (long long)(ms * 1e6);
	ts.tv_sec += (time_t)(ns / 1000000000LL);
	ts.tv_nsec = (long)(ns % 1000000000LL);
	return pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* Requests taken by a replica and not yet finished, over every model of
 * the process: the heap is the process's, so it is released only when
 * nothing at all runs (another model's requests would take the pages
 * back at once). */
static _Atomic long es_running_all;

/* Under mu, rp with nothing to run and no deadline: wait for work. Each
 * ENG_SCHED_IDLE_RELEASE_MS with no work, rp looks whether anything runs
 * anywhere; the first time nothing does, it hands the heap's freed memory
 * back (mem_release_freed, with mu released: it walks every arena), then
 * waits as long as it takes. */
static void es_wait_idle(struct eng__replica *rp)
{
	struct eng_sched *s = rp->s;
	if (rp->running || rp->released) {
		pthread_cond_wait(&s->cv, &s->mu);
		return;
	}
	if (es_wait_ms(s, ENG_SCHED_IDLE_RELEASE_MS) != ETIMEDOUT || s->n_waiting || s->closing ||
	    atomic_load(&es_running_all) > 0)
		return;
	rp->released = true;
	pthread_mutex_unlock(&s->mu);
	mem_release_freed();
	pthread_mutex_lock(&s->mu);
}

/* Under mu: requests rp could take with its room (max_other of the
 * other classes, max_batch of the batch class). */
static size_t es_takeable(const struct eng_sched *s, size_t max_other, size_t max_batch)
{
	return (max_other ? s->n_waiting - s->n_waiting_batch : 0) +
	       (max_batch ? s->n_waiting_batch : 0);
}

size_t eng__sched_take(struct eng__replica *rp, struct eng__req **out, size_t max_other,
		       size_t max_batch, bool block, double until_ms, bool *closing)
{
	struct eng_sched *s = rp->s;
	pthread_mutex_lock(&s->mu);
	while (block && (max_other || max_batch) && !s->closing &&
	       !(es_takeable(s, max_other, max_batch) && es_eligible(rp))) {
		if (until_ms <= 0) {
			es_wait_idle(rp);
			continue;
		}
		double left = until_ms - st_now_ms();
		if (left <= 0)
			break;
		es_wait_ms(s, left);
	}
	size_t k = 0, k_batch = 0;
	double now = st_now_ms();
	while (es_takeable(s, max_other, max_batch) && es_eligible(rp)) {
		int p = ENG_PRIORITY_COUNT - 1;
		while (p > 0 && !s->queue[p])
			p--;
		if (p == 0 ? k_batch == max_batch : k - k_batch == max_other)
			break; /* the highest class waiting has no more room */
		struct eng__req *r = s->queue[p];
		s->queue[p] = r->next;
		if (!s->queue[p])
			s->tail[p] = NULL;
		r->next = NULL;
		out[k++] = r;
		k_batch += p == 0;
		s->n_waiting--;
		s->n_waiting_batch -= p == 0;
		s->n_waiting_groups -= r->counts;
		rp->running++;
		rp->released = false;
		atomic_fetch_add(&es_running_all, 1);
		eng_hist_add(&s->st.queue_wait_ms, now - r->t_submit);
	}
	if (s->n_waiting)
		pthread_cond_broadcast(&s->cv); /* what this replica left, another may take */
	*closing = s->closing;
	pthread_mutex_unlock(&s->mu);
	return k;
}

/* When the next release under load is due (monotonic ms; 0: not armed). */
static _Atomic long long es_busy_release_at;

/* A request ended: when ENG_SCHED_BUSY_RELEASE_MS have passed since the
 * last release under load (or since the first end), hand the freed
 * memory back; one thread wins the exchange, the others go on. */
static void es_release_when_due(void)
{
	long long now = (long long)st_now_ms();
	long long at = atomic_load(&es_busy_release_at);
	if (at && now < at)
		return;
	if (!atomic_compare_exchange_strong(&es_busy_release_at, &at,
					    now + ENG_SCHED_BUSY_RELEASE_MS))
		return;
	if (at)
		mem_release_freed();
}

void eng__sched_finish(struct eng__replica *rp)
{
	struct eng_sched *s = rp->s;
	pthread_mutex_lock(&s->mu);
	rp->running--;
	atomic_fetch_sub(&es_running_all, 1);
	if (s->n_waiting)
		pthread_cond_broadcast(&s->cv); /* the balance moved */
	pthread_mutex_unlock(&s->mu);
	es_release_when_due();
}

/* Under mu: the outcome counters. */
static void es_count_locked(struct eng_sched *s, int rc, double request_ms)
{
	if (!rc) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s->st.completed++;
		s->st.last_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
		eng_hist_add(&s->st.request_ms, request_ms);
	} else if (rc == -ST_CANCELED) {
		s->st.cancelled++;
	} else if (rc == -ST_TIMEDOUT) {
		s->st.timed_out++;
	} else {
		s->st.failed++;
	}
}

void eng__sched_count(struct eng_sched *s, int rc, double request_ms)
{
	pthread_mutex_lock(&s->mu);
	es_count_locked(s, rc, request_ms);
	pthread_mutex_unlock(&s->mu);
}

bool eng__sched_sweep(struct eng__replica *rp)
{
	struct eng_sched *s = rp->s;
	struct eng__req *gone = NULL;
	double now = st_now_ms();
	pthread_mutex_lock(&s->mu);
	for (int p = 0; p < ENG_PRIORITY_COUNT; p++) {
		struct eng__req **link = &s->queue[p], *last = NULL;
		while (*link) {
			struct eng__req *r = *link;
			int rc = eng__req_expired(r, now);
			if (!rc) {
				last = r;
				link = &r->next;
				continue;
			}
			*link = r->next;
			r->next = gone;
			gone = r;
			s->n_waiting--;
			s->n_waiting_batch -= p == 0;
			s->n_waiting_groups -= r->counts;
			es_count_locked(s, rc, 0);
		}
		s->tail[p] = last;
	}
	bool closing = s->closing;
	pthread_mutex_unlock(&s->mu);
	while (gone) {
		struct eng__req *r = gone;
		gone = r->next;
		r->end(r, eng__req_expired(r, now), NULL);
	}
	return closing;
}

/* --- waiting for one request ------------------------------------------------- */

void eng__waiter_init(struct eng__waiter *w, char *err, size_t errlen)
{
	*w = (struct eng__waiter){ .err = err, .errlen = errlen };
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
}

void eng__waiter_done(struct eng__waiter *w, int rc, void *result, const char *err)
{
	pthread_mutex_lock(&w->mu);
	w->rc = rc;
	w->result = result;
	if (rc && err && w->err && w->errlen)
		snprintf(w->err, w->errlen, "%s", err);
	w->finished = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void eng__waiter_fini(struct eng__waiter *w)
{
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

int eng__waiter_wait(struct eng__waiter *w, void **result)
{
	pthread_mutex_lock(&w->mu);
	while (!w->finished)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	*result = w->result;
	int rc = w->rc;
	eng__waiter_fini(w);
	return rc;
}
