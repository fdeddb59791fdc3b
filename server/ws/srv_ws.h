/* srv_ws.h - RFC 6455 WebSocket on an upgraded HTTP/1.1 connection
 * (server/ internal): the opening handshake's checks and its
 * Sec-WebSocket-Accept (nettle's SHA-1 and base64), and the framing of
 * libwslay's event API (masking, fragmented messages reassembled, pings
 * answered with pongs, close handshake, a ceiling on message size).
 *
 * Threading: loop thread only. A struct srv_ws belongs to its protocol
 * (deepgram/srv_dg_live.c), which creates it once it has answered 101 and
 * handed the connection over (srv__conn_upgrade), feeds it the bytes the
 * connection reads, and destroys it when the connection goes.
 */
#ifndef SRV_WS_H
#define SRV_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/srv_int.h"

#define SRV_WS_ACCEPT_LEN 28 /* base64 of a 20-byte SHA-1 */

/* Close codes (RFC 6455 7.4.1). */
#define SRV_WS_CLOSE_NORMAL   1000
#define SRV_WS_CLOSE_AWAY     1001 /* server shutting down */
#define SRV_WS_CLOSE_PROTOCOL 1002
#define SRV_WS_CLOSE_DATA     1003 /* a message type we do not take */
#define SRV_WS_CLOSE_TOO_BIG  1009
#define SRV_WS_CLOSE_ERROR    1011

struct srv_ws;

/* What a protocol hears from its socket; ud is srv__ws_create's. Each
 * runs inside srv__ws_feed; it may queue messages or srv__ws_close, and
 * may close the connection (the srv_ws is then destroyed only once
 * srv__ws_feed returns). */
struct srv_ws_cbs {
	void (*on_text)(void *ud, const uint8_t *msg, size_t n);   /* a whole text message */
	void (*on_binary)(void *ud, const uint8_t *msg, size_t n); /* a whole binary message */
	/* on_end - the peer sent a close frame (code, 0 when none) or broke
	 * the protocol: no more messages come; our close frame is queued. */
	void (*on_end)(void *ud, uint16_t code);
};

/* srv__ws_accept_key - Sec-WebSocket-Accept for the client's key (RFC 6455
 * 4.2.2): base64(SHA-1(key "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), into
 * out (SRV_WS_ACCEPT_LEN + 1 bytes, NUL-terminated). */
void srv__ws_accept_key(const char *key, char out[SRV_WS_ACCEPT_LEN + 1]);

/* srv__ws_is_upgrade - does req ask for a WebSocket (an Upgrade header
 * naming "websocket")? */
bool srv__ws_is_upgrade(const struct srv_req *req);

/* srv__ws_check_request - is req a valid opening handshake (RFC 6455
 * 4.2.1): GET, Upgrade: websocket, Connection listing Upgrade,
 * Sec-WebSocket-Version 13 and a Sec-WebSocket-Key that is 16 bytes in
 * base64? 0, or the HTTP status to refuse with (400; 426 for another
 * version, whose answer must carry Sec-WebSocket-Version: 13) with err
 * set. */
int srv__ws_check_request(const struct srv_req *req, char *err, size_t errlen);

/* srv__ws_handshake - queue the 101 answer to req (its key already
 * checked), with "Sec-WebSocket-Protocol: protocol" when protocol is not
 * NULL and extra_headers (CRLF-ended lines, or "") after, then hand the
 * connection to up/ud (srv__conn_upgrade). Returns 0 or -ST_NOMEM/-ST_IO
 * (the connection is then closed). */
int srv__ws_handshake(struct srv_req *req, const char *protocol, const char *extra_headers,
		      const struct srv_conn_upgrade *up, void *ud);

/* srv__ws_create - framing state for conn (borrowed, upgraded), calling
 * cbs with ud; messages over max_msg_bytes close the socket with 1009.
 * *out is new (srv__ws_destroy). -ST_NOMEM. */
int srv__ws_create(struct srv_conn *conn, size_t max_msg_bytes, const struct srv_ws_cbs *cbs,
		   void *ud, struct srv_ws **out);

/* srv__ws_feed - bytes read from the connection: frames are parsed and
 * the callbacks run; answers (pongs, close) are written. */
void srv__ws_feed(struct srv_ws *ws, const char *data, size_t n);

/* srv__ws_send_text - queue and write one text message (copied). 0, or
 * -ST_CLOSED once a close frame was queued, -ST_NOMEM. */
int srv__ws_send_text(struct srv_ws *ws, const char *msg, size_t n);

/* srv__ws_close - queue a close frame with code and reason (<= 123
 * bytes), write it, and end the connection once it is written (the
 * socket's write side is shut, input dropped). Later calls do nothing. */
void srv__ws_close(struct srv_ws *ws, uint16_t code, const char *reason);

/* srv__ws_is_closing - a close frame was queued or received. */
bool srv__ws_is_closing(const struct srv_ws *ws);

/* srv__ws_close_sent - the status code of the close frame sent, ours or the
 * one wslay sent for a protocol error (1002, 1007, 1009, ...); 1005 when it
 * had none, 0 when no close frame went out. */
uint16_t srv__ws_close_sent(const struct srv_ws *ws);

/* srv__ws_destroy - free; NULL is a no-op. Inside one of its own
 * callbacks the memory goes once srv__ws_feed returns. */
void srv__ws_destroy(struct srv_ws *ws);

#endif /* SRV_WS_H */
