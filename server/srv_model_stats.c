/* srv_model_stats.c - the schedulers' stats (engine/sched/eng_stats.h) as
 * Prometheus metrics (appended to GET /metrics) and as JSON for
 * GET /v2/models/stats and GET /v2/models/{name}/stats.
 *
 * The JSON follows Triton's statistics extension where it has a name for
 * a figure (model_stats[].inference_count, execution_count,
 * inference_stats.success/fail/queue/compute_infer as {count, ns},
 * batch_stats[]); what Triton has no field for sits under "inferd":
 * outcomes, tokens, audio seconds, queue depth, the TTFT / inter-token /
 * queue-wait histograms, each replica's device, threads, busy ratio and
 * requests, and the last ENG_STATS_RECENT ended requests (replica,
 * outcome, submitted / admitted / ended on the monotonic clock of
 * "now_ms"). Rendering runs on the loop thread: it copies counters (a
 * mutex held for microseconds) and formats a few kilobytes.
 */
#include <stddef.h>
#include <stdio.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/eng.h"
#include "engine/sched/eng_stats.h"
#include "server/srv_int.h"
#include "server/srv_model_stats.h"

/* --- Prometheus ------------------------------------------------------------- */

/* Every metric family is one group (HELP, TYPE, then its samples for all
 * models), as the text format requires. */

static int srv_prom_head(struct srv_buf *out, const char *name, const char *type,
			 const char *help)
{
	return srv_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A histogram kept in ms (scale 1e-3: rendered in seconds) or in units
 * (scale 1). */
static int srv_prom_hist(struct srv_buf *out, const char *name, const char *model,
			 const struct eng_hist *h, double scale)
{
	uint64_t cum = 0;
	int rc = 0;
	for (int b = 0; b < h->n_bounds && !rc; b++) {
		cum += h->counts[b];
		rc = srv_buf_printf(out, "%s_bucket{model=\"%s\",le=\"%g\"} %llu\n", name, model,
				    h->bounds[b] * scale, (unsigned long long)cum);
	}
	if (!rc)
		rc = srv_buf_printf(out,
				    "%s_bucket{model=\"%s\",le=\"+Inf\"} %llu\n"
				    "%s_sum{model=\"%s\"} %.6f\n%s_count{model=\"%s\"} %llu\n",
				    name, model, (unsigned long long)h->count, name, model,
				    h->sum * scale, name, model, (unsigned long long)h->count);
	return rc;
}

struct srv_prom_all {
	const struct eng *eng;
	struct eng_stats *s; /* [n] */
	size_t n;
};

static const char *srv_prom_model(const struct srv_prom_all *a, size_t i)
{
	return eng_model_name(eng_model_at(a->eng, i));
}

static int srv_prom_outcomes(struct srv_buf *out, const struct srv_prom_all *a)
{
	int rc = srv_prom_head(out, "inferd_model_requests_total", "counter",
			       "Requests that reached a model's scheduler, by outcome "
			       "(rejected: its queue was full).");
	for (size_t i = 0; i < a->n && !rc; i++) {
		const struct eng_model_stats *st = &a->s[i].model;
		const struct {
			const char *outcome;
			uint64_t n;
		} oc[] = { { "completed", st->completed }, { "failed", st->failed },
			   { "cancelled", st->cancelled }, { "timed_out", st->timed_out },
			   { "rejected", st->rejected } };
		for (size_t k = 0; k < sizeof(oc) / sizeof(oc[0]) && !rc; k++)
			rc = srv_buf_printf(out,
					    "inferd_model_requests_total{model=\"%s\",outcome=\"%s\"} %llu\n",
					    srv_prom_model(a, i), oc[k].outcome,
					    (unsigned long long)oc[k].n);
	}
	return rc;
}

/* One sample per model: value(stats). */
static int srv_prom_scalar(struct srv_buf *out, const struct srv_prom_all *a, const char *name,
			   const char *type, const char *help,
			   double (*value)(const struct eng_stats *s))
{
	int rc = srv_prom_head(out, name, type, help);
	for (size_t i = 0; i < a->n && !rc; i++)
		rc = srv_buf_printf(out, "%s{model=\"%s\"} %.6g\n", name, srv_prom_model(a, i),
				    value(&a->s[i]));
	return rc;
}

static double srv_v_depth(const struct eng_stats *s) { return (double)s->queue_depth; }
static double srv_v_prompt(const struct eng_stats *s) { return (double)s->model.prompt_tokens; }
static double srv_v_shared(const struct eng_stats *s)
{
	return (double)s->model.prompt_tokens_shared;
}
static double srv_v_gen(const struct eng_stats *s) { return (double)s->model.generated_tokens; }
static double srv_v_audio(const struct eng_stats *s) { return s->model.audio_seconds; }
static double srv_v_compute(const struct eng_stats *s) { return s->model.compute_ms / 1e3; }
static double srv_v_windows(const struct eng_stats *s) { return (double)s->model.encoder_windows; }
static double srv_v_parked(const struct eng_stats *s)
{
	return (double)s->model.batch_parked_steps;
}
static double srv_v_positions(const struct eng_stats *s)
{
	return (double)s->model.encoder_positions;
}

/* Per replica: busy seconds, busy ratio, running requests, ended ones. */
#define SRV_PROM_REPLICA_FAMILIES 4
static int srv_prom_replicas(struct srv_buf *out, const struct srv_prom_all *a, int which)
{
	static const char *const names[] = { "inferd_replica_busy_seconds_total",
					     "inferd_replica_busy_ratio", "inferd_replica_running",
					     "inferd_replica_requests_total" };
	static const char *const types[] = { "counter", "gauge", "gauge", "counter" };
	static const char *const helps[] = {
		"Time a replica spent in batched compute steps.",
		"Busy time over the time since the replica started.",
		"Requests a replica has admitted and not finished.",
		"Requests a replica admitted and ended, whatever the outcome.",
	};
	int rc = srv_prom_head(out, names[which], types[which], helps[which]);
	for (size_t i = 0; i < a->n && !rc; i++)
		for (int r = 0; r < a->s[i].n_replicas && !rc; r++) {
			const struct eng_replica_stats *rp = &a->s[i].replicas[r];
			double up = a->s[i].now_ms - rp->started_ms;
			double v = which == 0 ? rp->busy_ms / 1e3
				   : which == 1 ? (up > 0 ? rp->busy_ms / up : 0.0)
				   : which == 2 ? (double)rp->running
						: (double)rp->requests;
			rc = srv_buf_printf(out, "%s{model=\"%s\",replica=\"%d\",device=\"%s\"} %.6g\n",
					    names[which], srv_prom_model(a, i), r, rp->device, v);
		}
	return rc;
}

static int srv_prom_hists(struct srv_buf *out, const struct srv_prom_all *a)
{
	static const struct {
		const char *name, *help;
		size_t off;
		double scale;
	} h[] = {
		{ "inferd_model_queue_wait_seconds", "Time from submission to admission into a batch.",
		  offsetof(struct eng_model_stats, queue_wait_ms), 1e-3 },
		{ "inferd_model_batch_size",
		  "Sequences (generation) or windows (transcription) per compute step.",
		  offsetof(struct eng_model_stats, batch_size), 1 },
		{ "inferd_model_time_to_first_token_seconds",
		  "Time from submission to the first generated token.",
		  offsetof(struct eng_model_stats, ttft_ms), 1e-3 },
		{ "inferd_model_inter_token_latency_seconds",
		  "Time between consecutive generated tokens of a sequence.",
		  offsetof(struct eng_model_stats, itl_ms), 1e-3 },
		{ "inferd_model_request_seconds", "Time from submission to the end of successful requests.",
		  offsetof(struct eng_model_stats, request_ms), 1e-3 },
	};
	int rc = 0;
	for (size_t k = 0; k < sizeof(h) / sizeof(h[0]) && !rc; k++) {
		rc = srv_prom_head(out, h[k].name, "histogram", h[k].help);
		for (size_t i = 0; i < a->n && !rc; i++)
			rc = srv_prom_hist(out, h[k].name, srv_prom_model(a, i),
					   (const struct eng_hist *)((const char *)&a->s[i].model +
								     h[k].off),
					   h[k].scale);
	}
	return rc;
}

int srv__model_stats_prometheus(const struct eng *eng, struct srv_buf *out)
{
	struct srv_prom_all a = { eng, NULL, eng_model_count(eng) };
	a.s = mem_calloc(a.n ? a.n : 1, sizeof(*a.s));
	int rc = a.s ? 0 : -ST_NOMEM;
	for (size_t i = 0; i < a.n && !rc; i++)
		rc = eng_model_stats_get(eng_model_at(eng, i), &a.s[i]);
	if (!rc)
		rc = srv_prom_outcomes(out, &a);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_queue_depth", "gauge",
				     "Requests waiting for a replica.", srv_v_depth);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_prompt_tokens_total", "counter",
				     "Prompt tokens processed (prefill).", srv_v_prompt);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_prompt_tokens_shared_total", "counter",
				     "Of them, copied from a running sequence's KV cache or a kept "
				     "prompt's instead of computed (n choices, prompts that begin "
				     "alike, prefix caching).",
				     srv_v_shared);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_generated_tokens_total", "counter",
				     "Tokens generated.", srv_v_gen);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_audio_seconds_total", "counter",
				     "Seconds of audio transcribed.", srv_v_audio);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_compute_seconds_total", "counter",
				     "Time the replicas spent in batched compute steps.",
				     srv_v_compute);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_encoder_windows_total", "counter",
				     "Whisper encoder windows computed.", srv_v_windows);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_batch_parked_steps_total", "counter",
				     "Steps (generation) or rounds (transcription) computed while "
				     "batch-priority work waited for interactive work.",
				     srv_v_parked);
	if (!rc)
		rc = srv_prom_scalar(out, &a, "inferd_model_encoder_positions_total", "counter",
				     "Their encoder positions: 1500 per 30 s window, fewer in a "
				     "live stream's trimmed windows (models[].live_window_ms).",
				     srv_v_positions);
	for (int w = 0; w < SRV_PROM_REPLICA_FAMILIES && !rc; w++)
		rc = srv_prom_replicas(out, &a, w);
	if (!rc)
		rc = srv_prom_hists(out, &a);
	for (size_t i = 0; a.s && i < a.n; i++)
		eng_stats_fini(&a.s[i]);
	mem_free(a.s);
	return rc;
}

/* --- JSON --------------------------------------------------------------------- */

static json_t *srv_json_hist(const struct eng_hist *h)
{
	json_t *bounds = json_array(), *counts = json_array();
	for (int b = 0; bounds && counts && b <= h->n_bounds; b++) {
		if (b < h->n_bounds)
			json_array_append_new(bounds, json_real(h->bounds[b]));
		json_array_append_new(counts, json_integer((json_int_t)h->counts[b]));
	}
	return json_pack("{s:o,s:o,s:f,s:I}", "bounds", bounds, "counts", counts, "sum", h->sum,
			 "count", (json_int_t)h->count);
}

/* {count, ns} as Triton's StatisticDuration. */
static json_t *srv_json_dur(uint64_t count, double ms)
{
	return json_pack("{s:I,s:I}", "count", (json_int_t)count, "ns", (json_int_t)(ms * 1e6));
}

static json_t *srv_json_replicas(const struct eng_stats *s)
{
	json_t *a = json_array();
	for (int r = 0; a && r < s->n_replicas; r++) {
		const struct eng_replica_stats *rp = &s->replicas[r];
		double up = s->now_ms - rp->started_ms;
		json_array_append_new(a, json_pack("{s:i,s:s,s:i,s:I,s:f,s:f,s:I,s:I,s:f}", "replica",
			r, "device", rp->device, "threads", rp->threads, "batches",
			(json_int_t)rp->batches, "busy_seconds", rp->busy_ms / 1e3, "busy_ratio",
			up > 0 ? rp->busy_ms / up : 0.0, "running", (json_int_t)rp->running,
			"requests", (json_int_t)rp->requests, "ms_per_work", rp->ms_per_work));
	}
	return a;
}

/* An ended request's outcome, named as the "requests" counters are. */
static const char *srv_json_outcome(int rc)
{
	return !rc ? "completed" : rc == -ST_CANCELED ? "cancelled"
	       : rc == -ST_TIMEDOUT ? "timed_out" : "failed";
}

/* The last ended requests, oldest first; times in monotonic ms (the
 * clock of the model's "now_ms"). */
static const char *srv_json_priority(int p)
{
	return p == ENG_PRIORITY_URGENT ? "urgent"
	       : p == ENG_PRIORITY_HIGH ? "high"
	       : p == ENG_PRIORITY_BATCH ? "batch"
					 : "normal";
}

static json_t *srv_json_recent(const struct eng_model_stats *st)
{
	const struct eng_recent_req *e[ENG_STATS_RECENT];
	size_t n = eng_stats_recent(st, e);
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_pack("{s:i,s:s,s:s,s:f,s:f,s:f,s:I,s:I,s:f}",
			"replica", e[i]->replica, "outcome", srv_json_outcome(e[i]->rc), "priority",
			srv_json_priority(e[i]->priority), "submitted_ms",
			e[i]->submitted_ms, "admitted_ms", e[i]->admitted_ms, "ended_ms",
			e[i]->ended_ms, "prompt_tokens", (json_int_t)e[i]->prompt_tokens,
			"generated_tokens", (json_int_t)e[i]->generated_tokens, "audio_seconds",
			e[i]->audio_seconds));
	return a;
}

/* Triton's batch_stats: one entry per batch size seen, with its steps
 * and their compute time. */
static json_t *srv_json_batches(const struct eng_model_stats *st)
{
	json_t *a = json_array();
	for (int b = 1; a && b <= ENG_STATS_MAX_BATCH; b++)
		if (st->batch_count[b])
			json_array_append_new(a, json_pack("{s:i,s:o}", "batch_size", b,
				"compute_infer", srv_json_dur(st->batch_count[b], st->batch_ms[b])));
	return a;
}

static json_t *srv_json_model(const struct eng_model *m, const struct eng_stats *s)
{
	const struct eng_model_stats *st = &s->model;
	uint64_t failed = st->failed + st->cancelled + st->timed_out;
	json_t *inferd = json_pack(
		"{s:I,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:I,s:I,s:I,s:f,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:f,"
		"s:o}",
		"queue_depth", (json_int_t)s->queue_depth, "requests", "submitted",
		(json_int_t)st->submitted, "completed", (json_int_t)st->completed, "failed",
		(json_int_t)st->failed, "cancelled", (json_int_t)st->cancelled, "timed_out",
		(json_int_t)st->timed_out, "rejected", (json_int_t)st->rejected, "prompt_tokens",
		(json_int_t)st->prompt_tokens, "prompt_tokens_shared",
		(json_int_t)st->prompt_tokens_shared, "generated_tokens",
		(json_int_t)st->generated_tokens,
		"audio_seconds", st->audio_seconds, "batch_parked_steps",
		(json_int_t)st->batch_parked_steps, "queue_wait_ms", srv_json_hist(&st->queue_wait_ms),
		"batch_size", srv_json_hist(&st->batch_size), "ttft_ms", srv_json_hist(&st->ttft_ms),
		"inter_token_latency_ms", srv_json_hist(&st->itl_ms), "request_ms",
		srv_json_hist(&st->request_ms), "replicas", srv_json_replicas(s), "now_ms",
		s->now_ms, "recent_requests", srv_json_recent(st));
	uint64_t batches = 0;
	for (int r = 0; r < s->n_replicas; r++)
		batches += s->replicas[r].batches;
	/* compute_input / _output: inside the passes (zero time, the same
	 * count as compute_infer: Triton's clients check the counts agree) */
	return json_pack("{s:s,s:s,s:I,s:I,s:I,s:{s:o,s:o,s:o,s:o,s:o,s:o},s:o,s:o}", "name",
		eng_model_name(m), "version", "1", "last_inference", (json_int_t)st->last_ms,
		"inference_count", (json_int_t)st->completed, "execution_count",
		(json_int_t)batches, "inference_stats", "success",
		srv_json_dur(st->completed, st->request_ms.sum), "fail", srv_json_dur(failed, 0),
		"queue", srv_json_dur(st->queue_wait_ms.count, st->queue_wait_ms.sum),
		"compute_input", srv_json_dur(batches, 0), "compute_infer",
		srv_json_dur(batches, st->compute_ms), "compute_output", srv_json_dur(batches, 0),
		"batch_stats", srv_json_batches(st), "inferd", inferd);
}

json_t *srv__model_stats_json(const struct eng *eng, const struct eng_model *only)
{
	json_t *list = json_array();
	for (size_t i = 0; list && i < eng_model_count(eng); i++) {
		const struct eng_model *m = eng_model_at(eng, i);
		if (only && m != only)
			continue;
		struct eng_stats s;
		if (eng_model_stats_get(m, &s)) {
			json_decref(list);
			return NULL;
		}
		json_t *o = srv_json_model(m, &s);
		eng_stats_fini(&s);
		if (!o || json_array_append_new(list, o)) {
			json_decref(list);
			return NULL;
		}
	}
	return list ? json_pack("{s:o}", "model_stats", list) : NULL;
}
