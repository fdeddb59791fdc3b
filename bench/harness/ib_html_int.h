/* ib_html_int.h - what the HTML report's files share (not for the rest of
 * inferd-bench: ib_html.h is the report's interface).
 *
 *   ib_html_json.c   reading the runs' JSON; put_esc     (a leaf)
 *   ib_html_chart.c  the SVG charts                     (uses json)
 *   ib_html.c        the check, tables and page         (uses both)
 *
 * Every member of the JSON is optional: a missing or odd one reads as
 * absent (false, NULL, 0 or the default given), never as an error.
 */
#ifndef IB_HTML_INT_H
#define IB_HTML_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- ib_html_json.c ----------------------------------------------------- */

/* Predicates over one stage, for ib_html__any_stage. */
typedef bool (*ib_html__stage_pred)(const json_t *st, const char *key);

/* ib_html__put_esc - write s (NULL: nothing) escaped for HTML text and attribute
 * values; C0 controls other than tab and newline become '?'. */
void ib_html__put_esc(FILE *f, const char *s);

/* ib_html__num_get - *out = j's value when j is a finite number within DATA_MAX;
 * otherwise false and *out untouched. */
bool ib_html__num_get(const json_t *j, double *out);

/* ib_html__str_or - j's string (borrowed), or dflt when j is not one. */
const char *ib_html__str_or(const json_t *j, const char *dflt);

/* ib_html__n_stages - how many stages run has (0 without "stages"). */
size_t ib_html__n_stages(const json_t *run);

/* ib_html__stage_at - stage k of run (borrowed), NULL past the end. */
json_t *ib_html__stage_at(const json_t *run, size_t k);

/* ib_html__run_label - the run's name in tables and legends: its label, else its URL. */
const char *ib_html__run_label(const json_t *run);

/* ib_html__stage_name - the stage's name (borrowed), or "stage". */
const char *ib_html__stage_name(const json_t *st);

/* ib_html__summary_get - stage.summary[key] or, with sub, stage.summary[key][sub]. */
json_t *ib_html__summary_get(const json_t *st, const char *key, const char *sub);

/* ib_html__summary_num - a summary number, 0 when missing. */
double ib_html__summary_num(const json_t *st, const char *key);

/* ib_html__hist_bins - bins of a {"edges", "counts"} histogram (0 for null or bad). */
size_t ib_html__hist_bins(const json_t *h);

/* ib_html__hist_bin - bin k's edges [e0, e1) and count; false when any is not a number. */
bool ib_html__hist_bin(const json_t *h, size_t k, double *e0, double *e1, double *count);

/* ib_html__stage_span - the seconds a stage takes on a time axis: its window, or
 * the end of its last 1-s bucket when that is later. */
double ib_html__stage_span(const json_t *st);

/* ib_html__stage_start - where stage k of run starts on a time axis. */
double ib_html__stage_start(const json_t *run, size_t k);

/* Stage predicates for ib_html__any_stage: summary[key] > 0; st[key] a
 * histogram with bins; summary[key] an object. */
bool ib_html__stage_has_positive(const json_t *st, const char *key);
bool ib_html__stage_has_hist(const json_t *st, const char *key);
bool ib_html__stage_has_object(const json_t *st, const char *key);

/* ib_html__any_stage - whether pred holds for some stage of some run. */
bool ib_html__any_stage(json_t *const *runs, size_t n, ib_html__stage_pred pred, const char *key);

/* ib_html__any_sweep - whether some run has more than one stage. */
bool ib_html__any_sweep(json_t *const *runs, size_t n);

/* ib_html__status_obj - a stage's status-keyed object: summary.errors_by_status
 * (errors) or timeseries.status. */
json_t *ib_html__status_obj(const json_t *st, bool errors);

/* ib_html__next_code - the least status key after prev (NULL: the first) over all
 * stages of runs[0..n); NULL when none is left. The string is borrowed
 * from the JSON. Walking with it visits each distinct key once, in order. */
const char *ib_html__next_code(json_t *const *runs, size_t n, bool errors, const char *prev);

/* ib_html__count_codes - how many distinct status keys next_code walks. */
size_t ib_html__count_codes(json_t *const *runs, size_t n, bool errors);

/* ---- ib_html_chart.c ---------------------------------------------------- */

/* The runs' colours, by run index modulo IB_HTML__N_PALETTE. */
#define IB_HTML__N_PALETTE ((size_t)10)
extern const char *const ib_html__palette[IB_HTML__N_PALETTE];

/* ib_html__charts_write - the "Charts" section of the page for runs[0..n)
 * (checked runs, borrowed): every chart ib_html.h names that has data. */
void ib_html__charts_write(FILE *f, json_t *const *runs, size_t n);

#endif /* IB_HTML_INT_H */
