/* srv_grpc.h - "gRPC-lite": KServe v2's GRPCInferenceService over HTTP/2
 * cleartext (h2c, prior knowledge) on its own port (cfg grpc_listen), on
 * the same libuv loop as the HTTP/1.1 front end. Internal to server/.
 *
 * Transport (srv_grpc.c): one nghttp2 server session per connection; bytes
 * read go to nghttp2_session_mem_recv, what it has to send is written with
 * uv_write after every event. A stream collects its request message (gRPC
 * framing: 1-byte compressed flag, 4-byte big-endian length, the protobuf
 * bytes; gzip or identity) up to limits.max_body_bytes, then its method
 * runs through srv->grpc_cbs (the methods, which srv.c sets: KServe's;
 * the transport names none of them). An answer is HEADERS (:status 200,
 * content-type application/grpc), DATA (one framed message) and trailers
 * (grpc-status, grpc-message); an error is a trailers-only response.
 * Limits: SETTINGS_MAX_CONCURRENT_STREAMS, the message size above, and
 * reading stops while more than SRV_GRPC_MAX_QUEUED bytes wait to be
 * written. A stream reset by the client (RST_STREAM) cancels its work;
 * grpc-timeout becomes the request's deadline (DEADLINE_EXCEEDED).
 * gRPC status codes and framing: grpc/grpc doc/PROTOCOL-HTTP2.md.
 */
#ifndef SRV_GRPC_H
#define SRV_GRPC_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server/srv_buf.h"
#include "server/srv_int.h"
#include "server/srv_status.h"

#define SRV_GRPC_MAX_STREAMS 128       /* concurrent streams per connection */
#define SRV_GRPC_MAX_QUEUED (4u << 20) /* written-but-unsent bytes before reading pauses */
#define SRV_GRPC_STREAM_MAX_RUNNING 16 /* ModelStreamInfer requests in flight per stream */
/* Request bytes all the streams of one connection may hold at once: two of
 * the largest messages (so one big upload does not block the others). */
#define SRV_GRPC_CONN_IN_MAX(max_body) (2 * (size_t)(max_body) + 10)

struct srv_grpc_conn;

/* The lifecycle of a stream. A unary call:
 *   RECEIVING (collecting its one message) -> DISPATCHED at END_STREAM,
 *   when the method runs (it answers now or when its job ends), or early
 *   when the request is refused (too big): later DATA is dropped.
 * ModelStreamInfer (STREAM_* states: each message runs as it completes,
 * answers go out as they come):
 *   STREAM_OPEN (:path named it) -> STREAM_HALF_CLOSED at the client's
 *   END_STREAM (its running requests finish) -> STREAM_ENDING once none
 *   runs (the trailers are on their way; nothing more is added).
 *   STREAM_OPEN or STREAM_HALF_CLOSED -> STREAM_FAILED on an error (a
 *   message too big, compressed or cut short): status and message are
 *   kept, running requests are cancelled, later messages dropped ->
 *   STREAM_ENDING once none runs.
 * The stream is freed in any state when nghttp2 closes it. */
enum srv_grpc_stream_state {
	SRV_GRPC_STREAM_STATE_RECEIVING = 0,
	SRV_GRPC_STREAM_STATE_DISPATCHED,
	SRV_GRPC_STREAM_STATE_STREAM_OPEN,
	SRV_GRPC_STREAM_STATE_STREAM_HALF_CLOSED,
	SRV_GRPC_STREAM_STATE_STREAM_FAILED,
	SRV_GRPC_STREAM_STATE_STREAM_ENDING,
};

/* One stream: its request, then its answer. Loop thread only. */
struct srv_grpc_stream {
	struct srv_grpc_conn *conn;
	int32_t id;
	enum srv_grpc_stream_state state;
	/* what the request headers said */
	char path[128];		/* :path, "/inference.GRPCInferenceService/ModelInfer" */
	bool grpc_type;		/* content-type application/grpc[+proto] */
	bool gzip;		/* grpc-encoding gzip */
	int timeout_ms;		/* grpc-timeout, 0 none */
	struct srv_buf in;	/* the framed request bytes */
	struct srv_buf out;	/* the framed response message(s); a stream's grows
				 * and is reused once sent */
	size_t out_off;
	int status;		/* grpc-status for the trailers */
	char message[256];	/* grpc-message */
	void *job;		/* the method's work in flight, or NULL */
	_Atomic int *cancel;	/* the job's cancel flag while it runs */
	/* ModelStreamInfer: response flags, independent of the state */
	bool headers_sent;	/* the response HEADERS went out */
	bool deferred;		/* the data provider is waiting for out to grow */
	int n_running;		/* its requests in flight */
	_Atomic int *cancels[SRV_GRPC_STREAM_MAX_RUNNING];
};

/* One connection. */
struct srv_grpc_conn {
	union {			/* a TCP connection, or a pipe (tests, fuzzing) */
		uv_handle_t handle;
		uv_stream_t stream;
		uv_tcp_t tcp;
		uv_pipe_t pipe;
	} h;
	struct srv *srv;
	nghttp2_session *h2;
	struct srv_grpc_conn *next;
	size_t queued;		/* bytes handed to uv_write, not yet written */
	struct srv_send_watch send; /* limits.send_timeout_ms */
	uint64_t active_ms;	/* uv_now at accept and at each read */
	bool read_any;		/* a byte arrived (else header_timeout_ms applies) */
	bool idle_goaway;	/* idle: GOAWAY sent, closing once written */
	size_t in_bytes;	/* request bytes its streams hold, at most
				 * SRV_GRPC_CONN_IN_MAX(limits.max_body_bytes) */
	bool reading, closing;
	bool in_recv;		/* inside nghttp2_session_mem_recv: its callbacks may
				 * not send (flush) or free the session */
	bool close_after;	/* a close asked for during in_recv */
	int n_work;		/* jobs that still point here */
};

/* srv__grpc_listen - bind the gRPC port of srv->cfg (no-op when none).
 * Returns 0 or -ST_IO with err. Loop thread, before srv_run. */
int srv__grpc_listen(struct srv *srv, char *err, size_t errlen);
/* srv__grpc_conn_open_fd - serve gRPC on the connected stream socket fd
 * (a socketpair end: the fuzz target). 0 or -ST_*. */
int srv__grpc_conn_open_fd(struct srv *srv, int fd);
/* srv__grpc_drain - on shutdown: stop accepting, GOAWAY to every
 * connection, close those with no stream in flight. */
void srv__grpc_drain(struct srv *srv);
/* srv__grpc_close_all - close every gRPC connection and the listener. */
void srv__grpc_close_all(struct srv *srv);
/* srv__grpc_sweep - every SRV_SEND_SWEEP_MS: close the gRPC connections
 * whose output has not moved for limits.send_timeout_ms
 * (srv__conns_send_sweep), and those idle - no call in progress - for
 * limits.header_timeout_ms before their first byte or limits.idle_timeout_ms
 * after it (a GOAWAY first when a session exists). */
void srv__grpc_sweep(struct srv *srv, uint64_t now_ms);

/* srv__grpc_respond - answer stream s with the framed message of packed
 * bytes [n] (status OK), or with status and message (n ignored) when
 * status != OK. Loop thread. */
void srv__grpc_respond(struct srv_grpc_stream *s, int status, const void *msg, size_t n,
		       const char *message);
/* srv__grpc_stream_send - ModelStreamInfer: queue one framed message of
 * packed bytes [n] on s (the response HEADERS first if not sent yet), and
 * wake the data provider. */
int srv__grpc_stream_send(struct srv_grpc_stream *s, const void *msg, size_t n);
/* srv__grpc_stream_maybe_end - ModelStreamInfer: send the trailers (grpc-
 * status 0) once the client is done and nothing runs. */
void srv__grpc_stream_maybe_end(struct srv_grpc_stream *s);
/* srv__grpc_stream_fail - ModelStreamInfer: end the call with status and
 * message (in the trailers once its running requests, now cancelled,
 * have ended); its further messages are dropped. */
void srv__grpc_stream_fail(struct srv_grpc_stream *s, int status, const char *message);
/* srv__grpc_flush - write what the session has to send. */
void srv__grpc_flush(struct srv_grpc_conn *c);
/* srv__grpc_work_done - a job that held c ended (it may close now). */
void srv__grpc_work_done(struct srv_grpc_conn *c);
/* srv__grpc_stream_of - stream id of c if it is still open, or NULL. */
struct srv_grpc_stream *srv__grpc_stream_of(struct srv_grpc_conn *c, int32_t id);

#endif /* SRV_GRPC_H */
