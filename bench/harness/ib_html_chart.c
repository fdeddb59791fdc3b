/* ib_html_chart.c - the HTML report's inline SVG charts (ib_html.h's
 * markup contract): axes with nice ticks, series walked by cursors, lines,
 * markers, bars and legends, and the charts themselves (latency CDF, the
 * time series, histograms, status codes, sweeps).
 *
 * Nothing is copied out of the JSON. A chart is a list of series, each a
 * recipe (which run, which stage, which member) that a cursor walks over
 * several times: once to count the points, once to find the axes' ranges,
 * once to write them. So nothing is allocated, and a line is always drawn
 * from the very values its axes were scaled for.
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
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ib_html_int.h"

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

/* The runs' colours (ib_html_int.h). */
const char *const ib_html__palette[IB_HTML__N_PALETTE] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};

/* stroke-dasharray by index; the first is a solid line. */
static const char *const dashes[] = { NULL, "7 4", "2 3", "9 3 2 3" };
#define N_DASHES (sizeof(dashes) / sizeof(dashes[0]))

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
	ib_html__put_esc(f, a->label);
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
	int color, dash;    /* indexes into ib_html__palette and dashes */
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
	return json_object_get(ib_html__stage_at(s->run, s->stage), s->key);
}

static bool cdf_next(struct cursor *c, double *x, double *y)
{
	const json_t *a = json_object_get(ib_html__stage_at(c->s->run, c->s->stage), "latency_cdf");
	while (c->i < json_array_size(a)) {
		const json_t *p = json_array_get(a, c->i++);
		if (ib_html__num_get(json_array_get(p, 0), x) && ib_html__num_get(json_array_get(p, 1), y))
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
	if (!ib_html__num_get(json_array_get(json_object_get(ts, "t"), i), x))
		return false;
	if (!v && s->sub) {
		*y = 0;
		return true;
	}
	return ib_html__num_get(json_array_get(v, i), y);
}

static bool time_next(struct cursor *c, double *x, double *y)
{
	while (c->stage < ib_html__n_stages(c->s->run)) {
		const json_t *st = ib_html__stage_at(c->s->run, c->stage);
		size_t n = json_array_size(json_object_get(json_object_get(st, "timeseries"), "t"));
		if (c->i < n) {
			if (!time_point(c->s, st, c->i++, x, y))
				continue;
			*x += c->t0;
			return true;
		}
		c->t0 += ib_html__stage_span(st);
		c->stage++;
		c->i = 0;
	}
	return false;
}

static bool sweep_next(struct cursor *c, double *x, double *y)
{
	while (c->stage < ib_html__n_stages(c->s->run)) {
		const json_t *st = ib_html__stage_at(c->s->run, c->stage++);
		if (ib_html__num_get(json_object_get(st, "load"), x) &&
		    ib_html__num_get(ib_html__summary_get(st, c->s->key, c->s->sub), y))
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
		return ib_html__hist_bins(series_hist(s));
	while (cur_next(&cu, &x, &y))
		n++;
	return n;
}

static const char *series_color(const struct series *s)
{
	return ib_html__palette[(size_t)s->color % IB_HTML__N_PALETTE];
}

/* put_name - the series' legend text. */
static void put_name(FILE *f, const struct series *s)
{
	ib_html__put_esc(f, ib_html__run_label(s->run));
	if (s->show_stage) {
		fputs(" \xc2\xb7 ", f); /* U+00B7 middle dot */
		ib_html__put_esc(f, ib_html__stage_name(ib_html__stage_at(s->run, s->stage)));
	}
	if (s->suffix) {
		fputc(' ', f);
		ib_html__put_esc(f, s->suffix);
	}
	if (s->axis)
		fputs(" (right axis)", f);
}

/* legend_width - estimated width of the series' legend entry. */
static double legend_width(const struct series *s)
{
	size_t n = strlen(ib_html__run_label(s->run));
	if (s->show_stage)
		n += 3 + strlen(ib_html__stage_name(ib_html__stage_at(s->run, s->stage)));
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

/* stage_color - ib_html__palette index of stage k of run r in a chart of one series
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
	for (size_t k = 0; k < ib_html__hist_bins(series_hist(s)); k++) {
		if (!ib_html__hist_bin(series_hist(s), k, &e0, &e1, &y))
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
		ax_extend(&c->x, ib_html__stage_start(c->runs[r], ib_html__n_stages(c->runs[r])));
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
	double t = ib_html__stage_start(c->runs[r], k);
	const char *name = ib_html__stage_name(ib_html__stage_at(c->runs[r], k));
	for (size_t q = 0; q < r; q++) {
		for (size_t i = 0; ib_html__n_stages(c->runs[q]) > 1 && i < ib_html__n_stages(c->runs[q]); i++) {
			if (fabs(ib_html__stage_start(c->runs[q], i) - t) < 1e-6 &&
			    !strcmp(ib_html__stage_name(ib_html__stage_at(c->runs[q], i)), name))
				return true;
		}
	}
	return false;
}

/* mark_write - the dashed line at the start of stage k of run r, labelled. */
static void mark_write(FILE *f, const struct chart *c, size_t r, size_t k)
{
	double x = xpos(c, ib_html__stage_start(c->runs[r], k));
	const char *color = c->n_runs > 1 ? ib_html__palette[r % IB_HTML__N_PALETTE] : "#7d8490";
	fprintf(f, "<line class=\"mark\" stroke=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		"y2=\"%.1f\"/>\n", color, x, c->py0, x, c->py1);
	fprintf(f, "<text class=\"marktext\" x=\"%.1f\" y=\"%.1f\" style=\"fill:%s\">", x + 4,
		c->py0 + 12 + 13 * (double)(r % 3), color);
	ib_html__put_esc(f, ib_html__stage_name(ib_html__stage_at(c->runs[r], k)));
	fputs("</text>\n", f);
}

static void marks_write(FILE *f, const struct chart *c)
{
	fputs("<g class=\"marks\">\n", f);
	for (size_t r = 0; r < c->n_runs; r++) {
		for (size_t k = 0; ib_html__n_stages(c->runs[r]) > 1 && k < ib_html__n_stages(c->runs[r]); k++)
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
	ib_html__put_esc(f, ib_html__run_label(s->run));
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
	if (!ib_html__hist_bin(series_hist(s), k, &e0, &e1, &count))
		return;
	double w = (e1 - e0) / (double)c->n;
	double xa = xpos(c, e0 + w * (double)j), xb = xpos(c, e0 + w * (double)(j + 1));
	double ya = ypos(c, 0, count);
	fputs("<rect class=\"bar\" data-run=\"", f);
	ib_html__put_esc(f, ib_html__run_label(s->run));
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
		for (size_t k = 0; k < ib_html__hist_bins(series_hist(&c->s[j])); k++)
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
	ib_html__put_esc(f, c->title);
	fprintf(f, "</title>\n<text class=\"ttl\" x=\"%d\" y=\"24\">", CH_LEFT);
	ib_html__put_esc(f, c->title);
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
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++) {
			struct series s = { .src = SRC_CDF, .run = runs[r], .stage = k,
					    .show_stage = ib_html__n_stages(runs[r]) > 1,
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
	for (size_t k = 0; k < ib_html__n_stages(run); k++)
		if (json_object_get(ib_html__status_obj(ib_html__stage_at(run, k), false), code))
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
	for (const char *code = ib_html__next_code(runs, n, false, NULL); code;
	     code = ib_html__next_code(runs, n, false, code), rank++) {
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
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++) {
			struct series s = { .src = SRC_HIST, .run = runs[r], .stage = k,
					    .key = name, .show_stage = ib_html__n_stages(runs[r]) > 1,
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
	bool ttft = ib_html__any_stage(runs, n, ib_html__stage_has_hist, "ttft_hist");
	bool itl = ib_html__any_stage(runs, n, ib_html__stage_has_hist, "itl_hist");
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
		for (size_t k = 0; k < ib_html__n_stages(runs[r]); k++) {
			json_t *mode_j = json_object_get(ib_html__stage_at(runs[r], k), "mode");
			const char *mode = ib_html__str_or(mode_j, "");
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
	bool rtfx = ib_html__any_stage(runs, n, ib_html__stage_has_positive, "rtfx");
	bool tokens = ib_html__any_stage(runs, n, ib_html__stage_has_positive, "tokens_per_s");
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

void ib_html__charts_write(FILE *f, json_t *const *runs, size_t n)
{
	bool rtfx = ib_html__any_stage(runs, n, ib_html__stage_has_positive, "rtfx");
	bool tokens = ib_html__any_stage(runs, n, ib_html__stage_has_positive, "tokens_per_s");
	fputs("<h2>Charts</h2>\n", f);
	chart_cdf(f, runs, n);
	chart_throughput_time(f, runs, n);
	if (rtfx || tokens)
		chart_work_time(f, runs, n, rtfx, tokens);
	chart_latency_time(f, runs, n);
	hists_write(f, runs, n);
	chart_status_time(f, runs, n);
	if (!ib_html__any_sweep(runs, n))
		return;
	chart_sweep_throughput(f, runs, n);
	chart_sweep_p99(f, runs, n);
}
