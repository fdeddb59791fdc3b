/* srv_int.h - the server module's internal structs and the functions its
 * files share (double-underscore names). Not included outside server/
 * except by the server's own tests and fuzz target.
 *
 * Threading: everything here belongs to the loop thread.
 * Lifetimes: struct srv lives for the process; a struct srv_conn from
 * accept to its close callbacks; a struct srv_req is embedded in its
 * connection and reset between requests (one request in flight per
 * connection; pipelined requests wait, unparsed, until the response to the
 * one before them is written).
 */
#ifndef SRV_INT_H
#define SRV_INT_H

#include <jansson.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <uv.h>

#include "config/cfg.h"
#include "engine/eng.h"
#include "server/srv.h"
#include "server/srv_buf.h"
#include "server/srv_metrics.h"

#define SRV_MAX_HEADERS 100      /* header fields kept; one more -> 431 (config/README.md) */
#define SRV_REQUEST_ID_MAX 128   /* longest X-Request-Id echoed */
#define SRV_READ_BUF_BYTES 65536 /* one read at most */
#define SRV_LINGER_MS 2000       /* how long LINGER drops input */
#define SRV_SEND_SWEEP_MS 1000   /* how often limits.send_timeout_ms is checked */
#define SRV_MAX_QUEUED_BYTES (1u << 20) /* unread responses before parsing pauses */

/* Which protocol's error shape and auth scheme a route speaks. */
enum srv_proto {
	SRV_PROTO_OPENAI = 0, /* {"error":{"message","type","param","code"}} */
	SRV_PROTO_KSERVE,     /* {"error":"message"} */
	SRV_PROTO_DEEPGRAM,   /* {"err_code","err_msg","request_id"} */
	SRV_PROTO_PLAIN,      /* metrics and health: OpenAI shape, no auth */
	SRV_PROTO_COUNT
};

/* Request body encodings we accept. */
enum srv_coding {
	SRV_CODING_IDENTITY = 0,
	SRV_CODING_ZSTD,
	SRV_CODING_UNSUPPORTED,
};

/* The lifecycle of a connection; transitions:
 * WAIT (no byte of the next request yet) -> HEAD on the first byte ->
 * BODY after the headers -> HANDLING once the message is complete ->
 * WAIT after the response is queued (keep-alive), or LINGER when the
 * response closes the connection: its write side is shut and input is read
 * and dropped for a moment, so the client sees the response rather than a
 * reset (nginx's lingering close). Any state -> CLOSING on error, timeout
 * or drain. */
enum srv_conn_state {
	SRV_CONN_STATE_WAIT = 0,
	SRV_CONN_STATE_HEAD,
	SRV_CONN_STATE_BODY,
	SRV_CONN_STATE_HANDLING,
	SRV_CONN_STATE_LINGER, /* last response sent, write side shut: drain input, then close */
	SRV_CONN_STATE_UPGRADED, /* a WebSocket (101 sent): bytes go to conn->up, not llhttp;
				  * leaves for LINGER (srv__conn_end) or CLOSING */
	SRV_CONN_STATE_CLOSING,
};

/* The owner of an upgraded connection (a WebSocket, srv__conn_upgrade):
 * the bytes read go to it instead of llhttp. Each gets the owner's ud.
 * Loop thread. */
struct srv_conn_upgrade {
	void (*on_data)(void *ud, const char *data, size_t n); /* bytes from the client */
	void (*on_eof)(void *ud);     /* the client closed its side or reset: the owner ends */
	void (*on_timeout)(void *ud); /* the timer of srv__conn_timer_start fired */
	void (*on_drain)(void *ud);   /* the server is stopping: finish and close soon */
	void (*on_deadline)(void *ud); /* limits.drain_timeout_ms passed: a last word (a
					* close frame) and end now; NULL: closed at once */
	/* on_close - the connection is closing or lingering: forget it, no
	 * more writes (its memory stays while the owner holds conn->n_work) */
	void (*on_close)(void *ud);
};

struct srv_route;
struct srv_req;

/* One parsed request. Strings point into head (valid until the reset). */
struct srv_req {
	struct srv_conn *conn;        /* owner */
	struct srv_buf head;          /* "url\0name\0value\0...", max_header_bytes */
	size_t n_headers;             /* header fields seen whole so far, <= SRV_MAX_HEADERS */
	size_t hdr_off[SRV_MAX_HEADERS][2]; /* name/value offsets into head */
	struct srv_buf body;          /* decoded request body, max_body_bytes */
	int method;                   /* llhttp_method_t, -1 until the request line parsed */
	bool in_trailers;             /* headers done: field callbacks now see trailers */
	bool url_done;                /* the URL is whole (NUL-ended) at head.data */
	size_t trailer_bytes;         /* counted against max_header_bytes, not stored */
	const char *path;             /* decoded-as-is path, NUL-terminated */
	const char *query;            /* after '?', or "" */
	char path_param[128];         /* the {name} segment of the route, if any */
	const struct srv_route *route; /* matched route, or NULL */
	int route_index;              /* its row of the route table, or srv->n_routes
				       * (the metrics' "unmatched" row) */
	enum srv_proto proto;         /* error shape for this request */
	enum srv_coding coding;       /* Content-Encoding of the body */
	bool accept_zstd;             /* client takes zstd responses */
	bool responded;               /* a final response has been queued */
	bool keep_alive;              /* llhttp says the connection may stay open */
	int err_status;               /* HTTP status chosen by a parser callback */
	int early_status;             /* srv__req_route's answer (404/405/401), or a
				       * parser callback's 431 for too many fields, or 0 */
	const char *early_code;       /* its error code string */
	char early_msg[256];          /* its message */
	char request_id[SRV_REQUEST_ID_MAX + 1];
	uint64_t start_ns;            /* uv_hrtime at the first byte */
	uint64_t bytes_in;            /* raw bytes of this request */
	struct srv_buf resp_headers;  /* extra response header lines */
};

/* The send timeout's record of one connection's output (nginx's
 * send_timeout: the time between two moves of the queued bytes, not the
 * whole response). handed counts every byte given to uv_write; the bytes
 * written so far are handed less libuv's write queue. */
struct srv_send_watch {
	uint64_t handed;              /* bytes given to uv_write, ever */
	uint64_t moved;               /* bytes written when they last moved */
	uint64_t moved_ms;            /* uv_now then */
};

/* srv__send_stalled - at a sweep: true when s holds queued bytes that have
 * not moved for timeout_ms (the client stopped reading); otherwise w
 * records where the output stands. Loop thread. */
static inline bool srv__send_stalled(struct srv_send_watch *w, const uv_stream_t *s,
				     uint64_t now_ms, int timeout_ms)
{
	size_t queued = uv_stream_get_write_queue_size(s);
	uint64_t written = w->handed - queued;
	if (queued == 0 || written != w->moved || w->moved_ms == 0) {
		w->moved = written;
		w->moved_ms = now_ms;
		return false;
	}
	return now_ms - w->moved_ms >= (uint64_t)timeout_ms;
}

struct srv_conn {
	union {
		uv_tcp_t tcp;
		uv_pipe_t pipe;
		uv_stream_t stream;
		uv_handle_t handle;
	} h;                          /* the client stream (TCP, or a pipe in tests) */
	uv_timer_t timer;             /* header, body, idle or linger timeout */
	uv_shutdown_t shutdown;       /* for LINGER */
	struct srv *srv;
	llhttp_t parser;
	enum srv_conn_state state;
	struct srv_req req;
	char *pending;                /* unparsed bytes after a paused message */
	size_t pending_len;
	int n_writes;                 /* uv_write requests in flight */
	size_t write_bytes;           /* bytes those writes still hold */
	bool write_blocked;           /* parsing paused until the client reads (backpressure) */
	int n_open_handles;           /* stream + timer; freed at zero */
	int n_work;                   /* thread-pool jobs holding the connection */
	_Atomic int *cancel;         /* a running job's stop flag (srv__conn_watch), or NULL:
				       * set to 1 when the client hangs up or the connection closes */
	uint64_t n_served;            /* responses completed on this connection */
	bool in_feed;                 /* inside srv_conn_feed (no re-entry) */
	bool close_after_write;       /* close once n_writes reaches 0 */
	bool reading;                 /* uv_read_start is active */
	bool refused;                 /* answered at the drain deadline (503 while its job
				       * ran, or an upgraded one's last word): it closes once
				       * that is written; a job's late answer is dropped */
	bool cut;                     /* closed by the drain deadline mid-response (a
				       * stream): logged 503, not the client's 499 */
	bool internal;                /* the Batch API's own client (srv__conn_open_internal):
				       * no API key asked, no idle timeout */
	struct srv_send_watch send;   /* limits.send_timeout_ms */
	char remote[64];              /* peer address, for the access log */
	const struct srv_conn_upgrade *up; /* UPGRADED: the owner's callbacks, else NULL */
	void *up_ud;                  /* their argument */
	struct srv_conn *prev, *next; /* srv->conns list */
};

struct srv_grpc_stream;

/* The calls the HTTP connection layer (srv_conn.c) makes into the layers
 * above it - the route table and the responses - held as callbacks that
 * srv.c sets when it creates the server (as libuv's and h2o's lower
 * layers do), so that srv_conn.c names no route or response function.
 * Loop thread. */
struct srv_conn_cbs {
	/* proto_for_path - the error shape and auth scheme of path. */
	enum srv_proto (*proto_for_path)(const char *path);
	/* route - srv__req_route: 0 with req->route set, or the early status. */
	int (*route)(struct srv_req *req);
	/* handle - the message is complete: run (or refuse) its handler. */
	void (*handle)(struct srv_req *req);
	/* respond_error - srv__req_respond_error: an error in req's shape. */
	int (*respond_error)(struct srv_req *req, int status, const char *code, const char *fmt,
			     ...) __attribute__((format(printf, 4, 5)));
	/* conn_closed - an HTTP or gRPC connection has gone (draining may end). */
	void (*conn_closed)(struct srv *srv);
};

/* The methods behind the gRPC transport (grpc/srv_grpc.c), set by srv.c so
 * that the transport names none of them (they are KServe's). Loop thread;
 * msg [n] is one unframed, decompressed request message. */
struct srv_grpc_cbs {
	/* dispatch - run the unary method of s (s->path); answers now or later. */
	void (*dispatch)(struct srv_grpc_stream *s, const uint8_t *msg, size_t n);
	/* stream_message - one request message of a streaming call. */
	void (*stream_message)(struct srv_grpc_stream *s, const uint8_t *msg, size_t n);
	/* stream_gone - s is closing or failed: cancel its work in flight. */
	void (*stream_gone)(struct srv_grpc_stream *s);
};

/* A job handed from an engine thread to the loop thread (srv_post.c). */
struct srv_post {
	struct srv_post *next;
	void (*fn)(struct srv_post *p);
};

struct srv {
	uv_loop_t loop;
	uv_async_t post_async;        /* srv__post wakes the loop */
	pthread_mutex_t post_mu;      /* guards post_head/tail */
	struct srv_post *post_head, *post_tail;
	int n_jobs;                   /* engine requests in flight (loop thread) */
	bool post_stopping;           /* close post_async once n_jobs is 0 */
	uv_tcp_t listener;
	uv_signal_t sigterm, sigint;
	uv_timer_t drain_timer;
	uv_timer_t send_timer;        /* the send-timeout sweep, every SRV_SEND_SWEEP_MS */
	const struct cfg *cfg;        /* borrowed, read-only */
	struct srv_conn_cbs cbs;      /* set by srv.c at creation */
	struct srv_grpc_cbs grpc_cbs; /* set by srv.c at creation */
	int n_routes;                 /* rows of the route table (srv_routes.c) */
	struct eng *eng;              /* borrowed */
	llhttp_settings_t parser_settings;
	char **api_keys;              /* cfg keys plus INFERD_API_KEY; borrowed strings */
	size_t n_api_keys;
	struct srv_conn *conns;       /* every open connection */
	int n_conns;
	uv_tcp_t grpc_listener;       /* cfg grpc_listen (srv_grpc.c), when grpc_on */
	bool grpc_on;
	struct srv_grpc_conn *grpc_conns; /* every open gRPC connection */
	int n_grpc_conns;
	bool draining;                /* a stop signal arrived */
	uint64_t next_request_id;     /* counter part of generated ids */
	uint32_t request_id_salt;     /* random part, chosen at start */
	struct srv_batchd *batch;     /* the Batch API's service (server/batch/), or NULL */
	char listen_addr[80];         /* "127.0.0.1:8080" as bound */
	char date[40];                /* cached HTTP Date header value */
	time_t date_sec;
	struct srv_metrics metrics;
	char rbuf[SRV_READ_BUF_BYTES]; /* shared read buffer (one loop thread) */
};

/* srv_conn.c */
const char *srv__req_header(const struct srv_req *req, const char *name);
int srv__req_add_header(struct srv_req *req, const char *name, const char *value);
int srv__conn_accept(struct srv *srv, uv_stream_t *listener);
int srv__conn_open_fd(struct srv *srv, int fd); /* tests/fuzz: a socketpair end */
/* srv__conn_open_internal - serve the socketpair end fd as the server's
 * own client's connection (the Batch API's runners): no API key is asked
 * of it and it has no header or idle timeout; otherwise a connection like
 * any other (limits, metrics, access log as remote "batch"). Closes fd on
 * failure. Loop thread. */
int srv__conn_open_internal(struct srv *srv, int fd);
void srv__conn_close(struct srv_conn *conn);
void srv__conn_request_done(struct srv_conn *conn);
void srv__conn_work_done(struct srv_conn *conn);
/* srv__conn_watch - while a job handles the request, keep reading the
 * socket so that a client that hangs up (EOF, reset) is noticed at once:
 * then *cancel becomes 1 and the connection closes. *cancel is also set
 * when the connection closes for any other reason (write error, drain).
 * Bytes that arrive meanwhile (a pipelined request) are kept, up to
 * SRV_MAX_QUEUED_BYTES, for after the response. cancel NULL stops
 * watching: call it before the flag's memory goes. Loop thread. */
void srv__conn_watch(struct srv_conn *conn, _Atomic int *cancel);
int srv__conn_write(struct srv_conn *conn, char *head, size_t head_len,
		    char *body, size_t body_len); /* steals head and body */
/* srv__conn_upgrade - conn now carries another protocol (its 101 answer
 * queued): the bytes that follow the request and all later reads go to
 * up->on_data(ud) (see struct srv_conn_upgrade). Loop thread. */
void srv__conn_upgrade(struct srv_conn *conn, const struct srv_conn_upgrade *up, void *ud);
/* srv__conn_timer_start - an upgraded connection's one timer: ms from now
 * up->on_timeout runs (0 stops it). */
void srv__conn_timer_start(struct srv_conn *conn, uint64_t ms);
/* srv__conn_end - close gracefully once every queued write is done (the
 * write side shut, then input dropped for SRV_LINGER_MS). */
void srv__conn_end(struct srv_conn *conn);
/* srv__conns_close_idle - drain: close connections with no request in
 * progress, and tell upgraded ones (up->on_drain). */
void srv__conns_close_idle(struct srv *srv);
void srv__conns_close_all(struct srv *srv);

/* srv__conns_deadline - the drain deadline (limits.drain_timeout_ms): a
 * request whose handler has not answered yet gets 503 "shutting_down" in
 * its protocol's error shape, its job is told to stop (the cancel flag),
 * and its connection closes once that answer is written; an upgraded one
 * says its last word (up->on_deadline: a live stream's close frame 1001)
 * and closes once that is written; every other connection (a response
 * streaming) closes now. Loop thread. */
void srv__conns_deadline(struct srv *srv);
/* srv__conns_send_sweep - close every connection whose queued response
 * bytes have not moved for limits.send_timeout_ms (srv_send_watch); the
 * request it carried is cancelled. Loop thread, every SRV_SEND_SWEEP_MS. */
void srv__conns_send_sweep(struct srv *srv, uint64_t now_ms);
void srv__parser_settings_init(llhttp_settings_t *s);

/* srv_post.c */
int srv__post_init(struct srv *srv);
/* srv__post - run fn(p) on the loop thread soon; p is the caller's node,
 * untouched until fn runs. Any thread. */
void srv__post(struct srv *srv, struct srv_post *p, void (*fn)(struct srv_post *p));
/* srv__jobs_begin / _end - count an engine request in flight (submitted,
 * done not yet run on the loop). Loop thread. */
void srv__jobs_begin(struct srv *srv);
void srv__jobs_end(struct srv *srv);
/* srv__post_stop - let the loop end once no engine request is in flight. */
void srv__post_stop(struct srv *srv);

/* srv.c */
/* srv__create_unbound - srv_create without a listening socket or signal
 * handlers, for tests and the fuzz target (connections via
 * srv__conn_open_fd). */
int srv__create_unbound(const struct cfg *cfg, struct eng *eng, const char *extra_api_key,
			struct srv **out);

/* srv__drain - begin the graceful stop a first SIGTERM begins: stop
 * accepting, close idle connections, let requests in progress finish
 * within limits.drain_timeout_ms; the loop ends when the last connection
 * has gone. Loop thread; a second call does nothing. */
void srv__drain(struct srv *srv);

/* srv_resp.c */
/* srv__date - the Date header value (cached for a second). */
const char *srv__date(struct srv *srv);
/* srv__req_sched_opts - the scheduling options a request asks for in its
 * headers: "Inferd-Priority: high|normal" and "Inferd-Timeout-Ms: N" (a
 * deadline from arrival, 1..86400000; absent: the model's). 0, or
 * -ST_INVAL with err naming the header. */
int srv__req_sched_opts(const struct srv_req *req, struct eng_req_opts *o, char *err,
			size_t errlen);
int srv__req_respond(struct srv_req *req, int status, const char *content_type,
		     const char *body, size_t len);
int srv__req_respond_json(struct srv_req *req, int status, json_t *obj);
int srv__req_respond_error(struct srv_req *req, int status, const char *code,
			   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* srv__req_respond_error_param - srv__req_respond_error naming the request
 * field at fault (borrowed; NULL: none) in the OpenAI shape's "param";
 * the KServe and Deepgram shapes have no such member and ignore it. */
int srv__req_respond_error_param(struct srv_req *req, int status, const char *code,
				 const char *param, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* srv__req_log - the access-log line of a response of bytes body bytes
 * that took secs (srv__req_respond and streamed responses call it). */
void srv__req_log(const struct srv_req *req, int status, size_t bytes, double secs);
/* srv__req_log_gone - count and log a request whose client left before
 * any answer (status 499, as nginx logs it), or whose stream the drain
 * deadline cut (503). */
void srv__req_log_gone(const struct srv_req *req);

/* srv_routes.c */
/* srv__req_route - match the route and check the API key from the
 * request line and headers alone (before any body byte is read): returns
 * 0 with req->route set, or the HTTP status the request will get (404,
 * 405, 401) with the answer recorded in req->early_*. */
int srv__req_route(struct srv_req *req);
void srv__req_begin_handling(struct srv_req *req);
void srv__req_dispatch(struct srv_req *req);
enum srv_proto srv__proto_for_path(const char *path);
/* srv__route_count - the rows of the route table. */
int srv__route_count(void);

#endif /* SRV_INT_H */
