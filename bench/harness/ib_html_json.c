/* ib_html_json.c - the HTML report's reading of the runs' JSON: numbers
 * only when finite and sane (DATA_MAX), stages, summaries, histograms and
 * status codes, every member optional; and put_esc, the one way a string
 * from the JSON reaches the page. A leaf: the charts (ib_html_chart.c)
 * and the tables and page (ib_html.c) both read through it.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ib_html_int.h"

#define DATA_MAX      1e15 /* values beyond this are ignored as garbage */

/* ib_html__put_esc - write s (NULL: nothing) escaped for HTML text and attribute
 * values; C0 controls other than tab and newline become '?'. */
void ib_html__put_esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			fputc((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' ? '?' : *s, f);
		}
	}
}

/* ---- JSON access --------------------------------------------------------- */

/* ib_html__num_get - *out = j's value when j is a finite number within DATA_MAX;
 * otherwise false and *out untouched. */
bool ib_html__num_get(const json_t *j, double *out)
{
	if (!json_is_number(j))
		return false;
	double v = json_number_value(j);
	if (!isfinite(v) || fabs(v) > DATA_MAX)
		return false;
	*out = v;
	return true;
}

const char *ib_html__str_or(const json_t *j, const char *dflt)
{
	const char *s = json_string_value(j);
	return s ? s : dflt;
}

size_t ib_html__n_stages(const json_t *run)
{
	return json_array_size(json_object_get(run, "stages"));
}

json_t *ib_html__stage_at(const json_t *run, size_t k)
{
	return json_array_get(json_object_get(run, "stages"), k);
}

/* ib_html__run_label - the run's name in tables and legends: its label, else its URL. */
const char *ib_html__run_label(const json_t *run)
{
	return ib_html__str_or(json_object_get(run, "label"),
		      ib_html__str_or(json_object_get(run, "url"), "unlabelled run"));
}

const char *ib_html__stage_name(const json_t *st)
{
	return ib_html__str_or(json_object_get(st, "name"), "stage");
}

/* ib_html__summary_get - stage.summary[key] or, with sub, stage.summary[key][sub]. */
json_t *ib_html__summary_get(const json_t *st, const char *key, const char *sub)
{
	json_t *v = json_object_get(json_object_get(st, "summary"), key);
	return sub ? json_object_get(v, sub) : v;
}

/* ib_html__summary_num - a summary number, 0 when missing. */
double ib_html__summary_num(const json_t *st, const char *key)
{
	double v = 0;
	ib_html__num_get(ib_html__summary_get(st, key, NULL), &v);
	return v;
}

/* ib_html__hist_bins - bins of a {"edges", "counts"} histogram (0 for null or bad). */
size_t ib_html__hist_bins(const json_t *h)
{
	size_t ne = json_array_size(json_object_get(h, "edges"));
	size_t nc = json_array_size(json_object_get(h, "counts"));
	if (ne < 2)
		return 0;
	return nc < ne - 1 ? nc : ne - 1;
}

/* ib_html__hist_bin - bin k's edges [e0, e1) and count; false when any is not a number. */
bool ib_html__hist_bin(const json_t *h, size_t k, double *e0, double *e1, double *count)
{
	const json_t *e = json_object_get(h, "edges");
	return ib_html__num_get(json_array_get(e, k), e0) && ib_html__num_get(json_array_get(e, k + 1), e1) &&
	       ib_html__num_get(json_array_get(json_object_get(h, "counts"), k), count) && *e1 >= *e0;
}

/* ib_html__stage_span - the seconds a stage takes on a time axis: its window, or
 * the end of its last 1-s bucket when that is later. */
double ib_html__stage_span(const json_t *st)
{
	double w = 0, t;
	const json_t *ts = json_object_get(json_object_get(st, "timeseries"), "t");
	size_t n = json_array_size(ts);
	ib_html__num_get(json_object_get(st, "window_s"), &w);
	if (n && ib_html__num_get(json_array_get(ts, n - 1), &t) && t + 1 > w)
		w = t + 1;
	return w > 0 ? w : 0;
}

/* ib_html__stage_start - where stage k of run starts on a time axis. */
double ib_html__stage_start(const json_t *run, size_t k)
{
	double t = 0;
	for (size_t i = 0; i < k; i++)
		t += ib_html__stage_span(ib_html__stage_at(run, i));
	return t;
}

bool ib_html__stage_has_positive(const json_t *st, const char *key)
{
	return ib_html__summary_num(st, key) > 0;
}

bool ib_html__stage_has_hist(const json_t *st, const char *key)
{
	return ib_html__hist_bins(json_object_get(st, key)) > 0;
}

bool ib_html__stage_has_object(const json_t *st, const char *key)
{
	return json_is_object(ib_html__summary_get(st, key, NULL));
}

/* ib_html__any_stage - whether pred holds for some stage of some run. */
bool ib_html__any_stage(json_t *const *runs, size_t n, ib_html__stage_pred pred, const char *key)
{
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++)
			if (pred(ib_html__stage_at(runs[r], k), key))
				return true;
	return false;
}

bool ib_html__any_sweep(json_t *const *runs, size_t n)
{
	for (size_t r = 0; r < n; r++)
		if (ib_html__n_stages(runs[r]) > 1)
			return true;
	return false;
}

/* ---- status codes ------------------------------------------------------ */

/* key_cmp - status keys in order: shorter first, then by bytes, so that
 * "200" < "503" < "error". */
static int key_cmp(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	if (na != nb)
		return na < nb ? -1 : 1;
	return strcmp(a, b);
}

/* ib_html__status_obj - a stage's status-keyed object: summary.errors_by_status
 * (errors) or timeseries.status. */
json_t *ib_html__status_obj(const json_t *st, bool errors)
{
	if (errors)
		return ib_html__summary_get(st, "errors_by_status", NULL);
	return json_object_get(json_object_get(st, "timeseries"), "status");
}

/* next_in - the least key of obj after prev (NULL: any) if less than best. */
static const char *next_in(json_t *obj, const char *prev, const char *best)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		(void)v;
		if ((!prev || key_cmp(key, prev) > 0) && (!best || key_cmp(key, best) < 0))
			best = key;
	}
	return best;
}

/* ib_html__next_code - the least status key after prev (NULL: the first) over all
 * stages of runs[0..n); NULL when none is left. The string is borrowed
 * from the JSON. Walking with it visits each distinct key once, in order. */
const char *ib_html__next_code(json_t *const *runs, size_t n, bool errors, const char *prev)
{
	const char *best = NULL;
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++)
			best = next_in(ib_html__status_obj(ib_html__stage_at(runs[r], k), errors), prev, best);
	return best;
}

size_t ib_html__count_codes(json_t *const *runs, size_t n, bool errors)
{
	size_t count = 0;
	for (const char *c = ib_html__next_code(runs, n, errors, NULL); c; c = ib_html__next_code(runs, n, errors, c))
		count++;
	return count;
}
