/* srv_conn.c - one client connection: reading, llhttp parsing with ceilings
 * on every buffer, timeouts (header, body, idle), pipelining and closing.
 *
 * Invariants: one request in flight per connection. When llhttp finishes a
 * message, on_message_complete pauses the parser; the read path dispatches
 * the request, and only once its response is queued does parsing resume on
 * the bytes left over (pipelined requests). While a request is handled
 * asynchronously the leftover bytes wait in conn->pending and reading is
 * stopped, so a client cannot queue unbounded input.
 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/container_of.h"
#include "common/mem.h"
#include "common/st.h"
#include "server/srv_int.h"
#include "server/srv_status.h"

static void srv_conn_feed(struct srv_conn *conn, const char *data, size_t len);
static void srv_conn_timer_arm(struct srv_conn *conn);
static int srv_conn_stash_more(struct srv_conn *conn, const char *data, size_t len);
static void srv_conn_read_start(struct srv_conn *conn);
static void srv_conn_read_stop(struct srv_conn *conn);

/* --- the request's headers ------------------------------------------ */

const char *srv__req_header(const struct srv_req *req, const char *name)
{
	for (size_t i = 0; i < req->n_headers; i++)
		if (!strcasecmp(req->head.data + req->hdr_off[i][0], name))
			return req->head.data + req->hdr_off[i][1];
	return NULL;
}

int srv__req_add_header(struct srv_req *req, const char *name, const char *value)
{
	return srv_buf_printf(&req->resp_headers, "%s: %s\r\n", name, value);
}

/* --- request reset ---------------------------------------------------- */

static void srv_req_reset(struct srv_conn *conn)
{
	struct srv_req *req = &conn->req;
	const struct cfg *cfg = conn->srv->cfg;
	srv_buf_fini(&req->head);
	srv_buf_fini(&req->body);
	srv_buf_fini(&req->resp_headers);
	*req = (struct srv_req){ .conn = conn, .method = -1, .route_index = conn->srv->n_routes };
	srv_buf_init(&req->head, (size_t)cfg->max_header_bytes);
	srv_buf_init(&req->body, (size_t)cfg->max_body_bytes);
	srv_buf_init(&req->resp_headers, 8192);
}

/* --- llhttp callbacks ------------------------------------------------- */

static struct srv_conn *srv_conn_of(llhttp_t *p)
{
	return p->data;
}

/* A parser callback failed: remember the status to answer with and make
 * llhttp stop with HPE_USER. */
static int srv_req_fail(struct srv_req *req, int status)
{
	req->err_status = status;
	return -1;
}

/* More than SRV_MAX_HEADERS header fields: a 431 whose message names the
 * count, not limits.max_header_bytes (the parser's usual 431). */
static int srv_req_fail_too_many_headers(struct srv_req *req)
{
	req->early_status = 431;
	req->early_code = srv__status_code(431);
	snprintf(req->early_msg, sizeof(req->early_msg),
		 "more than %d header fields (a fixed limit, not configurable)", SRV_MAX_HEADERS);
	return srv_req_fail(req, 431);
}

/* The request target passed limits.max_header_bytes (a 414): the protocol
 * its first bytes name (the ones kept in head, then at [n]), so that the
 * error comes in that API's shape, as a 431 does with the whole target
 * (srv__proto_for_path reads a prefix). */
static int srv_req_target_too_long(struct srv_req *req, const char *at, size_t n)
{
	char path[64];
	size_t k = req->head.len < sizeof(path) - 1 ? req->head.len : sizeof(path) - 1;
	if (k)
		memcpy(path, req->head.data, k);
	size_t m = n < sizeof(path) - 1 - k ? n : sizeof(path) - 1 - k;
	memcpy(path + k, at, m);
	path[k + m] = '\0';
	path[strcspn(path, "?")] = '\0';
	req->proto = req->conn->srv->cbs.proto_for_path(path);
	return srv_req_fail(req, 414);
}

static int srv_head_append(llhttp_t *p, const char *at, size_t n)
{
	struct srv_req *req = &srv_conn_of(p)->req;
	if (req->in_trailers) {
		/* Trailer fields are counted, not kept: nothing reads them, and
		 * growing head now would move the strings routing points at. */
		req->trailer_bytes += n;
		return req->trailer_bytes + req->head.len > req->head.max_len ? srv_req_fail(req, 431)
									     : 0;
	}
	int rc = srv_buf_append(&req->head, at, n);
	if (rc == -ST_TOOBIG && !req->url_done) /* still in the target: 414, as nginx answers */
		return srv_req_target_too_long(req, at, n);
	if (rc == -ST_TOOBIG)
		return srv_req_fail(req, 431);
	return rc ? srv_req_fail(req, 503) : 0;
}

static int srv_on_message_begin(llhttp_t *p)
{
	struct srv_conn *conn = srv_conn_of(p);
	conn->state = SRV_CONN_STATE_HEAD;
	if (!conn->req.start_ns)
		conn->req.start_ns = uv_hrtime();
	srv_conn_timer_arm(conn);
	return 0;
}

static int srv_on_url_complete(llhttp_t *p)
{
	int rc = srv_head_append(p, "", 1);
	srv_conn_of(p)->req.url_done = rc == 0;
	return rc;
}

static int srv_on_header_field(llhttp_t *p, const char *at, size_t n)
{
	struct srv_req *req = &srv_conn_of(p)->req;
	if (req->in_trailers)
		return srv_head_append(p, at, n);
	/* n_headers counts whole fields, so at the ceiling this is the first
	 * piece of one more: refused before hdr_off is indexed past its end. */
	if (req->n_headers >= SRV_MAX_HEADERS)
		return srv_req_fail_too_many_headers(req);
	/* The first piece of a new field records where its name starts. */
	if (req->hdr_off[req->n_headers][0] == 0)
		req->hdr_off[req->n_headers][0] = req->head.len;
	return srv_head_append(p, at, n);
}

static int srv_on_header_field_complete(llhttp_t *p)
{
	struct srv_req *req = &srv_conn_of(p)->req;
	if (req->in_trailers)
		return srv_head_append(p, ": ", 2); /* counted as sent */
	/* RFC 9112 5.1: no whitespace between a field name and the colon. */
	const char *name = req->head.data + req->hdr_off[req->n_headers][0];
	if (strpbrk(name, " \t"))
		return srv_req_fail(req, 400);
	int rc = srv_head_append(p, "", 1);
	req->hdr_off[req->n_headers][1] = req->head.len;
	return rc;
}

static int srv_on_header_value_complete(llhttp_t *p)
{
	struct srv_req *req = &srv_conn_of(p)->req;
	if (req->in_trailers)
		return srv_head_append(p, "\r\n", 2); /* counted as sent */
	/* Drop trailing whitespace (RFC 9110 5.5; llhttp drops the leading). */
	size_t start = req->hdr_off[req->n_headers][1];
	while (req->head.len > start &&
	       (req->head.data[req->head.len - 1] == ' ' || req->head.data[req->head.len - 1] == '\t'))
		req->head.len--;
	int rc = srv_head_append(p, "", 1);
	if (!rc)
		req->n_headers++;
	return rc;
}

/* Split the URL into path and query, in place inside head. */
static void srv_req_split_url(struct srv_req *req)
{
	char *url = req->head.data;
	char *q = strchr(url, '?');
	req->path = url;
	req->query = "";
	if (q) {
		*q = '\0';
		req->query = q + 1;
	}
}

static enum srv_coding srv_coding_parse(const char *v)
{
	if (!v || !*v || !strcasecmp(v, "identity"))
		return SRV_CODING_IDENTITY;
	if (!strcasecmp(v, "zstd"))
		return SRV_CODING_ZSTD;
	return SRV_CODING_UNSUPPORTED;
}

/* The q-value of one Accept-Encoding element "coding;q=0.5" (1 if absent). */
static double srv_qvalue(const char *params, size_t len)
{
	for (size_t i = 0; i + 2 < len; i++)
		if ((params[i] == 'q' || params[i] == 'Q') && params[i + 1] == '=' &&
		    (i == 0 || params[i - 1] == ';' || params[i - 1] == ' ' || params[i - 1] == '\t'))
			return strtod(params + i + 2, NULL);
	return 1.0;
}

/* Does an Accept-Encoding value (RFC 9110 12.5.3) accept zstd: listed
 * with q > 0, or "*" with q > 0 and zstd not listed? */
static bool srv_accepts_zstd(const char *v)
{
	double zstd_q = -1, star_q = -1;
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t item = strcspn(v, ","), n = strcspn(v, " \t,;");
		double q = srv_qvalue(v + n, item - n);
		if (n == 4 && !strncasecmp(v, "zstd", 4))
			zstd_q = q;
		else if (n == 1 && v[0] == '*')
			star_q = q;
		v += item;
	}
	return zstd_q >= 0 ? zstd_q > 0 : star_q > 0;
}

/* Transfer-Encoding other than plain "chunked" (gzip, chunked; ...) is not
 * implemented: 501, as nginx answers. */
static bool srv_te_is_supported(const char *te)
{
	return !te || !strcasecmp(te, "chunked");
}

/* Expect: 100-continue for an HTTP/1.1 request with a body queues the
 * interim response; any other expectation fails with 417. */
static int srv_expect(llhttp_t *p, struct srv_conn *conn)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const char *expect = srv__req_header(&conn->req, "Expect");
	if (!expect)
		return 0;
	if (strcasecmp(expect, "100-continue"))
		return srv_req_fail(&conn->req, 417);
	bool has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
	if (p->http_minor < 1 || !has_body)
		return 0; /* HTTP/1.0 ignores it (RFC 9110 10.1.1); nothing to wait for */
	char *msg = mem_strdup(cont);
	if (!msg || srv__conn_write(conn, msg, sizeof(cont) - 1, NULL, 0))
		return srv_req_fail(&conn->req, 503);
	return 0;
}

static void srv_req_set_request_id(struct srv_req *req)
{
	struct srv *srv = req->conn->srv;
	const char *v = srv__req_header(req, "X-Request-Id");
	size_t n = v ? strlen(v) : 0;
	bool ok = n > 0 && n <= SRV_REQUEST_ID_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = v[i] > 0x20 && v[i] < 0x7f && v[i] != '"' && v[i] != '\\';
	if (ok) {
		memcpy(req->request_id, v, n + 1);
		return;
	}
	snprintf(req->request_id, sizeof(req->request_id), "%08x%016llx",
		 (unsigned)srv->request_id_salt, (unsigned long long)++srv->next_request_id);
}

/* The URL is whole: path and query split, the request id set, and the
 * protocol (hence the error shape) the path names chosen. */
static void srv_req_take_url(struct srv_req *req)
{
	srv_req_split_url(req);
	srv_req_set_request_id(req);
	req->proto = req->conn->srv->cbs.proto_for_path(req->path);
}

static int srv_on_headers_complete(llhttp_t *p)
{
	struct srv_conn *conn = srv_conn_of(p);
	struct srv_req *req = &conn->req;
	req->method = llhttp_get_method(p);
	srv_req_take_url(req);
	req->accept_zstd = srv_accepts_zstd(srv__req_header(req, "Accept-Encoding"));
	req->coding = srv_coding_parse(srv__req_header(req, "Content-Encoding"));
	req->in_trailers = true;
	if (p->http_major != 1)
		return srv_req_fail(req, 505);
	if (!srv_te_is_supported(srv__req_header(req, "Transfer-Encoding")))
		return srv_req_fail(req, 501);
	/* Route and API key from the headers: a request that cannot succeed is
	 * answered before its body is read (and decompressed), not after. */
	int early = conn->srv->cbs.route(req);
	bool has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && p->content_length);
	if (early && has_body)
		return srv_req_fail(req, early);
	if (req->coding == SRV_CODING_UNSUPPORTED)
		return srv_req_fail(req, 415);
	if (p->content_length > (uint64_t)conn->srv->cfg->max_body_bytes &&
	    (p->flags & F_CONTENT_LENGTH))
		return srv_req_fail(req, 413);
	conn->state = SRV_CONN_STATE_BODY;
	srv_conn_timer_arm(conn);
	return srv_expect(p, conn);
}

static int srv_on_body(llhttp_t *p, const char *at, size_t n)
{
	struct srv_conn *conn = srv_conn_of(p);
	int rc = srv_buf_append(&conn->req.body, at, n);
	if (rc == -ST_TOOBIG)
		return srv_req_fail(&conn->req, 413);
	if (rc)
		return srv_req_fail(&conn->req, 503);
	srv_conn_timer_arm(conn); /* the body timeout is between bytes */
	return 0;
}

/* A chunk larger than what the body may still hold fails now, not after
 * the client has sent it (or at the body timeout). */
static int srv_on_chunk_header(llhttp_t *p)
{
	struct srv_req *req = &srv_conn_of(p)->req;
	if (p->content_length > req->body.max_len - req->body.len)
		return srv_req_fail(req, 413);
	return 0;
}

static int srv_on_message_complete(llhttp_t *p)
{
	struct srv_conn *conn = srv_conn_of(p);
	conn->state = SRV_CONN_STATE_HANDLING;
	conn->req.keep_alive = llhttp_should_keep_alive(p);
	uv_timer_stop(&conn->timer);
	return HPE_PAUSED;
}

void srv__parser_settings_init(llhttp_settings_t *s)
{
	llhttp_settings_init(s);
	s->on_message_begin = srv_on_message_begin;
	s->on_url = srv_head_append;
	s->on_url_complete = srv_on_url_complete;
	s->on_header_field = srv_on_header_field;
	s->on_header_field_complete = srv_on_header_field_complete;
	s->on_header_value = srv_head_append;
	s->on_header_value_complete = srv_on_header_value_complete;
	s->on_headers_complete = srv_on_headers_complete;
	s->on_body = srv_on_body;
	s->on_chunk_header = srv_on_chunk_header;
	s->on_message_complete = srv_on_message_complete;
}

/* --- lifetime ---------------------------------------------------------- */

static void srv_conn_free_if_unused(struct srv_conn *conn)
{
	if (conn->n_open_handles || conn->n_work)
		return;
	struct srv_req *req = &conn->req;
	srv_buf_fini(&req->head);
	srv_buf_fini(&req->body);
	srv_buf_fini(&req->resp_headers);
	mem_free(conn->pending);
	mem_free(conn);
}

static void srv_conn_close_cb(uv_handle_t *h)
{
	struct srv_conn *conn = h->data;
	conn->n_open_handles--;
	srv_conn_free_if_unused(conn);
}

static void srv_conn_unlink(struct srv_conn *conn)
{
	struct srv *srv = conn->srv;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		srv->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	conn->prev = conn->next = NULL;
	srv->n_conns--;
	srv->metrics.open_connections--;
	srv->cbs.conn_closed(srv);
}

/* An upgraded connection ends: its owner forgets it first. */
static void srv_conn_leave_upgraded(struct srv_conn *conn)
{
	if (conn->state != SRV_CONN_STATE_UPGRADED)
		return;
	conn->state = SRV_CONN_STATE_CLOSING; /* no write from the owner's on_close */
	conn->up->on_close(conn->up_ud);
	conn->state = SRV_CONN_STATE_UPGRADED;
}

void srv__conn_close(struct srv_conn *conn)
{
	if (conn->state == SRV_CONN_STATE_CLOSING)
		return;
	srv_conn_leave_upgraded(conn);
	conn->state = SRV_CONN_STATE_CLOSING;
	if (conn->cancel)
		*conn->cancel = 1; /* a job running for this client stops early */
	srv_conn_unlink(conn);
	uv_close(&conn->h.handle, srv_conn_close_cb);
	uv_close((uv_handle_t *)&conn->timer, srv_conn_close_cb);
}

void srv__conn_work_done(struct srv_conn *conn)
{
	conn->n_work--;
	srv_conn_free_if_unused(conn);
}

/* --- timers ------------------------------------------------------------ */

static void srv_conn_timeout_cb(uv_timer_t *t)
{
	struct srv_conn *conn = t->data;
	if (conn->state == SRV_CONN_STATE_LINGER) {
		srv__conn_close(conn);
		return;
	}
	if (conn->state == SRV_CONN_STATE_UPGRADED) {
		conn->up->on_timeout(conn->up_ud);
		return;
	}
	if (conn->state == SRV_CONN_STATE_HEAD || conn->state == SRV_CONN_STATE_BODY) {
		conn->req.keep_alive = false;
		conn->srv->cbs.respond_error(&conn->req, 408, "request_timeout",
					     "the request did not arrive within the time limit");
		return;
	}
	if (conn->n_writes > 0)
		return; /* still answering: idle from the last write's end (srv_conn_write_cb);
			 * output that stops moving is limits.send_timeout_ms's */
	srv__conn_close(conn); /* WAIT: idle keep-alive or silent client */
}

/* Arm (or stop) the timer that fits the connection's state. */
static void srv_conn_timer_arm(struct srv_conn *conn)
{
	const struct cfg *cfg = conn->srv->cfg;
	int ms = 0;
	switch (conn->state) {
	case SRV_CONN_STATE_WAIT:
		ms = conn->internal ? 0 : conn->n_served ? cfg->idle_timeout_ms : cfg->header_timeout_ms;
		break;
	case SRV_CONN_STATE_HEAD:
		ms = cfg->header_timeout_ms;
		break;
	case SRV_CONN_STATE_BODY:
		ms = cfg->body_timeout_ms;
		break;
	case SRV_CONN_STATE_LINGER:
		ms = SRV_LINGER_MS;
		break;
	default:
		break;
	}
	if (ms > 0)
		uv_timer_start(&conn->timer, srv_conn_timeout_cb, (uint64_t)ms, 0);
	else
		uv_timer_stop(&conn->timer);
}

/* --- reading ----------------------------------------------------------- */

static void srv_conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct srv_conn *conn = h->data;
	(void)hint;
	buf->base = conn->srv->rbuf;
	buf->len = sizeof(conn->srv->rbuf);
}

static void srv_conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct srv_conn *conn = s->data;
	if (nread == 0)
		return;
	if (conn->state == SRV_CONN_STATE_LINGER) {
		if (nread < 0)
			srv__conn_close(conn);
		return; /* input after the last response is dropped */
	}
	if (conn->state == SRV_CONN_STATE_UPGRADED) {
		if (nread < 0)
			conn->up->on_eof(conn->up_ud);
		else
			conn->srv->metrics.bytes_in += (uint64_t)nread;
		if (nread > 0)
			conn->up->on_data(conn->up_ud, buf->base, (size_t)nread);
		return;
	}
	if (nread < 0) {
		uv_read_stop(s);
		conn->reading = false;
		/* A request being handled still gets its response written,
		 * unless its job watches for the client leaving. */
		if (conn->state == SRV_CONN_STATE_HANDLING && !conn->cancel)
			conn->req.keep_alive = false;
		else
			srv__conn_close(conn);
		return;
	}
	conn->srv->metrics.bytes_in += (uint64_t)nread;
	if (conn->state == SRV_CONN_STATE_HANDLING) {
		/* read while a job is watched: the next request waits */
		if (srv_conn_stash_more(conn, buf->base, (size_t)nread))
			srv_conn_read_stop(conn);
		return;
	}
	conn->req.bytes_in += (uint64_t)nread;
	srv_conn_feed(conn, buf->base, (size_t)nread);
}

static void srv_conn_read_start(struct srv_conn *conn)
{
	if (conn->reading || conn->state == SRV_CONN_STATE_CLOSING)
		return;
	if (uv_read_start(&conn->h.stream, srv_conn_alloc_cb, srv_conn_read_cb) == 0)
		conn->reading = true;
	else
		srv__conn_close(conn);
}

static void srv_conn_read_stop(struct srv_conn *conn)
{
	if (conn->reading)
		uv_read_stop(&conn->h.stream);
	conn->reading = false;
}

/* llhttp stopped on an error: answer with the status a callback chose, or
 * 400 with llhttp's reason, and close. */
static void srv_conn_parse_error(struct srv_conn *conn, llhttp_errno_t e)
{
	struct srv_req *req = &conn->req;
	int status = req->err_status ? req->err_status : 400;
	req->keep_alive = false;
	if (!req->path && req->url_done)
		srv_req_take_url(req); /* stopped within the headers: the path's error shape still */
	else if (!req->path && status == 414)
		srv_req_set_request_id(req); /* its protocol: srv_req_target_too_long */
	if (!req->path)
		req->path = "";
	if (status == 400 && e != HPE_USER)
		conn->srv->cbs.respond_error(
			req, 400, "invalid_request", "malformed HTTP request: %s (%s)",
			llhttp_get_error_reason(&conn->parser), llhttp_errno_name(e));
	else if (req->early_status == status)
		conn->srv->cbs.respond_error(req, status, req->early_code, "%s", req->early_msg);
	else
		conn->srv->cbs.respond_error(req, status, srv__status_code(status), "%s",
					     srv__status_detail(status));
}

/* Keep bytes that follow a message until its response is queued. */
static int srv_conn_stash(struct srv_conn *conn, const char *data, size_t len)
{
	if (!conn->cancel) /* a watched job keeps reading (srv__conn_watch) */
		srv_conn_read_stop(conn);
	if (!len)
		return 0;
	char *p = mem_alloc(len);
	if (!p)
		return -ST_NOMEM;
	memcpy(p, data, len);
	mem_free(conn->pending);
	conn->pending = p;
	conn->pending_len = len;
	return 0;
}

/* Add bytes read while a job runs to those kept for after it; -ST_TOOBIG
 * past SRV_MAX_QUEUED_BYTES (the caller stops reading: the client then
 * waits, and a hang-up is seen only when a write fails). */
static int srv_conn_stash_more(struct srv_conn *conn, const char *data, size_t len)
{
	if (conn->pending_len + len > SRV_MAX_QUEUED_BYTES)
		return -ST_TOOBIG;
	char *p = mem_realloc(conn->pending, conn->pending_len + len);
	if (!p)
		return -ST_NOMEM;
	memcpy(p + conn->pending_len, data, len);
	conn->pending = p;
	conn->pending_len += len;
	return 0;
}

void srv__conn_watch(struct srv_conn *conn, _Atomic int *cancel)
{
	conn->cancel = cancel;
	if (cancel && conn->state == SRV_CONN_STATE_HANDLING &&
	    conn->pending_len < SRV_MAX_QUEUED_BYTES)
		srv_conn_read_start(conn);
}

static void srv_conn_feed(struct srv_conn *conn, const char *data, size_t len)
{
	conn->in_feed = true;
	while (len > 0 && conn->state != SRV_CONN_STATE_CLOSING && !conn->close_after_write) {
		llhttp_errno_t e = llhttp_execute(&conn->parser, data, len);
		if (e == HPE_OK)
			break;
		if (e != HPE_PAUSED) {
			srv_conn_parse_error(conn, e);
			break;
		}
		const char *pos = llhttp_get_error_pos(&conn->parser);
		len -= (size_t)(pos - data);
		data = pos;
		conn->srv->cbs.handle(&conn->req);
		if (conn->state == SRV_CONN_STATE_UPGRADED) {
			if (len)
				conn->up->on_data(conn->up_ud, data, len); /* the first frames */
			break;
		}
		if (conn->state == SRV_CONN_STATE_HANDLING || conn->write_blocked) {
			if (srv_conn_stash(conn, data, len))
				srv__conn_close(conn);
			break;
		}
	}
	conn->in_feed = false;
}

/* --- requests ---------------------------------------------------------- */

/* Resume parsing after a response: the pipelined bytes kept in pending
 * first, then the socket. */
static void srv_conn_continue(struct srv_conn *conn)
{
	llhttp_resume(&conn->parser);
	srv_conn_timer_arm(conn);
	if (conn->in_feed)
		return; /* the feed loop goes on with the bytes it holds */
	char *p = conn->pending;
	size_t n = conn->pending_len;
	conn->pending = NULL;
	conn->pending_len = 0;
	if (n)
		srv_conn_feed(conn, p, n);
	mem_free(p);
	if (!conn->write_blocked && (conn->state == SRV_CONN_STATE_WAIT ||
				     conn->state == SRV_CONN_STATE_HEAD ||
				     conn->state == SRV_CONN_STATE_BODY))
		srv_conn_read_start(conn);
}

void srv__conn_request_done(struct srv_conn *conn)
{
	if (conn->state == SRV_CONN_STATE_CLOSING)
		return;
	conn->n_served++;
	srv_req_reset(conn);
	conn->state = SRV_CONN_STATE_WAIT;
	if (conn->close_after_write) {
		srv_conn_read_stop(conn);
		uv_timer_stop(&conn->timer);
		return;
	}
	if (conn->write_bytes > SRV_MAX_QUEUED_BYTES) {
		/* The client is not reading its responses: stop taking requests
		 * until it does (the idle timeout still runs). */
		conn->write_blocked = true;
		srv_conn_read_stop(conn);
		srv_conn_timer_arm(conn);
		return;
	}
	srv_conn_continue(conn);
}

/* --- writing ----------------------------------------------------------- */

static void srv_conn_shutdown_cb(uv_shutdown_t *sh, int status)
{
	struct srv_conn *conn = sh->data;
	if (status < 0 && conn->state == SRV_CONN_STATE_LINGER)
		srv__conn_close(conn);
}

/* The last response is written: shut the write side (FIN), then read and
 * drop whatever the client still sends until it closes or SRV_LINGER_MS. */
static void srv_conn_linger(struct srv_conn *conn)
{
	srv_conn_leave_upgraded(conn);
	conn->state = SRV_CONN_STATE_LINGER;
	conn->shutdown.data = conn;
	if (uv_shutdown(&conn->shutdown, &conn->h.stream, srv_conn_shutdown_cb)) {
		srv__conn_close(conn);
		return;
	}
	srv_conn_timer_arm(conn);
	srv_conn_read_start(conn);
}

struct srv_write {
	uv_write_t w;
	struct srv_conn *conn;
	size_t bytes; /* head + body, for conn->write_bytes */
	char *head; /* owned */
	char *body; /* owned */
};

static void srv_conn_write_cb(uv_write_t *w, int status)
{
	struct srv_write *wr = container_of(w, struct srv_write, w);
	struct srv_conn *conn = wr->conn;
	conn->write_bytes -= wr->bytes;
	mem_free(wr->head);
	mem_free(wr->body);
	mem_free(wr);
	conn->n_writes--;
	if (conn->state == SRV_CONN_STATE_CLOSING)
		return;
	if (status >= 0 && conn->write_blocked && conn->write_bytes <= SRV_MAX_QUEUED_BYTES / 2) {
		conn->write_blocked = false;
		srv_conn_continue(conn);
		return;
	}
	if (status < 0 || (conn->srv->draining && conn->state == SRV_CONN_STATE_WAIT &&
			   conn->n_writes == 0 && !conn->close_after_write))
		srv__conn_close(conn);
	else if (conn->close_after_write && conn->n_writes == 0)
		srv_conn_linger(conn);
	else if (conn->state == SRV_CONN_STATE_WAIT && conn->n_writes == 0)
		srv_conn_timer_arm(conn); /* the idle time starts now (nginx's keepalive_timeout) */
}

int srv__conn_write(struct srv_conn *conn, char *head, size_t head_len,
		    char *body, size_t body_len)
{
	struct srv_write *wr = mem_calloc(1, sizeof(*wr));
	if (!wr || conn->state == SRV_CONN_STATE_CLOSING) {
		mem_free(wr);
		mem_free(head);
		mem_free(body);
		return wr ? -ST_CANCELED : -ST_NOMEM;
	}
	*wr = (struct srv_write){ .conn = conn, .head = head, .body = body,
				  .bytes = head_len + body_len };
	uv_buf_t bufs[2] = { uv_buf_init(head, (unsigned)head_len),
			     uv_buf_init(body, (unsigned)body_len) };
	int rc = uv_write(&wr->w, &conn->h.stream, bufs, body_len ? 2 : 1, srv_conn_write_cb);
	if (rc < 0) {
		mem_free(head);
		mem_free(body);
		mem_free(wr);
		srv__conn_close(conn);
		return -ST_IO;
	}
	conn->n_writes++;
	conn->write_bytes += head_len + body_len;
	conn->send.handed += head_len + body_len;
	conn->srv->metrics.bytes_out += head_len + body_len;
	return 0;
}

/* --- accepting ----------------------------------------------------------- */

static struct srv_conn *srv_conn_new(struct srv *srv)
{
	struct srv_conn *conn = mem_calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	conn->srv = srv;
	conn->h.handle.data = conn;
	conn->timer.data = conn;
	llhttp_init(&conn->parser, HTTP_REQUEST, &srv->parser_settings);
	conn->parser.data = conn;
	srv_req_reset(conn);
	return conn;
}

/* Link a connection whose stream is initialised and open, and start it. */
static void srv_conn_start(struct srv *srv, struct srv_conn *conn)
{
	uv_timer_init(&srv->loop, &conn->timer);
	conn->n_open_handles = 2;
	conn->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = conn;
	srv->conns = conn;
	srv->n_conns++;
	srv->metrics.open_connections++;
	srv->metrics.connections_accepted++;
	srv_conn_timer_arm(conn);
	srv_conn_read_start(conn);
}

static void srv_conn_remote(struct srv_conn *conn)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	memcpy(conn->remote, "-", sizeof("-"));
	if (uv_tcp_getpeername(&conn->h.tcp, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET6)
		uv_ip6_name((struct sockaddr_in6 *)&ss, conn->remote, sizeof(conn->remote));
	else
		uv_ip4_name((struct sockaddr_in *)&ss, conn->remote, sizeof(conn->remote));
}

int srv__conn_accept(struct srv *srv, uv_stream_t *listener)
{
	struct srv_conn *conn = srv_conn_new(srv);
	if (!conn)
		return -ST_NOMEM;
	uv_tcp_init(&srv->loop, &conn->h.tcp);
	if (uv_accept(listener, &conn->h.stream)) {
		conn->n_open_handles = 1;
		conn->state = SRV_CONN_STATE_CLOSING;
		uv_close(&conn->h.handle, srv_conn_close_cb);
		return -ST_IO;
	}
	uv_tcp_nodelay(&conn->h.tcp, 1);
	srv_conn_remote(conn);
	srv_conn_start(srv, conn);
	if (srv->n_conns + srv->n_grpc_conns > srv->cfg->max_connections) {
		srv->metrics.connections_rejected++;
		conn->req.keep_alive = false;
		srv__req_add_header(&conn->req, "Retry-After", "1");
		conn->srv->cbs.respond_error(
			&conn->req, 503, "server_busy",
			"too many open connections (limits.max_connections = %d)",
			srv->cfg->max_connections);
	}
	return 0;
}

/* Serve the socketpair end fd (remote: the access log's name for it). */
static int srv_conn_open_pipe(struct srv *srv, int fd, bool internal, const char *remote)
{
	struct srv_conn *conn = srv_conn_new(srv);
	if (!conn)
		return -ST_NOMEM;
	conn->internal = internal;
	uv_pipe_init(&srv->loop, &conn->h.pipe, 0);
	if (uv_pipe_open(&conn->h.pipe, fd)) {
		conn->n_open_handles = 1;
		conn->state = SRV_CONN_STATE_CLOSING;
		uv_close(&conn->h.handle, srv_conn_close_cb);
		return -ST_IO;
	}
	snprintf(conn->remote, sizeof(conn->remote), "%s", remote);
	srv_conn_start(srv, conn);
	return 0;
}

int srv__conn_open_fd(struct srv *srv, int fd)
{
	return srv_conn_open_pipe(srv, fd, false, "pipe");
}

int srv__conn_open_internal(struct srv *srv, int fd)
{
	int rc = srv_conn_open_pipe(srv, fd, true, "batch");
	if (rc)
		close(fd);
	return rc;
}

void srv__conns_close_idle(struct srv *srv)
{
	struct srv_conn *next;
	for (struct srv_conn *c = srv->conns; c; c = next) {
		next = c->next;
		if (c->state == SRV_CONN_STATE_WAIT && c->n_writes == 0)
			srv__conn_close(c);
		else if (c->state == SRV_CONN_STATE_UPGRADED)
			c->up->on_drain(c->up_ud); /* may close c: next is taken first */
	}
}

void srv__conn_upgrade(struct srv_conn *conn, const struct srv_conn_upgrade *up, void *ud)
{
	conn->state = SRV_CONN_STATE_UPGRADED;
	conn->up = up;
	conn->up_ud = ud;
	uv_timer_stop(&conn->timer);
	srv_conn_read_start(conn);
}

void srv__conn_timer_start(struct srv_conn *conn, uint64_t ms)
{
	if (conn->state != SRV_CONN_STATE_UPGRADED)
		return;
	if (ms)
		uv_timer_start(&conn->timer, srv_conn_timeout_cb, ms, 0);
	else
		uv_timer_stop(&conn->timer);
}

void srv__conn_end(struct srv_conn *conn)
{
	if (conn->state == SRV_CONN_STATE_CLOSING || conn->state == SRV_CONN_STATE_LINGER)
		return;
	uv_timer_stop(&conn->timer);
	if (conn->n_writes == 0)
		srv_conn_linger(conn);
	else
		conn->close_after_write = true;
}

void srv__conns_deadline(struct srv *srv)
{
	struct srv_conn *next;
	for (struct srv_conn *c = srv->conns; c; c = next) {
		next = c->next; /* responding may close c */
		if (c->state == SRV_CONN_STATE_HANDLING && !c->req.responded && c->n_work) {
			if (c->cancel)
				*c->cancel = 1;
			c->refused = true;
			srv->cbs.respond_error(&c->req, 503, "shutting_down",
					       "the server is shutting down and this request did not "
					       "finish within limits.drain_timeout_ms (%d ms)",
					       srv->cfg->drain_timeout_ms);
		} else if (c->state == SRV_CONN_STATE_UPGRADED && c->up->on_deadline) {
			c->refused = true;
			c->up->on_deadline(c->up_ud); /* may close c */
		}
		bool flushing = c->refused && (c->n_writes || c->state == SRV_CONN_STATE_LINGER);
		if (c->state != SRV_CONN_STATE_CLOSING && !flushing) {
			c->cut = c->state == SRV_CONN_STATE_HANDLING;
			srv__conn_close(c);
		}
	}
}

void srv__conns_close_all(struct srv *srv)
{
	while (srv->conns)
		srv__conn_close(srv->conns);
}

void srv__conns_send_sweep(struct srv *srv, uint64_t now_ms)
{
	for (struct srv_conn *c = srv->conns, *next; c; c = next) {
		next = c->next;
		if (srv__send_stalled(&c->send, &c->h.stream, now_ms, srv->cfg->send_timeout_ms)) {
			srv->metrics.send_timeouts++;
			srv__conn_close(c);
		}
	}
}
