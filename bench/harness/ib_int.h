/* ib_int.h - inferd-bench internals: the options, the workload (endpoints,
 * inputs and the prebuilt requests), one connection, one stage's load and
 * the per-request records. docs/bench.md is the user-facing contract.
 *
 * One thread: everything runs on one libuv loop (the main thread), so
 * nothing here is locked. Times are seconds (double) since the run's start
 * (uv_hrtime based) unless a name says otherwise.
 */
#ifndef IB_INT_H
#define IB_INT_H

#include <jansson.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#define IB_VERSION "0.1.0"

/* Largest response body kept for parsing (bytes); a longer 2xx body is a
 * protocol error (no server of ours answers that much). */
#define IB_MAX_BODY (64u << 20)

enum ib_endpoint {
	IB_EP_OPENAI_TRANSCRIPTIONS = 0,
	IB_EP_DEEPGRAM_LISTEN,
	IB_EP_OPENAI_COMPLETIONS,
	IB_EP_OPENAI_CHAT,
	IB_EP_KSERVE_INFER,
	IB_EP_HTTP_GET,
	IB_EP_DEEPGRAM_LIVE, /* Deepgram's live API: a WebSocket per stream (ib_live.c) */
	IB_EP_COUNT
};

/* How a request ended (docs/bench.md "What is measured"). */
enum ib_kind {
	IB_KIND_OK = 0,
	IB_KIND_HTTP,	  /* status >= 400 */
	IB_KIND_CONNECT,  /* no connection, or closed before any response byte */
	IB_KIND_TIMEOUT,  /* no complete response within --timeout */
	IB_KIND_PROTOCOL, /* malformed HTTP, event stream or 2xx body */
	IB_KIND_CLOSE,	  /* a live stream closed otherwise than with 1000 after CloseStream */
	IB_KIND_COUNT
};

/* One audio file, read whole at start. */
struct ib_audio {
	char *path;
	unsigned char *data;
	size_t len;
	double seconds; /* from libavformat */
	const char *ctype;
	int16_t *pcm;	/* deepgram-live: [n_pcm] 16 kHz mono s16 samples (ib_pcm.c), else NULL */
	size_t n_pcm;
};

/* One prebuilt request: head and body in one buffer, shared by every send
 * of it (uv_write does not modify it). */
struct ib_tmpl {
	char *bytes;
	size_t len;
	double audio_s; /* work it carries: audio seconds, or 0 */
	int input;	/* index of the audio file or prompt */
};

/* One workload entry (the command line makes one). */
struct ib_entry {
	enum ib_endpoint ep;
	double weight;
	char *model, *path, *audio_dir, *prompts_file;
	bool audio_random, prompt_random, stream;
	int max_tokens;
	double temperature;
	struct ib_tmpl *tmpl; /* one per input */
	size_t n_tmpl, next;
};

struct ib_opts {
	char *url, *host, *port, *prefix, *label;
	char *api_key;
	char **headers; /* "Name: value" */
	size_t n_headers;
	struct ib_entry proto; /* the command line's entry: defaults of a workload's */
	char *workload_file;
	int concurrency;
	double rate;	   /* > 0: open loop */
	double *sweep;	   /* loads of the stages */
	size_t n_sweep;
	bool sweep_rate;   /* the sweep's loads are rates */
	double duration_s, warmup_s, timeout_s;
	double speed;	   /* deepgram-live: times real time (default 1) */
	double keep_up_s;  /* deepgram-live: the most a stream may fall behind (default 1.5) */
	long requests;	   /* > 0: a stage's window ends after this many answers */
	uint64_t seed;
	int max_connections;
	double price_per_hour; /* 0: none */
	char *json_file, *csv_file, *html_file;
	bool quiet;
	int progress_tty; /* -1 auto */
};

/* One request as measured. */
struct ib_rec {
	int stage;
	int entry, input;
	double t_start;	 /* send (closed loop) or arrival (open loop) time */
	double t_end;	 /* last byte, or the error */
	double ttft;	 /* seconds from t_start, or -1 */
	int status;	 /* HTTP status, 0 when none came */
	enum ib_kind kind;
	int phase;	 /* the stage's phase when it ended: 0 warm-up, 1 window, 2 drain */
	uint64_t bytes_sent, bytes_recv;
	double audio_s;
	long tokens;
	size_t itl0, n_itl; /* its inter-token gaps in the run's itl array */
	struct ib_live_rec *live; /* deepgram-live: what the stream measured (owned), else NULL */
};

/* What one live stream (deepgram-live) measured, kept by its record from
 * its end (docs/bench.md "Live streams"). Times in seconds. */
struct ib_live_rec {
	float *final_lat;   /* [n_final]: each final with words, its arrival minus the
			     * time the audio of its last word's end was sent */
	size_t n_final;
	float *interim_lat; /* [n_interim]: each interim, the audio seconds sent at its
			     * arrival minus its start + duration (Deepgram's definition) */
	size_t n_interim;
	char *transcript;   /* the finals' transcripts joined by spaces (never NULL) */
	long words;	    /* words in the finals */
	int close_code;	    /* the server's close code; 1006: the connection ended
			     * without one; 0: no WebSocket (refused, failed) */
	double send_lag_s;  /* the most a frame went out after its real-time due time
			     * (counting bytes still queued for the socket) */
	double drain_s;	    /* CloseStream to the server's close, -1 when not both */
	bool kept_up;	    /* send_lag_s and drain_s both within --keep-up */
};

struct ib_run;
struct ib_live; /* one deepgram-live stream's state, ib_live.c's */

/* A closed-loop client: its connection and its retry timer. */
struct ib_client {
	struct ib_run *run;
	int id;
	struct ib_conn *conn;
	uv_timer_t retry;
	bool waiting; /* a request is waiting for conn to connect */
	/* a request to send again on the next connection (on_stale) */
	bool resend;
	size_t resend_rec;
	const struct ib_tmpl *resend_tmpl;
	enum ib_endpoint resend_ep;
};

/* What becomes of a connection, told to whoever opened it (the load
 * loop, ib_load.c): the libuv way, callbacks given at open. */
struct ib_conn_cbs {
	/* connected (status 0) or failed (a UV_E* code; c is closing) */
	void (*on_connected)(struct ib_conn *c, int status);
	/* rec is finished (its fields set); c is idle again if reusable,
	 * else closing */
	void (*on_done)(struct ib_conn *c, size_t rec, bool reusable);
	/* c's handles are closed; c is freed when this returns */
	void (*on_closed)(struct ib_conn *c);
	/* The request rec failed before any byte of its response on a
	 * connection that had answered before: the server closed it while
	 * it was idle, as HTTP/1.1 keep-alive allows (RFC 9112 9.3.1; curl
	 * and Go's net/http then retry on a new connection). true: the opener
	 * sends rec again on a new connection (c is closing, on_done does not
	 * come for rec); false: rec ends as a connect error. NULL: false. */
	bool (*on_stale)(struct ib_conn *c, size_t rec);
};

/* One connection; embedded handles, freed in the tcp close callback. */
struct ib_conn {
	uv_tcp_t tcp;
	uv_connect_t connect_req;
	uv_write_t write_req;
	uv_timer_t timer;
	llhttp_t parser;
	struct ib_run *run;
	const struct ib_conn_cbs *cbs; /* who opened it (borrowed) */
	int client; /* closed loop: the client owning it; open loop: -1 */
	bool connected, busy, closing, timer_closed, tcp_closed;
	struct ib_live *live; /* deepgram-live: the stream in flight (ib_live.c), or NULL */
	unsigned n_answered; /* complete responses on this connection */
	double t_connect; /* when the connection was asked for */
	/* the request in flight */
	size_t rec;	   /* index in run->recs */
	const struct ib_tmpl *tmpl;
	enum ib_endpoint ep;
	bool got_bytes, headers_done, complete, sse;
	char hname[64], ctype[64], ws_accept[64];
	size_t hname_len, ctype_len, ws_accept_len;
	int hstate; /* 0 other header, 1 in content-type, 2 in a name,
		     * 3 in sec-websocket-accept */
	char *body;
	size_t body_len, body_cap;
	/* event stream */
	char *line;
	size_t line_len, line_cap;
	char *data;
	size_t data_len, data_cap;
	bool sse_bad, sse_done, last_cr;
	double t_last_tok;
	long n_events_text;
	long usage_tokens; /* from a usage object, or -1 */
	float *gaps;	   /* the request's inter-token gaps, until it ends */
	size_t n_gaps, cap_gaps;
};

/* The run: options, workload, loop, records, the stage in progress. */
struct ib_run {
	uv_loop_t *loop;
	const struct ib_opts *o;
	struct ib_entry *entries;
	size_t n_entries;
	double weight_sum;
	struct ib_audio *audio; /* every audio file of every entry */
	size_t n_audio;
	struct sockaddr_storage addr;
	uint64_t t0_ns; /* run start */
	uint64_t rng;
	uint64_t ws_rng; /* WebSocket keys and masks: a generator of their own, so
			  * that they do not shift the workload's seeded draws */
	/* records */
	struct ib_rec *recs;
	size_t n_recs, cap_recs;
	float *itl;
	size_t n_itl, cap_itl;
	/* the stage in progress */
	int stage;
	bool open_loop;
	double load;
	double w0, w1; /* window; w1 is set when it ends */
	int phase;     /* 0 warm-up, 1 window, 2 drain, 3 done */
	long sent_in_window, answered_in_window;
	long in_flight;
	struct ib_client *clients; /* closed loop */
	int n_clients;
	int n_handles; /* client timers still open */
	struct ib_conn **idle; /* open loop: idle connections */
	size_t n_idle;
	int n_conns; /* open */
	int n_connecting; /* open loop: asked for, not connected yet */
	double t_next;	 /* open loop: the next arrival */
	/* open loop: the FIFO of arrival times waiting for a connection,
	 * pending[pending_head ...], n_pending of them; popping moves the
	 * head, so an overloaded server's long queue costs O(1) a request */
	double *pending;
	size_t pending_head, n_pending, cap_pending;
	uv_timer_t arrival, phase_timer, progress;
	uv_signal_t sigint;
	bool aborted;
	/* progress */
	bool tty;
	double last_plain;
	json_t *stages; /* results, one object per finished stage */
	FILE *csv;
};

/* --- ib_work.c: endpoints, inputs, requests ------------------------------ */

/* ib_endpoint_parse - the enum of a name of docs/bench.md, or -1. */
int ib_endpoint_parse(const char *name);
const char *ib_endpoint_name(enum ib_endpoint ep);
bool ib_endpoint_is_audio(enum ib_endpoint ep);
const char *ib_kind_name(enum ib_kind k);

/* ib_work_load - read the workload (o->workload_file, or the command
 * line's entry alone), load every input and prebuild every request into
 * run->entries / run->audio. Returns 0, or -1 with a message on stderr. */
int ib_work_load(struct ib_run *run, const struct ib_opts *o);
void ib_work_free(struct ib_run *run);

/* ib_work_pick - the next request: an entry by weight, then its next input
 * (round-robin or random). *entry gets the entry's index. */
const struct ib_tmpl *ib_work_pick(struct ib_run *run, int *entry);

/* ib_rng_next - xorshift64* (Vigna 2016): the next 64 random bits. */
uint64_t ib_rng_next(uint64_t *s);
/* ib_rng_unit - uniform in [0, 1). */
double ib_rng_unit(uint64_t *s);

/* --- ib_answer.c: responses ----------------------------------------------- */

/* ib_work_check_body - validate a complete 2xx non-streamed body of ep and
 * count its output tokens (-1: none counted). Returns false when the body
 * is not what the protocol promises. */
bool ib_work_check_body(enum ib_endpoint ep, const char *body, size_t len, long *tokens);

/* ib_work_event - one event-stream data payload of ep: *text is whether it
 * carries output text, *done whether it ends the stream ([DONE]),
 * *usage the completion tokens of a usage object (left alone if none).
 * Returns false for a payload that is neither [DONE] nor JSON. */
bool ib_work_event(enum ib_endpoint ep, const char *data, size_t len, bool *text, bool *done,
		   long *usage);

/* --- ib_conn.c: one HTTP/1.1 connection --------------------------------- */

/* ib_conn_open - a new connection of run, connecting; client as above.
 * NULL on allocation failure. cbs (borrowed, outliving c) is told what
 * becomes of it. */
struct ib_conn *ib_conn_open(struct ib_run *run, int client, const struct ib_conn_cbs *cbs);
/* ib_conn_send - send tmpl on a connected, idle c as record rec. */
void ib_conn_send(struct ib_conn *c, const struct ib_tmpl *tmpl, enum ib_endpoint ep, size_t rec);
/* ib_conn_close - close c (once); its memory goes in the close callback. */
void ib_conn_close(struct ib_conn *c);
/* --- ib_live.c: deepgram-live streams on ib_conn connections ------------ */

/* How a stream ends c's request in flight: as kind (its record's end time
 * now), c closed, c's opener told (ib_conn.c gives it; the stream calls it
 * at most once). */
typedef void (*ib_live_end_cb)(struct ib_conn *c, enum ib_kind kind);

/* ib_live_begin - a new stream for c's request (c->tmpl, whose audio is
 * run->audio[tmpl->input]): its state in c->live and its upgrade request
 * (the template's head, a fresh Sec-WebSocket-Key) in *buf, owned by the
 * stream; end (borrowed) is how it will end. Out of memory exits. */
void ib_live_begin(struct ib_conn *c, ib_live_end_cb end, uv_buf_t *buf);
/* ib_live_upgraded - the 101 came (its Sec-WebSocket-Accept in
 * c->ws_accept): check it and start streaming; extra[n] are the bytes
 * read after the 101 (frames already). A bad accept ends it as protocol. */
void ib_live_upgraded(struct ib_conn *c, const char *extra, size_t n);
/* ib_live_is_upgraded - whether l (NULL: false) is past its handshake and
 * not ended: the connection's bytes are WebSocket frames for
 * ib_live_on_read. */
bool ib_live_is_upgraded(const struct ib_live *l);
/* ib_live_on_read - n bytes of data (n > 0) or the connection's end
 * (n < 0) on an upgraded c. */
void ib_live_on_read(struct ib_conn *c, const char *data, ssize_t n);
/* ib_live_finish - what c's stream measured into r->live (new), as its
 * request ends (r's kind and end time set); audio_s credited when OK. */
void ib_live_finish(struct ib_conn *c, struct ib_rec *r);
/* ib_live_free - a stream's state (NULL: no-op). */
void ib_live_free(struct ib_live *l);

/* --- ib_pcm.c: audio for live streams ------------------------------------ */

/* ib_pcm_decode - the audio file at path decoded to 16 kHz mono s16
 * samples: *pcm new (free()) holding *n (> 0) of them. 0, or -1 with a
 * message on stderr. */
int ib_pcm_decode(const char *path, int16_t **pcm, size_t *n);

/* --- ib_load.c: stages ------------------------------------------------- */

/* ib_load_stage - run stage i at load (concurrency or rate) to its end,
 * append its results to run->stages. Returns 0 or -1 (fatal). */
int ib_load_stage(struct ib_run *run, int i, double load);

/* ib_load_on_sigint - SIGINT: end the stage now and skip the others; a
 * second one exits at once. */
void ib_load_on_sigint(uv_signal_t *s, int signum);

/* --- ib_rec.c: the clock and the records -------------------------------- */

/* ib_now - seconds since the run's start. */
double ib_now(const struct ib_run *run);

/* ib_xrealloc - realloc, or exit(2) with a message when out of memory. */
void *ib_xrealloc(void *p, size_t n);

/* ib_rec_new - a fresh record (index); aborts when out of memory. */
size_t ib_rec_new(struct ib_run *run);
/* ib_rec_set_itl - the n inter-token gaps of record rec, copied into the
 * run's itl array as one block. */
void ib_rec_set_itl(struct ib_run *run, size_t rec, const float *gaps, size_t n);
/* ib_rec_free_all - every record (with its live stream's figures) and the
 * gaps array; the run holds none after. */
void ib_rec_free_all(struct ib_run *run);

/* --- ib_pct.c: percentiles, durations ------------------------------------ */

/* ib_pct - nearest-rank percentile p (0..100) of sorted x[n], n >= 1. */
double ib_pct(const double *x, size_t n, double p);
/* ib_cmp_double - qsort's ascending order of doubles. */
int ib_cmp_double(const void *a, const void *b);
/* ib_fmt_dur - "123.4ms" / "1.23s" of the seconds in o[k] ("-" when absent
 * or not a number) into buf[n]; returns buf. */
const char *ib_fmt_dur(json_t *o, const char *k, char *buf, size_t n);

/* --- ib_stats.c: summaries and outputs --------------------------------- */

/* ib_stats_stage - the JSON object of stage i (docs/bench.md schema) from
 * run's records; new reference. */
json_t *ib_stats_stage(const struct ib_run *run, int i, const char *name);
/* ib_stats_table - the final table of every stage to f. */
void ib_stats_table(FILE *f, json_t *run_json);
/* ib_stats_progress - the live line's text for the stage in progress. */
void ib_stats_progress(const struct ib_run *run, char *buf, size_t len);
/* ib_stats_csv_header / _row - the per-request CSV. */
void ib_stats_csv_header(FILE *f);
void ib_stats_csv_row(FILE *f, const struct ib_run *run, const struct ib_rec *r);

/* --- ib_live_stats.c: live streams' figures ------------------------------- */

/* ib_live_stats - the summary's "live" object of stage i (docs/bench.md):
 * its counted streams' latencies, errors, transcripts; null when no entry
 * of the run is deepgram-live. New reference. */
json_t *ib_live_stats(const struct ib_run *run, int stage);
/* ib_live_table - the line under a stage of the final table with its
 * live figures (none when summary s has no "live" object). */
void ib_live_table(FILE *f, json_t *s);

#endif /* IB_INT_H */
