/* srv_metrics.c - counters and histograms in the Prometheus text format. */
#include "server/srv_metrics.h"

#include "common/mem.h"

#include <llhttp.h>

static const double srv_dur_bounds[SRV_METRICS_N_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30,
};

/* Methods we name in labels; anything else counts as "OTHER". */
static const struct {
	int method;
	const char *name;
} srv_method_slots[5] = {
	{ HTTP_GET, "GET" }, { HTTP_POST, "POST" }, { HTTP_HEAD, "HEAD" },
	{ HTTP_DELETE, "DELETE" }, { -1, "OTHER" },
};

static int srv_method_slot(int method)
{
	for (int i = 0; i < 4; i++)
		if (srv_method_slots[i].method == method)
			return i;
	return 4;
}

void srv_metrics_observe(struct srv_metrics *m, int route, int method,
			 int status, double seconds)
{
	if (route < 0 || route >= SRV_METRICS_MAX_ROUTES)
		route = SRV_METRICS_MAX_ROUTES - 1;
	if (status < 100 || status > 599)
		status = 500;
	m->requests[route][srv_method_slot(method)][status]++;
	for (int b = 0; b < SRV_METRICS_N_BUCKETS; b++)
		if (seconds <= srv_dur_bounds[b])
			m->dur_buckets[route][b]++;
	m->dur_count[route]++;
	m->dur_sum_s[route] += seconds;
}

static int srv_metrics_render_requests(const struct srv_metrics *m, struct srv_buf *out,
				       const char *(*route_name)(int i), int n_routes)
{
	int rc = srv_buf_printf(out,
		"# HELP inferd_http_requests_total HTTP requests answered, by route, method and status.\n"
		"# TYPE inferd_http_requests_total counter\n");
	for (int r = 0; r < n_routes && !rc; r++)
		for (int s = 0; s < 5 && !rc; s++)
			for (int code = 100; code < 600 && !rc; code++) {
				uint64_t n = m->requests[r][s][code];
				if (n)
					rc = srv_buf_printf(out,
						"inferd_http_requests_total{route=\"%s\",method=\"%s\",code=\"%d\"} %llu\n",
						route_name(r), srv_method_slots[s].name, code,
						(unsigned long long)n);
			}
	return rc;
}

static int srv_metrics_render_durations(const struct srv_metrics *m, struct srv_buf *out,
					const char *(*route_name)(int i), int n_routes)
{
	int rc = srv_buf_printf(out,
		"# HELP inferd_http_request_duration_seconds Time from the first request byte to the response being queued.\n"
		"# TYPE inferd_http_request_duration_seconds histogram\n");
	for (int r = 0; r < n_routes && !rc; r++) {
		if (!m->dur_count[r])
			continue;
		const char *name = route_name(r);
		for (int b = 0; b < SRV_METRICS_N_BUCKETS && !rc; b++)
			rc = srv_buf_printf(out,
				"inferd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
				name, srv_dur_bounds[b], (unsigned long long)m->dur_buckets[r][b]);
		if (!rc)
			rc = srv_buf_printf(out,
				"inferd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
				"inferd_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
				"inferd_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
				name, (unsigned long long)m->dur_count[r], name, m->dur_sum_s[r],
				name, (unsigned long long)m->dur_count[r]);
	}
	return rc;
}

static int srv_metrics_render_conns(const struct srv_metrics *m, struct srv_buf *out)
{
	return srv_buf_printf(out,
		"# HELP inferd_http_open_connections Client connections open now.\n"
		"# TYPE inferd_http_open_connections gauge\n"
		"inferd_http_open_connections %lld\n"
		"# HELP inferd_http_connections_total Client connections accepted.\n"
		"# TYPE inferd_http_connections_total counter\n"
		"inferd_http_connections_total %llu\n"
		"# HELP inferd_http_connections_rejected_total Connections refused over limits.max_connections.\n"
		"# TYPE inferd_http_connections_rejected_total counter\n"
		"inferd_http_connections_rejected_total %llu\n"
		"# HELP inferd_http_send_timeouts_total Connections closed because their queued response bytes did not move for limits.send_timeout_ms.\n"
		"# TYPE inferd_http_send_timeouts_total counter\n"
		"inferd_http_send_timeouts_total %llu\n"
		"# HELP inferd_http_received_bytes_total Bytes read from client sockets.\n"
		"# TYPE inferd_http_received_bytes_total counter\n"
		"inferd_http_received_bytes_total %llu\n"
		"# HELP inferd_http_sent_bytes_total Bytes written to client sockets.\n"
		"# TYPE inferd_http_sent_bytes_total counter\n"
		"inferd_http_sent_bytes_total %llu\n",
		(long long)m->open_connections,
		(unsigned long long)m->connections_accepted,
		(unsigned long long)m->connections_rejected,
		(unsigned long long)m->send_timeouts,
		(unsigned long long)m->bytes_in, (unsigned long long)m->bytes_out);
}

/* The allocator's account (mem_stats_read): what the program holds, and
 * what it freed that the allocator keeps for reuse (Redis INFO's
 * used_memory and allocator fragmentation bytes, in spirit). */
static int srv_metrics_render_memory(struct srv_buf *out)
{
	struct mem_stats st;
	mem_stats_read(&st);
	return srv_buf_printf(out,
		"# HELP inferd_memory_allocated_bytes Heap bytes the daemon holds, by the allocator's account (pages never written are not resident, so this may exceed the RSS).\n"
		"# TYPE inferd_memory_allocated_bytes gauge\n"
		"inferd_memory_allocated_bytes{allocator=\"%s\"} %zu\n"
		"# HELP inferd_memory_allocator_kept_bytes Freed pages the allocator keeps for reuse and has not yet handed back to the system.\n"
		"# TYPE inferd_memory_allocator_kept_bytes gauge\n"
		"inferd_memory_allocator_kept_bytes{allocator=\"%s\"} %zu\n",
		st.allocator, st.allocated, st.allocator, st.kept);
}

int srv_metrics_render(const struct srv_metrics *m, struct srv_buf *out,
		       const char *(*route_name)(int i), int n_routes)
{
	if (n_routes > SRV_METRICS_MAX_ROUTES)
		n_routes = SRV_METRICS_MAX_ROUTES;
	int rc = srv_metrics_render_requests(m, out, route_name, n_routes);
	if (!rc)
		rc = srv_metrics_render_durations(m, out, route_name, n_routes);
	if (!rc)
		rc = srv_metrics_render_conns(m, out);
	if (!rc)
		rc = srv_metrics_render_memory(out);
	return rc;
}
