/* ib_live.c - one deepgram-live stream on an ib_conn connection: the
 * WebSocket opening handshake (RFC 6455 4.1: a GET with Upgrade,
 * Sec-WebSocket-Key, and the 101's Sec-WebSocket-Accept checked), then
 * libwslay's client framing (every frame masked, as a client's must be)
 * over the connection's bytes: the file's 16 kHz s16le samples in binary
 * messages of IB_LIVE_FRAME_S seconds at real-time pace (--speed times
 * it), {"type":"CloseStream"} after the last, and the server's messages
 * read until its close frame. docs/bench.md "Live streams" says what is
 * measured; ib_live_msg.c reads the messages and computes the latencies.
 *
 * The pace is a microphone's: frame k holds audio [k, k + 1) * frame and
 * goes out when that audio has been "spoken", at t0 + (k + 1) * frame /
 * speed, t0 being when the 101 came. While streaming, the connection's
 * timer is the pacing timer; before the 101 and after CloseStream it is
 * the --timeout. wslay pulls input through recv_cb from the bytes
 * ib_live_on_read was given and pushes output through send_cb into one
 * buffer, written with one uv_write (a request of its own, freed by its
 * callback) after each round, as server/ws/srv_ws.c does on the other side.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <wslay/wslay.h>

#include "ib_int.h"
#include "ib_live_msg.h"

#define IB_LIVE_RATE	16000	    /* Hz of the samples sent (sample_rate=16000) */
#define IB_LIVE_FRAME	1600	    /* samples per binary message */
#define IB_LIVE_FRAME_S 0.1	    /* ... in seconds of audio */
#define IB_LIVE_MAX_MSG (16u << 20) /* largest server message read (bytes) */
#define IB_LIVE_EARLY_S 0.002	    /* a frame may go this early (ms timers) */
#define IB_WS_NO_STATUS 1005	    /* RFC 6455 7.4.1: a close frame without a code */
#define IB_WS_ABNORMAL	1006	    /* ... the connection ended without a close frame */

/* Where a stream is: HANDSHAKE -> STREAMING (the 101) -> CLOSING
 * (CloseStream sent) -> DONE (the server's close, or any error: the
 * record has its kind); any -> DONE on an error. */
enum ib_live_state {
	IB_LIVE_STATE_HANDSHAKE = 0,
	IB_LIVE_STATE_STREAMING,
	IB_LIVE_STATE_CLOSING,
	IB_LIVE_STATE_DONE,
};

struct ib_live {
	struct ib_conn *c;  /* the connection, which owns us */
	ib_live_end_cb end; /* how we end its request (given at begin) */
	enum ib_live_state state;
	wslay_event_context_ptr ctx;
	const int16_t *pcm; /* [n_pcm] the file's samples (borrowed: run->audio) */
	size_t n_pcm;
	size_t n_frames, n_sent; /* frames of the file; sent so far */
	double *t_frame;	 /* [n_frames] when each frame went out (run s) */
	double t0;		 /* the audio clock's start (run s) */
	double speed;		 /* times real time */
	double t_close_stream;	 /* when CloseStream went (run s), -1 before */
	char key[IB_WS_KEY_LEN + 1];
	char *hs; /* the upgrade request: the template's head and our key */
	size_t hs_len;
	const uint8_t *in; /* bytes being fed to wslay (borrowed during on_read) */
	size_t in_len, in_pos;
	uint8_t *out; /* frames wslay produced, not yet written */
	size_t out_len, out_cap;
	/* measured (moved into the record's ib_live_rec at the end) */
	float *fin, *inter; /* final and interim latencies (s) */
	size_t n_fin, cap_fin, n_inter, cap_inter;
	char *text; /* the finals' transcripts joined */
	size_t text_len, text_cap;
	long words;
	int close_code; /* 0 before the 101, then IB_WS_ABNORMAL until a close */
	double lag;	/* the most a frame was late (s) */
};

/* One write of the stream's frames. */
struct ib_live_write {
	uv_write_t req; /* first: the callback's pointer is ours */
	uint8_t *data;
};

static void ib_live_push(float **a, size_t *n, size_t *cap, double v)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*a = ib_xrealloc(*a, *cap * sizeof(**a));
	}
	(*a)[(*n)++] = (float)v;
}

static void ib_live_append(struct ib_live *l, const char *s, size_t n)
{
	if (l->text_len + n + 2 > l->text_cap) {
		l->text_cap = (l->text_len + n + 2) * 2;
		l->text = ib_xrealloc(l->text, l->text_cap);
	}
	if (l->text_len)
		l->text[l->text_len++] = ' ';
	memcpy(l->text + l->text_len, s, n);
	l->text_len += n;
	l->text[l->text_len] = '\0';
}

static uint64_t ib_live_timeout_ms(const struct ib_run *run)
{
	return (uint64_t)(run->o->timeout_s * 1000.0 + 0.5);
}

/* --- ending -------------------------------------------------------------- */

/* End the stream as kind; code, when not 0, is the close code it got. */
static void ib_live_end(struct ib_conn *c, enum ib_kind kind, int code)
{
	struct ib_live *l = c->live;
	if (l->state == IB_LIVE_STATE_DONE)
		return;
	if (code)
		l->close_code = code;
	l->end(c, kind);
}

void ib_live_finish(struct ib_conn *c, struct ib_rec *r)
{
	struct ib_live *l = c->live;
	const struct ib_opts *o = c->run->o;
	struct ib_live_rec *lr = ib_xrealloc(NULL, sizeof(*lr));
	*lr = (struct ib_live_rec){
		.final_lat = l->fin,
		.n_final = l->n_fin,
		.interim_lat = l->inter,
		.n_interim = l->n_inter,
		.transcript = l->text ? l->text : ib_xrealloc(NULL, 1),
		.words = l->words,
		.close_code = l->close_code,
		.send_lag_s = l->lag,
		.drain_s = l->t_close_stream >= 0 && r->kind != IB_KIND_TIMEOUT
				   ? r->t_end - l->t_close_stream
				   : -1.0,
	};
	if (!l->text)
		lr->transcript[0] = '\0';
	lr->kept_up = r->kind == IB_KIND_OK && lr->send_lag_s <= o->keep_up_s && lr->drain_s >= 0 &&
		      lr->drain_s <= o->keep_up_s;
	if (r->kind == IB_KIND_OK)
		r->audio_s = c->tmpl->audio_s;
	l->fin = l->inter = NULL;
	l->text = NULL;
	l->n_fin = l->n_inter = l->cap_fin = l->cap_inter = l->text_len = l->text_cap = 0;
	l->state = IB_LIVE_STATE_DONE;
	r->live = lr;
}

/* --- output -------------------------------------------------------------- */

static void ib_live_on_write(uv_write_t *req, int status)
{
	struct ib_live_write *w = (struct ib_live_write *)req;
	struct ib_conn *c = req->handle->data;
	free(w->data);
	free(w);
	/* (write callbacks come before the close callback: c is alive) */
	if (status < 0 && c->live && c->busy && !c->closing)
		ib_live_end(c, IB_KIND_CLOSE, IB_WS_ABNORMAL);
}

/* Let wslay write what it has queued and send it in one write; -1 when
 * the connection cannot take it. */
static int ib_live_flush(struct ib_conn *c)
{
	struct ib_live *l = c->live;
	if (wslay_event_send(l->ctx) != 0)
		return -1;
	if (!l->out_len)
		return 0;
	struct ib_live_write *w = ib_xrealloc(NULL, sizeof(*w));
	uv_buf_t b = uv_buf_init((char *)l->out, (unsigned)l->out_len);
	w->data = l->out;
	c->run->recs[c->rec].bytes_sent += l->out_len;
	l->out = NULL;
	l->out_len = l->out_cap = 0;
	if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, ib_live_on_write) != 0) {
		free(w->data);
		free(w);
		return -1;
	}
	return 0;
}

/* --- the pace -------------------------------------------------------------- */

/* When frame k is due (run s). */
static double ib_live_due(const struct ib_live *l, size_t k)
{
	return l->t0 + (double)(k + 1) * IB_LIVE_FRAME_S / l->speed;
}

/* Frame k = l->n_sent out now; its lateness counts the bytes still queued
 * for the socket (their audio seconds at the pace). */
static int ib_live_send_frame(struct ib_conn *c, double now)
{
	struct ib_live *l = c->live;
	size_t k = l->n_sent, first = k * IB_LIVE_FRAME, n = l->n_pcm - first;
	n = n < IB_LIVE_FRAME ? n : IB_LIVE_FRAME;
	double queued = (double)uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) /
			(2.0 * IB_LIVE_RATE * l->speed);
	double lag = now - ib_live_due(l, k) + queued;
	l->lag = lag > l->lag ? lag : l->lag;
	/* int16_t in memory is s16le on the little-endian hosts we run on */
	struct wslay_event_msg m = {.opcode = WSLAY_BINARY_FRAME,
				    .msg = (const uint8_t *)(l->pcm + first),
				    .msg_length = n * sizeof(*l->pcm)};
	if (wslay_event_queue_msg(l->ctx, &m) != 0)
		return -1;
	l->t_frame[k] = now;
	l->n_sent++;
	return ib_live_flush(c);
}

static void ib_live_on_timeout(uv_timer_t *t)
{
	struct ib_conn *c = t->data;
	if (c->busy)
		ib_live_end(c, IB_KIND_TIMEOUT, 0);
}

/* Every frame is out: CloseStream, then the server's close within
 * --timeout. */
static void ib_live_close_stream(struct ib_conn *c)
{
	static const char msg[] = "{\"type\":\"CloseStream\"}";
	struct ib_live *l = c->live;
	struct wslay_event_msg m = {.opcode = WSLAY_TEXT_FRAME,
				    .msg = (const uint8_t *)msg,
				    .msg_length = sizeof(msg) - 1};
	if (wslay_event_queue_msg(l->ctx, &m) != 0 || ib_live_flush(c) != 0) {
		ib_live_end(c, IB_KIND_CLOSE, IB_WS_ABNORMAL);
		return;
	}
	l->state = IB_LIVE_STATE_CLOSING;
	l->t_close_stream = ib_now(c->run);
	uv_timer_start(&c->timer, ib_live_on_timeout, ib_live_timeout_ms(c->run), 0);
}

static void ib_live_on_tick(uv_timer_t *t);

/* The timer for the next frame's due time. */
static void ib_live_schedule(struct ib_conn *c)
{
	struct ib_live *l = c->live;
	double ms = ceil((ib_live_due(l, l->n_sent) - ib_now(c->run)) * 1000.0);
	uv_timer_start(&c->timer, ib_live_on_tick, ms > 0 ? (uint64_t)ms : 0, 0);
}

/* Every frame now due goes out (several when the loop was late). */
static void ib_live_on_tick(uv_timer_t *t)
{
	struct ib_conn *c = t->data;
	struct ib_live *l = c->live;
	double now = ib_now(c->run);
	while (l->n_sent < l->n_frames && ib_live_due(l, l->n_sent) <= now + IB_LIVE_EARLY_S) {
		if (ib_live_send_frame(c, now) != 0) {
			ib_live_end(c, IB_KIND_CLOSE, IB_WS_ABNORMAL);
			return;
		}
	}
	if (l->n_sent < l->n_frames)
		ib_live_schedule(c);
	else
		ib_live_close_stream(c);
}

/* --- input ----------------------------------------------------------------- */

/* A text message: a Results' latency, words and transcript. */
static void ib_live_on_text(struct ib_conn *c, const uint8_t *s, size_t n)
{
	struct ib_live *l = c->live;
	double now = ib_now(c->run);
	struct ib_live_msg m;
	if (ib_live_msg_parse((const char *)s, n, &m) != 0) {
		ib_live_end(c, IB_KIND_PROTOCOL, 0);
		return;
	}
	if (m.type == IB_LIVE_MSG_RESULTS && !m.is_final) {
		size_t sent = l->n_sent * IB_LIVE_FRAME;
		double sent_s = (double)(sent < l->n_pcm ? sent : l->n_pcm) / IB_LIVE_RATE;
		ib_live_push(&l->inter, &l->n_inter, &l->cap_inter,
			     ib_live_interim_latency(sent_s, &m));
	} else if (m.type == IB_LIVE_MSG_RESULTS && m.n_words > 0) {
		if (l->n_sent > 0)
			ib_live_push(&l->fin, &l->n_fin, &l->cap_fin,
				     ib_live_final_latency(now, l->t_frame, l->n_sent,
							   IB_LIVE_FRAME_S, m.last_end));
		if (m.transcript[0])
			ib_live_append(l, m.transcript, strlen(m.transcript));
		l->words += m.n_words;
	}
	ib_live_msg_fini(&m);
}

/* The server's close frame (wslay has queued our answer to it): OK when
 * it is 1000 and came after CloseStream. */
static void ib_live_on_close(struct ib_conn *c, uint16_t code)
{
	struct ib_live *l = c->live;
	int cc = code ? code : IB_WS_NO_STATUS;
	bool ok = cc == 1000 && l->state == IB_LIVE_STATE_CLOSING;
	ib_live_flush(c); /* the answer, if the socket takes it before the close */
	ib_live_end(c, ok ? IB_KIND_OK : IB_KIND_CLOSE, cc);
}

static void ib_live_on_msg(wslay_event_context_ptr ctx,
			   const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
	struct ib_live *l = user;
	(void)ctx;
	if (l->state == IB_LIVE_STATE_DONE)
		return;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE)
		ib_live_on_close(l->c, arg->status_code);
	else if (arg->opcode == WSLAY_TEXT_FRAME)
		ib_live_on_text(l->c, arg->msg, arg->msg_length);
	/* a binary message is none of Deepgram's: ignored; pings wslay answers */
}

static ssize_t ib_live_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
			       void *user)
{
	struct ib_live *l = user;
	(void)flags;
	size_t n = l->in_len - l->in_pos;
	if (n == 0 || l->state == IB_LIVE_STATE_DONE) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	n = n < len ? n : len;
	memcpy(buf, l->in + l->in_pos, n);
	l->in_pos += n;
	return (ssize_t)n;
}

static ssize_t ib_live_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len,
			       int flags, void *user)
{
	struct ib_live *l = user;
	(void)ctx;
	(void)flags;
	if (l->out_len + len > l->out_cap) {
		l->out_cap = (l->out_len + len) * 2;
		l->out = ib_xrealloc(l->out, l->out_cap);
	}
	memcpy(l->out + l->out_len, data, len);
	l->out_len += len;
	return (ssize_t)len;
}

/* Masking keys (RFC 6455 5.3): from the run's own generator for them, so
 * that they do not shift the workload's seeded draws. */
static int ib_live_genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	struct ib_live *l = user;
	(void)ctx;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = ib_rng_next(&l->c->run->ws_rng);
		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
	return 0;
}

void ib_live_on_read(struct ib_conn *c, const char *data, ssize_t n)
{
	struct ib_live *l = c->live;
	if (n < 0) { /* the end, without a close frame */
		ib_live_end(c, IB_KIND_CLOSE, IB_WS_ABNORMAL);
		return;
	}
	l->in = (const uint8_t *)data;
	l->in_len = (size_t)n;
	l->in_pos = 0;
	int rc = wslay_event_recv(l->ctx);
	l->in = NULL;
	if (l->state == IB_LIVE_STATE_DONE)
		return;
	if (rc != 0 || !wslay_event_get_read_enabled(l->ctx)) {
		ib_live_end(c, IB_KIND_PROTOCOL, 0); /* a bad frame, or one too long */
		return;
	}
	if (ib_live_flush(c) != 0)
		ib_live_end(c, IB_KIND_CLOSE, IB_WS_ABNORMAL);
}

/* --- the handshake ---------------------------------------------------------- */

void ib_live_begin(struct ib_conn *c, ib_live_end_cb end, uv_buf_t *buf)
{
	static const struct wslay_event_callbacks cbs = {
		.recv_callback = ib_live_recv_cb,
		.send_callback = ib_live_send_cb,
		.genmask_callback = ib_live_genmask_cb,
		.on_msg_recv_callback = ib_live_on_msg,
	};
	struct ib_run *run = c->run;
	const struct ib_audio *a = &run->audio[c->tmpl->input];
	struct ib_live *l = ib_xrealloc(NULL, sizeof(*l));
	*l = (struct ib_live){.c = c,
			      .end = end,
			      .pcm = a->pcm,
			      .n_pcm = a->n_pcm,
			      .speed = run->o->speed,
			      .t_close_stream = -1.0};
	l->n_frames = (a->n_pcm + IB_LIVE_FRAME - 1) / IB_LIVE_FRAME;
	l->t_frame = ib_xrealloc(NULL, (l->n_frames + 1) * sizeof(*l->t_frame));
	uint64_t nonce[2] = {ib_rng_next(&run->ws_rng), ib_rng_next(&run->ws_rng)};
	ib_ws_key((const uint8_t *)nonce, l->key);
	/* the template is the head without its blank line */
	static const char fmt[] = "Sec-WebSocket-Key: %s\r\n\r\n";
	l->hs_len = c->tmpl->len + sizeof(fmt) + IB_WS_KEY_LEN;
	l->hs = ib_xrealloc(NULL, l->hs_len);
	memcpy(l->hs, c->tmpl->bytes, c->tmpl->len);
	int k = snprintf(l->hs + c->tmpl->len, l->hs_len - c->tmpl->len, fmt, l->key);
	l->hs_len = c->tmpl->len + (size_t)k;
	if (wslay_event_context_client_init(&l->ctx, &cbs, l) != 0) {
		fprintf(stderr, "inferd-bench: out of memory\n");
		exit(2);
	}
	wslay_event_config_set_max_recv_msg_length(l->ctx, IB_LIVE_MAX_MSG);
	ib_live_free(c->live);
	c->live = l;
	*buf = uv_buf_init(l->hs, (unsigned)l->hs_len);
}

void ib_live_upgraded(struct ib_conn *c, const char *extra, size_t n)
{
	struct ib_live *l = c->live;
	uv_timer_stop(&c->timer);
	if (!ib_ws_accept_is_valid(l->key, c->ws_accept, c->ws_accept_len)) {
		ib_live_end(c, IB_KIND_PROTOCOL, 0);
		return;
	}
	l->state = IB_LIVE_STATE_STREAMING;
	l->close_code = IB_WS_ABNORMAL; /* until a close frame says otherwise */
	l->t0 = ib_now(c->run);
	ib_live_schedule(c);
	if (n)
		ib_live_on_read(c, extra, (ssize_t)n);
}

bool ib_live_is_upgraded(const struct ib_live *l)
{
	return l && (l->state == IB_LIVE_STATE_STREAMING || l->state == IB_LIVE_STATE_CLOSING);
}

void ib_live_free(struct ib_live *l)
{
	if (!l)
		return;
	wslay_event_context_free(l->ctx);
	free(l->t_frame);
	free(l->hs);
	free(l->out);
	free(l->fin);
	free(l->inter);
	free(l->text);
	free(l);
}
