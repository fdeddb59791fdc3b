/* srv_grpc.c - the gRPC-lite transport (srv_grpc.h): HTTP/2 cleartext with
 * nghttp2 on the libuv loop, gRPC message framing, answers and trailers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/grpc/srv_grpc.h"

/* A stream's list link lives in the connection's array of live streams:
 * few per connection, so a small array scanned on close is enough. */
struct srv_grpc_live {
	struct srv_grpc_stream *s[SRV_GRPC_MAX_STREAMS + 8];
	int n;
};

struct srv_grpc_conn_full {
	struct srv_grpc_conn c; /* first */
	struct srv_grpc_live live;
};

static struct srv_grpc_live *srv_grpc_live(struct srv_grpc_conn *c)
{
	return &((struct srv_grpc_conn_full *)c)->live;
}

struct srv_grpc_write {
	uv_write_t req;
	struct srv_grpc_conn *conn;
	size_t len;
	char data[];
};

static void srv_grpc_conn_close(struct srv_grpc_conn *c);
static void srv_grpc_stream_messages(struct srv_grpc_stream *s);


/* --- streams -------------------------------------------------------------- */

static void srv_grpc_stream_free(struct srv_grpc_stream *s)
{
	struct srv_grpc_live *l = srv_grpc_live(s->conn);
	for (int i = 0; i < l->n; i++)
		if (l->s[i] == s) {
			l->s[i] = l->s[--l->n];
			break;
		}
	s->conn->srv->grpc_cbs.stream_gone(s);
	s->conn->in_bytes -= s->in.len;
	srv_buf_fini(&s->in);
	srv_buf_fini(&s->out);
	mem_free(s);
}

struct srv_grpc_stream *srv__grpc_stream_of(struct srv_grpc_conn *c, int32_t id)
{
	if (c->closing || !c->h2)
		return NULL;
	return nghttp2_session_get_stream_user_data(c->h2, id);
}

/* grpc-timeout: digits and a unit, H M S m u n (PROTOCOL-HTTP2.md). */
static int srv_grpc_timeout_ms(const uint8_t *v, size_t n)
{
	if (n < 2 || n > 9)
		return 0;
	long long x = 0;
	for (size_t i = 0; i + 1 < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 0;
		x = x * 10 + (v[i] - '0');
	}
	double ms;
	switch (v[n - 1]) {
	case 'H': ms = (double)x * 3600e3; break;
	case 'M': ms = (double)x * 60e3; break;
	case 'S': ms = (double)x * 1e3; break;
	case 'm': ms = (double)x; break;
	case 'u': ms = (double)x / 1e3; break;
	case 'n': ms = (double)x / 1e6; break;
	default: return 0;
	}
	if (ms > 86400e3)
		ms = 86400e3;
	return ms < 1.0 ? 1 : (int)(ms + 0.999);
}

static bool srv_grpc_is(const uint8_t *a, size_t n, const char *lit)
{
	return n == strlen(lit) && !memcmp(a, lit, n);
}

/* A ModelStreamInfer call (a STREAM_* state), not a unary one. */
static bool srv_grpc_is_streaming(const struct srv_grpc_stream *s)
{
	return s->state >= SRV_GRPC_STREAM_STATE_STREAM_OPEN;
}

/* --- nghttp2 callbacks ------------------------------------------------------ */

static int srv_grpc_on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
	struct srv_grpc_conn *c = ud;
	struct srv_grpc_live *l = srv_grpc_live(c);
	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct srv_grpc_stream *s = l->n < (int)(sizeof(l->s) / sizeof(l->s[0]))
					    ? mem_calloc(1, sizeof(*s))
					    : NULL;
	if (!s)
		return nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, f->hd.stream_id,
						 NGHTTP2_REFUSED_STREAM) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
	s->conn = c;
	s->id = f->hd.stream_id;
	srv_buf_init(&s->in, (size_t)c->srv->cfg->max_body_bytes + 5);
	srv_buf_init(&s->out, (size_t)c->srv->cfg->max_body_bytes + 5);
	l->s[l->n++] = s;
	nghttp2_session_set_stream_user_data(h2, s->id, s);
	return 0;
}

static int srv_grpc_on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
			      size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
			      void *ud)
{
	(void)flags;
	(void)ud;
	struct srv_grpc_stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (!s || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if (srv_grpc_is(name, namelen, ":path")) {
		size_t k = valuelen < sizeof(s->path) ? valuelen : 0; /* too long: unknown */
		memcpy(s->path, value, k);
		s->path[k] = '\0';
		if (!strcmp(s->path, "/inference.GRPCInferenceService/ModelStreamInfer"))
			s->state = SRV_GRPC_STREAM_STATE_STREAM_OPEN;
	} else if (srv_grpc_is(name, namelen, "content-type")) {
		s->grpc_type = valuelen >= 16 && !memcmp(value, "application/grpc", 16) &&
			       (valuelen == 16 || value[16] == '+' || value[16] == ';');
	} else if (srv_grpc_is(name, namelen, "grpc-encoding")) {
		s->gzip = srv_grpc_is(value, valuelen, "gzip");
	} else if (srv_grpc_is(name, namelen, "grpc-timeout")) {
		s->timeout_ms = srv_grpc_timeout_ms(value, valuelen);
	}
	return 0;
}

static int srv_grpc_on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
			    size_t len, void *ud)
{
	(void)flags;
	(void)ud;
	struct srv_grpc_stream *s = nghttp2_session_get_stream_user_data(h2, id);
	if (!s || (s->state != SRV_GRPC_STREAM_STATE_RECEIVING &&
		   s->state != SRV_GRPC_STREAM_STATE_STREAM_OPEN))
		return 0; /* answered or failed: the rest is dropped */
	struct srv_grpc_conn *c = s->conn;
	if (c->in_bytes + len > SRV_GRPC_CONN_IN_MAX(c->srv->cfg->max_body_bytes)) {
		if (srv_grpc_is_streaming(s)) {
			srv__grpc_stream_fail(s, SRV_GRPC_RESOURCE_EXHAUSTED,
					      "this connection's requests in progress hold too many "
					      "bytes (limits.max_body_bytes)");
		} else {
			s->state = SRV_GRPC_STREAM_STATE_DISPATCHED;
			srv__grpc_respond(s, SRV_GRPC_RESOURCE_EXHAUSTED, NULL, 0,
					  "this connection's requests in progress hold too many "
					  "bytes (limits.max_body_bytes)");
		}
		return 0;
	}
	c->in_bytes += len;
	if (srv_grpc_is_streaming(s)) {
		if (srv_buf_append(&s->in, data, len)) {
			c->in_bytes -= len;
			srv__grpc_stream_fail(s, SRV_GRPC_RESOURCE_EXHAUSTED,
					     "a message is larger than limits.max_body_bytes");
			return 0;
		}
		srv_grpc_stream_messages(s);
		return 0;
	}
	if (srv_buf_append(&s->in, data, len)) {
		c->in_bytes -= len;
		s->state = SRV_GRPC_STREAM_STATE_DISPATCHED;
		srv__grpc_respond(s, SRV_GRPC_RESOURCE_EXHAUSTED, NULL, 0,
				  "the request message is larger than limits.max_body_bytes");
	}
	return 0;
}

/* gunzip src [n] into out (bounded by its max_len). */
static int srv_grpc_gunzip(const uint8_t *src, size_t n, struct srv_buf *out)
{
	z_stream z = { 0 };
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ST_NOMEM;
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)n;
	int zrc = Z_OK, rc = 0;
	char chunk[16384];
	while (zrc != Z_STREAM_END && !rc) {
		z.next_out = (Bytef *)chunk;
		z.avail_out = sizeof(chunk);
		zrc = inflate(&z, Z_NO_FLUSH);
		if (zrc != Z_OK && zrc != Z_STREAM_END)
			rc = -ST_INVAL;
		else if (srv_buf_append(out, chunk, sizeof(chunk) - z.avail_out))
			rc = -ST_TOOBIG;
		else if (zrc == Z_OK && z.avail_in == 0 && z.avail_out != 0)
			rc = -ST_INVAL; /* truncated */
	}
	inflateEnd(&z);
	return rc;
}

/* The request is complete: unframe its one message and run the method. */
static void srv_grpc_request_done(struct srv_grpc_stream *s)
{
	s->state = SRV_GRPC_STREAM_STATE_DISPATCHED;
	const uint8_t *p = (const uint8_t *)s->in.data;
	size_t n = s->in.len;
	if (!s->grpc_type) {
		srv__grpc_respond(s, SRV_GRPC_INVALID_ARGUMENT, NULL, 0,
				  "content-type must be application/grpc");
		return;
	}
	uint32_t len = n >= 5 ? (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
					(uint32_t)p[3] << 8 | p[4]
			      : 0;
	if (n < 5 || p[0] > 1 || (size_t)len != n - 5) {
		srv__grpc_respond(s, SRV_GRPC_INTERNAL, NULL, 0,
				  "a unary call carries exactly one length-prefixed message");
		return;
	}
	if (p[0] == 0) {
		s->conn->srv->grpc_cbs.dispatch(s, p + 5, len);
		return;
	}
	if (!s->gzip) {
		srv__grpc_respond(s, SRV_GRPC_UNIMPLEMENTED, NULL, 0,
				  "a compressed message needs grpc-encoding gzip (the only one "
				  "supported)");
		return;
	}
	struct srv_buf plain;
	srv_buf_init(&plain, (size_t)s->conn->srv->cfg->max_body_bytes);
	int rc = srv_grpc_gunzip(p + 5, len, &plain);
	if (rc)
		srv__grpc_respond(s, rc == -ST_TOOBIG ? SRV_GRPC_RESOURCE_EXHAUSTED : SRV_GRPC_INTERNAL,
				  NULL, 0, rc == -ST_TOOBIG ? "the message inflates past "
							      "limits.max_body_bytes"
							    : "the gzip message is corrupt");
	else
		s->conn->srv->grpc_cbs.dispatch(s, (const uint8_t *)(plain.data ? plain.data : ""),
						plain.len);
	srv_buf_fini(&plain);
}

/* ModelStreamInfer: run every complete message in s->in, keep the rest. */
static void srv_grpc_stream_messages(struct srv_grpc_stream *s)
{
	size_t off = 0;
	const uint8_t *p = (const uint8_t *)s->in.data;
	while (s->in.len - off >= 5 && s->state == SRV_GRPC_STREAM_STATE_STREAM_OPEN) {
		const uint8_t *h = p + off;
		size_t len = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
		if (h[0] != 0) {
			srv__grpc_stream_fail(s, SRV_GRPC_UNIMPLEMENTED,
					     "compressed messages on ModelStreamInfer");
			return;
		}
		if (s->in.len - off - 5 < len)
			break;
		s->conn->srv->grpc_cbs.stream_message(s, h + 5, len);
		off += 5 + len;
	}
	if (off) {
		memmove(s->in.data, s->in.data + off, s->in.len - off);
		s->in.len -= off;
		s->conn->in_bytes -= off;
	}
}

static int srv_grpc_on_frame(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
	(void)ud;
	if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
	    !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct srv_grpc_stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
	if (s && s->state == SRV_GRPC_STREAM_STATE_RECEIVING) {
		srv_grpc_request_done(s);
		s->conn->in_bytes -= s->in.len; /* the method has taken what it needs */
		srv_buf_fini(&s->in);
		return 0;
	}
	if (s && s->state == SRV_GRPC_STREAM_STATE_STREAM_OPEN) {
		s->state = SRV_GRPC_STREAM_STATE_STREAM_HALF_CLOSED;
		if (s->in.len)
			srv__grpc_stream_fail(s, SRV_GRPC_INTERNAL, "the stream ends inside a message");
		else
			srv__grpc_stream_maybe_end(s);
	} else if (s && srv_grpc_is_streaming(s)) {
		srv__grpc_stream_maybe_end(s); /* failed already */
	}
	return 0;
}

static int srv_grpc_on_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
	(void)code;
	(void)ud;
	struct srv_grpc_stream *s = nghttp2_session_get_stream_user_data(h2, id);
	if (s) {
		nghttp2_session_set_stream_user_data(h2, id, NULL);
		srv_grpc_stream_free(s);
	}
	return 0;
}

/* --- answers ---------------------------------------------------------------- */

static void srv_grpc_pct(const char *in, char *out, size_t cap);

/* Trailers: grpc-status, and grpc-message when not OK. */
static int srv_grpc_trailers(nghttp2_session *h2, int32_t id, int status, const char *message)
{
	char code[8], text[768];
	snprintf(code, sizeof(code), "%d", status);
	srv_grpc_pct(message, text, sizeof(text));
	nghttp2_nv t[] = {
		{ (uint8_t *)"grpc-status", (uint8_t *)code, 11, strlen(code), NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)"grpc-message", (uint8_t *)text, 12, strlen(text), NGHTTP2_NV_FLAG_NONE },
	};
	return nghttp2_submit_trailer(h2, id, t, status ? 2 : 1);
}

static ssize_t srv_grpc_read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
				  uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	(void)ud;
	struct srv_grpc_stream *s = src->ptr;
	size_t left = s->out.len - s->out_off;
	size_t k = left < length ? left : length;
	bool more = srv_grpc_is_streaming(s) && s->state != SRV_GRPC_STREAM_STATE_STREAM_ENDING;
	if (more && k == 0) {
		s->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	memcpy(buf, s->out.data + s->out_off, k);
	s->out_off += k;
	if (srv_grpc_is_streaming(s) && s->out_off == s->out.len) { /* sent all: reuse the buffer */
		s->out.len = 0;
		s->out_off = 0;
	}
	if (more)
		return (ssize_t)k;
	if (s->out_off == s->out.len) {
		*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (srv_grpc_trailers(h2, id, s->status, s->message))
			return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return (ssize_t)k;
}

#define SRV_GRPC_NV(n, v) \
	{ (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* grpc-message: percent-encode all but printable ASCII other than '%'. */
static void srv_grpc_pct(const char *in, char *out, size_t cap)
{
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p && k + 4 < cap; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '%')
			out[k++] = (char)*p;
		else
			k += (size_t)snprintf(out + k, cap - k, "%%%02X", *p);
	}
	out[k] = '\0';
}

void srv__grpc_respond(struct srv_grpc_stream *s, int status, const void *msg, size_t n,
		       const char *message)
{
	struct srv_grpc_conn *c = s->conn;
	if (status == SRV_GRPC_OK) {
		uint8_t hdr[5] = { 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
				   (uint8_t)n };
		if (srv_buf_append(&s->out, hdr, 5) || srv_buf_append(&s->out, msg, n)) {
			srv__grpc_respond(s, SRV_GRPC_RESOURCE_EXHAUSTED, NULL, 0,
					  "the answer is larger than limits.max_body_bytes");
			return;
		}
		nghttp2_nv hs[] = { SRV_GRPC_NV(":status", "200"),
				    SRV_GRPC_NV("content-type", "application/grpc"),
				    SRV_GRPC_NV("grpc-accept-encoding", "identity,gzip") };
		nghttp2_data_provider dp = { .source.ptr = s, .read_callback = srv_grpc_read_body };
		if (nghttp2_submit_response(c->h2, s->id, hs, 3, &dp))
			nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id,
						  NGHTTP2_INTERNAL_ERROR);
	} else {
		char code[8], text[768];
		snprintf(code, sizeof(code), "%d", status);
		srv_grpc_pct(message ? message : "", text, sizeof(text));
		nghttp2_nv hs[] = { SRV_GRPC_NV(":status", "200"),
				    SRV_GRPC_NV("content-type", "application/grpc"),
				    SRV_GRPC_NV("grpc-status", code), SRV_GRPC_NV("grpc-message", text) };
		if (nghttp2_submit_response(c->h2, s->id, hs, 4, NULL))
			nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, s->id,
						  NGHTTP2_INTERNAL_ERROR);
	}
	srv__grpc_flush(c);
}

static int srv_grpc_stream_headers(struct srv_grpc_stream *s)
{
	if (s->headers_sent)
		return 0;
	s->headers_sent = true;
	nghttp2_nv hs[] = { SRV_GRPC_NV(":status", "200"),
			    SRV_GRPC_NV("content-type", "application/grpc"),
			    SRV_GRPC_NV("grpc-accept-encoding", "identity,gzip") };
	nghttp2_data_provider dp = { .source.ptr = s, .read_callback = srv_grpc_read_body };
	return nghttp2_submit_response(s->conn->h2, s->id, hs, 3, &dp) ? -ST_NOMEM : 0;
}

int srv__grpc_stream_send(struct srv_grpc_stream *s, const void *msg, size_t n)
{
	uint8_t hdr[5] = { 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
			   (uint8_t)n };
	if (srv_buf_append(&s->out, hdr, 5) || srv_buf_append(&s->out, msg, n))
		return -ST_TOOBIG;
	int rc = srv_grpc_stream_headers(s);
	if (!rc && s->deferred) {
		s->deferred = false;
		nghttp2_session_resume_data(s->conn->h2, s->id);
	}
	srv__grpc_flush(s->conn);
	return rc;
}

void srv__grpc_stream_maybe_end(struct srv_grpc_stream *s)
{
	if ((s->state != SRV_GRPC_STREAM_STATE_STREAM_HALF_CLOSED &&
	     s->state != SRV_GRPC_STREAM_STATE_STREAM_FAILED) || s->n_running > 0)
		return;
	s->state = SRV_GRPC_STREAM_STATE_STREAM_ENDING; /* the answer is complete */
	if (!s->headers_sent && s->status != SRV_GRPC_OK) {
		srv__grpc_respond(s, s->status, NULL, 0, s->message);
		return;
	}
	if (!s->headers_sent) { /* no request came: trailers-only OK */
		nghttp2_nv hs[] = { SRV_GRPC_NV(":status", "200"),
				    SRV_GRPC_NV("content-type", "application/grpc"),
				    SRV_GRPC_NV("grpc-status", "0") };
		nghttp2_submit_response(s->conn->h2, s->id, hs, 3, NULL);
		srv__grpc_flush(s->conn);
		return;
	}
	if (s->deferred) {
		s->deferred = false;
		nghttp2_session_resume_data(s->conn->h2, s->id);
	}
	srv__grpc_flush(s->conn);
}

/* End a ModelStreamInfer call in error: stop reading its messages, cancel
 * its running requests; the status goes out in the trailers once they
 * have ended. */
void srv__grpc_stream_fail(struct srv_grpc_stream *s, int status, const char *message)
{
	if (s->status == SRV_GRPC_OK) {
		s->status = status;
		snprintf(s->message, sizeof(s->message), "%s", message);
	}
	if (s->state != SRV_GRPC_STREAM_STATE_STREAM_ENDING)
		s->state = SRV_GRPC_STREAM_STATE_STREAM_FAILED;
	s->conn->srv->grpc_cbs.stream_gone(s);
	srv__grpc_stream_maybe_end(s);
}

/* --- the connection ---------------------------------------------------------- */

static void srv_grpc_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)suggested;
	struct srv_grpc_conn *c = h->data;
	buf->base = c->srv->rbuf;
	buf->len = sizeof(c->srv->rbuf);
}

static void srv_grpc_on_write(uv_write_t *req, int status)
{
	struct srv_grpc_write *w = (struct srv_grpc_write *)req;
	struct srv_grpc_conn *c = w->conn;
	c->queued -= w->len;
	mem_free(w);
	if (status < 0) {
		srv_grpc_conn_close(c);
		return;
	}
	/* resumes reading; with nothing left to write, closes a session that
	 * wants nothing more (after a GOAWAY) */
	if (!c->closing && (c->queued == 0 || (!c->reading && c->queued < SRV_GRPC_MAX_QUEUED / 2)))
		srv__grpc_flush(c);
}

static void srv_grpc_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);

void srv__grpc_flush(struct srv_grpc_conn *c)
{
	if (c->closing || c->in_recv) /* in_recv: srv_grpc_on_read flushes after */
		return;
	struct srv_buf b;
	srv_buf_init(&b, SIZE_MAX);
	const uint8_t *p;
	ssize_t n;
	while ((n = nghttp2_session_mem_send(c->h2, &p)) > 0)
		if (srv_buf_append(&b, p, (size_t)n)) {
			n = -1;
			break;
		}
	if (n < 0) {
		srv_buf_fini(&b);
		srv_grpc_conn_close(c);
		return;
	}
	if (b.len) {
		struct srv_grpc_write *w = mem_alloc(sizeof(*w) + b.len);
		if (!w) {
			srv_buf_fini(&b);
			srv_grpc_conn_close(c);
			return;
		}
		w->conn = c;
		w->len = b.len;
		memcpy(w->data, b.data, b.len);
		uv_buf_t ub = uv_buf_init(w->data, (unsigned)b.len);
		c->queued += b.len;
		if (uv_write(&w->req, &c->h.stream, &ub, 1, srv_grpc_on_write)) {
			c->queued -= b.len;
			mem_free(w);
			srv_buf_fini(&b);
			srv_grpc_conn_close(c);
			return;
		}
		c->send.handed += b.len;
	}
	srv_buf_fini(&b);
	bool want = nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2);
	if (!want && c->queued == 0) {
		srv_grpc_conn_close(c);
		return;
	}
	bool pause = c->queued > SRV_GRPC_MAX_QUEUED;
	if (pause && c->reading) {
		uv_read_stop(&c->h.stream);
		c->reading = false;
	} else if (!pause && !c->reading) {
		c->reading = !uv_read_start(&c->h.stream, srv_grpc_alloc, srv_grpc_on_read);
	}
}

static void srv_grpc_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct srv_grpc_conn *c = st->data;
	if (n < 0) {
		srv_grpc_conn_close(c);
		return;
	}
	if (n == 0)
		return;
	c->read_any = true;
	c->active_ms = uv_now(st->loop);
	c->in_recv = true;
	ssize_t rv = nghttp2_session_mem_recv(c->h2, (const uint8_t *)buf->base, (size_t)n);
	c->in_recv = false;
	if (rv < 0 || c->close_after) {
		srv_grpc_conn_close(c);
		return;
	}
	srv__grpc_flush(c);
}

static void srv_grpc_conn_free(struct srv_grpc_conn *c)
{
	struct srv *srv = c->srv;
	struct srv_grpc_conn **pp = &srv->grpc_conns;
	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
	srv->n_grpc_conns--;
	mem_free(c);
	srv->cbs.conn_closed(srv);
}

static void srv_grpc_on_closed(uv_handle_t *h)
{
	struct srv_grpc_conn *c = h->data;
	c->h.handle.data = NULL; /* closed */
	if (c->n_work == 0)
		srv_grpc_conn_free(c);
}

static void srv_grpc_conn_close(struct srv_grpc_conn *c)
{
	if (c->closing)
		return;
	if (c->in_recv) {
		c->close_after = true;
		return;
	}
	c->closing = true;
	struct srv_grpc_live *l = srv_grpc_live(c);
	while (l->n > 0)
		srv_grpc_stream_free(l->s[l->n - 1]);
	nghttp2_session_del(c->h2);
	c->h2 = NULL;
	uv_close(&c->h.handle, srv_grpc_on_closed);
}

void srv__grpc_work_done(struct srv_grpc_conn *c)
{
	if (--c->n_work == 0 && c->closing && !c->h.handle.data)
		srv_grpc_conn_free(c);
}

static nghttp2_session_callbacks *srv_grpc_callbacks(void)
{
	nghttp2_session_callbacks *cb;
	if (nghttp2_session_callbacks_new(&cb))
		return NULL;
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, srv_grpc_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cb, srv_grpc_on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, srv_grpc_on_data);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_grpc_on_frame);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, srv_grpc_on_close);
	return cb;
}

/* A new session for c with our SETTINGS queued. */
static int srv_grpc_session(struct srv_grpc_conn *c)
{
	nghttp2_session_callbacks *cb = srv_grpc_callbacks();
	if (!cb)
		return -ST_NOMEM;
	int rc = nghttp2_session_server_new(&c->h2, cb, c);
	nghttp2_session_callbacks_del(cb);
	if (rc)
		return -ST_NOMEM;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SRV_GRPC_MAX_STREAMS },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384 },
	};
	return nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3) ? -ST_NOMEM : 0;
}

static struct srv_grpc_conn *srv_grpc_conn_new(struct srv *srv)
{
	struct srv_grpc_conn *c = mem_calloc(1, sizeof(struct srv_grpc_conn_full));
	if (!c)
		return NULL;
	c->srv = srv;
	c->active_ms = uv_now(&srv->loop);
	c->next = srv->grpc_conns;
	srv->grpc_conns = c;
	srv->n_grpc_conns++;
	return c;
}

static void srv_grpc_on_connection(uv_stream_t *listener, int status)
{
	struct srv *srv = listener->data;
	if (status < 0 || srv->draining)
		return;
	struct srv_grpc_conn *c = srv_grpc_conn_new(srv);
	if (!c)
		return;
	uv_tcp_init(&srv->loop, &c->h.tcp);
	c->h.handle.data = c;
	/* limits.max_connections counts HTTP and gRPC connections together */
	bool full = srv->n_conns + srv->n_grpc_conns > srv->cfg->max_connections;
	if (uv_accept(listener, &c->h.stream) || full || srv_grpc_session(c)) {
		srv_grpc_conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->h.tcp, 1);
	srv__grpc_flush(c);
}

int srv__grpc_conn_open_fd(struct srv *srv, int fd)
{
	struct srv_grpc_conn *c = srv_grpc_conn_new(srv);
	if (!c)
		return -ST_NOMEM;
	uv_pipe_init(&srv->loop, &c->h.pipe, 0);
	c->h.handle.data = c;
	if (uv_pipe_open(&c->h.pipe, fd) || srv_grpc_session(c)) {
		srv_grpc_conn_close(c);
		return -ST_IO;
	}
	srv__grpc_flush(c);
	return 0;
}

int srv__grpc_listen(struct srv *srv, char *err, size_t errlen)
{
	const struct cfg *cfg = srv->cfg;
	if (!cfg->grpc_host)
		return 0;
	struct sockaddr_storage ss;
	int rc = strchr(cfg->grpc_host, ':')
			 ? uv_ip6_addr(cfg->grpc_host, cfg->grpc_port, (struct sockaddr_in6 *)&ss)
			 : uv_ip4_addr(cfg->grpc_host, cfg->grpc_port, (struct sockaddr_in *)&ss);
	uv_tcp_init(&srv->loop, &srv->grpc_listener);
	srv->grpc_listener.data = srv;
	srv->grpc_on = true;
	if (!rc)
		rc = uv_tcp_bind(&srv->grpc_listener, (const struct sockaddr *)&ss, 0);
	if (!rc)
		rc = uv_listen((uv_stream_t *)&srv->grpc_listener, 511, srv_grpc_on_connection);
	if (rc) {
		snprintf(err, errlen, "cannot listen on %s:%d for gRPC: %s", cfg->grpc_host,
			 cfg->grpc_port, uv_strerror(rc));
		return -ST_IO;
	}
	struct sockaddr_storage bound;
	int len = sizeof(bound);
	char host[64] = "";
	uv_tcp_getsockname(&srv->grpc_listener, (struct sockaddr *)&bound, &len);
	int port = 0;
	if (bound.ss_family == AF_INET6) {
		uv_ip6_name((struct sockaddr_in6 *)&bound, host, sizeof(host));
		port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
	} else {
		uv_ip4_name((struct sockaddr_in *)&bound, host, sizeof(host));
		port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	}
	fprintf(stderr, "inferd: gRPC (KServe v2, h2c) port %s%s%s:%d\n",
		bound.ss_family == AF_INET6 ? "[" : "", host, bound.ss_family == AF_INET6 ? "]" : "",
		port);
	return 0;
}

/* GOAWAY (NO_ERROR) after the last stream begun; with no call in
 * progress the session then wants nothing more, and closes once the
 * GOAWAY is written (srv_grpc_on_write). */
static void srv_grpc_goaway(struct srv_grpc_conn *c)
{
	nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
			      nghttp2_session_get_last_proc_stream_id(c->h2), NGHTTP2_NO_ERROR,
			      NULL, 0);
	if (srv_grpc_live(c)->n == 0)
		nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
	srv__grpc_flush(c);
}

void srv__grpc_drain(struct srv *srv)
{
	if (srv->grpc_on && !uv_is_closing((uv_handle_t *)&srv->grpc_listener))
		uv_close((uv_handle_t *)&srv->grpc_listener, NULL);
	for (struct srv_grpc_conn *c = srv->grpc_conns, *next; c; c = next) {
		next = c->next;
		if (c->closing)
			continue;
		srv_grpc_goaway(c);
	}
}

void srv__grpc_close_all(struct srv *srv)
{
	if (srv->grpc_on && !uv_is_closing((uv_handle_t *)&srv->grpc_listener))
		uv_close((uv_handle_t *)&srv->grpc_listener, NULL);
	for (struct srv_grpc_conn *c = srv->grpc_conns, *next; c; c = next) {
		next = c->next;
		srv_grpc_conn_close(c);
	}
}

/* A connection with no call in progress and nothing to write, quiet for
 * limits.header_timeout_ms when it never sent a byte, for
 * limits.idle_timeout_ms after that. */
static bool srv_grpc_idle(struct srv_grpc_conn *c, uint64_t now_ms)
{
	const struct cfg *cfg = c->srv->cfg;
	if (srv_grpc_live(c)->n || c->n_work || c->queued)
		return false;
	uint64_t limit = (uint64_t)(c->read_any ? cfg->idle_timeout_ms : cfg->header_timeout_ms);
	return now_ms - c->active_ms >= limit;
}

void srv__grpc_sweep(struct srv *srv, uint64_t now_ms)
{
	for (struct srv_grpc_conn *c = srv->grpc_conns, *next; c; c = next) {
		next = c->next;
		if (c->closing)
			continue;
		if (srv__send_stalled(&c->send, &c->h.stream, now_ms, srv->cfg->send_timeout_ms)) {
			srv->metrics.send_timeouts++;
			srv_grpc_conn_close(c);
		} else if (!srv_grpc_idle(c, now_ms) || c->idle_goaway) {
			continue;
		} else if (!c->read_any) {
			srv_grpc_conn_close(c); /* not even a preface: nothing to say goodbye to */
		} else {
			c->idle_goaway = true;
			srv_grpc_goaway(c);
		}
	}
}
