/* ib_html.h - inferd-bench's self-contained HTML report.
 *
 * Draws one or more runs (docs/bench.md, JSON schema version 1) side by
 * side into one page: the runs, a summary table (one row per run and
 * stage), an errors table (when any run has errors) and inline SVG charts:
 * latency CDF, throughput, work (RTFx, tokens/s) and latency over time,
 * TTFT and ITL histograms, status codes over time and, when a run has more
 * than one stage, throughput and p99 latency against load. The page needs
 * nothing from elsewhere: inline CSS and SVG, no scripts, fonts or images.
 *
 * Markup contract (tests and tools count these; keep the names):
 *   each chart      <svg class="chart" data-chart="NAME" ...> with a <title>;
 *                   NAME is latency_cdf, throughput_time, work_time,
 *                   latency_time, ttft_hist, itl_hist, status_time,
 *                   sweep_throughput or sweep_p99;
 *   each data line  <polyline class="series" data-run="LABEL" data-n="N" points="x,y ...">,
 *                   N the number of points, LABEL the run's label, escaped;
 *   line markers    <circle class="pt"> on every point of a series of at most 60;
 *   histogram bars  <rect class="bar" data-run="LABEL" ...>, one per bin.
 * Without any histogram the two histogram charts are replaced by a
 * <p class="note" data-note="hist"> saying that no request was streamed.
 *
 * Thread: any; no state outside the arguments. Allocates nothing itself
 * (jansson allocates nothing either on the paths used).
 */
#ifndef IB_HTML_H
#define IB_HTML_H

#include <jansson.h>
#include <stdio.h>

/* ib_html_write - write one self-contained HTML report of n_runs runs
 * (each a JSON object of docs/bench.md's schema version 1, borrowed) to f.
 * Returns 0, or -1 with a message in err (errlen bytes) when a run is not
 * of that schema or writing fails.
 *
 *   f:      an open stream (borrowed); flushed, not closed.
 *   runs:   n_runs run objects (borrowed, not modified); n_runs >= 1.
 *   err:    receives one line on failure (may be NULL; errlen 0 for none).
 *
 * Every run is checked before anything is written, so a run of the wrong
 * schema leaves f untouched. Checked: "tool" is "inferd-bench", "schema" is
 * the integer 1, "stages" is an array of objects each with a "summary"
 * object. Every other member is optional: a missing or null one leaves a
 * dash in a table or no line in a chart. Strings from the JSON (labels,
 * stage names, URLs, status codes) are HTML-escaped. */
int ib_html_write(FILE *f, json_t *const *runs, size_t n_runs, char *err, size_t errlen);

#endif /* IB_HTML_H */
