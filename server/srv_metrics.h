/* srv_metrics.h - the HTTP front end's Prometheus metrics: requests by
 * route, method and status, a request-duration histogram by route, open
 * connections, bytes in and out. Loop thread only (no atomics needed).
 * Exposition follows the Prometheus text format 0.0.4.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdint.h>

#include "server/srv_buf.h"

#define SRV_METRICS_MAX_ROUTES 48 /* route table rows + 1 for "unmatched" */
#define SRV_METRICS_N_BUCKETS 12  /* duration histogram upper bounds */

struct srv_metrics {
	uint64_t requests[SRV_METRICS_MAX_ROUTES][5][600]; /* [route][method slot][status] */
	uint64_t dur_buckets[SRV_METRICS_MAX_ROUTES][SRV_METRICS_N_BUCKETS];
	uint64_t dur_count[SRV_METRICS_MAX_ROUTES];
	double dur_sum_s[SRV_METRICS_MAX_ROUTES];
	uint64_t bytes_in, bytes_out;     /* raw socket bytes */
	uint64_t connections_accepted;
	uint64_t connections_rejected;    /* over max_connections */
	int64_t open_connections;
	uint64_t send_timeouts;           /* closed by limits.send_timeout_ms */
};

/* srv_metrics_observe - count one finished request: route index (the
 * route table row, or the "unmatched" row), llhttp method, HTTP status,
 * duration in seconds. Out-of-range values are clamped, never trusted. */
void srv_metrics_observe(struct srv_metrics *m, int route, int method,
			 int status, double seconds);

/* srv_metrics_render - append the exposition text. route_name(i) names
 * row i; rows with no traffic are skipped. Returns 0 or a srv_buf error. */
int srv_metrics_render(const struct srv_metrics *m, struct srv_buf *out,
		       const char *(*route_name)(int i), int n_routes);

#endif /* SRV_METRICS_H */
