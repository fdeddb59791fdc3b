/* ib_live_stats.c - a stage's figures for its live streams (deepgram-live):
 * the summary's "live" object of docs/bench.md and its line in the final
 * table. Like the rest of the summary it counts the streams that ended
 * inside the stage's window; latencies, words per minute and transcripts
 * come from the streams that ended OK (closed with 1000 after
 * CloseStream), errors from all of them. Percentiles are nearest-rank, as
 * ib_stats.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "ib_int.h"

static bool ib_live_run_has(const struct ib_run *run)
{
	for (size_t i = 0; i < run->n_entries; i++)
		if (run->entries[i].ep == IB_EP_DEEPGRAM_LIVE)
			return true;
	return false;
}

static bool ib_live_counted(const struct ib_rec *r, int stage)
{
	return r->stage == stage && r->phase == 1 && r->live;
}

/* {"mean", "p50", "p95", "p99", "max"} of x[n] (sorted here), null when
 * n is 0. */
static json_t *ib_live_dist(double *x, size_t n)
{
	if (!n)
		return json_null();
	qsort(x, n, sizeof(*x), ib_cmp_double);
	double sum = 0.0;
	for (size_t i = 0; i < n; i++)
		sum += x[i];
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", sum / (double)n, "p50",
			 ib_pct(x, n, 50), "p95", ib_pct(x, n, 95), "p99", ib_pct(x, n, 99), "max",
			 x[n - 1]);
}

static const char *ib_live_input(const struct ib_run *run, const struct ib_rec *r)
{
	const char *p = run->audio[r->input].path, *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Words per minute of audio of stream r (its file's seconds). */
static double ib_live_wpm(const struct ib_run *run, const struct ib_rec *r)
{
	double s = run->audio[r->input].seconds;
	return s > 0 ? (double)r->live->words * 60.0 / s : 0.0;
}

/* One stream's object of "per_stream". */
static json_t *ib_live_stream(const struct ib_run *run, const struct ib_rec *r)
{
	const struct ib_live_rec *l = r->live;
	double fmax = 0.0;
	for (size_t k = 0; k < l->n_final; k++)
		fmax = l->final_lat[k] > fmax ? l->final_lat[k] : fmax;
	return json_pack("{s:s, s:f, s:s, s:i, s:I, s:I, s:o, s:I, s:f, s:f, s:o, s:b, s:s}",
			 "input", ib_live_input(run, r), "start_s", r->t_start, "kind",
			 ib_kind_name(r->kind), "close_code", l->close_code, "finals",
			 (json_int_t)l->n_final, "interims", (json_int_t)l->n_interim,
			 "final_latency_max_s", l->n_final ? json_real(fmax) : json_null(), "words",
			 (json_int_t)l->words, "words_per_minute", ib_live_wpm(run, r),
			 "send_lag_s", l->send_lag_s, "drain_s",
			 l->drain_s >= 0 ? json_real(l->drain_s) : json_null(), "kept_up",
			 l->kept_up, "transcript", l->transcript);
}

/* What one pass over the stage's streams counts and collects. */
struct ib_live_tally {
	size_t streams, ok, kept_up;
	long kinds[IB_KIND_COUNT];
	double *fin, *inter; /* OK streams' latencies; NULL on the counting pass */
	size_t n_fin, n_inter;
	double wpm_sum;
	json_t *by_code, *transcripts, *per_stream; /* NULL on the counting pass */
};

/* Stream r into t (its samples only when t has arrays for them). */
static void ib_live_tally_add(const struct ib_run *run, const struct ib_rec *r,
			      struct ib_live_tally *t)
{
	const struct ib_live_rec *l = r->live;
	t->streams++;
	t->kinds[r->kind]++;
	t->kept_up += l->kept_up;
	if (t->per_stream)
		json_array_append_new(t->per_stream, ib_live_stream(run, r));
	if (r->kind == IB_KIND_CLOSE && t->by_code) {
		char key[16];
		snprintf(key, sizeof(key), "%d", l->close_code);
		json_t *n = json_object_get(t->by_code, key);
		json_object_set_new(t->by_code, key,
				    json_integer(n ? json_integer_value(n) + 1 : 1));
	}
	if (r->kind != IB_KIND_OK)
		return;
	t->ok++;
	t->wpm_sum += ib_live_wpm(run, r);
	for (size_t k = 0; k < l->n_final; k++, t->n_fin++)
		if (t->fin)
			t->fin[t->n_fin] = l->final_lat[k];
	for (size_t k = 0; k < l->n_interim; k++, t->n_inter++)
		if (t->inter)
			t->inter[t->n_inter] = l->interim_lat[k];
	if (t->transcripts) {
		const char *in = ib_live_input(run, r);
		json_t *a = json_object_get(t->transcripts, in);
		if (!a)
			json_object_set_new(t->transcripts, in, a = json_array());
		json_array_append_new(a, json_string(l->transcript));
	}
}

static json_t *ib_live_kinds(const struct ib_live_tally *t)
{
	return json_pack(
		"{s:I, s:I, s:I, s:I, s:I}", "connect", (json_int_t)t->kinds[IB_KIND_CONNECT],
		"timeout", (json_int_t)t->kinds[IB_KIND_TIMEOUT], "protocol",
		(json_int_t)t->kinds[IB_KIND_PROTOCOL], "http", (json_int_t)t->kinds[IB_KIND_HTTP],
		"close", (json_int_t)t->kinds[IB_KIND_CLOSE]);
}

json_t *ib_live_stats(const struct ib_run *run, int stage)
{
	if (!ib_live_run_has(run))
		return json_null();
	struct ib_live_tally t = {0};
	for (size_t i = 0; i < run->n_recs; i++) /* counting: the arrays' sizes */
		if (ib_live_counted(&run->recs[i], stage))
			ib_live_tally_add(run, &run->recs[i], &t);
	struct ib_live_tally f = {
		.fin = ib_xrealloc(NULL, (t.n_fin + 1) * sizeof(double)),
		.inter = ib_xrealloc(NULL, (t.n_inter + 1) * sizeof(double)),
		.by_code = json_object(),
		.transcripts = json_object(),
		.per_stream = json_array(),
	};
	for (size_t i = 0; i < run->n_recs; i++)
		if (ib_live_counted(&run->recs[i], stage))
			ib_live_tally_add(run, &run->recs[i], &f);
	json_t *j = json_pack(
		"{s:f, s:f, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:o}",
		"speed", run->o->speed, "keep_up_s", run->o->keep_up_s, "streams",
		(json_int_t)f.streams, "ok", (json_int_t)f.ok, "errors",
		(json_int_t)(f.streams - f.ok), "kept_up", (json_int_t)f.kept_up, "errors_by_kind",
		ib_live_kinds(&f), "errors_by_close_code", f.by_code, "final_latency_s",
		ib_live_dist(f.fin, f.n_fin), "interim_latency_s", ib_live_dist(f.inter, f.n_inter),
		"finals", (json_int_t)f.n_fin, "interims", (json_int_t)f.n_inter,
		"words_per_minute", f.ok ? json_real(f.wpm_sum / (double)f.ok) : json_null(),
		"transcripts", f.transcripts, "per_stream", f.per_stream);
	free(f.fin);
	free(f.inter);
	return j;
}

/* The close codes of the streams that ended on one: " [1011] 2 ...". */
static void ib_live_codes(FILE *f, json_t *by_code)
{
	const char *k;
	json_t *v;
	if (json_object_size(by_code))
		fputs("; close codes", f);
	json_object_foreach(by_code, k, v)
	fprintf(f, " [%s] %lld", k, (long long)json_integer_value(v));
}

void ib_live_table(FILE *f, json_t *s)
{
	json_t *l = json_object_get(s, "live");
	if (!json_is_object(l))
		return;
	json_t *fl = json_object_get(l, "final_latency_s");
	json_t *il = json_object_get(l, "interim_latency_s");
	char b[5][32];
	fprintf(f, "%16s live: streams %lld (ok %lld, kept up %lld); final latency p50 %s p95 %s "
		   "max %s (%lld finals); interim p50 %s p95 %s (%lld)",
		"", (long long)json_integer_value(json_object_get(l, "streams")),
		(long long)json_integer_value(json_object_get(l, "ok")),
		(long long)json_integer_value(json_object_get(l, "kept_up")),
		ib_fmt_dur(fl, "p50", b[0], 32), ib_fmt_dur(fl, "p95", b[1], 32),
		ib_fmt_dur(fl, "max", b[2], 32),
		(long long)json_integer_value(json_object_get(l, "finals")),
		ib_fmt_dur(il, "p50", b[3], 32), ib_fmt_dur(il, "p95", b[4], 32),
		(long long)json_integer_value(json_object_get(l, "interims")));
	json_t *wpm = json_object_get(l, "words_per_minute");
	if (json_is_number(wpm))
		fprintf(f, "; %.0f words/min", json_number_value(wpm));
	ib_live_codes(f, json_object_get(l, "errors_by_close_code"));
	fputc('\n', f);
}
