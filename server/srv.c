/* srv.c - the server object: listening socket, accept loop, signals and
 * graceful shutdown.
 *
 * Shutdown (SIGTERM or SIGINT): stop accepting, close idle connections,
 * let requests in progress finish (their responses carry
 * Connection: close), and stop the loop when the last connection closes or
 * limits.drain_timeout_ms passes, whichever comes first (then a request
 * not answered yet gets 503 and its connection closes once that is
 * written: srv__conns_deadline). A second signal
 * closes everything at once.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_batch.h"
#include "server/grpc/srv_grpc.h"
#include "server/kserve/srv_kserve_grpc.h"
#include "server/srv_int.h"

static void srv_on_connection(uv_stream_t *listener, int status)
{
	struct srv *srv = listener->data;
	if (status < 0 || srv->draining)
		return;
	int rc = srv__conn_accept(srv, listener);
	if (rc)
		fprintf(stderr, "inferd: accept failed: %s\n", st_str(rc));
}

static void srv_close_cb(uv_handle_t *h)
{
	(void)h;
}

/* Close the server's own handles; the loop then ends by itself. */
static void srv_stop_loop(struct srv *srv)
{
	srv__batch_drain(srv); /* before srv__post_stop: no runner posts after it */
	uv_handle_t *hs[] = { (uv_handle_t *)&srv->sigterm, (uv_handle_t *)&srv->sigint,
			      (uv_handle_t *)&srv->drain_timer, (uv_handle_t *)&srv->send_timer,
			      (uv_handle_t *)&srv->listener };
	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
		if (!uv_is_closing(hs[i]))
			uv_close(hs[i], srv_close_cb);
	/* Closing the watchers gave SIGTERM/SIGINT their default action back;
	 * one more (`timeout` signals the whole group) must not kill the
	 * process while the engine winds down. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	srv__grpc_close_all(srv);
	srv__post_stop(srv);
}

/* Stop once draining and the last connection has gone (srv_conn_cbs). */
static void srv_drain_check(struct srv *srv)
{
	if (srv->draining && srv->n_conns == 0 && srv->n_grpc_conns == 0)
		srv_stop_loop(srv);
}

static void srv_drain_timeout_cb(uv_timer_t *t)
{
	struct srv *srv = t->data;
	fprintf(stderr, "inferd: drain timeout: answering the requests in progress with 503 and "
		"closing %d connection(s)\n", srv->n_conns + srv->n_grpc_conns);
	srv__conns_deadline(srv);
	srv__grpc_close_all(srv);
	srv_stop_loop(srv);
}

/* limits.send_timeout_ms (and the gRPC connections' idle timeouts), swept
 * the way Redis's clientsCron sweeps its clients for timeouts: one timer
 * for the server, not one per connection. */
static void srv_send_sweep_cb(uv_timer_t *t)
{
	struct srv *srv = t->data;
	uint64_t now = uv_now(&srv->loop);
	srv__conns_send_sweep(srv, now);
	srv__grpc_sweep(srv, now);
}

static void srv_on_signal(uv_signal_t *s, int signum)
{
	struct srv *srv = s->data;
	if (srv->draining) {
		fprintf(stderr, "inferd: second signal: closing now\n");
		srv__conns_close_all(srv);
		srv__grpc_close_all(srv);
		srv_stop_loop(srv);
		return;
	}
	fprintf(stderr, "inferd: %s: draining %d connection(s)\n", strsignal(signum),
		srv->n_conns + srv->n_grpc_conns);
	srv__drain(srv);
}

void srv__drain(struct srv *srv)
{
	if (srv->draining)
		return;
	srv->draining = true;
	srv__batch_drain(srv);
	uv_close((uv_handle_t *)&srv->listener, srv_close_cb);
	uv_timer_start(&srv->drain_timer, srv_drain_timeout_cb,
		       (uint64_t)srv->cfg->drain_timeout_ms, 0);
	srv__conns_close_idle(srv);
	srv__grpc_drain(srv);
	srv_drain_check(srv);
}

/* Parse "HOST:PORT" or "[V6]:PORT" into a socket address. */
static int srv_parse_listen(const char *s, struct sockaddr_storage *ss)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s)
		return -ST_INVAL;
	const char *h = s;
	size_t n = (size_t)(colon - s);
	if (*h == '[' && n >= 2 && h[n - 1] == ']') {
		h++;
		n -= 2;
	}
	if (n >= sizeof(host))
		return -ST_INVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || colon[1] == '\0')
		return -ST_INVAL;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (!uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss))
		return 0;
	if (!uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss))
		return 0;
	return -ST_INVAL;
}

static bool srv_addr_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	return IN6_IS_ADDR_LOOPBACK(a);
}

/* Record the bound address (the real port when 0 was asked for). */
static void srv_note_bound(struct srv *srv)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	char ip[64] = "?";
	int port = 0;
	uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
	if (ss.ss_family == AF_INET6) {
		uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		snprintf(srv->listen_addr, sizeof(srv->listen_addr), "[%s]:%d", ip, port);
	} else {
		uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		snprintf(srv->listen_addr, sizeof(srv->listen_addr), "%s:%d", ip, port);
	}
}

static int srv_listen(struct srv *srv, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (srv_parse_listen(addr, &ss)) {
		snprintf(err, errlen, "listen %s: expected HOST:PORT with a numeric address", addr);
		return -ST_INVAL;
	}
	int rc = uv_tcp_bind(&srv->listener, (const struct sockaddr *)&ss, 0);
	if (!rc)
		rc = uv_listen((uv_stream_t *)&srv->listener, 511, srv_on_connection);
	if (rc) {
		snprintf(err, errlen, "listen %s: %s", addr, uv_strerror(rc));
		return -ST_IO;
	}
	srv->listener.data = srv;
	srv_note_bound(srv);
	if (!srv_addr_is_loopback(&ss) && srv->n_api_keys == 0)
		fprintf(stderr,
			"inferd: WARNING: listening on %s, reachable from other machines, with NO API KEY.\n"
			"inferd: WARNING: anyone who can reach this port can use every model. Set\n"
			"inferd: WARNING: \"api_keys\" in the config or INFERD_API_KEY to require one.\n",
			srv->listen_addr);
	return 0;
}

static int srv_keys_init(struct srv *srv, const char *extra_key)
{
	const struct cfg *cfg = srv->cfg;
	size_t n = cfg->n_api_keys + (extra_key && *extra_key ? 1 : 0);
	if (!n)
		return 0;
	srv->api_keys = mem_calloc(n, sizeof(*srv->api_keys));
	if (!srv->api_keys)
		return -ST_NOMEM;
	for (size_t i = 0; i < cfg->n_api_keys; i++)
		srv->api_keys[i] = cfg->api_keys[i];
	if (n > cfg->n_api_keys)
		srv->api_keys[n - 1] = (char *)extra_key;
	srv->n_api_keys = n;
	return 0;
}

int srv__create_unbound(const struct cfg *cfg, struct eng *eng, const char *extra_api_key,
			struct srv **out)
{
	*out = NULL;
	struct srv *srv = mem_calloc(1, sizeof(*srv));
	if (!srv)
		return -ST_NOMEM;
	srv->cfg = cfg;
	srv->eng = eng;
	srv->n_routes = srv__route_count();
	srv->cbs = (struct srv_conn_cbs){
		.proto_for_path = srv__proto_for_path,
		.route = srv__req_route,
		.handle = srv__req_begin_handling,
		.respond_error = srv__req_respond_error,
		.conn_closed = srv_drain_check,
	};
	srv->grpc_cbs = (struct srv_grpc_cbs){
		.dispatch = srv__ks_grpc_dispatch,
		.stream_message = srv__ks_grpc_stream_message,
		.stream_gone = srv__ks_grpc_stream_gone,
	};
	srv__parser_settings_init(&srv->parser_settings);
	if (uv_loop_init(&srv->loop)) {
		mem_free(srv);
		return -ST_IO;
	}
	uv_random(NULL, NULL, &srv->request_id_salt, sizeof(srv->request_id_salt), 0, NULL);
	uv_signal_init(&srv->loop, &srv->sigterm);
	uv_signal_init(&srv->loop, &srv->sigint);
	uv_timer_init(&srv->loop, &srv->drain_timer);
	uv_timer_init(&srv->loop, &srv->send_timer);
	uv_tcp_init(&srv->loop, &srv->listener);
	if (srv__post_init(srv)) {
		uv_close((uv_handle_t *)&srv->listener, NULL);
		uv_close((uv_handle_t *)&srv->drain_timer, NULL);
		uv_close((uv_handle_t *)&srv->send_timer, NULL);
		uv_close((uv_handle_t *)&srv->sigterm, NULL);
		uv_close((uv_handle_t *)&srv->sigint, NULL);
		uv_run(&srv->loop, UV_RUN_DEFAULT);
		uv_loop_close(&srv->loop);
		mem_free(srv);
		return -ST_IO;
	}
	srv->sigterm.data = srv->sigint.data = srv->drain_timer.data = srv;
	srv->send_timer.data = srv;
	/* unreferenced: the sweep alone does not keep the loop running */
	uv_timer_start(&srv->send_timer, srv_send_sweep_cb, SRV_SEND_SWEEP_MS, SRV_SEND_SWEEP_MS);
	uv_unref((uv_handle_t *)&srv->send_timer);
	int rc = srv_keys_init(srv, extra_api_key);
	if (rc) {
		srv_destroy(srv);
		return rc;
	}
	*out = srv;
	return 0;
}

int srv_create(const struct cfg *cfg, struct eng *eng, const char *listen_override,
	       const char *extra_api_key, struct srv **out, char *err, size_t errlen)
{
	struct srv *srv;
	int rc = srv__create_unbound(cfg, eng, extra_api_key, &srv);
	*out = NULL;
	if (rc) {
		snprintf(err, errlen, "cannot create the server: %s", st_str(rc));
		return rc;
	}
	char addr[96];
	if (listen_override)
		snprintf(addr, sizeof(addr), "%s", listen_override);
	else
		snprintf(addr, sizeof(addr), strchr(cfg->listen_host, ':') ? "[%s]:%d" : "%s:%d",
			 cfg->listen_host, cfg->listen_port);
	rc = srv_listen(srv, addr, err, errlen);
	if (!rc)
		rc = srv__grpc_listen(srv, err, errlen);
	if (rc) {
		srv_destroy(srv);
		return rc;
	}
	uv_signal_start(&srv->sigterm, srv_on_signal, SIGTERM);
	uv_signal_start(&srv->sigint, srv_on_signal, SIGINT);
	*out = srv;
	return 0;
}

void srv_set_engine(struct srv *srv, struct eng *eng)
{
	srv->eng = eng;
}

int srv_run(struct srv *srv)
{
	char err[512];
	if (srv__batch_start(srv, err, sizeof(err))) {
		fprintf(stderr, "inferd: WARNING: the Batch API is off: %s\n", err);
		srv__batch_stop(srv);
	}
	fprintf(stderr, "inferd: listening on %s\n", srv->listen_addr);
	int rc = uv_run(&srv->loop, UV_RUN_DEFAULT);
	srv__batch_stop(srv);
	(void)rc;
	fprintf(stderr, "inferd: stopped\n");
	return 0;
}

void srv_destroy(struct srv *srv)
{
	if (!srv)
		return;
	srv__conns_close_all(srv);
	srv__grpc_close_all(srv);
	srv_stop_loop(srv);
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	srv__batch_stop(srv);
	if (uv_loop_close(&srv->loop))
		fprintf(stderr, "inferd: warning: loop closed with handles still open\n");
	mem_free(srv->api_keys);
	mem_free(srv);
}
