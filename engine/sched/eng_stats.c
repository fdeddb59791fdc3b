/* eng_stats.c - histograms and snapshots of a scheduler's stats
 * (eng_stats.h). */
#include "engine/sched/eng_stats.h"

#include <string.h>

#include "common/clock.h"
#include "common/mem.h"
#include "common/st.h"
#include "engine/eng_int.h"
#include "engine/sched/eng_sched.h"

void eng_hist_init(struct eng_hist *h, const double *bounds, int n)
{
	memset(h, 0, sizeof(*h));
	h->n_bounds = n < ENG_HIST_MAX ? n : ENG_HIST_MAX;
	memcpy(h->bounds, bounds, (size_t)h->n_bounds * sizeof(double));
}

void eng_hist_add(struct eng_hist *h, double v)
{
	int i = 0;
	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void eng_model_stats_init(struct eng_model_stats *s)
{
	static const double ms[] = { 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
				     10000, 30000, 60000 };
	static const double itl[] = { 1, 2.5, 5, 10, 15, 20, 30, 50, 75, 100, 150, 250, 500, 1000 };
	static const double batch[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256 };
	memset(s, 0, sizeof(*s));
	eng_hist_init(&s->queue_wait_ms, ms, (int)(sizeof(ms) / sizeof(ms[0])));
	eng_hist_init(&s->ttft_ms, ms, (int)(sizeof(ms) / sizeof(ms[0])));
	eng_hist_init(&s->request_ms, ms, (int)(sizeof(ms) / sizeof(ms[0])));
	eng_hist_init(&s->itl_ms, itl, (int)(sizeof(itl) / sizeof(itl[0])));
	eng_hist_init(&s->batch_size, batch, (int)(sizeof(batch) / sizeof(batch[0])));
}

void eng_stats_batch(struct eng_model_stats *s, int size, double ms)
{
	if (size < 1)
		return;
	int slot = size < ENG_STATS_MAX_BATCH ? size : ENG_STATS_MAX_BATCH;
	eng_hist_add(&s->batch_size, (double)size);
	s->batch_count[slot]++;
	s->batch_ms[slot] += ms;
}

void eng_stats_ended(struct eng_model_stats *s, struct eng_replica_stats *rs,
		     const struct eng_recent_req *e)
{
	rs->requests++;
	double work = e->audio_seconds > 0 ? e->audio_seconds
					   : (double)(e->prompt_tokens + e->generated_tokens);
	if (!e->rc && work > 0 && e->ended_ms > e->admitted_ms) {
		double pace = (e->ended_ms - e->admitted_ms) / work;
		rs->ms_per_work = rs->ms_per_work > 0 ? 0.75 * rs->ms_per_work + 0.25 * pace : pace;
	}
	s->recent[s->n_recent_total % ENG_STATS_RECENT] = *e;
	s->n_recent_total++;
}

size_t eng_stats_recent(const struct eng_model_stats *s,
			const struct eng_recent_req *out[ENG_STATS_RECENT])
{
	uint64_t n = s->n_recent_total < ENG_STATS_RECENT ? s->n_recent_total : ENG_STATS_RECENT;
	uint64_t first = s->n_recent_total - n;
	for (uint64_t i = 0; i < n; i++)
		out[i] = &s->recent[(first + i) % ENG_STATS_RECENT];
	return (size_t)n;
}

int eng_model_stats_get(const struct eng_model *m, struct eng_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct eng_sched *s = m->sched;
	if (!s) {
		eng_model_stats_init(&out->model);
		out->now_ms = st_now_ms();
		return 0;
	}
	out->replicas = mem_calloc((size_t)s->n_reps, sizeof(*out->replicas));
	if (!out->replicas)
		return -ST_NOMEM;
	pthread_mutex_lock(&s->mu);
	out->model = s->st;
	out->queue_depth = s->n_waiting;
	out->n_replicas = s->n_reps;
	for (int i = 0; i < s->n_reps; i++) {
		const struct eng__replica *rp = &s->reps[i];
		out->replicas[i] = rp->st;
		out->replicas[i].running = rp->running;
	}
	pthread_mutex_unlock(&s->mu);
	out->now_ms = st_now_ms();
	return 0;
}

void eng_stats_fini(struct eng_stats *s)
{
	mem_free(s->replicas);
	s->replicas = NULL;
	s->n_replicas = 0;
}
