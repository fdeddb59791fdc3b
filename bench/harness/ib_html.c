/* ib_html.c - inferd-bench's HTML report: tables and inline SVG charts drawn
 * straight from the runs' JSON (docs/bench.md, schema 1).
 *
 * Nothing is copied out of the JSON. A chart is a list of series, each a
 * recipe (which run, which stage, which member) that a cursor walks over
 * several times: once to count the points, once to find the axes' ranges,
 * once to write them. So the module allocates nothing, and a line is always
 * drawn from the very values its axes were scaled for.
 *
 * Invariants: every number that reaches an SVG coordinate went through
 * num_get (finite, |v| <= DATA_MAX) and ax_pos (finite, clamped), so no NaN
 * or infinity is ever printed; every string from the JSON goes out through
 * put_esc.
 *
 * Time charts put a run's stages end to end: stage k starts where stage
 * k-1's window ended (stage_span), and a dashed line labelled with the stage
 * name marks each start when the run has more than one stage.
 */
#define _POSIX_C_SOURCE 200809L /* gmtime_r */

#include "ib_html.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Chart geometry, in SVG user units (the viewBox). */
#define CH_W          960 /* width of every chart */
#define CH_LEFT       78  /* plot's left edge: room for y tick labels */
#define CH_RIGHT      28  /* right margin without a right axis */
#define CH_RIGHT2     78  /* right margin with one */
#define CH_TOP        44  /* plot's top edge, under the title */
#define CH_PLOT_H     250 /* plot height */
#define CH_LEGEND_DY  66  /* first legend baseline below the plot */
#define CH_LEGEND_ROW 20  /* legend line height */
#define CH_MAX_SERIES 96  /* more are counted in a note, not drawn */
#define CH_PT_MAX     60  /* series of at most this many points get markers */
#define CH_X_TICKS    8   /* about this many x intervals */
#define CH_Y_TICKS    5   /* about this many y intervals */
#define DATA_MAX      1e15 /* values beyond this are ignored as garbage */

static const char *const palette[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};
#define N_PALETTE (sizeof(palette) / sizeof(palette[0]))

/* stroke-dasharray by index; the first is a solid line. */
static const char *const dashes[] = { NULL, "7 4", "2 3", "9 3 2 3" };
#define N_DASHES (sizeof(dashes) / sizeof(dashes[0]))

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

/* put_esc - write s (NULL: nothing) escaped for HTML text and attribute
 * values; C0 controls other than tab and newline become '?'. */
static void put_esc(FILE *f, const char *s)
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

/* esc_cb - json_dump_callback sink that escapes into the FILE in data. */
static int esc_cb(const char *buf, size_t size, void *data)
{
	for (size_t i = 0; i < size; i++) {
		char one[2] = { buf[i], '\0' };
		put_esc(data, one);
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

/* ---- JSON access --------------------------------------------------------- */

/* num_get - *out = j's value when j is a finite number within DATA_MAX;
 * otherwise false and *out untouched. */
static bool num_get(const json_t *j, double *out)
{
	if (!json_is_number(j))
		return false;
	double v = json_number_value(j);
	if (!isfinite(v) || fabs(v) > DATA_MAX)
		return false;
	*out = v;
	return true;
}

static const char *str_or(const json_t *j, const char *dflt)
{
	const char *s = json_string_value(j);
	return s ? s : dflt;
}

static size_t n_stages(const json_t *run)
{
	return json_array_size(json_object_get(run, "stages"));
}

static json_t *stage_at(const json_t *run, size_t k)
{
	return json_array_get(json_object_get(run, "stages"), k);
}

/* run_label - the run's name in tables and legends: its label, else its URL. */
static const char *run_label(const json_t *run)
{
	return str_or(json_object_get(run, "label"),
		      str_or(json_object_get(run, "url"), "unlabelled run"));
}

static const char *stage_name(const json_t *st)
{
	return str_or(json_object_get(st, "name"), "stage");
}

/* summary_get - stage.summary[key] or, with sub, stage.summary[key][sub]. */
static json_t *summary_get(const json_t *st, const char *key, const char *sub)
{
	json_t *v = json_object_get(json_object_get(st, "summary"), key);
	return sub ? json_object_get(v, sub) : v;
}

/* summary_num - a summary number, 0 when missing. */
static double summary_num(const json_t *st, const char *key)
{
	double v = 0;
	num_get(summary_get(st, key, NULL), &v);
	return v;
}

/* hist_bins - bins of a {"edges", "counts"} histogram (0 for null or bad). */
static size_t hist_bins(const json_t *h)
{
	size_t ne = json_array_size(json_object_get(h, "edges"));
	size_t nc = json_array_size(json_object_get(h, "counts"));
	if (ne < 2)
		return 0;
	return nc < ne - 1 ? nc : ne - 1;
}

/* hist_bin - bin k's edges [e0, e1) and count; false when any is not a number. */
static bool hist_bin(const json_t *h, size_t k, double *e0, double *e1, double *count)
{
	const json_t *e = json_object_get(h, "edges");
	return num_get(json_array_get(e, k), e0) && num_get(json_array_get(e, k + 1), e1) &&
	       num_get(json_array_get(json_object_get(h, "counts"), k), count) && *e1 >= *e0;
}

/* stage_span - the seconds a stage takes on a time axis: its window, or
 * the end of its last 1-s bucket when that is later. */
static double stage_span(const json_t *st)
{
	double w = 0, t;
	const json_t *ts = json_object_get(json_object_get(st, "timeseries"), "t");
	size_t n = json_array_size(ts);
	num_get(json_object_get(st, "window_s"), &w);
	if (n && num_get(json_array_get(ts, n - 1), &t) && t + 1 > w)
		w = t + 1;
	return w > 0 ? w : 0;
}

/* stage_start - where stage k of run starts on a time axis. */
static double stage_start(const json_t *run, size_t k)
{
	double t = 0;
	for (size_t i = 0; i < k; i++)
		t += stage_span(stage_at(run, i));
	return t;
}

/* Predicates over one stage, for any_stage. */
typedef bool (*stage_pred)(const json_t *st, const char *key);

static bool stage_has_positive(const json_t *st, const char *key)
{
	return summary_num(st, key) > 0;
}

static bool stage_has_hist(const json_t *st, const char *key)
{
	return hist_bins(json_object_get(st, key)) > 0;
}

static bool stage_has_object(const json_t *st, const char *key)
{
	return json_is_object(summary_get(st, key, NULL));
}

/* any_stage - whether pred holds for some stage of some run. */
static bool any_stage(json_t *const *runs, size_t n, stage_pred pred, const char *key)
{
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < n_stages(runs[r]); k++)
			if (pred(stage_at(runs[r], k), key))
				return true;
	return false;
}

static bool any_sweep(json_t *const *runs, size_t n)
{
	for (size_t r = 0; r < n; r++)
		if (n_stages(runs[r]) > 1)
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

/* status_obj - a stage's status-keyed object: summary.errors_by_status
 * (errors) or timeseries.status. */
static json_t *status_obj(const json_t *st, bool errors)
{
	if (errors)
		return summary_get(st, "errors_by_status", NULL);
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

/* next_code - the least status key after prev (NULL: the first) over all
 * stages of runs[0..n); NULL when none is left. The string is borrowed
 * from the JSON. Walking with it visits each distinct key once, in order. */
static const char *next_code(json_t *const *runs, size_t n, bool errors, const char *prev)
{
	const char *best = NULL;
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < n_stages(runs[r]); k++)
			best = next_in(status_obj(stage_at(runs[r], k), errors), prev, best);
	return best;
}

static size_t count_codes(json_t *const *runs, size_t n, bool errors)
{
	size_t count = 0;
	for (const char *c = next_code(runs, n, errors, NULL); c; c = next_code(runs, n, errors, c))
		count++;
	return count;
}

/* ---- validation ---------------------------------------------------------- */

/* run_check - the minimal schema check of run i (0-based). */
static int run_check(const json_t *run, size_t i, char *err, size_t errlen)
{
	const json_t *schema = json_object_get(run, "schema");
	const json_t *stages = json_object_get(run, "stages");
	if (!json_is_object(run))
		return fail(err, errlen, "run %zu: not a JSON object", i + 1);
	if (strcmp(str_or(json_object_get(run, "tool"), ""), "inferd-bench"))
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

/* ---- axes ------------------------------------------------------------------ */

enum ax_kind {
	AX_PLAIN,    /* a count or a rate; the label carries the unit */
	AX_SECONDS,  /* elapsed time, in s */
	AX_LATENCY,  /* seconds, shown in ms when the axis ends below 1 s */
	AX_FRACTION, /* 0..1 */
};

struct axis {
	enum ax_kind kind;
	const char *label; /* without unit; NULL: the axis is not used */
	bool integer;      /* ticks at whole numbers only (counts, clients) */
	bool seen;         /* lo and hi hold data */
	double lo, hi;     /* data range seen, data units */
	double scale;      /* display units per data unit (1000 for ms) */
	double t0, t1;     /* first and last tick, display units */
	double step;       /* tick spacing, display units */
	int decimals;      /* digits after the point in tick labels */
};

static void ax_extend(struct axis *a, double v)
{
	if (!a->seen || v < a->lo)
		a->lo = v;
	if (!a->seen || v > a->hi)
		a->hi = v;
	a->seen = true;
}

/* nice_step - a round tick spacing (1, 2, 2.5 or 5 times a power of ten)
 * at or above raw > 0. */
static double nice_step(double raw)
{
	double mag = pow(10, floor(log10(raw)));
	double m = raw / mag;
	if (m <= 1.0001)
		m = 1;
	else if (m <= 2)
		m = 2;
	else if (m <= 2.5)
		m = 2.5;
	else if (m <= 5)
		m = 5;
	else
		m = 10;
	return m * mag;
}

/* step_decimals - digits after the point needed to print multiples of step. */
static int step_decimals(double step)
{
	int d = 0;
	for (double s = step; d < 6 && fabs(s - round(s)) > 1e-6 * fmax(1, s); s *= 10)
		d++;
	return d;
}

/* axis_finish - choose the unit and the round tick range of an axis from
 * the data it has seen; the range always holds 0 and is never empty. */
static void axis_finish(struct axis *a, int n_ticks)
{
	double lo = a->seen ? fmin(a->lo, 0) : 0;
	double hi = a->seen ? fmax(a->hi, 0) : 1;
	if (a->kind == AX_FRACTION)
		hi = fmax(hi, 1);
	a->scale = a->kind == AX_LATENCY && hi < 1 ? 1000 : 1;
	lo *= a->scale;
	hi *= a->scale;
	if (hi - lo < 1e-9)
		hi = lo + 1;
	a->step = nice_step((hi - lo) / n_ticks);
	if (a->integer && a->step < 1)
		a->step = 1;
	a->t0 = floor(lo / a->step + 1e-9) * a->step;
	a->t1 = ceil(hi / a->step - 1e-9) * a->step;
	if (a->t1 <= a->t0)
		a->t1 = a->t0 + a->step;
	a->decimals = step_decimals(a->step);
}

/* ax_pos - data value v on an axis drawn from p0 (its t0) to p1 (its t1). */
static double ax_pos(const struct axis *a, double v, double p0, double p1)
{
	double p = p0 + (v * a->scale - a->t0) / (a->t1 - a->t0) * (p1 - p0);
	if (!isfinite(p))
		return p0;
	return fmin(fmax(p, -1e4), 1e4);
}

static int ax_n_ticks(const struct axis *a)
{
	long n = lround((a->t1 - a->t0) / a->step);
	return n < 1 ? 1 : n > 50 ? 50 : (int)n;
}

static const char *ax_unit(const struct axis *a)
{
	if (a->kind == AX_SECONDS || a->kind == AX_LATENCY)
		return a->scale > 1 ? "ms" : "s";
	return NULL;
}

/* put_tick - tick k's label. */
static void put_tick(FILE *f, const struct axis *a, int k)
{
	double v = a->t0 + k * a->step;
	fprintf(f, "%.*f", a->decimals, fabs(v) < a->step * 1e-6 ? 0.0 : v);
}

/* put_value - a data value in the axis's unit, one digit finer than its ticks. */
static void put_value(FILE *f, const struct axis *a, double v)
{
	const char *unit = ax_unit(a);
	fprintf(f, "%.*f%s%s", a->decimals + 1, v * a->scale, unit ? " " : "", unit ? unit : "");
}

static void put_axis_label(FILE *f, const struct axis *a)
{
	const char *unit = ax_unit(a);
	put_esc(f, a->label);
	if (unit)
		fprintf(f, " (%s)", unit);
}

/* ---- series ------------------------------------------------------------- */

enum src {
	SRC_CDF,   /* a stage's latency_cdf pairs */
	SRC_TIME,  /* a timeseries member over a run's stages, end to end */
	SRC_SWEEP, /* one point per stage: (load, summary member) */
	SRC_HIST,  /* a stage's histogram; drawn as bars */
};

/* One line (or set of bars) of a chart: where its values come from and how
 * it looks. Every pointer is borrowed from the runs or is a literal. */
struct series {
	enum src src;
	const json_t *run;
	size_t stage;       /* SRC_CDF, SRC_HIST: the stage's index */
	const char *key;    /* SRC_TIME: timeseries member; SRC_SWEEP: summary
			     * member; SRC_HIST: stage member */
	const char *sub;    /* member of key's object (a status code, "p99"), or NULL */
	const char *suffix; /* legend text after the run's (and stage's) name, or NULL */
	bool show_stage;    /* the legend names the stage */
	int color, dash;    /* indexes into palette and dashes */
	int axis;           /* 0: left y axis, 1: right */
};

/* Walks the points of one line series. */
struct cursor {
	const struct series *s;
	size_t stage; /* SRC_TIME, SRC_SWEEP: the stage being read */
	size_t i;     /* next index in it */
	double t0;    /* SRC_TIME: where that stage starts on the time axis */
};

static const json_t *series_hist(const struct series *s)
{
	return json_object_get(stage_at(s->run, s->stage), s->key);
}

static bool cdf_next(struct cursor *c, double *x, double *y)
{
	const json_t *a = json_object_get(stage_at(c->s->run, c->s->stage), "latency_cdf");
	while (c->i < json_array_size(a)) {
		const json_t *p = json_array_get(a, c->i++);
		if (num_get(json_array_get(p, 0), x) && num_get(json_array_get(p, 1), y))
			return true;
	}
	return false;
}

/* time_point - bucket i of a stage; a status code that the stage does not
 * have counts as 0 in each of its buckets, other missing values as no point. */
static bool time_point(const struct series *s, const json_t *st, size_t i, double *x, double *y)
{
	const json_t *ts = json_object_get(st, "timeseries");
	const json_t *v = json_object_get(ts, s->key);
	if (s->sub)
		v = json_object_get(v, s->sub);
	if (!num_get(json_array_get(json_object_get(ts, "t"), i), x))
		return false;
	if (!v && s->sub) {
		*y = 0;
		return true;
	}
	return num_get(json_array_get(v, i), y);
}

static bool time_next(struct cursor *c, double *x, double *y)
{
	while (c->stage < n_stages(c->s->run)) {
		const json_t *st = stage_at(c->s->run, c->stage);
		size_t n = json_array_size(json_object_get(json_object_get(st, "timeseries"), "t"));
		if (c->i < n) {
			if (!time_point(c->s, st, c->i++, x, y))
				continue;
			*x += c->t0;
			return true;
		}
		c->t0 += stage_span(st);
		c->stage++;
		c->i = 0;
	}
	return false;
}

static bool sweep_next(struct cursor *c, double *x, double *y)
{
	while (c->stage < n_stages(c->s->run)) {
		const json_t *st = stage_at(c->s->run, c->stage++);
		if (num_get(json_object_get(st, "load"), x) &&
		    num_get(summary_get(st, c->s->key, c->s->sub), y))
			return true;
	}
	return false;
}

/* cur_next - the next valid point of the series; false at its end. */
static bool cur_next(struct cursor *c, double *x, double *y)
{
	switch (c->s->src) {
	case SRC_CDF:
		return cdf_next(c, x, y);
	case SRC_TIME:
		return time_next(c, x, y);
	case SRC_SWEEP:
		return sweep_next(c, x, y);
	default:
		return false;
	}
}

/* series_size - points of a line, bins of a histogram. */
static size_t series_size(const struct series *s)
{
	struct cursor cu = { .s = s };
	double x, y;
	size_t n = 0;
	if (s->src == SRC_HIST)
		return hist_bins(series_hist(s));
	while (cur_next(&cu, &x, &y))
		n++;
	return n;
}

static const char *series_color(const struct series *s)
{
	return palette[(size_t)s->color % N_PALETTE];
}

/* put_name - the series' legend text. */
static void put_name(FILE *f, const struct series *s)
{
	put_esc(f, run_label(s->run));
	if (s->show_stage) {
		fputs(" \xc2\xb7 ", f); /* U+00B7 middle dot */
		put_esc(f, stage_name(stage_at(s->run, s->stage)));
	}
	if (s->suffix) {
		fputc(' ', f);
		put_esc(f, s->suffix);
	}
	if (s->axis)
		fputs(" (right axis)", f);
}

/* legend_width - estimated width of the series' legend entry. */
static double legend_width(const struct series *s)
{
	size_t n = strlen(run_label(s->run));
	if (s->show_stage)
		n += 3 + strlen(stage_name(stage_at(s->run, s->stage)));
	if (s->suffix)
		n += 1 + strlen(s->suffix);
	if (s->axis)
		n += 13;
	return 32 + 6.9 * (double)n + 22;
}

/* ---- charts -------------------------------------------------------------- */

struct chart {
	const char *name;      /* data-chart value, a literal */
	const char *title;     /* <title> and heading, a literal */
	json_t *const *runs;   /* all runs (borrowed), for the stage marks */
	size_t n_runs;
	bool marks;            /* the x axis is time: mark stage starts */
	bool bars;             /* the series are histograms */
	struct axis x, y[2];   /* y[1], the right axis, is used when labelled */
	double px0, px1;       /* plot's left and right edges */
	double py0, py1;       /* plot's top and bottom edges */
	size_t n, dropped;     /* series kept, series over CH_MAX_SERIES */
	struct series s[CH_MAX_SERIES];
};

static void chart_init(struct chart *c, const char *name, const char *title,
		       json_t *const *runs, size_t n_runs)
{
	memset(c, 0, sizeof(*c));
	c->name = name;
	c->title = title;
	c->runs = runs;
	c->n_runs = n_runs;
}

static void axis_set(struct axis *a, enum ax_kind kind, const char *label)
{
	a->kind = kind;
	a->label = label;
}

/* stage_color - palette index of stage k of run r in a chart of one series
 * per stage: a run's first stage keeps the run's color (as in the tables and
 * the per-run charts), later stages take the next color after all runs'. */
static int stage_color(size_t r, size_t k, size_t *next)
{
	return (int)(k == 0 ? r : (*next)++);
}

/* chart_add - keep a copy of s unless it has no point. */
static void chart_add(struct chart *c, const struct series *s)
{
	if (series_size(s) == 0)
		return;
	if (c->n == CH_MAX_SERIES) {
		c->dropped++;
		return;
	}
	c->s[c->n++] = *s;
}

/* add_per_run - one copy of proto per run, in the run's color. */
static void add_per_run(struct chart *c, const struct series *proto)
{
	for (size_t r = 0; r < c->n_runs; r++) {
		struct series s = *proto;
		s.run = c->runs[r];
		s.color = (int)r;
		chart_add(c, &s);
	}
}

static double xpos(const struct chart *c, double v)
{
	return ax_pos(&c->x, v, c->px0, c->px1);
}

static double ypos(const struct chart *c, int axis, double v)
{
	return ax_pos(&c->y[axis], v, c->py1, c->py0);
}

/* series_extend - widen the chart's axes to hold the series. */
static void series_extend(struct chart *c, const struct series *s)
{
	struct cursor cu = { .s = s };
	double x, y, e0, e1;
	if (s->src != SRC_HIST) {
		while (cur_next(&cu, &x, &y)) {
			ax_extend(&c->x, x);
			ax_extend(&c->y[s->axis], y);
		}
		return;
	}
	for (size_t k = 0; k < hist_bins(series_hist(s)); k++) {
		if (!hist_bin(series_hist(s), k, &e0, &e1, &y))
			continue;
		ax_extend(&c->x, e0);
		ax_extend(&c->x, e1);
		ax_extend(&c->y[0], y);
	}
}

/* chart_layout - axes' ranges and the plot area. */
static void chart_layout(struct chart *c)
{
	for (size_t j = 0; j < c->n; j++)
		series_extend(c, &c->s[j]);
	for (size_t r = 0; c->marks && r < c->n_runs; r++)
		ax_extend(&c->x, stage_start(c->runs[r], n_stages(c->runs[r])));
	axis_finish(&c->x, CH_X_TICKS);
	axis_finish(&c->y[0], CH_Y_TICKS);
	axis_finish(&c->y[1], CH_Y_TICKS);
	c->px0 = CH_LEFT;
	c->px1 = CH_W - (c->y[1].label ? CH_RIGHT2 : CH_RIGHT);
	c->py0 = CH_TOP;
	c->py1 = CH_TOP + CH_PLOT_H;
}

static void put_line(FILE *f, const char *cls, double x1, double y1, double x2, double y2)
{
	fprintf(f, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
		cls, x1, y1, x2, y2);
}

/* xaxis_write - vertical grid lines, ticks, their labels and the x label. */
static void xaxis_write(FILE *f, const struct chart *c)
{
	int n = ax_n_ticks(&c->x);
	for (int k = 0; k <= n; k++) {
		double x = c->px0 + (double)k / n * (c->px1 - c->px0);
		put_line(f, "grid", x, c->py0, x, c->py1);
		put_line(f, "axis", x, c->py1, x, c->py1 + 5);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x, c->py1 + 19);
		put_tick(f, &c->x, k);
		fputs("</text>\n", f);
	}
	fprintf(f, "<text class=\"axl\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
		(c->px0 + c->px1) / 2, c->py1 + 42);
	put_axis_label(f, &c->x);
	fputs("</text>\n", f);
}

/* yaxis_write - left (i 0, with horizontal grid lines) or right y axis. */
static void yaxis_write(FILE *f, const struct chart *c, int i)
{
	const struct axis *a = &c->y[i];
	double edge = i ? c->px1 : c->px0;
	int n = ax_n_ticks(a);
	for (int k = 0; k <= n; k++) {
		double y = c->py1 - (double)k / n * (c->py1 - c->py0);
		if (i == 0)
			put_line(f, "grid", c->px0, y, c->px1, y);
		put_line(f, "axis", edge, y, i ? edge + 5 : edge - 5, y);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">",
			i ? edge + 8 : edge - 8, y + 4, i ? "start" : "end");
		put_tick(f, a, k);
		fputs("</text>\n", f);
	}
	put_line(f, "axis", edge, c->py0, edge, c->py1);
	fprintf(f, "<text class=\"axl\" text-anchor=\"middle\" transform=\"translate(%d %.1f) "
		"rotate(-90)\">", i ? CH_W - 12 : 18, (c->py0 + c->py1) / 2);
	put_axis_label(f, a);
	fputs("</text>\n", f);
}

static void axes_write(FILE *f, const struct chart *c)
{
	fputs("<g class=\"axes\">\n", f);
	xaxis_write(f, c);
	yaxis_write(f, c, 0);
	if (c->y[1].label)
		yaxis_write(f, c, 1);
	put_line(f, "axis", c->px0, c->py1, c->px1, c->py1);
	fputs("</g>\n", f);
}

/* mark_dup - whether an earlier run already marked the same stage start. */
static bool mark_dup(const struct chart *c, size_t r, size_t k)
{
	double t = stage_start(c->runs[r], k);
	const char *name = stage_name(stage_at(c->runs[r], k));
	for (size_t q = 0; q < r; q++) {
		for (size_t i = 0; n_stages(c->runs[q]) > 1 && i < n_stages(c->runs[q]); i++) {
			if (fabs(stage_start(c->runs[q], i) - t) < 1e-6 &&
			    !strcmp(stage_name(stage_at(c->runs[q], i)), name))
				return true;
		}
	}
	return false;
}

/* mark_write - the dashed line at the start of stage k of run r, labelled. */
static void mark_write(FILE *f, const struct chart *c, size_t r, size_t k)
{
	double x = xpos(c, stage_start(c->runs[r], k));
	const char *color = c->n_runs > 1 ? palette[r % N_PALETTE] : "#7d8490";
	fprintf(f, "<line class=\"mark\" stroke=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		"y2=\"%.1f\"/>\n", color, x, c->py0, x, c->py1);
	fprintf(f, "<text class=\"marktext\" x=\"%.1f\" y=\"%.1f\" style=\"fill:%s\">", x + 4,
		c->py0 + 12 + 13 * (double)(r % 3), color);
	put_esc(f, stage_name(stage_at(c->runs[r], k)));
	fputs("</text>\n", f);
}

static void marks_write(FILE *f, const struct chart *c)
{
	fputs("<g class=\"marks\">\n", f);
	for (size_t r = 0; r < c->n_runs; r++) {
		for (size_t k = 0; n_stages(c->runs[r]) > 1 && k < n_stages(c->runs[r]); k++)
			if (!mark_dup(c, r, k))
				mark_write(f, c, r, k);
	}
	fputs("</g>\n", f);
}

static void put_dash(FILE *f, int dash)
{
	const char *d = dashes[(size_t)dash % N_DASHES];
	if (d)
		fprintf(f, " stroke-dasharray=\"%s\"", d);
}

/* points_write - a marker with its values as a tooltip on each point. */
static void points_write(FILE *f, const struct chart *c, const struct series *s)
{
	struct cursor cu = { .s = s };
	double x, y;
	while (cur_next(&cu, &x, &y)) {
		fprintf(f, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\">"
			"<title>", xpos(c, x), ypos(c, s->axis, y), series_color(s));
		put_value(f, &c->x, x);
		fputs(", ", f);
		put_value(f, &c->y[s->axis], y);
		fputs("</title></circle>\n", f);
	}
}

/* line_write - a series as one polyline (plus markers when short). */
static void line_write(FILE *f, const struct chart *c, const struct series *s)
{
	struct cursor cu = { .s = s };
	size_t n = series_size(s);
	double x, y;
	fputs("<polyline class=\"series\" data-run=\"", f);
	put_esc(f, run_label(s->run));
	fprintf(f, "\" data-n=\"%zu\" stroke=\"%s\"", n, series_color(s));
	put_dash(f, s->dash);
	fputs(" points=\"", f);
	for (size_t k = 0; cur_next(&cu, &x, &y); k++)
		fprintf(f, "%s%.1f,%.1f", k ? " " : "", xpos(c, x), ypos(c, s->axis, y));
	fputs("\"><title>", f);
	put_name(f, s);
	fputs("</title></polyline>\n", f);
	if (n <= CH_PT_MAX)
		points_write(f, c, s);
}

/* bar_write - bin k of series j: each bin's width is shared by all the
 * series, side by side, so that runs and stages can be compared. */
static void bar_write(FILE *f, const struct chart *c, size_t j, size_t k)
{
	const struct series *s = &c->s[j];
	double e0, e1, count;
	if (!hist_bin(series_hist(s), k, &e0, &e1, &count))
		return;
	double w = (e1 - e0) / (double)c->n;
	double xa = xpos(c, e0 + w * (double)j), xb = xpos(c, e0 + w * (double)(j + 1));
	double ya = ypos(c, 0, count);
	fputs("<rect class=\"bar\" data-run=\"", f);
	put_esc(f, run_label(s->run));
	fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
		"<title>", xa, ya, xb - xa > 3 ? xb - xa - 1 : fmax(xb - xa, 0.5),
		ypos(c, 0, 0) - ya, series_color(s));
	put_name(f, s);
	fputs(": ", f);
	put_value(f, &c->x, e0);
	fputs(" to ", f);
	put_value(f, &c->x, e1);
	fprintf(f, ": %.0f</title></rect>\n", count);
}

static void data_write(FILE *f, const struct chart *c)
{
	fputs("<g class=\"data\">\n", f);
	for (size_t j = 0; j < c->n; j++) {
		if (!c->bars) {
			line_write(f, c, &c->s[j]);
			continue;
		}
		for (size_t k = 0; k < hist_bins(series_hist(&c->s[j])); k++)
			bar_write(f, c, j, k);
	}
	if (c->n == 0)
		fprintf(f, "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
			"no data</text>\n", (c->px0 + c->px1) / 2, (c->py0 + c->py1) / 2);
	fputs("</g>\n", f);
}

/* legend_item - a swatch and the series' name with its baseline at y. */
static void legend_item(FILE *f, const struct chart *c, const struct series *s, double x,
			double y)
{
	const char *color = series_color(s);
	if (c->bars) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"%s\"/>",
			x, y - 10, color);
	} else {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"2.5\"", x, y - 4, x + 26, y - 4, color);
		put_dash(f, s->dash);
		fputs("/>", f);
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 32, y);
	put_name(f, s);
	fputs("</text>\n", f);
}

/* legend_walk - lay the legend out in rows under the plot and write it
 * when f is not NULL. Returns the number of rows. */
static int legend_walk(const struct chart *c, FILE *f)
{
	double x = CH_LEFT, y0 = CH_TOP + CH_PLOT_H + CH_LEGEND_DY;
	int row = 0;
	if (f)
		fputs("<g class=\"legend\">\n", f);
	for (size_t j = 0; j < c->n; j++) {
		double w = legend_width(&c->s[j]);
		if (x > CH_LEFT && x + w > CH_W - 8) {
			x = CH_LEFT;
			row++;
		}
		if (f)
			legend_item(f, c, &c->s[j], x, y0 + row * CH_LEGEND_ROW);
		x += w;
	}
	if (f && c->dropped)
		fprintf(f, "<text x=\"%d\" y=\"%.1f\">(%zu more series not drawn)</text>\n",
			CH_LEFT, y0 + (row + 1) * CH_LEGEND_ROW, c->dropped);
	if (f)
		fputs("</g>\n", f);
	return (c->n ? row + 1 : 0) + (c->dropped ? 1 : 0);
}

/* chart_write - the chart as one <figure><svg class="chart">. */
static void chart_write(FILE *f, struct chart *c)
{
	chart_layout(c);
	int h = CH_TOP + CH_PLOT_H + CH_LEGEND_DY + legend_walk(c, NULL) * CH_LEGEND_ROW - 6;
	fprintf(f, "<figure>\n<svg class=\"chart\" data-chart=\"%s\" "
		"xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" width=\"%d\" "
		"height=\"%d\" role=\"img\"><title>", c->name, CH_W, h, CH_W, h);
	put_esc(f, c->title);
	fprintf(f, "</title>\n<text class=\"ttl\" x=\"%d\" y=\"24\">", CH_LEFT);
	put_esc(f, c->title);
	fputs("</text>\n", f);
	axes_write(f, c);
	if (c->marks)
		marks_write(f, c);
	data_write(f, c);
	legend_walk(c, f);
	fputs("</svg>\n</figure>\n", f);
}

/* ---- the charts -------------------------------------------------------- */

static void chart_cdf(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	chart_init(&c, "latency_cdf", "Latency CDF", runs, n);
	axis_set(&c.x, AX_LATENCY, "latency");
	axis_set(&c.y[0], AX_FRACTION, "fraction of requests");
	for (size_t r = 0, next = n; r < n; r++) {
		for (size_t k = 0; k < n_stages(runs[r]); k++) {
			struct series s = { .src = SRC_CDF, .run = runs[r], .stage = k,
					    .show_stage = n_stages(runs[r]) > 1,
					    .color = stage_color(r, k, &next), .dash = (int)r };
			chart_add(&c, &s);
		}
	}
	chart_write(f, &c);
}

/* time_chart_init - a chart over time, with stage marks. */
static void time_chart_init(struct chart *c, const char *name, const char *title,
			    json_t *const *runs, size_t n)
{
	chart_init(c, name, title, runs, n);
	c->marks = true;
	axis_set(&c->x, AX_SECONDS, "time");
}

static void chart_throughput_time(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	time_chart_init(&c, "throughput_time", "Throughput over time", runs, n);
	axis_set(&c.y[0], AX_PLAIN, "requests/s");
	add_per_run(&c, &(struct series){ .src = SRC_TIME, .key = "rps", .suffix = "req/s" });
	chart_write(f, &c);
}

/* chart_work_time - RTFx and output tokens/s over time; when a report has
 * both, tokens/s goes on the right axis (their scales differ). */
static void chart_work_time(FILE *f, json_t *const *runs, size_t n, bool rtfx, bool tokens)
{
	struct chart c;
	time_chart_init(&c, "work_time", "Work over time: RTFx and output tokens/s", runs, n);
	if (rtfx) {
		axis_set(&c.y[0], AX_PLAIN, "RTFx (audio s per s)");
		add_per_run(&c, &(struct series){ .src = SRC_TIME, .key = "rtfx",
						  .suffix = "RTFx" });
	}
	if (tokens) {
		axis_set(&c.y[rtfx], AX_PLAIN, "output tokens/s");
		add_per_run(&c, &(struct series){ .src = SRC_TIME, .key = "tokens_per_s",
						  .suffix = "tok/s", .dash = rtfx, .axis = rtfx });
	}
	chart_write(f, &c);
}

static void chart_latency_time(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	time_chart_init(&c, "latency_time", "Latency over time: p50 and p99", runs, n);
	axis_set(&c.y[0], AX_LATENCY, "latency");
	add_per_run(&c, &(struct series){ .src = SRC_TIME, .key = "latency_p50", .suffix = "p50",
					  .dash = 1 });
	add_per_run(&c, &(struct series){ .src = SRC_TIME, .key = "latency_p99", .suffix = "p99" });
	chart_write(f, &c);
}

/* run_has_status - whether some stage of run has the status key code. */
static bool run_has_status(const json_t *run, const char *code)
{
	for (size_t k = 0; k < n_stages(run); k++)
		if (json_object_get(status_obj(stage_at(run, k), false), code))
			return true;
	return false;
}

/* chart_status_time - one line per status key and run: the color tells the
 * status, the dash the run. */
static void chart_status_time(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	int rank = 0;
	time_chart_init(&c, "status_time", "Responses by status over time", runs, n);
	axis_set(&c.y[0], AX_PLAIN, "responses per 1-s bucket");
	c.y[0].integer = true;
	for (const char *code = next_code(runs, n, false, NULL); code;
	     code = next_code(runs, n, false, code), rank++) {
		for (size_t r = 0; r < n; r++) {
			struct series s = { .src = SRC_TIME, .run = runs[r], .key = "status",
					    .sub = code, .suffix = code, .color = rank,
					    .dash = (int)r };
			if (run_has_status(runs[r], code))
				chart_add(&c, &s);
		}
	}
	chart_write(f, &c);
}

/* chart_hist - a histogram member of every stage, bars side by side. */
static void chart_hist(FILE *f, json_t *const *runs, size_t n, const char *name,
		       const char *title, const char *xlabel)
{
	struct chart c;
	chart_init(&c, name, title, runs, n);
	c.bars = true;
	axis_set(&c.x, AX_LATENCY, xlabel);
	axis_set(&c.y[0], AX_PLAIN, strcmp(name, "itl_hist") ? "requests" : "token gaps");
	c.y[0].integer = true;
	for (size_t r = 0, next = n; r < n; r++) {
		for (size_t k = 0; k < n_stages(runs[r]); k++) {
			struct series s = { .src = SRC_HIST, .run = runs[r], .stage = k,
					    .key = name, .show_stage = n_stages(runs[r]) > 1,
					    .color = stage_color(r, k, &next) };
			chart_add(&c, &s);
		}
	}
	chart_write(f, &c);
}

static void hist_note(FILE *f, const char *what)
{
	fprintf(f, "<p class=\"note\" data-note=\"hist\">No streamed requests with %s in these "
		"runs: no %s histogram.</p>\n", what, what);
}

static void hists_write(FILE *f, json_t *const *runs, size_t n)
{
	bool ttft = any_stage(runs, n, stage_has_hist, "ttft_hist");
	bool itl = any_stage(runs, n, stage_has_hist, "itl_hist");
	if (!ttft && !itl) {
		fputs("<p class=\"note\" data-note=\"hist\">No streamed requests in these runs: "
		      "no TTFT or ITL histograms.</p>\n", f);
		return;
	}
	if (ttft)
		chart_hist(f, runs, n, "ttft_hist", "Time to first token", "time to first token");
	else
		hist_note(f, "TTFT");
	if (itl)
		chart_hist(f, runs, n, "itl_hist", "Inter-token latency", "gap between tokens");
	else
		hist_note(f, "ITL");
}

/* sweep_axis - the load axis, labelled from the stages' modes; whole
 * numbers when every stage is a closed loop (a count of clients). */
static void sweep_axis(struct axis *a, json_t *const *runs, size_t n)
{
	bool closed = false, open = false;
	for (size_t r = 0; r < n; r++) {
		for (size_t k = 0; k < n_stages(runs[r]); k++) {
			json_t *mode_j = json_object_get(stage_at(runs[r], k), "mode");
			const char *mode = str_or(mode_j, "");
			closed |= !strcmp(mode, "closed");
			open |= !strcmp(mode, "open");
		}
	}
	axis_set(a, AX_PLAIN, "load");
	if (closed != open)
		a->label = closed ? "load (concurrent clients)" : "load (offered requests/s)";
	a->integer = closed && !open;
}

/* chart_sweep_throughput - rps against load on the left axis; RTFx and
 * tokens/s, when not zero, on the right one. */
static void chart_sweep_throughput(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	bool rtfx = any_stage(runs, n, stage_has_positive, "rtfx");
	bool tokens = any_stage(runs, n, stage_has_positive, "tokens_per_s");
	chart_init(&c, "sweep_throughput", "Throughput against load", runs, n);
	sweep_axis(&c.x, runs, n);
	axis_set(&c.y[0], AX_PLAIN, "requests/s");
	if (rtfx || tokens)
		axis_set(&c.y[1], AX_PLAIN, rtfx && tokens ? "RTFx, output tokens/s" :
					    rtfx ? "RTFx (audio s per s)" : "output tokens/s");
	add_per_run(&c, &(struct series){ .src = SRC_SWEEP, .key = "rps", .suffix = "req/s" });
	if (rtfx)
		add_per_run(&c, &(struct series){ .src = SRC_SWEEP, .key = "rtfx", .suffix = "RTFx",
						  .dash = 1, .axis = 1 });
	if (tokens)
		add_per_run(&c, &(struct series){ .src = SRC_SWEEP, .key = "tokens_per_s",
						  .suffix = "tok/s", .dash = 2, .axis = 1 });
	chart_write(f, &c);
}

static void chart_sweep_p99(FILE *f, json_t *const *runs, size_t n)
{
	struct chart c;
	chart_init(&c, "sweep_p99", "p99 latency against load", runs, n);
	sweep_axis(&c.x, runs, n);
	axis_set(&c.y[0], AX_LATENCY, "p99 latency");
	add_per_run(&c, &(struct series){ .src = SRC_SWEEP, .key = "latency_s", .sub = "p99",
					  .suffix = "p99" });
	chart_write(f, &c);
}

static void charts_write(FILE *f, json_t *const *runs, size_t n)
{
	bool rtfx = any_stage(runs, n, stage_has_positive, "rtfx");
	bool tokens = any_stage(runs, n, stage_has_positive, "tokens_per_s");
	fputs("<h2>Charts</h2>\n", f);
	chart_cdf(f, runs, n);
	chart_throughput_time(f, runs, n);
	if (rtfx || tokens)
		chart_work_time(f, runs, n, rtfx, tokens);
	chart_latency_time(f, runs, n);
	hists_write(f, runs, n);
	chart_status_time(f, runs, n);
	if (!any_sweep(runs, n))
		return;
	chart_sweep_throughput(f, runs, n);
	chart_sweep_p99(f, runs, n);
}

/* ---- tables -------------------------------------------------------------- */

static void td_text(FILE *f, const char *s)
{
	fputs("<td>", f);
	put_esc(f, s);
	fputs("</td>", f);
}

/* td_label - the run's label behind a swatch of its color. */
static void td_label(FILE *f, const json_t *run, size_t r)
{
	fprintf(f, "<td class=\"run\"><span class=\"sw\" style=\"background:%s\"></span>",
		palette[r % N_PALETTE]);
	put_esc(f, run_label(run));
	fputs("</td>", f);
}

/* td_num - a number with decimals digits; a dash when missing, or when
 * not positive and dash_zero. */
static void td_num(FILE *f, const json_t *j, int decimals, bool dash_zero)
{
	double v;
	if (!num_get(j, &v) || (dash_zero && v <= 0))
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f); /* en dash */
	else
		fprintf(f, "<td class=\"n\">%.*f</td>", decimals, v);
}

static void td_dur(FILE *f, const json_t *j)
{
	double v;
	if (!num_get(j, &v)) {
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
	if (!num_get(j, &v) || v <= 0)
		fputs("<td class=\"n nil\">\xe2\x80\x93</td>", f);
	else
		fprintf(f, "<td class=\"n\">$%.*f</td>", decimals, v);
}

static void td_errors(FILE *f, const json_t *j)
{
	double v = 0;
	num_get(j, &v);
	fprintf(f, "<td class=\"n%s\">%.0f</td>", v > 0 ? " bad" : "", v);
}

/* td_load - "c=8" for a closed loop, "4/s" for an open one. */
static void td_load(FILE *f, const json_t *st)
{
	double v;
	const char *mode = str_or(json_object_get(st, "mode"), "");
	if (!num_get(json_object_get(st, "load"), &v)) {
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
	fprintf(f, "<td>%zu", n_stages(run));
	for (size_t k = 0; k < n_stages(run); k++) {
		fputs(k ? ", " : ": ", f);
		put_esc(f, stage_name(stage_at(run, k)));
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
		td_text(f, str_or(json_object_get(runs[r], "url"), ""));
		td_text(f, str_or(json_object_get(runs[r], "started"), ""));
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
	td_text(f, stage_name(st));
	td_load(f, st);
	td_num(f, summary_get(st, "requests", NULL), 0, false);
	td_num(f, summary_get(st, "ok", NULL), 0, false);
	td_errors(f, summary_get(st, "errors", NULL));
	td_num(f, summary_get(st, "rps", NULL), 2, false);
	td_num(f, summary_get(st, "rtfx", NULL), 1, true);
	td_num(f, summary_get(st, "tokens_per_s", NULL), 1, true);
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++)
		td_dur(f, summary_get(st, "latency_s", lat[i]));
	for (size_t i = 0; i < 3; i += 2) /* p50, p99 */
		td_dur(f, summary_get(st, "ttft_s", lat[i]));
	for (size_t i = 0; i < 3; i += 2)
		td_dur(f, summary_get(st, "itl_s", lat[i]));
	if (cost) {
		td_money(f, summary_get(st, "cost", "per_audio_hour"), 4);
		td_money(f, summary_get(st, "cost", "per_million_tokens"), 2);
	}
	fputs("</tr>\n", f);
}

static void summary_table(FILE *f, json_t *const *runs, size_t n)
{
	bool cost = any_stage(runs, n, stage_has_object, "cost");
	summary_head(f, cost);
	for (size_t r = 0; r < n; r++)
		for (size_t k = 0; k < n_stages(runs[r]); k++)
			summary_row(f, runs[r], r, stage_at(runs[r], k), cost);
	fputs("</tbody></table></div>\n", f);
}

static void errors_head(FILE *f, json_t *const *runs, size_t n)
{
	fprintf(f, "<h2>Errors</h2>\n<div class=\"tw\"><table class=\"err\">\n<thead><tr>"
		"<th rowspan=\"2\">Run</th><th rowspan=\"2\">Stage</th>"
		"<th rowspan=\"2\">Errors</th>"
		"<th colspan=\"4\">By kind</th>");
	if (count_codes(runs, n, true))
		fprintf(f, "<th colspan=\"%zu\">By HTTP status</th>", count_codes(runs, n, true));
	fputs("</tr>\n<tr><th>connect</th><th>timeout</th><th>protocol</th><th>http</th>", f);
	for (const char *c = next_code(runs, n, true, NULL); c; c = next_code(runs, n, true, c)) {
		fputs("<th>", f);
		put_esc(f, c);
		fputs("</th>", f);
	}
	fputs("</tr></thead>\n<tbody>\n", f);
}

static void errors_row(FILE *f, json_t *const *runs, size_t n, size_t r, const json_t *st)
{
	static const char *const kinds[] = { "connect", "timeout", "protocol", "http" };
	fputs("<tr>", f);
	td_label(f, runs[r], r);
	td_text(f, stage_name(st));
	td_errors(f, summary_get(st, "errors", NULL));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		td_num(f, summary_get(st, "errors_by_kind", kinds[i]), 0, true);
	for (const char *c = next_code(runs, n, true, NULL); c; c = next_code(runs, n, true, c))
		td_num(f, summary_get(st, "errors_by_status", c), 0, true);
	fputs("</tr>\n", f);
}

/* errors_table - one row per stage with errors, by kind and by status. */
static void errors_table(FILE *f, json_t *const *runs, size_t n)
{
	errors_head(f, runs, n);
	for (size_t r = 0; r < n; r++) {
		for (size_t k = 0; k < n_stages(runs[r]); k++)
			if (summary_num(stage_at(runs[r], k), "errors") > 0)
				errors_row(f, runs, n, r, stage_at(runs[r], k));
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
		put_esc(f, first);
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
		put_esc(f, run_label(runs[r]));
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
	if (any_stage(runs, n_runs, stage_has_positive, "errors"))
		errors_table(f, runs, n_runs);
	charts_write(f, runs, n_runs);
	fputs("<footer>inferd-bench \xc2\xb7 results schema 1</footer>\n</main>\n</body>\n"
	      "</html>\n", f);
	if (fflush(f) || ferror(f))
		return fail(err, errlen, "writing the HTML report failed");
	return 0;
}
