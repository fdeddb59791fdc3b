/* test_ib_html.c - the HTML report renderer (bench/harness/ib_html.c) on
 * synthetic runs built here: a two-stage streamed sweep with errors and a
 * label that needs escaping beside a one-stage run; a lone one-stage run
 * without streaming; degenerate values (single points, equal values, empty
 * arrays, nulls); and runs of the wrong schema.
 *
 * With IB_HTML_SAMPLE=PATH in the environment the two-run report is also
 * written to PATH, to be looked at in a browser. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ib_html.h"

#define NASTY       "inferd <&>\"'"
#define NASTY_ATTR  "inferd &lt;&amp;&gt;&quot;&#39;"
#define HIST_BINS   12
#define CDF_POINTS  40

/* ---- synthetic runs ------------------------------------------------------- */

static json_t *pct(double p50, double p99)
{
	return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", p50 * 1.1, "p50", p50, "p90",
			 (p50 + p99) / 2, "p99", p99, "max", p99 * 1.3);
}

/* cdf - n points of a latency CDF rising from lo to hi seconds. */
static json_t *cdf(size_t n, double lo, double hi)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		double fr = (double)(i + 1) / (double)n;
		json_array_append_new(a, json_pack("[f, f]", lo + (hi - lo) * fr * fr, fr));
	}
	return a;
}

/* hist - bins of width w seconds with a bump around bin 3. */
static json_t *hist(double w, int scale)
{
	json_t *e = json_array(), *c = json_array();
	for (int i = 0; i <= HIST_BINS; i++)
		json_array_append_new(e, json_real(w * i));
	for (int i = 0; i < HIST_BINS; i++)
		json_array_append_new(c, json_integer(scale * 40 / (1 + (i - 3) * (i - 3))));
	return json_pack("{s:o, s:o}", "edges", e, "counts", c);
}

static void push(json_t *obj, const char *key, json_t *v)
{
	json_array_append_new(json_object_get(obj, key), v);
}

/* timeseries - n 1-s buckets around rps requests/s; with errs, 503s and
 * transport errors in the second half. */
static json_t *timeseries(size_t n, double rps, double lat, double tps, bool errs)
{
	json_t *ts = json_pack("{s:[], s:[], s:[], s:[], s:[], s:[], s:{s:[]}}", "t", "rps",
			       "rtfx", "tokens_per_s", "latency_p50", "latency_p99", "status",
			       "200");
	json_t *st = json_object_get(ts, "status");
	if (errs) {
		json_object_set_new(st, "503", json_array());
		json_object_set_new(st, "error", json_array());
	}
	for (size_t i = 0; i < n; i++) {
		double v = rps * (0.9 + 0.2 * (double)((i * 7) % 5) / 4);
		int bad = errs && i >= n / 2 ? 2 : 0;
		push(ts, "t", json_integer((json_int_t)i));
		push(ts, "rps", json_real(v));
		push(ts, "rtfx", json_real(0));
		push(ts, "tokens_per_s", json_real(v * tps));
		push(ts, "latency_p50", i == 1 ? json_null() : json_real(lat * (1 + 0.05 * i)));
		push(ts, "latency_p99", json_real(lat * (2.5 + 0.1 * i)));
		push(st, "200", json_integer((json_int_t)v - bad));
		if (errs) {
			push(st, "503", json_integer(bad));
			push(st, "error", json_integer(bad / 2));
		}
	}
	return ts;
}

/* stage - one stage of load conc with nb 1-s buckets. */
static json_t *stage(const char *name, double conc, size_t nb, double rps, double lat,
		     bool stream, bool errs)
{
	json_t *sum = json_pack("{s:I, s:I, s:i, s:{}, s:{s:i, s:i, s:i, s:i}, s:f, s:f, s:f,"
				" s:I, s:f, s:i, s:i, s:o, s:o, s:o, s:o}",
				"requests", (json_int_t)(rps * nb), "ok",
				(json_int_t)(rps * nb) - (errs ? 12 : 0), "errors", errs ? 12 : 0,
				"errors_by_status", "errors_by_kind", "connect", 0, "timeout",
				errs ? 2 : 0, "protocol", 0, "http", errs ? 10 : 0, "rps", rps,
				"audio_s", 0.0, "rtfx", 0.0, "output_tokens",
				(json_int_t)(rps * nb * 40), "tokens_per_s", rps * 40, "bytes_sent",
				1000, "bytes_received", 5000, "latency_s", pct(lat, lat * 3),
				"ttft_s", stream ? pct(lat / 8, lat / 3) : json_null(), "itl_s",
				stream ? pct(0.012, 0.03) : json_null(), "cost",
				stream ? json_pack("{s:f, s:f, s:f}", "price_per_hour", 2.5,
						   "per_audio_hour", 0.0, "per_million_tokens",
						   2.5 / 3600 / (rps * 40) * 1e6)
				       : json_null());
	if (errs)
		json_object_set_new(json_object_get(sum, "errors_by_status"), "503",
				    json_integer(10));
	return json_pack("{s:s, s:s, s:f, s:f, s:o, s:o, s:o, s:o, s:o}", "name", name, "mode",
			 "closed", "load", conc, "window_s", (double)nb, "summary", sum,
			 "latency_cdf", cdf(CDF_POINTS - (size_t)conc, lat * 0.5, lat * 3),
			 "timeseries", timeseries(nb, rps, lat, 40, errs), "ttft_hist",
			 stream ? hist(0.01, 1) : json_null(), "itl_hist",
			 stream ? hist(0.004, 8) : json_null());
}

static json_t *run(const char *label, json_t *stages)
{
	return json_pack("{s:s, s:i, s:s, s:s, s:s, s:{s:s, s:b}, s:o}", "tool", "inferd-bench",
			 "schema", 1, "label", label, "url", "http://127.0.0.1:8080/?a=<b>",
			 "started", "2025-05-04T10:00:00Z", "options", "endpoint", "openai-chat",
			 "stream", 1, "stages", stages);
}

/* the two-stage streamed sweep with errors (5 + 5 buckets; CDF 39 and 36 points) */
static json_t *run_sweep(void)
{
	return run(NASTY, json_pack("[o, o]", stage("c1", 1, 5, 6.0, 0.15, true, false),
				    stage("c4", 4, 5, 19.0, 0.21, true, true)));
}

/* one stage, no streaming (8 buckets; CDF 38 points) */
static json_t *run_single(void)
{
	return run("llama.cpp", json_pack("[o]", stage("c2", 2, 8, 11.0, 0.18, false, false)));
}

/* ---- rendering and inspecting ---------------------------------------------- */

/* render - the report of runs as a new string (free it); *rc gets the result. */
static char *render(json_t *const *runs, size_t n, int *rc, char *err)
{
	/* static: with their addresses handed to open_memstream, gcc 12 at
	 * -O3 takes pointers into the result for pointers to these locals
	 * (-Wdangling-pointer) */
	static char *buf;
	static size_t len;
	buf = NULL;
	len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	*rc = ib_html_write(f, runs, n, err, 256);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* chart - a copy of chart NAME's <svg> element (free it), or NULL. */
static char *chart(const char *html, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "data-chart=\"%s\"", name);
	const char *p = strstr(html, key);
	if (!p)
		return NULL;
	const char *end = strstr(p, "</svg>");
	assert_non_null(end);
	return strndup(p, (size_t)(end - p));
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* series_n - whether chart NAME has a polyline of run label with n points. */
static bool series_n(const char *html, const char *name, const char *label, size_t n)
{
	char key[160];
	char *c = chart(html, name);
	bool found;
	assert_non_null(c);
	snprintf(key, sizeof(key), "<polyline class=\"series\" data-run=\"%s\" data-n=\"%zu\"",
		 label, n);
	found = strstr(c, key) != NULL;
	free(c);
	return found;
}

/* assert_finite_coords - no numeric attribute holds a NaN or infinity. */
static void assert_finite_coords(const char *html)
{
	static const char *const attrs[] = { " points=\"", " x=\"", " y=\"", " x1=\"", " x2=\"",
					     " y1=\"", " y2=\"", " cx=\"", " cy=\"", " width=\"",
					     " height=\"", " transform=\"", " viewBox=\"" };
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		for (const char *p = strstr(html, attrs[i]); p; p = strstr(p + 1, attrs[i])) {
			const char *v = p + strlen(attrs[i]);
			size_t n = strcspn(v, "\"");
			char *val = strndup(v, n);
			for (char *q = val; *q; q++)
				if (*q >= 'A' && *q <= 'Z')
					*q = (char)(*q - 'A' + 'a');
			assert_null(strstr(val, "nan"));
			assert_null(strstr(val, "inf"));
			free(val);
		}
	}
}

static void write_sample(const char *html)
{
	const char *path = getenv("IB_HTML_SAMPLE");
	FILE *f = path && *path ? fopen(path, "w") : NULL;
	if (!f)
		return;
	fputs(html, f);
	fclose(f);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_two_runs(void **state)
{
	(void)state;
	json_t *runs[2] = { run_sweep(), run_single() };
	char err[256];
	int rc;
	char *html = render(runs, 2, &rc, err);
	static const char *const charts[] = { "latency_cdf",  "throughput_time",  "work_time",
					      "latency_time", "ttft_hist",        "itl_hist",
					      "status_time",  "sweep_throughput", "sweep_p99" };
	assert_int_equal(rc, 0);
	write_sample(html);
	assert_int_equal(strncmp(html, "<!DOCTYPE html>", 15), 0);
	for (size_t i = 0; i < sizeof(charts) / sizeof(charts[0]); i++) {
		char *c = chart(html, charts[i]);
		assert_non_null(c);
		assert_non_null(strstr(c, "<title>"));
		free(c);
	}
	/* the sweep's stages end to end: 5 + 5 buckets; the single run: 8 */
	assert_true(series_n(html, "throughput_time", NASTY_ATTR, 10));
	assert_true(series_n(html, "throughput_time", "llama.cpp", 8));
	/* latency_p50 has a null at bucket 1 of each stage */
	assert_true(series_n(html, "latency_time", NASTY_ATTR, 8));
	assert_true(series_n(html, "latency_cdf", NASTY_ATTR, CDF_POINTS - 1));
	assert_true(series_n(html, "latency_cdf", NASTY_ATTR, CDF_POINTS - 4));
	assert_true(series_n(html, "latency_cdf", "llama.cpp", CDF_POINTS - 2));
	/* one point per stage against load */
	assert_true(series_n(html, "sweep_throughput", NASTY_ATTR, 2));
	assert_true(series_n(html, "sweep_p99", "llama.cpp", 1));
	/* 503 only in the sweep's second stage, zero-filled over its first */
	assert_true(series_n(html, "status_time", NASTY_ATTR, 10));
	/* only the sweep streams: 2 stages x HIST_BINS bars in each histogram */
	char *c = chart(html, "ttft_hist");
	assert_int_equal(count(c, "<rect class=\"bar\" data-run=\"" NASTY_ATTR "\""),
			 2 * HIST_BINS);
	assert_int_equal(count(c, "<rect class=\"bar\""), 2 * HIST_BINS);
	free(c);
	/* markers on short series, stage marks on time charts */
	c = chart(html, "throughput_time");
	assert_int_equal(count(c, "<circle class=\"pt\""), 18);
	assert_int_equal(count(c, "class=\"mark\""), 2);
	free(c);
	/* escaping: the raw label never appears, the escaped one does */
	assert_null(strstr(html, "<&>"));
	assert_null(strstr(html, "a=<b>"));
	assert_non_null(strstr(html, NASTY_ATTR));
	assert_non_null(strstr(html, "<h2>Errors</h2>"));
	assert_non_null(strstr(html, "per M tokens"));
	assert_finite_coords(html);
	free(html);
	json_decref(runs[0]);
	json_decref(runs[1]);
}

static void test_single_no_stream(void **state)
{
	(void)state;
	json_t *r = run_single();
	char err[256];
	int rc;
	char *html = render(&r, 1, &rc, err);
	assert_int_equal(rc, 0);
	assert_int_equal(strncmp(html, "<!DOCTYPE html>", 15), 0);
	assert_non_null(strstr(html, "data-chart=\"latency_cdf\""));
	assert_non_null(strstr(html, "data-chart=\"status_time\""));
	assert_null(strstr(html, "data-chart=\"sweep_throughput\""));
	assert_null(strstr(html, "data-chart=\"sweep_p99\""));
	assert_null(strstr(html, "data-chart=\"ttft_hist\""));
	assert_null(strstr(html, "data-chart=\"itl_hist\""));
	assert_null(strstr(html, "<rect class=\"bar\""));
	assert_non_null(strstr(html, "data-note=\"hist\""));
	assert_null(strstr(html, "<h2>Errors</h2>"));
	assert_null(strstr(html, "class=\"mark\""));
	assert_true(series_n(html, "throughput_time", "llama.cpp", 8));
	assert_finite_coords(html);
	free(html);
	json_decref(r);
}

/* a stage whose every optional member is null, empty or flat */
static json_t *stage_degenerate(const char *name, double load)
{
	return json_pack("{s:s, s:s, s:f, s:f, s:{s:i, s:i, s:i, s:n, s:n, s:f, s:f, s:f, s:n,"
			 " s:n, s:n, s:n}, s:[[f, f]], s:{s:[i], s:[f], s:[f], s:[f], s:[n],"
			 " s:[f], s:{}}, s:{s:[f], s:[]}, s:n}",
			 "name", name, "mode", "open", "load", load, "window_s", 0.0, "summary",
			 "requests", 1, "ok", 1, "errors", 0, "errors_by_status",
			 "errors_by_kind", "rps", 0.0, "rtfx", 0.0, "tokens_per_s", 0.0,
			 "latency_s", "ttft_s", "itl_s", "cost", "latency_cdf", 0.25, 1.0,
			 "timeseries", "t", 0, "rps", 0.0, "rtfx", 0.0, "tokens_per_s", 0.0,
			 "latency_p50", "latency_p99", 0.0, "status", "ttft_hist", "edges", 0.1,
			 "counts", "itl_hist");
}

static void test_degenerate(void **state)
{
	(void)state;
	json_t *a = run("flat", json_pack("[o, o]", stage_degenerate("r1", 2),
					  stage_degenerate("r1", 2)));
	json_t *b = run("empty", json_array());
	json_t *c = json_pack("{s:s, s:i, s:[{s:{}, s:[], s:{s:[]}}]}", "tool", "inferd-bench",
			      "schema", 1, "stages", "summary", "latency_cdf", "timeseries", "t");
	json_t *runs[3] = { a, b, c };
	char err[256];
	int rc;
	char *html = render(runs, 3, &rc, err);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(html, "data-chart=\"sweep_p99\""));
	assert_non_null(strstr(html, "data-note=\"hist\""));
	assert_true(series_n(html, "latency_cdf", "flat", 1));
	assert_true(series_n(html, "throughput_time", "flat", 2));
	assert_true(series_n(html, "sweep_throughput", "flat", 2));
	assert_non_null(strstr(html, "no data")); /* sweep_p99: no latency anywhere */
	assert_non_null(strstr(html, "unlabelled run"));
	assert_finite_coords(html);
	free(html);
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

/* expect_bad - run is refused with a message naming what, nothing written. */
static void expect_bad(json_t *r, const char *what)
{
	json_t *runs[2] = { run_single(), r };
	char err[256];
	int rc;
	char *html = render(runs, 2, &rc, err);
	assert_int_equal(rc, -1);
	assert_non_null(strstr(err, "run 2"));
	assert_non_null(strstr(err, what));
	assert_string_equal(html, "");
	free(html);
	json_decref(runs[0]);
	json_decref(r);
}

static void test_bad_runs(void **state)
{
	(void)state;
	json_t *r = run_single();
	json_object_set_new(r, "schema", json_integer(2));
	expect_bad(r, "schema");
	r = run_single();
	json_object_set_new(r, "schema", json_string("1"));
	expect_bad(r, "schema");
	r = run_single();
	json_object_set_new(r, "tool", json_string("wrk"));
	expect_bad(r, "tool");
	r = run_single();
	json_object_set_new(r, "stages", json_object());
	expect_bad(r, "stages");
	r = run_single();
	json_object_del(json_array_get(json_object_get(r, "stages"), 0), "summary");
	expect_bad(r, "summary");
	expect_bad(json_array(), "object");

	char err[256] = "x";
	assert_int_equal(ib_html_write(stdout, NULL, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no runs"));
}

/* a stream that refuses writes: the failure is reported, not ignored */
static void test_write_fails(void **state)
{
	(void)state;
	json_t *r = run_single();
	char err[256];
	FILE *ro = fopen("/dev/null", "r");
	assert_non_null(ro);
	assert_int_equal(ib_html_write(ro, &r, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "writing"));
	fclose(ro);
	json_decref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_runs),
		cmocka_unit_test(test_single_no_stream),
		cmocka_unit_test(test_degenerate),
		cmocka_unit_test(test_bad_runs),
		cmocka_unit_test(test_write_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
