/* srv_stream.c - streamed responses: headers, then the body as HTTP/1.1
 * chunks written as a worker produces it, then the last chunk (contract in
 * srv_stream.h).
 *
 * Invariants: only the loop thread touches the connection; the worker only
 * appends to queue under lock and calls uv_async_send (which libuv allows
 * from any thread, and coalesces: one callback may carry many pushes). The
 * stream is freed in the async handle's close callback, never earlier.
 * An HTTP/1.0 client gets the body without chunk framing and the
 * connection closes after it (RFC 9112 6.3 item 8).
 */
#include <stdio.h>
#include <string.h>

#include "common/container_of.h"
#include "common/mem.h"
#include "common/st.h"
#include "server/srv_status.h"
#include "server/srv_stream.h"

struct srv_stream {
	uv_async_t async;         /* wakes the loop after a push; data = this stream */
	uv_mutex_t lock;          /* guards queue */
	struct srv_buf queue;     /* pushed, not yet written, SRV_STREAM_QUEUE_MAX */
	struct srv_conn *conn;    /* borrowed: the owner's job holds it (n_work) */
	const char *content_type; /* static */
	int status;               /* HTTP status of the response */
	bool started;             /* status line and headers written */
	bool chunked;             /* chunk framing (HTTP/1.1); else the body ends at close */
	bool close;               /* Connection: close was announced */
	size_t bytes_out;         /* body bytes written, for the access log */
};

static void srv_stream_async_cb(uv_async_t *a);

int srv__stream_create(struct srv_req *req, int status, const char *content_type,
		       struct srv_stream **out)
{
	struct srv_conn *conn = req->conn;
	*out = NULL;
	struct srv_stream *st = mem_calloc(1, sizeof(*st));
	if (!st)
		return -ST_NOMEM;
	*st = (struct srv_stream){ .conn = conn, .content_type = content_type, .status = status,
				   .chunked = conn->parser.http_major == 1 &&
					      conn->parser.http_minor >= 1 };
	srv_buf_init(&st->queue, SRV_STREAM_QUEUE_MAX);
	if (uv_mutex_init(&st->lock)) {
		mem_free(st);
		return -ST_NOMEM;
	}
	if (uv_async_init(&conn->srv->loop, &st->async, srv_stream_async_cb)) {
		uv_mutex_destroy(&st->lock);
		mem_free(st);
		return -ST_IO;
	}
	st->async.data = st;
	*out = st;
	return 0;
}

int srv__stream_push(struct srv_stream *st, const char *data, size_t len)
{
	uv_mutex_lock(&st->lock);
	int rc = srv_buf_append(&st->queue, data, len);
	uv_mutex_unlock(&st->lock);
	if (!rc)
		uv_async_send(&st->async);
	return rc;
}

bool srv__stream_is_empty(struct srv_stream *st)
{
	uv_mutex_lock(&st->lock);
	bool empty = !st->started && st->queue.len == 0;
	uv_mutex_unlock(&st->lock);
	return empty;
}

/* --- writing (loop thread) --------------------------------------------- */

/* Status line and headers; the request counts as answered from here on. */
static int srv_stream_head(struct srv_stream *st)
{
	struct srv_conn *conn = st->conn;
	struct srv_req *req = &conn->req;
	struct srv_buf h;
	st->started = true;
	req->responded = true;
	st->close = !req->keep_alive || conn->srv->draining || !st->chunked;
	srv_buf_init(&h, 16384);
	int rc = srv_buf_printf(&h,
		"HTTP/1.1 %d %s\r\nServer: inferd/" INFERD_VERSION "\r\nDate: %s\r\n"
		"Content-Type: %s\r\n%sCache-Control: no-cache\r\nX-Request-Id: %s\r\n%s",
		st->status, srv__status_reason(st->status), srv__date(conn->srv),
		st->content_type, st->chunked ? "Transfer-Encoding: chunked\r\n" : "",
		req->request_id, st->close ? "Connection: close\r\n" : "");
	if (!rc && req->resp_headers.len)
		rc = srv_buf_append(&h, req->resp_headers.data, req->resp_headers.len);
	if (!rc)
		rc = srv_buf_append(&h, "\r\n", 2);
	if (rc) {
		srv_buf_fini(&h);
		return rc;
	}
	size_t len = h.len;
	return srv__conn_write(conn, srv_buf_steal(&h), len, NULL, 0);
}

/* Write data [len] (stolen) as one chunk: "<hex len>\r\n" data "\r\n". */
static int srv_stream_write_chunk(struct srv_stream *st, char *data, size_t len)
{
	if (!st->chunked)
		return srv__conn_write(st->conn, data, len, NULL, 0);
	char *head = mem_alloc(24);
	char *body = mem_realloc(data, len + 2);
	if (!head || !body) {
		mem_free(head);
		mem_free(body ? body : data);
		return -ST_NOMEM;
	}
	int n = snprintf(head, 24, "%zx\r\n", len);
	memcpy(body + len, "\r\n", 2);
	return srv__conn_write(st->conn, head, (size_t)n, body, len + 2);
}

/* The request was answered 503 at the drain deadline before this stream
 * wrote anything: what its job writes now is dropped. */
static bool srv_stream_refused(const struct srv_stream *st)
{
	return st->conn->refused && !st->started;
}

/* Write what is queued, headers first when they have not gone yet. A
 * failure closes the connection (which sets the job's cancel flag). */
static void srv_stream_flush(struct srv_stream *st)
{
	uv_mutex_lock(&st->lock);
	size_t len = st->queue.len;
	char *data = srv_buf_steal(&st->queue);
	uv_mutex_unlock(&st->lock);
	struct srv_conn *conn = st->conn;
	if (!len || conn->state == SRV_CONN_STATE_CLOSING || srv_stream_refused(st)) {
		mem_free(data);
		return;
	}
	int rc = st->started ? 0 : srv_stream_head(st);
	if (rc) {
		mem_free(data);
	} else {
		st->bytes_out += len;
		rc = srv_stream_write_chunk(st, data, len);
	}
	if (rc)
		srv__conn_close(conn);
}

static void srv_stream_async_cb(uv_async_t *a)
{
	srv_stream_flush(a->data);
}

static void srv_stream_log(struct srv_stream *st, int status)
{
	struct srv_req *req = &st->conn->req;
	struct srv *srv = st->conn->srv;
	double secs = (double)(uv_hrtime() - (req->start_ns ? req->start_ns : uv_hrtime())) / 1e9;
	srv_metrics_observe(&srv->metrics, req->route_index, req->method, status, secs);
	srv__req_log(req, status, st->bytes_out, secs);
}

void srv__stream_finish(struct srv_stream *st)
{
	struct srv_conn *conn = st->conn;
	srv_stream_flush(st);
	if (srv_stream_refused(st)) {
		srv__stream_destroy(st);
		return;
	}
	if (conn->state == SRV_CONN_STATE_CLOSING) {
		/* the client left (nginx's 499), or the drain deadline cut it */
		srv_stream_log(st, conn->cut ? 503 : 499);
		srv__stream_destroy(st);
		return;
	}
	int rc = st->started ? 0 : srv_stream_head(st);
	if (st->close || conn->srv->draining)
		conn->close_after_write = true;
	if (!rc && st->chunked) {
		char *last = mem_strdup("0\r\n\r\n");
		rc = last ? srv__conn_write(conn, last, 5, NULL, 0) : -ST_NOMEM;
	}
	srv_stream_log(st, st->status);
	if (rc) {
		srv__conn_close(conn);
	} else {
		srv__conn_request_done(conn);
		if (conn->close_after_write && conn->n_writes == 0)
			srv__conn_close(conn); /* nothing left in flight to linger after */
	}
	srv__stream_destroy(st);
}

static void srv_stream_close_cb(uv_handle_t *h)
{
	struct srv_stream *st = container_of((uv_async_t *)h, struct srv_stream, async);
	srv_buf_fini(&st->queue);
	uv_mutex_destroy(&st->lock);
	mem_free(st);
}

void srv__stream_destroy(struct srv_stream *st)
{
	if (st)
		uv_close((uv_handle_t *)&st->async, srv_stream_close_cb);
}
