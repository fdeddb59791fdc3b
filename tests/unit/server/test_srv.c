/* test_srv.c - server pieces without a network: buffer ceilings, metrics
 * exposition, and whole requests over a socketpair through the same
 * connection code the daemon uses (parse, route, respond, pipelining,
 * limits), ending with every handle closed and uv_loop_close() == 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/st.h"
#include "server/srv_int.h"

static void test_buf_ceiling(void **state)
{
	(void)state;
	struct srv_buf b;
	srv_buf_init(&b, 10);
	assert_int_equal(srv_buf_append(&b, "12345", 5), 0);
	assert_int_equal(srv_buf_printf(&b, "%d", 6789), 0);
	assert_int_equal(b.len, 9);
	assert_string_equal(b.data, "123456789");
	assert_int_equal(srv_buf_append(&b, "ab", 2), -ST_TOOBIG);
	assert_int_equal(srv_buf_printf(&b, "%s", "ab"), -ST_TOOBIG);
	assert_int_equal(b.len, 9); /* unchanged by the refused appends */
	assert_int_equal(srv_buf_append(&b, "0", 1), 0);
	srv_buf_reset(&b);
	assert_int_equal(b.len, 0);
	srv_buf_fini(&b);
}

static const char *route_name(int i)
{
	return i == 0 ? "/a" : "unmatched";
}

static void test_metrics_render(void **state)
{
	(void)state;
	static struct srv_metrics m; /* large: keep it off the stack */
	memset(&m, 0, sizeof(m));
	srv_metrics_observe(&m, 0, HTTP_GET, 200, 0.002);
	srv_metrics_observe(&m, 0, HTTP_GET, 200, 0.2);
	srv_metrics_observe(&m, 1, HTTP_POST, 404, 0.0001);
	srv_metrics_observe(&m, 99, 12345, 9999, 1); /* clamped, not trusted */
	struct srv_buf out;
	srv_buf_init(&out, 1 << 20);
	assert_int_equal(srv_metrics_render(&m, &out, route_name, 2), 0);
	assert_non_null(strstr(out.data,
		"inferd_http_requests_total{route=\"/a\",method=\"GET\",code=\"200\"} 2\n"));
	assert_non_null(strstr(out.data,
		"inferd_http_requests_total{route=\"unmatched\",method=\"POST\",code=\"404\"} 1\n"));
	/* 0.002 s falls in le=0.0025 and above; 0.2 s only from le=0.5 */
	assert_non_null(strstr(out.data,
		"inferd_http_request_duration_seconds_bucket{route=\"/a\",le=\"0.0025\"} 1\n"));
	assert_non_null(strstr(out.data,
		"inferd_http_request_duration_seconds_bucket{route=\"/a\",le=\"0.5\"} 2\n"));
	assert_non_null(strstr(out.data,
		"inferd_http_request_duration_seconds_count{route=\"/a\"} 2\n"));
	srv_buf_fini(&out);
}

static const char test_cfg_json[] =
	"{\"access_log\": false, \"limits\": {\"max_header_bytes\": 1024,"
	" \"max_body_bytes\": 2048}, \"models\": [{\"name\": \"m\", \"path\": \"x\"}]}";

/* Send input on a fresh connection, hang up, run the loop until the
 * server has closed it, and return everything the server wrote. */
static char *exchange(const char *input, size_t len)
{
	struct cfg *cfg;
	struct eng *eng;
	struct srv *srv;
	char err[256];
	assert_int_equal(cfg_load_string(test_cfg_json, strlen(test_cfg_json), &cfg, err, sizeof(err)), 0);
	assert_int_equal(eng_create(NULL, 0, &eng, err, sizeof(err)), 0);
	assert_int_equal(srv__create_unbound(cfg, eng, NULL, &srv), 0);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(srv__conn_open_fd(srv, sv[0]), 0);
	assert_int_equal(write(sv[1], input, len), (ssize_t)len);
	shutdown(sv[1], SHUT_WR);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	struct srv_buf out;
	srv_buf_init(&out, 1 << 20);
	char buf[4096];
	for (int i = 0; i < 100000 && srv->n_conns > 0; i++) {
		uv_run(&srv->loop, UV_RUN_NOWAIT);
		ssize_t n;
		while ((n = read(sv[1], buf, sizeof(buf))) > 0)
			srv_buf_append(&out, buf, (size_t)n);
	}
	assert_int_equal(srv->n_conns, 0);
	srv_destroy(srv); /* closes every handle and checks uv_loop_close */
	eng_destroy(eng);
	cfg_destroy(cfg);
	close(sv[1]);
	return srv_buf_steal(&out);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_pipelined_over_socketpair(void **state)
{
	(void)state;
	const char in[] = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
			  "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n";
	char *out = exchange(in, sizeof(in) - 1);
	assert_int_equal(count(out, "HTTP/1.1 200 OK\r\n"), 2);
	assert_int_equal(count(out, "HTTP/1.1 404 Not Found\r\n"), 1);
	const char *live = strstr(out, "{\"live\":true}");
	const char *list = strstr(out, "{\"object\":\"list\",\"data\":[]}");
	assert_non_null(live);
	assert_non_null(list);
	assert_true(live < list); /* answered in order */
	free(out);
}

static void test_limits_over_socketpair(void **state)
{
	(void)state;
	char big[3000];
	int n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: %02000d\r\n\r\n", 0);
	char *out = exchange(big, (size_t)n);
	assert_non_null(strstr(out, "HTTP/1.1 431 "));
	free(out);
	const char body[] = "POST /v1/audio/transcriptions HTTP/1.1\r\nContent-Length: 4096\r\n\r\n";
	out = exchange(body, sizeof(body) - 1);
	assert_non_null(strstr(out, "HTTP/1.1 413 "));
	free(out);
	const char chunk[] = "POST /v1/audio/transcriptions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
	out = exchange(chunk, sizeof(chunk) - 1);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	free(out);
}

/* A GET with n header fields, the last of them X-Request-Id: last (so the
 * response shows that the n-th field was kept); returns what came back. */
static char *exchange_n_headers(int n)
{
	char in[2048];
	int len = snprintf(in, sizeof(in), "GET /v2/health/live HTTP/1.1\r\n");
	for (int i = 0; i < n - 1; i++)
		len += snprintf(in + len, sizeof(in) - (size_t)len, "h%d:1\r\n", i);
	len += snprintf(in + len, sizeof(in) - (size_t)len, "X-Request-Id: last\r\n\r\n");
	assert_true(len < (int)sizeof(in));
	return exchange(in, (size_t)len);
}

static void test_header_count_limit(void **state)
{
	(void)state;
	char *out = exchange_n_headers(SRV_MAX_HEADERS);
	assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "X-Request-Id: last\r\n"));
	free(out);
	out = exchange_n_headers(SRV_MAX_HEADERS + 1);
	assert_non_null(strstr(out, "HTTP/1.1 431 "));
	/* the cause named is the count, not limits.max_header_bytes */
	assert_non_null(strstr(out, "more than 100 header fields"));
	assert_null(strstr(out, "max_header_bytes"));
	free(out);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_ceiling),
		cmocka_unit_test(test_metrics_render),
		cmocka_unit_test(test_pipelined_over_socketpair),
		cmocka_unit_test(test_limits_over_socketpair),
		cmocka_unit_test(test_header_count_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
