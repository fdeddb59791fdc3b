/* srv_bqueue.c - the Batch API's open batches (srv_batch_int.h): the
 * list the runners take items from, how a batch is cancelled and ended,
 * and the store connections the service's threads open.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch_int.h"

int64_t srv__batch_now(void)
{
	return (int64_t)time(NULL);
}

/* mkdir -p of the folder holding path. */
static int batch_mkdirs(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST)
			return -ST_IO;
		*p = '/';
	}
	return mkdir(dir, 0700) && errno != EEXIST ? -ST_IO : 0;
}

int srv__batch_store_open(struct srv_batchd *d, bool create, struct srv_bstore **out,
			  char *err, size_t errlen)
{
	*out = NULL;
	if (!create && access(d->path, F_OK))
		return st_errf(-ST_NOTFOUND, err, errlen, "no batch store at %s", d->path);
	if (create && batch_mkdirs(d->path))
		return st_errf(-ST_IO, err, errlen, "batch store %s: cannot make its folder: %s",
			       d->path, strerror(errno));
	return srv__bstore_open(d->path, out, err, errlen);
}

/* --- open batches ------------------------------------------------------ */

void srv__bq_add(struct srv_batchd *d, const struct srv_batch *b)
{
	struct srv_bq *q = mem_calloc(1, sizeof(*q));
	pthread_mutex_lock(&d->mu);
	struct srv_bq **at = &d->open;
	for (; *at; at = &(*at)->next)
		if (!strcmp((*at)->id, b->id))
			break;
	if (!*at && q) {
		memcpy(q->id, b->id, sizeof(q->id));
		snprintf(q->endpoint, sizeof(q->endpoint), "%s", b->endpoint);
		q->expires_at = b->expires_at;
		q->ending = !strcmp(b->status, "cancelling") ? SRV_BQ_CANCEL : SRV_BQ_RUN;
		*at = q;
		q = NULL;
		d->n_open++;
		pthread_cond_broadcast(&d->work_cv);
	}
	pthread_mutex_unlock(&d->mu);
	if (q)
		mem_free(q);
}

void srv__bq_drop_items(struct srv_bq *q)
{
	while (q->head) {
		struct srv_bq_item *i = q->head;
		q->head = i->next;
		srv__bstore_items_free(&i->it, 1);
		mem_free(i);
	}
	q->tail = NULL;
}

bool srv__bq_cancel(struct srv_batchd *d, const char *id)
{
	bool idle = true;
	pthread_mutex_lock(&d->mu);
	for (struct srv_bq *q = d->open; q; q = q->next) {
		if (strcmp(q->id, id))
			continue;
		if (q->ending == SRV_BQ_RUN)
			q->ending = SRV_BQ_CANCEL;
		srv__bq_drop_items(q);
		q->exhausted = true;
		idle = q->in_flight == 0 && !q->finishing;
		if (idle)
			q->finishing = true;
		break;
	}
	pthread_mutex_unlock(&d->mu);
	return idle;
}

void srv__bq_finish(struct srv_batchd *d, struct srv_bstore *s, struct srv_bq *q)
{
	static const char *const status[] = { "completed", "cancelled", "expired" };
	int rc = srv__bstore_batch_finish(
		s, q->id, status[q->ending], srv__batch_now(), d->cfg->batch_file_ttl_s,
		q->ending == SRV_BQ_EXPIRE ? "batch_expired" : NULL,
		"this request could not be executed before the completion window expired");
	if (rc)
		fprintf(stderr, "inferd: batch %s: cannot end it: %s (it ends at the next start)\n",
			q->id, st_str(rc));
	pthread_mutex_lock(&d->mu);
	for (struct srv_bq **at = &d->open; *at; at = &(*at)->next)
		if (*at == q) {
			*at = q->next;
			d->n_open--;
			break;
		}
	srv__bq_drop_items(q);
	pthread_mutex_unlock(&d->mu);
	mem_free(q);
}

void srv__bq_free_all(struct srv_batchd *d)
{
	while (d->open) {
		struct srv_bq *q = d->open;
		d->open = q->next;
		srv__bq_drop_items(q);
		mem_free(q);
	}
}

int srv__batch_metrics(const struct srv *srv, struct srv_buf *out)
{
	struct srv_batchd *d = srv->batch;
	if (!d)
		return 0;
	return srv_buf_printf(
		out,
		"# HELP inferd_batch_items_total Batch API items ended by this process, by state.\n"
		"# TYPE inferd_batch_items_total counter\n"
		"inferd_batch_items_total{state=\"done\"} %llu\n"
		"inferd_batch_items_total{state=\"failed\"} %llu\n"
		"# HELP inferd_batch_retries_total Batch items sent and left pending (429, 503, "
		"connection lost).\n"
		"# TYPE inferd_batch_retries_total counter\n"
		"inferd_batch_retries_total %llu\n"
		"# HELP inferd_batch_audio_seconds_total Audio transcribed by done batch items.\n"
		"# TYPE inferd_batch_audio_seconds_total counter\n"
		"inferd_batch_audio_seconds_total %.3f\n"
		"# HELP inferd_batch_tokens_total Tokens of done batch items.\n"
		"# TYPE inferd_batch_tokens_total counter\n"
		"inferd_batch_tokens_total{kind=\"prompt\"} %llu\n"
		"inferd_batch_tokens_total{kind=\"completion\"} %llu\n"
		"# HELP inferd_batch_open Batches not ended (in_progress, finalizing, cancelling).\n"
		"# TYPE inferd_batch_open gauge\n"
		"inferd_batch_open %d\n"
		"# HELP inferd_batch_items_in_flight Batch items sent and not answered yet.\n"
		"# TYPE inferd_batch_items_in_flight gauge\n"
		"inferd_batch_items_in_flight %d\n"
		"# HELP inferd_batch_runners Batch requests that may be in flight at once.\n"
		"# TYPE inferd_batch_runners gauge\n"
		"inferd_batch_runners %d\n",
		(unsigned long long)d->n_done, (unsigned long long)d->n_failed,
		(unsigned long long)d->n_retried, (double)d->audio_ms / 1000.0,
		(unsigned long long)d->prompt_tokens, (unsigned long long)d->completion_tokens,
		(int)d->n_open,
		(int)d->in_flight, d->n_runners);
}
