/* ib_conn.c - one HTTP/1.1 client connection of inferd-bench on the libuv
 * loop: connect, write a prebuilt request, parse the response with llhttp,
 * read an event stream (text/event-stream, the WHATWG HTML "server-sent
 * events" format: lines, "data:" fields, a blank line ends an event) and
 * time its text events, enforce the request timeout, and report the
 * outcome through the callbacks it was opened with (struct ib_conn_cbs:
 * the load loop's, ib_load.c). No pipelining: one request at a time per
 * connection, kept alive unless the server says otherwise. A deepgram-live
 * request is an upgrade: its 101 hands the connection's bytes to ib_live.c
 * (the stream's state hangs off c->live), which ends it through the
 * callback it was given (ib_conn_end).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ib_int.h"

#define IB_LINE_MAX (1u << 20) /* longest event-stream line kept */

static void ib_conn_free_bufs(struct ib_conn *c)
{
	free(c->body);
	free(c->line);
	free(c->data);
	free(c->gaps);
	ib_live_free(c->live);
	c->live = NULL;
	c->body = c->line = c->data = NULL;
	c->gaps = NULL;
	c->body_cap = c->line_cap = c->data_cap = c->cap_gaps = 0;
}

static void ib_conn_on_close(uv_handle_t *h)
{
	struct ib_conn *c = h->data;
	if (h == (uv_handle_t *)&c->timer)
		c->timer_closed = true;
	else
		c->tcp_closed = true;
	if (!c->timer_closed || !c->tcp_closed)
		return;
	c->cbs->on_closed(c);
	ib_conn_free_bufs(c);
	free(c);
}

void ib_conn_close(struct ib_conn *c)
{
	if (c->closing)
		return;
	c->closing = true;
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, ib_conn_on_close);
	uv_close((uv_handle_t *)&c->tcp, ib_conn_on_close);
}

static bool ib_grow(char **p, size_t *cap, size_t need, size_t max)
{
	if (need <= *cap)
		return true;
	if (need > max)
		return false;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	char *q = realloc(*p, n);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

/* The request in flight ends as kind; the connection is reused only for a
 * complete response the server lets us keep. */
static void ib_conn_finish(struct ib_conn *c, enum ib_kind kind, bool reusable)
{
	struct ib_run *run = c->run;
	struct ib_rec *r = &run->recs[c->rec];
	uv_timer_stop(&c->timer);
	r->t_end = ib_now(run);
	r->kind = kind;
	if (c->live)
		ib_live_finish(c, r);
	if (c->n_gaps)
		ib_rec_set_itl(run, c->rec, c->gaps, c->n_gaps);
	c->n_gaps = 0;
	c->busy = false;
	if (!reusable)
		ib_conn_close(c);
	c->cbs->on_done(c, c->rec, reusable && !c->closing);
}

/* A live stream's end (ib_live_end_cb). */
static void ib_conn_end(struct ib_conn *c, enum ib_kind kind)
{
	if (c->busy)
		ib_conn_finish(c, kind, false);
}

/* The request in flight failed: bytes of its response came (protocol), or
 * none did: on a connection that has answered before, a stale keep-alive
 * connection the opener may send the request again on a new one
 * (on_stale); else a connect error. */
static void ib_conn_fail(struct ib_conn *c)
{
	if (!c->got_bytes && c->n_answered > 0 && c->cbs->on_stale) {
		uv_timer_stop(&c->timer);
		c->busy = false;
		c->n_gaps = 0;
		ib_conn_close(c);
		if (c->cbs->on_stale(c, c->rec))
			return;
		c->busy = true; /* ended below, as any failure */
	}
	ib_conn_finish(c, c->got_bytes ? IB_KIND_PROTOCOL : IB_KIND_CONNECT, false);
}

/* --- event stream ------------------------------------------------------ */

/* One inter-token gap of the request in flight (one lost when out of
 * memory). */
static void ib_conn_add_gap(struct ib_conn *c, double gap_s)
{
	if (c->n_gaps == c->cap_gaps) {
		size_t cap = c->cap_gaps ? c->cap_gaps * 2 : 256;
		float *g = realloc(c->gaps, cap * sizeof(*g));
		if (!g)
			return;
		c->gaps = g;
		c->cap_gaps = cap;
	}
	c->gaps[c->n_gaps++] = (float)gap_s;
}

static void ib_sse_dispatch(struct ib_conn *c)
{
	if (!c->data_len)
		return;
	bool text, done;
	struct ib_run *run = c->run;
	if (!ib_work_event(c->ep, c->data, c->data_len, &text, &done, &c->usage_tokens)) {
		c->sse_bad = true;
	} else if (done) {
		c->sse_done = true;
	} else if (text) {
		double t = ib_now(run);
		struct ib_rec *r = &run->recs[c->rec];
		if (c->n_events_text == 0)
			r->ttft = t - r->t_start;
		else
			ib_conn_add_gap(c, t - c->t_last_tok);
		c->t_last_tok = t;
		c->n_events_text++;
	}
	c->data_len = 0;
}

static void ib_sse_line(struct ib_conn *c)
{
	const char *l = c->line;
	size_t n = c->line_len;
	c->line_len = 0;
	if (n == 0) {
		ib_sse_dispatch(c);
		return;
	}
	if (n < 5 || memcmp(l, "data:", 5) != 0)
		return; /* comments (":"), event:, id:, retry: */
	l += 5;
	n -= 5;
	if (n && *l == ' ') {
		l++;
		n--;
	}
	if (c->data_len && ib_grow(&c->data, &c->data_cap, c->data_len + 1, IB_MAX_BODY))
		c->data[c->data_len++] = '\n';
	if (!ib_grow(&c->data, &c->data_cap, c->data_len + n + 1, IB_MAX_BODY)) {
		c->sse_bad = true;
		return;
	}
	memcpy(c->data + c->data_len, l, n);
	c->data_len += n;
}

static void ib_sse_feed(struct ib_conn *c, const char *p, size_t n)
{
	for (size_t i = 0; i < n && !c->sse_bad; i++) {
		char ch = p[i];
		if (ch == '\n' && c->last_cr) {
			c->last_cr = false; /* the LF of a CRLF */
			continue;
		}
		c->last_cr = ch == '\r';
		if (ch == '\r' || ch == '\n') {
			ib_sse_line(c);
			continue;
		}
		if (!ib_grow(&c->line, &c->line_cap, c->line_len + 1, IB_LINE_MAX)) {
			c->sse_bad = true;
			return;
		}
		c->line[c->line_len++] = ch;
	}
}

/* --- llhttp callbacks -------------------------------------------------- */

/* Append at [len] to the NUL-terminated buf [cap] holding *n bytes; what
 * does not fit is dropped (header names and content types are short). */
static void ib_append_cut(char *buf, size_t cap, size_t *n, const char *at, size_t len)
{
	size_t room = cap - 1 - *n;
	size_t k = len < room ? len : room;
	memcpy(buf + *n, at, k);
	*n += k;
	buf[*n] = '\0';
}

static int ib_on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct ib_conn *c = p->data;
	if (c->hstate != 2) { /* a new field begins */
		c->hname_len = 0;
		c->hstate = 2;
	}
	ib_append_cut(c->hname, sizeof(c->hname), &c->hname_len, at, len);
	return 0;
}

static int ib_on_header_value(llhttp_t *p, const char *at, size_t len)
{
	struct ib_conn *c = p->data;
	if (c->hstate == 2)
		c->hstate = !strcasecmp(c->hname, "content-type")	    ? 1
			    : !strcasecmp(c->hname, "sec-websocket-accept") ? 3
									    : 0;
	if (c->hstate == 1)
		ib_append_cut(c->ctype, sizeof(c->ctype), &c->ctype_len, at, len);
	if (c->hstate == 3)
		ib_append_cut(c->ws_accept, sizeof(c->ws_accept), &c->ws_accept_len, at, len);
	return 0;
}

/* An interim response (RFC 9110 15.2: 100 Continue, 102, 103 Early Hints),
 * which a client reads and skips, whether it asked for one or not; 101
 * switches protocols and is final. */
static bool ib_interim(int status)
{
	return status >= 100 && status < 200 && status != 101;
}

/* 1xx, 204 and 304 responses have no body, whatever Content-Length says
 * (RFC 9112 6.3): returning 1 tells llhttp so. */
static int ib_on_headers_complete(llhttp_t *p)
{
	struct ib_conn *c = p->data;
	struct ib_rec *r = &c->run->recs[c->rec];
	r->status = llhttp_get_status_code(p);
	c->headers_done = true;
	c->sse = r->status >= 200 && r->status < 300 &&
		 !strncasecmp(c->ctype, "text/event-stream", 17);
	return r->status < 200 || r->status == 204 || r->status == 304;
}

static int ib_on_body(llhttp_t *p, const char *at, size_t len)
{
	struct ib_conn *c = p->data;
	if (c->sse) {
		ib_sse_feed(c, at, len);
		return 0;
	}
	if (!ib_grow(&c->body, &c->body_cap, c->body_len + len + 1, IB_MAX_BODY)) {
		c->sse_bad = true; /* too long to check: reported as protocol */
		return 0;
	}
	memcpy(c->body + c->body_len, at, len);
	c->body_len += len;
	return 0;
}

static int ib_on_message_complete(llhttp_t *p)
{
	struct ib_conn *c = p->data;
	if (ib_interim(c->run->recs[c->rec].status)) { /* the final response follows */
		c->headers_done = false;
		c->hstate = 0;
		c->hname_len = c->ctype_len = 0;
		c->ctype[0] = '\0';
		return 0;
	}
	c->complete = true;
	return HPE_PAUSED; /* one response per request: stop here */
}

static const llhttp_settings_t ib_settings = {
	.on_header_field = ib_on_header_field,
	.on_header_value = ib_on_header_value,
	.on_headers_complete = ib_on_headers_complete,
	.on_body = ib_on_body,
	.on_message_complete = ib_on_message_complete,
};

/* Whether ep's event stream ends with "data: [DONE]" (OpenAI's do): one
 * without it was cut short. */
static bool ib_sse_wants_done(enum ib_endpoint ep)
{
	return ep == IB_EP_OPENAI_COMPLETIONS || ep == IB_EP_OPENAI_CHAT;
}

/* A complete response: check it, count its work, end the request. A
 * response that came before the request was all written (write_req.data
 * is set while a write is in progress) leaves the connection in an unknown
 * state and its write request busy: it is not reused. */
static void ib_conn_complete(struct ib_conn *c, bool extra_bytes)
{
	struct ib_run *run = c->run;
	struct ib_rec *r = &run->recs[c->rec];
	bool keep = llhttp_should_keep_alive(&c->parser) && !extra_bytes && !c->write_req.data &&
		    !c->live; /* a refused stream's connection is not reused */
	enum ib_kind kind = IB_KIND_OK;
	if (r->status >= 400) {
		kind = IB_KIND_HTTP;
	} else if (r->status < 200 || extra_bytes || c->sse_bad || c->live) {
		/* (a live stream's final answer other than its 101, or an error) */
		kind = IB_KIND_PROTOCOL;
	} else if (c->sse) {
		if (c->line_len)
			ib_sse_line(c); /* a last line without its newline */
		ib_sse_dispatch(c);
		if (c->sse_bad || (ib_sse_wants_done(c->ep) && !c->sse_done))
			kind = IB_KIND_PROTOCOL;
		r->tokens = c->usage_tokens >= 0 ? c->usage_tokens : c->n_events_text;
	} else {
		long tokens;
		if (!ib_work_check_body(c->ep, c->body, c->body_len, &tokens))
			kind = IB_KIND_PROTOCOL;
		r->tokens = tokens >= 0 ? tokens : 0;
	}
	if (kind == IB_KIND_OK)
		r->audio_s = c->tmpl->audio_s;
	c->n_answered++;
	ib_conn_finish(c, kind, keep);
}

/* --- libuv callbacks --------------------------------------------------- */

static void ib_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	static char slab[65536]; /* one thread, read callbacks never nest */
	buf->base = slab;
	buf->len = sizeof(slab);
}

static void ib_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct ib_conn *c = s->data;
	if (n == 0)
		return;
	if (!c->busy) { /* bytes or EOF while idle: the server closed or misbehaved */
		ib_conn_close(c);
		return;
	}
	struct ib_rec *r = &c->run->recs[c->rec];
	if (ib_live_is_upgraded(c->live)) {
		r->bytes_recv += n > 0 ? (uint64_t)n : 0;
		ib_live_on_read(c, buf->base, n);
		return;
	}
	if (n < 0) {
		/* a body delimited by the close: llhttp_finish runs
		 * on_message_complete, whose pause it returns */
		llhttp_errno_t e = n == UV_EOF && c->got_bytes ? llhttp_finish(&c->parser) : HPE_OK;
		if ((e == HPE_OK || e == HPE_PAUSED) && c->complete) {
			ib_conn_complete(c, false);
			return;
		}
		ib_conn_fail(c);
		return;
	}
	c->got_bytes = true;
	r->bytes_recv += (uint64_t)n;
	llhttp_errno_t e = llhttp_execute(&c->parser, buf->base, (size_t)n);
	if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && c->complete) {
		const char *stop = llhttp_get_error_pos(&c->parser);
		size_t extra = stop && stop >= buf->base && stop < buf->base + n
				       ? (size_t)(buf->base + n - stop)
				       : 0;
		if (c->live && r->status == 101)
			ib_live_upgraded(c, stop, extra);
		else
			ib_conn_complete(c, extra > 0);
		return;
	}
	if (e != HPE_OK)
		ib_conn_finish(c, IB_KIND_PROTOCOL, false);
}

static void ib_on_write(uv_write_t *w, int status)
{
	struct ib_conn *c = w->data;
	w->data = NULL; /* no write in progress */
	if (status < 0 && c->busy && !c->closing)
		ib_conn_fail(c);
}

static void ib_on_timeout(uv_timer_t *t)
{
	struct ib_conn *c = t->data;
	if (c->busy)
		ib_conn_finish(c, IB_KIND_TIMEOUT, false);
}

static uint64_t ib_timeout_ms(const struct ib_run *run)
{
	return (uint64_t)(run->o->timeout_s * 1000.0 + 0.5);
}

static void ib_on_connect(uv_connect_t *req, int status)
{
	struct ib_conn *c = req->data;
	if (c->closing)
		return;
	uv_timer_stop(&c->timer);
	if (status == 0) {
		c->connected = true;
		uv_tcp_nodelay(&c->tcp, 1);
		if (uv_read_start((uv_stream_t *)&c->tcp, ib_alloc, ib_on_read) != 0)
			status = UV_EIO;
	}
	if (status != 0)
		ib_conn_close(c);
	c->cbs->on_connected(c, status);
}

static void ib_on_connect_error(uv_timer_t *t)
{
	struct ib_conn *c = t->data;
	ib_conn_close(c);
	c->cbs->on_connected(c, UV_ECONNREFUSED);
}

/* No connection within --timeout (a full accept queue, a host that drops
 * the SYNs): given up like a refused one; the connect callback then comes
 * with UV_ECANCELED to a closing connection. */
static void ib_on_connect_timeout(uv_timer_t *t)
{
	struct ib_conn *c = t->data;
	ib_conn_close(c);
	c->cbs->on_connected(c, UV_ETIMEDOUT);
}

struct ib_conn *ib_conn_open(struct ib_run *run, int client, const struct ib_conn_cbs *cbs)
{
	struct ib_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->run = run;
	c->cbs = cbs;
	c->client = client;
	c->usage_tokens = -1;
	uv_tcp_init(run->loop, &c->tcp);
	uv_timer_init(run->loop, &c->timer);
	c->tcp.data = c->timer.data = c->connect_req.data = c;
	c->t_connect = ib_now(run);
	int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&run->addr,
				ib_on_connect);
	if (rc != 0) /* (too many open files...) reported from the next loop turn */
		uv_timer_start(&c->timer, ib_on_connect_error, 0, 0);
	else
		uv_timer_start(&c->timer, ib_on_connect_timeout, ib_timeout_ms(run), 0);
	return c;
}

void ib_conn_send(struct ib_conn *c, const struct ib_tmpl *tmpl, enum ib_endpoint ep, size_t rec)
{
	struct ib_run *run = c->run;
	c->busy = true;
	c->rec = rec;
	c->tmpl = tmpl;
	c->ep = ep;
	c->got_bytes = c->headers_done = c->complete = c->sse = false;
	c->sse_bad = c->sse_done = c->last_cr = false;
	c->hname_len = c->ctype_len = c->ws_accept_len = 0;
	c->hstate = 0;
	c->ctype[0] = c->ws_accept[0] = '\0';
	c->body_len = c->line_len = c->data_len = 0;
	c->n_events_text = 0;
	c->n_gaps = 0;
	c->usage_tokens = -1;
	llhttp_init(&c->parser, HTTP_RESPONSE, &ib_settings);
	c->parser.data = c;
	uv_buf_t b = uv_buf_init(tmpl->bytes, (unsigned)tmpl->len);
	if (ep == IB_EP_DEEPGRAM_LIVE)
		ib_live_begin(c, ib_conn_end, &b); /* the upgrade request, its own key */
	run->recs[rec].bytes_sent = b.len;
	uv_timer_start(&c->timer, ib_on_timeout, ib_timeout_ms(run), 0);
	c->write_req.data = c;
	if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, ib_on_write) != 0) {
		c->write_req.data = NULL;
		ib_conn_fail(c);
	}
}
