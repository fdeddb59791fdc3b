/* ib_stats.c - inferd-bench's figures: a stage's summary, latency CDF,
 * 1-second time series and TTFT / ITL histograms as the JSON of
 * docs/bench.md; the final table; the progress line; the per-request CSV.
 *
 * Percentiles are nearest-rank (the value at rank ceil(p/100 * n) of the
 * sorted sample), the definition wrk and most load testers print. A stage
 * counts the requests that ended inside its window (phase 1); its
 * throughput (rtfx, tokens_per_s) credits every OK request's audio and
 * tokens pro rata to the part of its time inside the window, so that
 * requests a batching server answers together at the window's edge do not
 * quantize it (bench/replicas's method).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ib_int.h"

#define IB_CDF_POINTS 200
#define IB_HIST_BINS  30

static json_t *ib_dist(const double *x, size_t n)
{
	if (!n)
		return json_null();
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", sum / (double)n, "p50",
			 ib_pct(x, n, 50), "p90", ib_pct(x, n, 90), "p99", ib_pct(x, n, 99), "max",
			 x[n - 1]);
}

static json_t *ib_cdf(const double *x, size_t n)
{
	json_t *a = json_array();
	size_t m = n < IB_CDF_POINTS ? n : IB_CDF_POINTS;
	for (size_t k = 0; k < m; k++) {
		size_t i = m == 1 ? n - 1 : (size_t)llround((double)k * (double)(n - 1) / (double)(m - 1));
		json_array_append_new(a, json_pack("[f, f]", x[i], (double)(i + 1) / (double)n));
	}
	return a;
}

/* Histogram of sorted x[n] over [0, max] in IB_HIST_BINS bins. */
static json_t *ib_hist(const double *x, size_t n)
{
	if (!n)
		return json_null();
	double hi = x[n - 1] > 0 ? x[n - 1] : 1e-3;
	json_t *edges = json_array(), *counts = json_array();
	long c[IB_HIST_BINS] = {0};
	for (size_t i = 0; i < n; i++) {
		int b = (int)(x[i] / hi * IB_HIST_BINS);
		c[b < 0 ? 0 : b >= IB_HIST_BINS ? IB_HIST_BINS - 1 : b]++;
	}
	for (int b = 0; b <= IB_HIST_BINS; b++)
		json_array_append_new(edges, json_real(hi * b / IB_HIST_BINS));
	for (int b = 0; b < IB_HIST_BINS; b++)
		json_array_append_new(counts, json_integer(c[b]));
	return json_pack("{s:o, s:o}", "edges", edges, "counts", counts);
}

static bool ib_counted(const struct ib_rec *r, int stage)
{
	return r->stage == stage && r->phase == 1;
}

/* One second of the window: its requests, and where its OK latencies go
 * in the series' latency array. */
struct ib_sec {
	size_t n, n_ok, at, fill;
	double audio;
	long tokens;
};

/* The second of end time t of a window [w0, w1] of nb seconds, or -1: the
 * last second takes the window's remainder (up to a second past w1). */
static long ib_sec_of(double t, double w0, double w1, size_t nb)
{
	if (t < w0)
		return -1;
	double b = floor(t - w0);
	if (b < (double)(nb - 1))
		return (long)b;
	return t < w1 + 1.0 ? (long)(nb - 1) : -1;
}

/* One more request of status key (its status, or "error") in second b. */
static void ib_status_add(json_t *status, const struct ib_rec *r, size_t b, size_t nb)
{
	char key[16];
	if (r->kind == IB_KIND_OK || r->kind == IB_KIND_HTTP)
		snprintf(key, sizeof(key), "%d", r->status);
	else
		snprintf(key, sizeof(key), "error");
	json_t *arr = json_object_get(status, key);
	if (!arr) {
		arr = json_array();
		for (size_t k = 0; k < nb; k++)
			json_array_append_new(arr, json_integer(0));
		json_object_set_new(status, key, arr);
	}
	json_array_set_new(arr, b, json_integer(json_integer_value(json_array_get(arr, b)) + 1));
}

/* The OK latencies of the window's records into lat, grouped by second
 * (sec[b].at onwards); counts and sums per second; the status series. */
static void ib_secs_fill(const struct ib_run *run, int stage, double w0, double w1,
			 struct ib_sec *sec, size_t nb, double *lat, json_t *status)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < run->n_recs; i++) {
			const struct ib_rec *r = &run->recs[i];
			long b = ib_counted(r, stage) ? ib_sec_of(r->t_end, w0, w1, nb) : -1;
			if (b < 0)
				continue;
			struct ib_sec *s = &sec[b];
			if (pass == 1) {
				if (r->kind == IB_KIND_OK)
					lat[s->at + s->fill++] = r->t_end - r->t_start;
				continue;
			}
			s->n++;
			s->n_ok += r->kind == IB_KIND_OK;
			s->audio += r->audio_s;
			s->tokens += r->tokens;
			ib_status_add(status, r, (size_t)b, nb);
		}
		for (size_t b = 1; pass == 0 && b < nb; b++)
			sec[b].at = sec[b - 1].at + sec[b - 1].n_ok;
	}
}

/* Per-second series over the window, by the time each request ended (one
 * pass over the records, however long the window). */
static json_t *ib_timeseries(const struct ib_run *run, int stage, double w0, double w1)
{
	/* whole seconds; the last bucket takes the window's remainder (10 ms
	 * of slack: libuv's millisecond timers end a 3-s window at 2.9996 s,
	 * which is still three buckets) */
	size_t nb = (size_t)floor(w1 - w0 + 0.01);
	if (nb == 0)
		nb = 1;
	json_t *t = json_array(), *rps = json_array(), *rtfx = json_array(), *tps = json_array();
	json_t *p50 = json_array(), *p99 = json_array(), *status = json_object();
	struct ib_sec *sec = calloc(nb, sizeof(*sec));
	double *lat = malloc(run->n_recs * sizeof(*lat) + 1);
	if (!sec || !lat) {
		fprintf(stderr, "inferd-bench: out of memory\n");
		exit(2);
	}
	ib_secs_fill(run, stage, w0, w1, sec, nb, lat, status);
	for (size_t b = 0; b < nb; b++) {
		double b0 = w0 + (double)b, b1 = b + 1 == nb ? w1 : b0 + 1.0;
		double width = b1 - b0 > 1e-3 ? b1 - b0 : 1e-3;
		double *l = lat + sec[b].at;
		size_t n = sec[b].n_ok;
		json_array_append_new(t, json_real(b0 - w0));
		json_array_append_new(rps, json_real((double)sec[b].n / width));
		json_array_append_new(rtfx, json_real(sec[b].audio / width));
		json_array_append_new(tps, json_real((double)sec[b].tokens / width));
		qsort(l, n, sizeof(*l), ib_cmp_double);
		json_array_append_new(p50, n ? json_real(ib_pct(l, n, 50)) : json_null());
		json_array_append_new(p99, n ? json_real(ib_pct(l, n, 99)) : json_null());
	}
	free(sec);
	free(lat);
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "t", t, "rps", rps, "rtfx", rtfx,
			 "tokens_per_s", tps, "latency_p50", p50, "latency_p99", p99, "status",
			 status);
}

/* What a stage's summary counts, from one pass over its records. */
struct ib_tally {
	size_t n, n_ok;             /* requests counted; of them OK */
	size_t n_ttft, n_itl;       /* OK requests with a TTFT; their ITL gaps */
	long kinds[IB_KIND_COUNT];  /* requests by how they ended */
	long tokens;                /* output tokens of the OK requests */
	double audio;               /* audio seconds of the OK requests */
	double tokens_pr, audio_pr; /* the same pro rata, over every OK request */
	uint64_t sent, recv;        /* bytes of every counted request */
	json_t *by_status;          /* HTTP errors by status: {"503": n} */
};

/* The fraction of r's time [t_start, t_end] inside the window [w0, w1]
 * (an instant request: 1 when it ended inside). */
static double ib_in_window(const struct ib_rec *r, double w0, double w1)
{
	double d = r->t_end - r->t_start;
	if (!(d > 0))
		return r->t_end >= w0 && r->t_end <= w1;
	double a = r->t_start > w0 ? r->t_start : w0, b = r->t_end < w1 ? r->t_end : w1;
	return b > a ? (b - a) / d : 0.0;
}

static void ib_tally_stage(const struct ib_run *run, int stage, struct ib_tally *t)
{
	for (size_t i = 0; i < run->n_recs; i++) {
		const struct ib_rec *r = &run->recs[i];
		if (r->stage == stage && r->kind == IB_KIND_OK) {
			double f = ib_in_window(r, run->w0, run->w1);
			t->audio_pr += f * r->audio_s;
			t->tokens_pr += f * (double)r->tokens;
		}
		if (!ib_counted(r, stage))
			continue;
		t->n++;
		t->kinds[r->kind]++;
		t->sent += r->bytes_sent;
		t->recv += r->bytes_recv;
		if (r->kind == IB_KIND_OK) {
			t->n_ok++;
			t->audio += r->audio_s;
			t->tokens += r->tokens;
			t->n_ttft += r->ttft >= 0;
			t->n_itl += r->n_itl;
		}
		if (r->kind == IB_KIND_HTTP) {
			char key[16];
			snprintf(key, sizeof(key), "%d", r->status);
			json_t *c = json_object_get(t->by_status, key);
			json_object_set_new(t->by_status, key,
					    json_integer(c ? json_integer_value(c) + 1 : 1));
		}
	}
}

/* The OK requests' latencies, TTFTs and ITL gaps of a stage, sorted. */
struct ib_samples {
	double *lat, *ttft, *itl;
	size_t n_lat, n_ttft, n_itl;
};

static void ib_samples_free(struct ib_samples *sm)
{
	free(sm->lat);
	free(sm->ttft);
	free(sm->itl);
}

/* Fills sm (sized by t); -1 when out of memory (sm freed). */
static int ib_samples_collect(const struct ib_run *run, int stage, const struct ib_tally *t,
			      struct ib_samples *sm)
{
	sm->lat = malloc((t->n_ok + 1) * sizeof(*sm->lat));
	sm->ttft = malloc((t->n_ttft + 1) * sizeof(*sm->ttft));
	sm->itl = malloc((t->n_itl + 1) * sizeof(*sm->itl));
	if (!sm->lat || !sm->ttft || !sm->itl) {
		ib_samples_free(sm);
		return -1;
	}
	size_t a = 0, b = 0, c = 0;
	for (size_t i = 0; i < run->n_recs; i++) {
		const struct ib_rec *r = &run->recs[i];
		if (!ib_counted(r, stage) || r->kind != IB_KIND_OK)
			continue;
		sm->lat[a++] = r->t_end - r->t_start;
		if (r->ttft >= 0)
			sm->ttft[b++] = r->ttft;
		for (size_t k = 0; k < r->n_itl; k++)
			sm->itl[c++] = run->itl[r->itl0 + k];
	}
	qsort(sm->lat, a, sizeof(*sm->lat), ib_cmp_double);
	qsort(sm->ttft, b, sizeof(*sm->ttft), ib_cmp_double);
	qsort(sm->itl, c, sizeof(*sm->itl), ib_cmp_double);
	sm->n_lat = a;
	sm->n_ttft = b;
	sm->n_itl = c;
	return 0;
}

/* The summary's "cost": null without --price-per-hour. */
static json_t *ib_cost(const struct ib_opts *o, double rtfx, double tps)
{
	if (!(o->price_per_hour > 0))
		return json_null();
	return json_pack("{s:f, s:o, s:o}", "price_per_hour", o->price_per_hour, "per_audio_hour",
			 rtfx > 0 ? json_real(o->price_per_hour / rtfx) : json_null(),
			 "per_million_tokens",
			 tps > 0 ? json_real(o->price_per_hour / 3600.0 / tps * 1e6) : json_null());
}

/* The stage's "summary" over a window of w seconds; steals t->by_status. */
static json_t *ib_summary(const struct ib_opts *o, const struct ib_tally *t,
			  const struct ib_samples *sm, double w)
{
	double rtfx = t->audio_pr / w, tps = t->tokens_pr / w;
	json_t *cost = ib_cost(o, rtfx, tps);
	return json_pack(
		"{s:I, s:I, s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I}, s:f, s:f, s:f, s:I, s:f, s:I, s:I,"
		" s:o, s:o, s:o, s:o, s:f, s:f}",
		"requests", (json_int_t)t->n, "ok", (json_int_t)t->n_ok, "errors",
		(json_int_t)(t->n - t->n_ok), "errors_by_status", t->by_status, "errors_by_kind",
		"connect", (json_int_t)t->kinds[IB_KIND_CONNECT], "timeout",
		(json_int_t)t->kinds[IB_KIND_TIMEOUT], "protocol",
		(json_int_t)t->kinds[IB_KIND_PROTOCOL], "http", (json_int_t)t->kinds[IB_KIND_HTTP],
		"close", (json_int_t)t->kinds[IB_KIND_CLOSE],
		"rps", (double)t->n / w, "audio_s", t->audio, "rtfx", rtfx, "output_tokens",
		(json_int_t)t->tokens, "tokens_per_s", tps, "bytes_sent", (json_int_t)t->sent,
		"bytes_received", (json_int_t)t->recv, "latency_s", ib_dist(sm->lat, sm->n_lat),
		"ttft_s", ib_dist(sm->ttft, sm->n_ttft), "itl_s", ib_dist(sm->itl, sm->n_itl), "cost",
		cost, "audio_s_pro_rata", t->audio_pr, "output_tokens_pro_rata", t->tokens_pr);
}

json_t *ib_stats_stage(const struct ib_run *run, int stage, const char *name)
{
	double window = run->w1 - run->w0;
	struct ib_tally t = {.by_status = json_object()};
	struct ib_samples sm = {0};
	ib_tally_stage(run, stage, &t);
	if (ib_samples_collect(run, stage, &t, &sm) != 0) {
		json_decref(t.by_status);
		return NULL;
	}
	double w = window > 1e-9 ? window : 1e-9;
	json_t *summary = ib_summary(run->o, &t, &sm, w);
	json_object_set_new(summary, "live", ib_live_stats(run, stage));
	json_t *st = json_pack("{s:s, s:s, s:f, s:f, s:f, s:o, s:o, s:o, s:o, s:o}", "name", name,
			       "mode", run->open_loop ? "open" : "closed", "load", run->load,
			       "window_s", window, "window_start_s", run->w0, "summary", summary,
			       "latency_cdf",
			       ib_cdf(sm.lat, sm.n_lat), "timeseries",
			       ib_timeseries(run, stage, run->w0, run->w1), "ttft_hist",
			       ib_hist(sm.ttft, sm.n_ttft), "itl_hist", ib_hist(sm.itl, sm.n_itl));
	ib_samples_free(&sm);
	return st;
}

/* --- the table, the progress line, the CSV ------------------------------ */

static double ib_num(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* The table's optional column groups: those some stage has figures for. */
struct ib_cols {
	bool audio, tokens, ttft, cost;
};

static struct ib_cols ib_table_cols(json_t *stages)
{
	struct ib_cols c = {0};
	size_t i;
	json_t *st;
	json_array_foreach(stages, i, st)
	{
		json_t *s = json_object_get(st, "summary");
		c.audio |= ib_num(s, "audio_s") > 0;
		c.tokens |= ib_num(s, "output_tokens") > 0;
		c.ttft |= json_is_object(json_object_get(s, "ttft_s"));
		c.cost |= json_is_object(json_object_get(s, "cost"));
	}
	return c;
}

static void ib_table_head(FILE *f, const struct ib_cols *c)
{
	fprintf(f, "\n%-16s %8s %7s %9s", "stage", "requests", "errors", "req/s");
	if (c->audio)
		fprintf(f, " %8s", "RTFx");
	if (c->tokens)
		fprintf(f, " %9s", "tok/s");
	fprintf(f, " %9s %9s %9s %9s", "p50", "p90", "p99", "max");
	if (c->ttft)
		fprintf(f, " %9s %9s %9s", "TTFT p50", "TTFT p99", "ITL p50");
	if (c->cost)
		fprintf(f, " %12s", c->audio ? "$/audio-h" : "$/M tok");
	fputc('\n', f);
}

/* The latency columns, then TTFT / ITL and cost where the table has them. */
static void ib_table_times(FILE *f, const struct ib_cols *c, json_t *s)
{
	json_t *lat = json_object_get(s, "latency_s");
	char b1[32], b2[32], b3[32], b4[32];
	fprintf(f, " %9s %9s %9s %9s", ib_fmt_dur(lat, "p50", b1, 32),
		ib_fmt_dur(lat, "p90", b2, 32), ib_fmt_dur(lat, "p99", b3, 32),
		ib_fmt_dur(lat, "max", b4, 32));
	if (c->ttft) {
		json_t *t = json_object_get(s, "ttft_s"), *it = json_object_get(s, "itl_s");
		fprintf(f, " %9s %9s %9s", ib_fmt_dur(t, "p50", b1, 32),
			ib_fmt_dur(t, "p99", b2, 32), ib_fmt_dur(it, "p50", b3, 32));
	}
	if (c->cost) {
		json_t *cs = json_object_get(s, "cost");
		json_t *v = json_object_get(cs, c->audio ? "per_audio_hour" : "per_million_tokens");
		if (json_is_number(v))
			fprintf(f, " %12.4f", json_number_value(v));
		else
			fprintf(f, " %12s", "-");
	}
}

/* The line under a stage with errors: counts by kind, then by status. */
static void ib_table_errors(FILE *f, json_t *s)
{
	json_t *bk = json_object_get(s, "errors_by_kind"), *bs = json_object_get(s, "errors_by_status");
	if (json_integer_value(json_object_get(s, "errors")) <= 0)
		return;
	const char *k;
	json_t *v;
	fprintf(f, "%16s errors:", "");
	json_object_foreach(bk, k, v)
	if (json_integer_value(v))
		fprintf(f, " %s %lld", k, (long long)json_integer_value(v));
	json_object_foreach(bs, k, v)
	fprintf(f, " [%s] %lld", k, (long long)json_integer_value(v));
	fputc('\n', f);
}

void ib_stats_table(FILE *f, json_t *run_json)
{
	json_t *stages = json_object_get(run_json, "stages");
	struct ib_cols c = ib_table_cols(stages);
	size_t i;
	json_t *st;
	ib_table_head(f, &c);
	json_array_foreach(stages, i, st)
	{
		json_t *s = json_object_get(st, "summary");
		fprintf(f, "%-16s %8lld %7lld %9.2f", json_string_value(json_object_get(st, "name")),
			(long long)json_integer_value(json_object_get(s, "requests")),
			(long long)json_integer_value(json_object_get(s, "errors")), ib_num(s, "rps"));
		if (c.audio)
			fprintf(f, " %8.2f", ib_num(s, "rtfx"));
		if (c.tokens)
			fprintf(f, " %9.1f", ib_num(s, "tokens_per_s"));
		ib_table_times(f, &c, s);
		fputc('\n', f);
		ib_table_errors(f, s);
		ib_live_table(f, s);
	}
}

void ib_stats_progress(const struct ib_run *run, char *buf, size_t len)
{
	static const char *const phases[] = {"warm-up", "window", "drain", "done"};
	double now = ib_now(run);
	double t = run->phase == 0 ? now - (run->w0 - run->o->warmup_s) : now - run->w0;
	long errors = 0;
	double audio = 0.0;
	long tokens = 0;
	/* the last records only: the window's running totals */
	for (size_t i = run->n_recs; i-- > 0;) {
		const struct ib_rec *r = &run->recs[i];
		if (r->stage != run->stage)
			break;
		if (r->phase != 1 || r->t_end <= 0)
			continue;
		errors += r->kind != IB_KIND_OK;
		audio += r->audio_s;
		tokens += r->tokens;
	}
	double w = t > 1e-3 ? t : 1e-3;
	int n = snprintf(buf, len, "[stage %d %s %g] %s %5.1fs  answered %ld (%.1f/s)  errors %ld  "
			 "in flight %ld",
			 run->stage + 1, run->open_loop ? "rate" : "concurrency", run->load,
			 phases[run->phase < 4 ? run->phase : 3], t, run->answered_in_window,
			 run->phase == 1 ? (double)run->answered_in_window / w : 0.0, errors,
			 run->in_flight);
	if (n > 0 && (size_t)n < len && run->phase == 1 && audio > 0)
		n += snprintf(buf + n, len - (size_t)n, "  RTFx %.1f", audio / w);
	if (n > 0 && (size_t)n < len && run->phase == 1 && tokens > 0)
		snprintf(buf + n, len - (size_t)n, "  tok/s %.1f", (double)tokens / w);
}

void ib_stats_csv_header(FILE *f)
{
	fprintf(f, "stage,phase,endpoint,input,start_s,latency_s,ttft_s,status,kind,bytes_sent,"
		   "bytes_received,audio_s,tokens\n");
}

void ib_stats_csv_row(FILE *f, const struct ib_run *run, const struct ib_rec *r)
{
	static const char *const phases[] = {"warmup", "window", "drain"};
	const struct ib_entry *e = &run->entries[r->entry];
	const char *input = "";
	char num[32];
	if (e->ep == IB_EP_HTTP_GET) {
		input = "";
	} else if (ib_endpoint_is_audio(e->ep) || (e->ep == IB_EP_KSERVE_INFER && e->audio_dir)) {
		/* (a text entry's audio_dir, from --audio, is not loaded) */
		const char *p = run->audio[r->input].path, *s = strrchr(p, '/');
		input = s ? s + 1 : p;
	} else {
		snprintf(num, sizeof(num), "prompt %d", r->input);
		input = num;
	}
	fprintf(f, "%d,%s,%s,\"", r->stage, phases[r->phase >= 0 && r->phase < 3 ? r->phase : 2],
		ib_endpoint_name(e->ep));
	for (const char *s = input; *s; s++)
		fputs(*s == '"' ? "\"\"" : (char[2]){*s, 0}, f);
	fprintf(f, "\",%.6f,%.6f,", r->t_start, r->t_end - r->t_start);
	if (r->ttft >= 0)
		fprintf(f, "%.6f", r->ttft);
	fprintf(f, ",%d,%s,%llu,%llu,%.3f,%ld\n", r->status, ib_kind_name(r->kind),
		(unsigned long long)r->bytes_sent, (unsigned long long)r->bytes_recv, r->audio_s,
		r->tokens);
}
