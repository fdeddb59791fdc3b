/* srv_batch.c - the Batch API service (srv_batch.h): its start and stop,
 * the batch thread that runs the routes' commands and sweeps expired
 * files and batches, and the list of open batches the runners take
 * items from.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch_int.h"

#define SRV_BATCH_SWEEP_S 30 /* how often expired files and batches are looked for (or
			     * batch.file_ttl_s when shorter) */
#define SRV_BATCH_MAX_RUNNERS 256

/* The store's path: batch.store, else $XDG_STATE_HOME/inferd/batch.db,
 * else ~/.local/state/inferd/batch.db (the XDG base directory spec's
 * state home). */
static int batch_path(const struct cfg *cfg, char *out, size_t cap)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;
	if (cfg->batch_store)
		n = snprintf(out, cap, "%s", cfg->batch_store);
	else if (xdg && *xdg == '/')
		n = snprintf(out, cap, "%s/inferd/batch.db", xdg);
	else if (home && *home)
		n = snprintf(out, cap, "%s/.local/state/inferd/batch.db", home);
	else
		n = snprintf(out, cap, "inferd-batch.db");
	return n < 0 || (size_t)n >= cap ? -ST_INVAL : 0;
}

/* Batches past their window: end those idle now, mark the others. */
static void batch_expire_open(struct srv_batchd *d, int64_t now)
{
	for (;;) {
		struct srv_bq *idle = NULL;
		pthread_mutex_lock(&d->mu);
		for (struct srv_bq *q = d->open; q && !idle; q = q->next) {
			if (q->finishing || q->ending != SRV_BQ_RUN || q->expires_at > now)
				continue;
			q->ending = SRV_BQ_EXPIRE;
			srv__bq_drop_items(q);
			q->exhausted = true;
			if (q->in_flight == 0) {
				q->finishing = true;
				idle = q;
			}
		}
		pthread_mutex_unlock(&d->mu);
		if (!idle)
			return;
		srv__bq_finish(d, d->store, idle);
	}
}

/* Load the store's open batches (after a restart) into d->open. */
static void batch_resume(struct srv_batchd *d)
{
	struct srv_batch *b = mem_calloc(64, sizeof(*b));
	if (!b)
		return;
	char after[SRV_BSTORE_ID_MAX] = "";
	size_t n;
	bool more = true;
	while (more && !srv__bstore_batch_list(d->store, after, true, b, 64, &n, &more) && n) {
		for (size_t i = 0; i < n; i++)
			srv__bq_add(d, &b[i]);
		memcpy(after, b[n - 1].id, sizeof(after));
	}
	mem_free(b);
}

/* --- the batch thread -------------------------------------------------- */

static void batch_sweep(struct srv_batchd *d)
{
	if (!d->store)
		return;
	int64_t now = srv__batch_now();
	batch_expire_open(d, now);
	int rc = srv__bstore_expire(d->store, now);
	if (rc < 0)
		fprintf(stderr, "inferd: batch store: removing expired files failed: %s\n",
			st_str(rc));
}

static void *batch_main(void *arg)
{
	struct srv_batchd *d = arg;
	int64_t next_sweep = 0;
	pthread_mutex_lock(&d->mu);
	while (!d->quit) {
		struct srv_bcmd *c = d->cmd_head;
		if (!c) {
			int64_t now = srv__batch_now();
			if (now >= next_sweep) {
				pthread_mutex_unlock(&d->mu);
				batch_sweep(d);
				pthread_mutex_lock(&d->mu);
				int64_t every = d->cfg->batch_file_ttl_s < SRV_BATCH_SWEEP_S
							? d->cfg->batch_file_ttl_s
							: SRV_BATCH_SWEEP_S;
				next_sweep = now + every;
				continue;
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += next_sweep - now;
			pthread_cond_timedwait(&d->cmd_cv, &d->mu, &ts);
			continue;
		}
		d->cmd_head = c->next;
		if (!d->cmd_head)
			d->cmd_tail = NULL;
		pthread_mutex_unlock(&d->mu);
		c->run(d, c);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* Runners when batch.concurrency is absent: each model's largest batch
 * (sequences for generation, windows for transcription) times its
 * replicas, so that a batch can fill every replica's batch. */
static int batch_auto_runners(const struct srv *srv)
{
	const struct cfg *cfg = srv->cfg;
	long n = 0;
	for (size_t i = 0; i < cfg->n_models; i++) {
		const struct cfg_model *m = &cfg->models[i];
		const struct eng_model *em = srv->eng ? eng_model_find(srv->eng, m->name) : NULL;
		bool gen = em && eng_model_task(em) == ENG_TASK_GENERATION;
		long reps = m->n_replicas ? (long)m->n_replicas : m->replica_count;
		n += (gen ? m->max_num_seqs : m->max_batch_size) * (reps > 0 ? reps : 1);
	}
	return n < 1 ? 1 : n > SRV_BATCH_MAX_RUNNERS ? SRV_BATCH_MAX_RUNNERS : (int)n;
}

int srv__batch_start(struct srv *srv, char *err, size_t errlen)
{
	struct srv_batchd *d = mem_calloc(1, sizeof(*d));
	if (!d)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	d->srv = srv;
	d->cfg = srv->cfg;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cmd_cv, NULL);
	pthread_cond_init(&d->work_cv, NULL);
	srv->batch = d;
	int rc = batch_path(srv->cfg, d->path, sizeof(d->path));
	if (rc)
		return st_errf(rc, err, errlen, "batch.store: the path is too long");
	rc = srv__batch_store_open(d, false, &d->store, err, errlen);
	if (rc == -ST_NOTFOUND)
		rc = 0; /* made on the first upload */
	if (rc)
		return rc;
	d->store_ready = d->store != NULL;
	if (d->store)
		batch_resume(d);
	d->n_runners = srv->cfg->batch_concurrency > 0 ? srv->cfg->batch_concurrency
						      : batch_auto_runners(srv);
	d->runners = mem_calloc((size_t)d->n_runners, sizeof(*d->runners));
	if (!d->runners)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	if (pthread_create(&d->thread, NULL, batch_main, d))
		return st_errf(-ST_IO, err, errlen, "cannot start the batch thread");
	d->thread_started = true;
	for (int i = 0; i < d->n_runners; i++) {
		struct srv_brunner *r = &d->runners[i];
		r->d = d;
		r->fd = r->handed_fd = -1;
		if (pthread_create(&r->th, NULL, srv__brunner_main, r))
			return st_errf(-ST_IO, err, errlen, "cannot start batch runner %d", i);
		r->started = true;
	}
	return 0;
}

void srv__batch_drain(struct srv *srv)
{
	struct srv_batchd *d = srv->batch;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stopping = true;
	pthread_cond_broadcast(&d->work_cv);
	pthread_mutex_unlock(&d->mu);
}

void srv__batch_stop(struct srv *srv)
{
	struct srv_batchd *d = srv->batch;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stopping = d->quit = true;
	pthread_cond_broadcast(&d->work_cv);
	pthread_cond_broadcast(&d->cmd_cv);
	pthread_mutex_unlock(&d->mu);
	for (int i = 0; d->runners && i < d->n_runners; i++) {
		struct srv_brunner *r = &d->runners[i];
		if (r->started)
			pthread_join(r->th, NULL);
		if (r->fd >= 0)
			close(r->fd);
		if (r->handed_fd >= 0)
			close(r->handed_fd);
		srv__bstore_close(r->store);
	}
	if (d->thread_started)
		pthread_join(d->thread, NULL);
	srv__bq_free_all(d);
	srv__bstore_close(d->store);
	mem_free(d->runners);
	pthread_cond_destroy(&d->work_cv);
	pthread_cond_destroy(&d->cmd_cv);
	pthread_mutex_destroy(&d->mu);
	mem_free(d);
	srv->batch = NULL;
}
