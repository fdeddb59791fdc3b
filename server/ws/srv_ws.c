/* srv_ws.c - the WebSocket transport (contract in srv_ws.h): the opening
 * handshake (RFC 6455 section 4.2) and libwslay's event API over the
 * connection's bytes. wslay pulls input through recv_cb from the bytes
 * srv__ws_feed was given and pushes output through send_cb into one
 * buffer, written to the socket in one uv_write after each round.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <wslay/wslay.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/ws/srv_ws.h"

#define SRV_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 1.3 */

struct srv_ws {
	wslay_event_context_ptr ctx;
	struct srv_conn *conn;       /* borrowed: outlives us (the owner's n_work) */
	const struct srv_ws_cbs *cbs;
	void *ud;
	const uint8_t *in;           /* bytes being fed, borrowed during srv__ws_feed */
	size_t in_len, in_pos;
	struct srv_buf out;          /* frames wslay produced, not yet written */
	bool in_feed;                /* inside srv__ws_feed (destroy waits) */
	bool dead;                   /* srv__ws_destroy was called inside a callback */
	bool ended;                  /* on_end was called */
	bool close_queued;           /* our close frame is asked for: end after writing it */
	bool close_pending;          /* ... but not yet given to wslay (see srv__ws_close) */
	uint16_t close_code;
	char close_reason[124];
};

/* --- handshake ------------------------------------------------------------ */

void srv__ws_accept_key(const char *key, char out[SRV_WS_ACCEPT_LEN + 1])
{
	struct sha1_ctx c;
	uint8_t digest[SHA1_DIGEST_SIZE];
	sha1_init(&c);
	sha1_update(&c, strlen(key), (const uint8_t *)key);
	sha1_update(&c, sizeof(SRV_WS_GUID) - 1, (const uint8_t *)SRV_WS_GUID);
	sha1_digest(&c, SHA1_DIGEST_SIZE, digest);
	base64_encode_raw(out, SHA1_DIGEST_SIZE, digest);
	out[SRV_WS_ACCEPT_LEN] = '\0';
}

/* Does the comma-separated header value list token (case-insensitive)? */
static bool srv_ws_has_token(const char *v, const char *token)
{
	size_t n = strlen(token);
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t len = strcspn(v, ",");
		size_t end = len;
		while (end && (v[end - 1] == ' ' || v[end - 1] == '\t'))
			end--;
		if (end == n && !strncasecmp(v, token, n))
			return true;
		v += len;
	}
	return false;
}

bool srv__ws_is_upgrade(const struct srv_req *req)
{
	return srv_ws_has_token(srv__req_header(req, "Upgrade"), "websocket");
}

/* A Sec-WebSocket-Key must decode to 16 bytes (RFC 6455 4.2.1 item 5). */
static bool srv_ws_key_is_valid(const char *key)
{
	if (!key || strlen(key) != 24)
		return false;
	struct base64_decode_ctx c;
	uint8_t raw[BASE64_DECODE_LENGTH(24)];
	size_t n = sizeof(raw);
	base64_decode_init(&c);
	if (!base64_decode_update(&c, &n, raw, 24, key) || !base64_decode_final(&c))
		return false;
	return n == 16;
}

int srv__ws_check_request(const struct srv_req *req, char *err, size_t errlen)
{
	const char *version = srv__req_header(req, "Sec-WebSocket-Version");
	if (req->method != HTTP_GET)
		return snprintf(err, errlen, "a WebSocket opens with GET"), 400;
	if (!srv__ws_is_upgrade(req) ||
	    !srv_ws_has_token(srv__req_header(req, "Connection"), "upgrade"))
		return snprintf(err, errlen, "this route is a WebSocket: send Upgrade: websocket "
				"and Connection: Upgrade"), 426;
	if (!version || strcmp(version, "13"))
		return snprintf(err, errlen, "unsupported Sec-WebSocket-Version (13 only)"), 426;
	if (!srv_ws_key_is_valid(srv__req_header(req, "Sec-WebSocket-Key")))
		return snprintf(err, errlen, "missing or malformed Sec-WebSocket-Key"), 400;
	return 0;
}

int srv__ws_handshake(struct srv_req *req, const char *protocol, const char *extra_headers,
		      const struct srv_conn_upgrade *up, void *ud)
{
	char accept[SRV_WS_ACCEPT_LEN + 1];
	struct srv_buf h;
	srv_buf_init(&h, 4096);
	srv__ws_accept_key(srv__req_header(req, "Sec-WebSocket-Key"), accept);
	int rc = srv_buf_printf(&h, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
				"Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n", accept);
	if (!rc && protocol)
		rc = srv_buf_printf(&h, "Sec-WebSocket-Protocol: %s\r\n", protocol);
	if (!rc)
		rc = srv_buf_printf(&h, "%s\r\n", extra_headers);
	if (rc) {
		srv_buf_fini(&h);
		srv__conn_close(req->conn);
		return -ST_NOMEM;
	}
	size_t len = h.len;
	double secs = (double)(uv_hrtime() - req->start_ns) / 1e9;
	srv__req_log(req, 101, 0, secs);
	rc = srv__conn_write(req->conn, srv_buf_steal(&h), len, NULL, 0);
	if (!rc)
		srv__conn_upgrade(req->conn, up, ud);
	return rc;
}

/* --- wslay callbacks ----------------------------------------------------- */

static ssize_t srv_ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
			      void *user)
{
	struct srv_ws *ws = user;
	(void)flags;
	size_t n = ws->in_len - ws->in_pos;
	if (n == 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	n = n < len ? n : len;
	memcpy(buf, ws->in + ws->in_pos, n);
	ws->in_pos += n;
	return (ssize_t)n;
}

static ssize_t srv_ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
			      int flags, void *user)
{
	struct srv_ws *ws = user;
	(void)flags;
	if (srv_buf_append(&ws->out, data, len)) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return (ssize_t)len;
}

static void srv_ws_end(struct srv_ws *ws, uint16_t code)
{
	if (ws->ended || ws->dead)
		return;
	ws->ended = true;
	ws->cbs->on_end(ws->ud, code);
}

static void srv_ws_msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
			  void *user)
{
	struct srv_ws *ws = user;
	(void)ctx;
	if (ws->dead || ws->ended)
		return;
	if (arg->opcode == WSLAY_TEXT_FRAME)
		ws->cbs->on_text(ws->ud, arg->msg, arg->msg_length);
	else if (arg->opcode == WSLAY_BINARY_FRAME)
		ws->cbs->on_binary(ws->ud, arg->msg, arg->msg_length);
	else if (arg->opcode == WSLAY_CONNECTION_CLOSE)
		srv_ws_end(ws, arg->status_code);
}

/* --- output ---------------------------------------------------------------- */

/* Let wslay write what it has queued, send it in one write, and end the
 * connection once nothing more can be read or written. */
static void srv_ws_flush(struct srv_ws *ws)
{
	if (ws->dead || ws->conn->state == SRV_CONN_STATE_CLOSING)
		return;
	int rc = wslay_event_send(ws->ctx);
	if (!rc && ws->close_pending) {
		/* wslay sends control frames before queued messages: the close
		 * goes in only once the messages before it are out */
		ws->close_pending = false;
		wslay_event_queue_close(ws->ctx, ws->close_code, (const uint8_t *)ws->close_reason,
					strlen(ws->close_reason));
		rc = wslay_event_send(ws->ctx);
	}
	if (ws->out.len) {
		size_t len = ws->out.len;
		if (srv__conn_write(ws->conn, srv_buf_steal(&ws->out), len, NULL, 0))
			return; /* the connection closed */
	}
	if (rc) {
		srv__conn_close(ws->conn);
		return;
	}
	bool done = ws->close_queued || wslay_event_get_close_sent(ws->ctx);
	if (done && !wslay_event_want_write(ws->ctx))
		srv__conn_end(ws->conn);
}

int srv__ws_send_text(struct srv_ws *ws, const char *msg, size_t n)
{
	if (ws->close_queued || wslay_event_get_close_sent(ws->ctx))
		return -ST_CLOSED;
	struct wslay_event_msg m = { .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *)msg,
				     .msg_length = n };
	int rc = wslay_event_queue_msg(ws->ctx, &m);
	if (rc)
		return rc == WSLAY_ERR_NOMEM ? -ST_NOMEM : -ST_CLOSED;
	if (!ws->in_feed)
		srv_ws_flush(ws);
	return 0;
}

void srv__ws_close(struct srv_ws *ws, uint16_t code, const char *reason)
{
	if (ws->close_queued)
		return;
	ws->close_queued = true;
	ws->close_pending = true;
	ws->close_code = code;
	snprintf(ws->close_reason, sizeof(ws->close_reason), "%s", reason ? reason : "");
	if (!ws->in_feed)
		srv_ws_flush(ws);
}

bool srv__ws_is_closing(const struct srv_ws *ws)
{
	return ws->close_queued || ws->ended || wslay_event_get_close_sent(ws->ctx) ||
	       wslay_event_get_close_received(ws->ctx);
}

uint16_t srv__ws_close_sent(const struct srv_ws *ws)
{
	return wslay_event_get_close_sent(ws->ctx) ? wslay_event_get_status_code_sent(ws->ctx) : 0;
}

/* --- life ------------------------------------------------------------------ */

int srv__ws_create(struct srv_conn *conn, size_t max_msg_bytes, const struct srv_ws_cbs *cbs,
		   void *ud, struct srv_ws **out)
{
	static const struct wslay_event_callbacks wcbs = {
		.recv_callback = srv_ws_recv_cb,
		.send_callback = srv_ws_send_cb,
		.on_msg_recv_callback = srv_ws_msg_cb,
	};
	*out = NULL;
	struct srv_ws *ws = mem_calloc(1, sizeof(*ws));
	if (!ws)
		return -ST_NOMEM;
	*ws = (struct srv_ws){ .conn = conn, .cbs = cbs, .ud = ud };
	srv_buf_init(&ws->out, max_msg_bytes + (64u << 10));
	if (wslay_event_context_server_init(&ws->ctx, &wcbs, ws)) {
		mem_free(ws);
		return -ST_NOMEM;
	}
	wslay_event_config_set_max_recv_msg_length(ws->ctx, max_msg_bytes);
	*out = ws;
	return 0;
}

static void srv_ws_free(struct srv_ws *ws)
{
	wslay_event_context_free(ws->ctx);
	srv_buf_fini(&ws->out);
	mem_free(ws);
}

void srv__ws_feed(struct srv_ws *ws, const char *data, size_t n)
{
	ws->in = (const uint8_t *)data;
	ws->in_len = n;
	ws->in_pos = 0;
	ws->in_feed = true;
	int rc = wslay_event_recv(ws->ctx);
	ws->in = NULL;
	if (rc || !wslay_event_get_read_enabled(ws->ctx))
		srv_ws_end(ws, 0); /* a protocol error or a close: wslay queued its close */
	srv_ws_flush(ws);
	ws->in_feed = false;
	if (ws->dead)
		srv_ws_free(ws);
}

void srv__ws_destroy(struct srv_ws *ws)
{
	if (!ws)
		return;
	if (ws->in_feed) {
		ws->dead = true;
		return;
	}
	srv_ws_free(ws);
}
