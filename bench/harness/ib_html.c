/* ib_html.c - inferd-bench's HTML report (ib_html.h): the runs' check,
 * the tables (runs, summary, errors) and the page around them (CSS,
 * dates); the charts are ib_html_chart.c's, the reading of the JSON
 * ib_html_json.c's (ib_html_int.h lists what they share).
 *
 * Every string from the JSON goes out through ib_html__put_esc.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */

#include "ib_html.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "ib_html_int.h"

/* ---- output ------------------------------------------------------------ */

/* fail - put a message in err (if any) and return -1. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* esc_cb - json_dump_callback sink that escapes into the FILE in data. */
static int esc_cb(const char *buf, size_t size, void *data)
{
	for (size_t i = 0; i < size; i++) {
		char one[2] = { buf[i], '\0' };
		ib_html__put_esc(data, one);
	}
	return 0;
}

/* put_dur - a duration in seconds as "12.3 ms" or "1.23 s". */
static void put_dur(FILE *f, double s)
{
	if (s < 0.01)
		fprintf(f, "%.2f ms", s * 1e3);
	else if (s < 1)
		fprintf(f, "%.1f ms", s * 1e3);
	else
		fprintf(f, "%.2f s", s);
}

/* ---- validation ---------------------------------------------------------- */

/* run_check - the minimal schema check of run i (0-based). */
static int run_check(const json_t *run, size_t i, char *err, size_t errlen)
{
	const json_t *schema = json_object_get(run, "schema");
	const json_t *stages = json_object_get(run, "stages");
	if (!json_is_object(run))
		return fail(err, errlen, "run %zu: not a JSON object", i + 1);
	if (strcmp(ib_html__str_or(json_object_get(run, "tool"), ""), "inferd-bench"))
		return fail(err, errlen, "run %zu: \"tool\" is not \"inferd-bench\"", i + 1);
	if (!json_is_integer(schema) || json_integer_value(schema) != 1)
		return fail(err, errlen, "run %zu: \"schema\" is not 1 (only schema 1 is known)",
			    i + 1);
	if (!json_is_array(stages))
		return fail(err, errlen, "run %zu: \"stages\" is not an array", i + 1);
	for (size_t k = 0; k < json_array_size(stages); k++) {
		const json_t *st = json_array_get(stages, k);
		if (!json_is_object(st) || !json_is_object(json_object_get(st, "summary")))
			return fail(err, errlen, "run %zu: stage %zu is not an object with a "
				    "\"summary\" object", i + 1, k + 1);
	}
	return 0;
}

/* ---- tables -------------------------------------------------------------- */

static void td_text(FILE *f, const char *s)
{
	fputs("<td>", f);
	ib_html__put_esc(f, s);
	fputs("</td>", f);
}

/* td_label - the run's label behind a swatch of its color. */
static void td_label(FILE *f, const json_t *run, size_t r)
{
	fprintf(f, "<td class=\"run\"><span class=\"sw\" style=\"background:%s\"></span>",
		ib_html__palette[r % IB_HTML__N_PALETTE]);
	ib_html__put_esc(f, ib_html__run_label(run));
	fputs("</td>", f);
}

/* td_num - a number with decimals digits; a dash when missing, or when
 * not positive and dash_zero. */
static void td_num(FILE *f, const json_t *j, int decimals, bool dash_zero)
{
	double v;
	if (!ib_html__num_get(j, &v) || (dash_zero && v <= 0))
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f); /* en dash */
	else
		fprintf(f, "<td class=\"n\">%.*f</td>", decimals, v);
}

static void td_dur(FILE *f, const json_t *j)
{
	double v;
	if (!ib_html__num_get(j, &v)) {
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f);
		return;
	}
	fputs("<td class=\"n\">", f);
	put_dur(f, v);
	fputs("</td>", f);
}

static void td_money(FILE *f, const json_t *j, int decimals)
{
	double v;
	if (!ib_html__num_get(j, &v) || v <= 0)
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f);
	else
		fprintf(f, "<td class=\"n\">$%.*f</td>", decimals, v);
}

static void td_errors(FILE *f, const json_t *j)
{
	double v = 0;
	ib_html__num_get(j, &v);
	fprintf(f, "<td class=\"n%s\">%.0f</td>", v > 0 ? " bad" : "", v);
}

/* td_load - "c=8" for a closed loop, "4/s" for an open one. */
static void td_load(FILE *f, const json_t *st)
{
	double v;
	const char *mode = ib_html__str_or(json_object_get(st, "mode"), "");
	if (!ib_html__num_get(json_object_get(st, "load"), &v)) {
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f);
		return;
	}
	if (!strcmp(mode, "open"))
		fprintf(f, "<td class=\"n\">%g/s</td>", v);
	else
		fprintf(f, "<td class=\"n\">%s%g</td>", strcmp(mode, "closed") ? "" : "c=", v);
}

/* td_stages - a run's stage count and names. */
static void td_stages(FILE *f, const json_t *run)
{
	fprintf(f, "<td>%zu", ib_html__n_stages(run));
	for (size_t k = 0; k < ib_html__n_stages(run); k++) {
		fputs(k ? ", " : ": ", f);
		ib_html__put_esc(f, ib_html__stage_name(ib_html__stage_at(run, k)));
	}
	fputs("</td>", f);
}

/* td_options - the command line's options as JSON, folded away. */
static void td_options(FILE *f, const json_t *opt)
{
	if (!json_is_object(opt) || json_object_size(opt) == 0) {
		fputs("<td class=\"nil\">\xe2\x80\x93</td>", f);
		return;
	}
	fprintf(f, "<td><details><summary>%zu options</summary><code>", json_object_size(opt));
	json_dump_callback(opt, esc_cb, f, JSON_SORT_KEYS);
	fputs("</code></details></td>", f);
}

static void runs_table(FILE *f, json_t *const *runs, size_t n)
{
	fputs("<h2>Runs</h2>\n<div class=\"tw\"><table>\n<thead><tr><th>Run</th><th>URL</th>"
	      "<th>Started</th><th>Stages</th><th>Options</th></tr></thead>\n<tbody>\n", f);
	for (size_t r = 0; r < n; r++) {
		fputs("<tr>", f);
		td_label(f, runs[r], r);
		td_text(f, ib_html__str_or(json_object_get(runs[r], "url"), ""));
		td_text(f, ib_html__str_or(json_object_get(runs[r], "started"), ""));
		td_stages(f, runs[r]);
		td_options(f, json_object_get(runs[r], "options"));
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
}

static void summary_head(FILE *f, bool cost)
{
	fputs("<h2>Summary</h2>\n<div class=\"tw\"><table class=\"sum\">\n<thead><tr>"
	      "<th rowspan=\"2\">Run</th><th rowspan=\"2\">Stage</th><th rowspan=\"2\">Load</th>"
	      "<th rowspan=\"2\">Requests</th><th rowspan=\"2\">OK</th>"
	      "<th rowspan=\"2\">Errors</th><th rowspan=\"2\">req/s</th>"
	      "<th rowspan=\"2\">RTFx</th><th rowspan=\"2\">tok/s</th>"
	      "<th colspan=\"4\">Latency</th><th colspan=\"2\">TTFT</th>"
	      "<th colspan=\"2\">ITL</th>", f);
	if (cost)
		fputs("<th colspan=\"2\">Cost (USD)</th>", f);
	fputs("</tr>\n<tr><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>p50</th>"
	      "<th>p99</th><th>p50</th><th>p99</th>", f);
	if (cost)
		fputs("<th>per audio hour</th><th>per M tokens</th>", f);
	fputs("</tr></thead>\n<tbody>\n", f);
}

static void summary_row(FILE *f, const json_t *run, size_t r, const json_t *st, bool cost)
{
	static const char *const lat[] = { "p50", "p90", "p99", "max" };
	fputs("<tr>", f);
	td_label(f, run, r);
	td_text(f, ib_html__stage_name(st));
	td_load(f, st);
	td_num(f, ib_html__summary_get(st, "requests", NULL), 0, false);
	td_num(f, ib_html__summary_get(st, "ok", NULL), 0, false);
	td_errors(f, ib_html__summary_get(st, "errors", NULL));
	td_num(f, ib_html__summary_get(st, "rps", NULL), 2, false);
	td_num(f, ib_html__summary_get(st, "rtfx", NULL), 1, true);
	td_num(f, ib_html__summary_get(st, "tokens_per_s", NULL), 1, true);
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++)
		td_dur(f, ib_html__summary_get(st, "latency_s", lat[i]));
	for (size_t i = 0; i < 3; i += 2) /* p50, p99 */
		td_dur(f, ib_html__summary_get(st, "ttft_s", lat[i]));
	for (size_t i = 0; i < 3; i += 2)
		td_dur(f, ib_html__summary_get(st, "itl_s", lat[i]));
	if (cost) {
		td_money(f, ib_html__summary_get(st, "cost", "per_audio_hour"), 4);
		td_money(f, ib_html__summary_get(st, "cost", "per_million_tokens"), 2);
	}
	fputs("</tr>\n", f);
}

static void summary_table(FILE *f, json_t *const *runs, size_t n)
{
	bool cost = ib_html__any_stage(runs, n, ib_html__stage_has_object, "cost");
	summary_head(f, cost);
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++)
			summary_row(f, runs[r], r, ib_html__stage_at(runs[r], k), cost);
	fputs("</tbody></table></div>\n", f);
}

static void errors_head(FILE *f, json_t *const *runs, size_t n)
{
	fprintf(f, "<h2>Errors</h2>\n<div class=\"tw\"><table class=\"err\">\n<thead><tr>"
		"<th rowspan=\"2\">Run</th><th rowspan=\"2\">Stage</th>"
		"<th rowspan=\"2\">Errors</th>"
		"<th colspan=\"5\">By kind</th>");
	if (ib_html__count_codes(runs, n, true))
		fprintf(f, "<th colspan=\"%zu\">By HTTP status</th>", ib_html__count_codes(runs, n, true));
	fputs("</tr>\n<tr><th>connect</th><th>timeout</th><th>protocol</th><th>http</th>"
	      "<th>close</th>", f);
	for (const char *c = ib_html__next_code(runs, n, true, NULL); c; c = ib_html__next_code(runs, n, true, c)) {
		fputs("<th>", f);
		ib_html__put_esc(f, c);
		fputs("</th>", f);
	}
	fputs("</tr></thead>\n<tbody>\n", f);
}

static void errors_row(FILE *f, json_t *const *runs, size_t n, size_t r, const json_t *st)
{
	static const char *const kinds[] = { "connect", "timeout", "protocol", "http", "close" };
	fputs("<tr>", f);
	td_label(f, runs[r], r);
	td_text(f, ib_html__stage_name(st));
	td_errors(f, ib_html__summary_get(st, "errors", NULL));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		td_num(f, ib_html__summary_get(st, "errors_by_kind", kinds[i]), 0, true);
	for (const char *c = ib_html__next_code(runs, n, true, NULL); c; c = ib_html__next_code(runs, n, true, c))
		td_num(f, ib_html__summary_get(st, "errors_by_status", c), 0, true);
	fputs("</tr>\n", f);
}

/* errors_table - one row per stage with errors, by kind and by status. */
static void errors_table(FILE *f, json_t *const *runs, size_t n)
{
	errors_head(f, runs, n);
	for (size_t r = 0; r < n; r++) {
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++)
			if (ib_html__summary_num(ib_html__stage_at(runs[r], k), "errors") > 0)
				errors_row(f, runs, n, r, ib_html__stage_at(runs[r], k));
	}
	fputs("</tbody></table></div>\n", f);
}

/* ---- page ------------------------------------------------------------------ */

static const char css[] =
	":root{color-scheme:light}\n"
	"body{margin:0;background:#f5f6f8;color:#1c2230;font:14px/1.45 system-ui,-apple-system,"
	"'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}\n"
	"main{max-width:1240px;margin:0 auto;padding:24px 28px 48px}\n"
	"h1{font-size:26px;margin:0 0 4px}\n"
	"h2{font-size:18px;margin:30px 0 10px;padding-bottom:4px;border-bottom:1px solid #d8dce2}\n"
	".date{color:#5a6372;margin:0}\n"
	".tw{overflow-x:auto;background:#fff;border:1px solid #d8dce2;border-radius:6px}\n"
	"table{border-collapse:collapse;font-size:13px;width:100%}\n"
	"th,td{padding:5px 9px;border-bottom:1px solid #eceef2;white-space:nowrap;"
	"text-align:left}\n"
	"th{background:#eff1f4;font-weight:600;text-align:center}\n"
	"td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
	"td.nil{color:#a0a6b0}\n"
	"tbody tr:nth-child(even){background:#fafbfc}\n"
	".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:7px}\n"
	".bad{color:#c62828;font-weight:600}\n"
	"details code{display:block;max-width:520px;white-space:pre-wrap;word-break:break-all;"
	"font-size:12px}\n"
	"figure{margin:0 0 20px;padding:10px;background:#fff;border:1px solid #d8dce2;"
	"border-radius:6px}\n"
	"svg.chart{display:block;width:100%;max-width:960px;height:auto;margin:0 auto}\n"
	"svg.chart text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif;"
	"font-size:12px;fill:#3a4150}\n"
	"svg.chart .ttl{font-size:15px;font-weight:600;fill:#1c2230}\n"
	"svg.chart .axl{font-size:12.5px;fill:#5a6372}\n"
	"svg.chart .empty{font-size:14px;fill:#a0a6b0}\n"
	"svg.chart .grid{stroke:#e9ebef;stroke-width:1}\n"
	"svg.chart .axis{stroke:#6b7280;stroke-width:1}\n"
	"svg.chart .series{fill:none;stroke-width:2;stroke-linejoin:round;stroke-linecap:round}\n"
	"svg.chart .mark{stroke-width:1.2;stroke-dasharray:5 4}\n"
	"svg.chart .marktext{font-size:11px}\n"
	"svg.chart .bar{fill-opacity:.85}\n"
	".note{color:#5a6372;font-style:italic;background:#fff;border:1px dashed #d8dce2;"
	"border-radius:6px;padding:10px 14px}\n"
	"footer{margin-top:28px;color:#8a919c;font-size:12px}\n";

/* put_dates - when the runs started (the earliest) and when this was drawn. */
static void put_dates(FILE *f, json_t *const *runs, size_t n)
{
	const char *first = NULL;
	char now[32] = "";
	time_t t = time(NULL);
	struct tm tm;
	for (size_t r = 0; r < n; r++) {
		const char *s = json_string_value(json_object_get(runs[r], "started"));
		if (s && (!first || strcmp(s, first) < 0))
			first = s;
	}
	if (t != (time_t)-1 && gmtime_r(&t, &tm))
		strftime(now, sizeof(now), "%Y-%m-%d %H:%M UTC", &tm);
	fprintf(f, "<p class=\"date\">%zu run%s", n, n == 1 ? "" : "s");
	if (first) {
		fputs(" \xc2\xb7 started ", f);
		ib_html__put_esc(f, first);
	}
	fprintf(f, " \xc2\xb7 report generated %s</p>\n", now);
}

static void page_head(FILE *f, json_t *const *runs, size_t n)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<title>inferd-bench report: ", f);
	for (size_t r = 0; r < n; r++) {
		fputs(r ? ", " : "", f);
		ib_html__put_esc(f, ib_html__run_label(runs[r]));
	}
	fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<header>\n"
		"<h1>inferd-bench report</h1>\n", css);
	put_dates(f, runs, n);
	fputs("</header>\n", f);
}

int ib_html_write(FILE *f, json_t *const *runs, size_t n_runs, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!f)
		return fail(err, errlen, "no output stream");
	if (!runs || n_runs == 0)
		return fail(err, errlen, "no runs to report");
	for (size_t r = 0; r < n_runs; r++)
		if (run_check(runs[r], r, err, errlen))
			return -1;
	page_head(f, runs, n_runs);
	runs_table(f, runs, n_runs);
	summary_table(f, runs, n_runs);
	if (ib_html__any_stage(runs, n_runs, ib_html__stage_has_positive, "errors"))
		errors_table(f, runs, n_runs);
	ib_html__charts_write(f, runs, n_runs);
	fputs("<footer>inferd-bench \xc2\xb7 results schema 1</footer>\n</main>\n</body>\n"
	      "</html>\n", f);
	if (fflush(f) || ferror(f))
		return fail(err, errlen, "writing the HTML report failed");
	return 0;
}

