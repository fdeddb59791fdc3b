/* srv_dg_live.c - GET /v1/listen with Upgrade: websocket, Deepgram's live
 * transcription API (https://developers.deepgram.com/reference/speech-to-text-api/listen-streaming):
 * the handshake (auth as the REST routes, done by srv_routes.c, plus the
 * browser's "Sec-WebSocket-Protocol: token, KEY"; the query parsed by
 * srv_dg_live_query.c; refusals are HTTP 4xx with a dg-error header and
 * Deepgram's JSON error body), then the client's messages:
 *   binary             audio in the query's encoding (an empty one: CloseStream);
 *                      with multichannel=true every channel is a stream of its
 *                      own (srv_dg_live_int.h), each message goes to each
 *   {"type":"KeepAlive"}    resets the idle timer
 *   {"type":"Finalize"}     flush: finals carry from_finalize, the stream stays open
 *   {"type":"CloseStream"}  flush, finals, a Metadata summary, close 1000
 * anything else is logged and ignored. No audio and no KeepAlive for
 * limits.live_idle_timeout_ms, while none of its audio is waiting to be
 * decoded or transcribed, closes with 1011 and NET-0001; SIGTERM
 * flushes and closes with 1001. The stream's policy is described in
 * srv_dg_live_int.h.
 */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/deepgram/srv_deepgram.h"
#include "server/deepgram/srv_dg_live_int.h"
#include "server/job/srv_audio_job.h"

#define SRV_DG_LIVE_NET0001 "NET-0001: no audio data or KeepAlive received within the " \
	"timeout window (https://dpgr.am/net0001)"

static void srv_dg_live_idle_arm(struct srv_dg_live *l)
{
	srv__conn_timer_start(l->conn, (uint64_t)l->srv->cfg->live_idle_timeout_ms);
}

/* Finalize or CloseStream on every channel. */
static void srv_dg_live_flush_all(struct srv_dg_live *lead, bool from_finalize)
{
	for (int i = 0; i < lead->n_chan; i++)
		srv__dg_live_flush(lead->chans[i], from_finalize);
}

/* The socket has gone (destroyed by the caller): every channel ends, and
 * each is freed once its decode work and job are over (the lead last,
 * since the loop reads its chans). */
static void srv_dg_live_detach(struct srv_dg_live *lead)
{
	for (int i = 0; i < lead->n_chan; i++) {
		lead->chans[i]->cancel = 1;
		lead->chans[i]->state = SRV_DG_LIVE_STATE_DONE;
		lead->chans[i]->ws = NULL;
	}
	for (int i = 1; i < lead->n_chan; i++)
		srv__dg_live_release(lead->chans[i]);
	srv__dg_live_release(lead);
}

/* --- client messages ------------------------------------------------------ */

static void srv_dg_live_on_text(void *ud, const uint8_t *msg, size_t n)
{
	struct srv_dg_live *l = ud;
	json_t *j = json_loadb((const char *)msg, n, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type)
		fprintf(stderr, "inferd: live %s: ignoring a text message that is not "
			"{\"type\": ...} JSON (%zu bytes)\n", l->request_id, n);
	else if (!strcmp(type, "KeepAlive"))
		srv_dg_live_idle_arm(l);
	else if (!strcmp(type, "Finalize"))
		srv_dg_live_flush_all(l, true);
	else if (!strcmp(type, "CloseStream"))
		srv_dg_live_flush_all(l, false);
	else
		fprintf(stderr, "inferd: live %s: ignoring a message of unknown type '%.40s'\n",
			l->request_id, type);
	json_decref(j);
}

static void srv_dg_live_on_binary(void *ud, const uint8_t *msg, size_t n)
{
	struct srv_dg_live *l = ud;
	if (n == 0) { /* old clients' CloseStream */
		srv_dg_live_flush_all(l, false);
		return;
	}
	srv_dg_live_idle_arm(l);
	for (int i = 0; i < l->n_chan; i++) /* each decodes its own channel */
		srv__dg_live_audio(l->chans[i], msg, n);
}

/* The peer closed (or broke the protocol): nobody reads results any more. */
static void srv_dg_live_on_end(void *ud, uint16_t code)
{
	struct srv_dg_live *l = ud;
	(void)code;
	for (int i = 0; i < l->n_chan; i++) {
		l->chans[i]->state = SRV_DG_LIVE_STATE_DONE;
		l->chans[i]->cancel = 1;
	}
}

static const struct srv_ws_cbs srv_dg_live_ws_cbs = {
	.on_text = srv_dg_live_on_text,
	.on_binary = srv_dg_live_on_binary,
	.on_end = srv_dg_live_on_end,
};

/* --- the connection's events ---------------------------------------------- */

static void srv_dg_live_on_data(void *ud, const char *data, size_t n)
{
	struct srv_dg_live *l = ud;
	srv__dg_live_enter(l);
	srv__ws_feed(l->ws, data, n);
	srv__dg_live_leave(l);
}

static void srv_dg_live_on_eof(void *ud)
{
	struct srv_dg_live *l = ud;
	srv__conn_close(l->conn); /* on_close frees what it can at once */
}

static void srv_dg_live_on_timeout(void *ud)
{
	struct srv_dg_live *l = ud;
	for (int i = 0; i < l->n_chan; i++) {
		const struct srv_dg_live *c = l->chans[i];
		if (c->job || c->n_finals || c->work_busy || c->want_finalize) {
			/* the client waits on us (a Finalize's results, say): not idle */
			srv_dg_live_idle_arm(l);
			return;
		}
	}
	fprintf(stderr, "inferd: live %s: idle for %d ms, closing (NET-0001)\n", l->request_id,
		l->srv->cfg->live_idle_timeout_ms);
	srv__dg_live_enter(l);
	srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, SRV_DG_LIVE_NET0001);
	srv__dg_live_leave(l);
}

static void srv_dg_live_on_drain(void *ud)
{
	struct srv_dg_live *l = ud;
	if (l->state != SRV_DG_LIVE_STATE_OPEN)
		return;
	l->close_code = SRV_WS_CLOSE_AWAY; /* before the flush, which may end at once */
	srv__dg_live_enter(l);
	srv_dg_live_flush_all(l, false);
	srv__dg_live_leave(l);
}

/* The drain deadline with results still owed (a pass on a slow device):
 * close with 1001 now, without them. */
static void srv_dg_live_on_deadline(void *ud)
{
	struct srv_dg_live *l = ud;
	srv__dg_live_enter(l);
	srv__dg_live_fail(l, SRV_WS_CLOSE_AWAY, "server shutting down");
	srv__dg_live_leave(l);
}

static void srv_dg_live_on_close(void *ud)
{
	struct srv_dg_live *l = ud;
	unsigned finals = 0;
	for (int i = 0; i < l->n_chan; i++)
		finals += l->chans[i]->n_finals_sent;
	if (l->srv->cfg->access_log) /* the stream's end; its start was the 101's line */
		fprintf(stderr, "access remote=%s method=GET path=\"/v1/listen\" live_end=1 "
			"audio_s=%.3f finals=%u close=%u duration_ms=%.3f request_id=%s\n",
			l->conn->remote, (double)(l->audio_base + (int64_t)l->audio_n) / SRV_DG_LIVE_RATE,
			finals, l->close_sent ? l->close_sent : srv__ws_close_sent(l->ws),
			(double)(uv_hrtime() - l->start_ns) / 1e6,
			l->request_id);
	srv__ws_destroy(l->ws);
	srv_dg_live_detach(l);
}

static const struct srv_conn_upgrade srv_dg_live_up = {
	.on_data = srv_dg_live_on_data,
	.on_eof = srv_dg_live_on_eof,
	.on_timeout = srv_dg_live_on_timeout,
	.on_drain = srv_dg_live_on_drain,
	.on_deadline = srv_dg_live_on_deadline,
	.on_close = srv_dg_live_on_close,
};

/* --- the handshake ---------------------------------------------------------- */

/* A refusal: HTTP status with Deepgram's error body and dg-error header
 * (srv__req_respond_error), and the connection closed after it. */
static void srv_dg_live_refuse(struct srv_req *req, int status, const char *msg)
{
	req->keep_alive = false;
	if (status == 426) {
		srv__req_add_header(req, "Upgrade", "websocket");
		srv__req_add_header(req, "Sec-WebSocket-Version", "13");
	}
	srv__req_respond_error(req, status, NULL, "%s", msg);
}

/* The browser form of auth offers "token" as a subprotocol: echo it. */
static const char *srv_dg_live_protocol(const struct srv_req *req)
{
	const char *v = srv__req_header(req, "Sec-WebSocket-Protocol");
	if (!v)
		return NULL;
	v += strspn(v, " \t");
	return !strncasecmp(v, "token", 5) && strchr(" \t,", v[5]) ? "token" : NULL;
}

/* Free a stream not yet counted in its connection's work. */
static void srv_dg_live_discard(struct srv_dg_live *l)
{
	eng_audio_stream_destroy(l->dec);
	srv_buf_fini(&l->raw);
	srv_buf_fini(&l->work_raw);
	mem_free(l->chans);
	mem_free(l);
}

/* Channel chan's stream (its own lead until told otherwise; no socket
 * yet), decoding that channel alone when there are several. NULL with err
 * set (a decoder refusal) or empty (out of memory). */
static struct srv_dg_live *srv_dg_live_chan_new(struct srv_req *req,
						const struct srv_dg_live_opts *o,
						const struct eng_model *m, int chan, char *err,
						size_t n)
{
	struct srv_dg_live *l = mem_calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	*l = (struct srv_dg_live){ .srv = req->conn->srv, .conn = req->conn, .o = *o, .model = m,
				   .close_code = SRV_WS_CLOSE_NORMAL, .quiet_since = -1,
				   .ue_due_at = -1, .lead = l, .chan = chan,
				   .n_chan = o->n_channels };
	memcpy(l->request_id, req->request_id, sizeof(l->request_id));
	l->start_ns = uv_hrtime();
	srv__dg_created(l->created);
	srv__dg_uuid(eng_model_name(m), 0, l->model_uuid);
	srv_buf_init(&l->raw, SRV_DG_LIVE_MAX_RAW);
	srv_buf_init(&l->work_raw, SRV_DG_LIVE_MAX_RAW);
	sha256_init(&l->sha);
	if (eng_audio_stream_create(o->container ? NULL : &o->raw, o->n_channels > 1 ? chan : -1,
				    &l->dec, err, n)) {
		srv_dg_live_discard(l);
		return NULL;
	}
	return l;
}

/* The lead and its channels, sharing one socket. */
static struct srv_dg_live *srv_dg_live_new(struct srv_req *req, const struct srv_dg_live_opts *o,
					   const struct eng_model *m, char *err, size_t n)
{
	struct srv_dg_live *l = srv_dg_live_chan_new(req, o, m, 0, err, n);
	if (!l)
		return NULL;
	l->chans = mem_calloc((size_t)l->n_chan, sizeof(*l->chans));
	int rc = l->chans ? 0 : -ST_NOMEM;
	if (!rc)
		l->chans[0] = l;
	for (int c = 1; !rc && c < l->n_chan; c++) {
		l->chans[c] = srv_dg_live_chan_new(req, o, m, c, err, n);
		rc = l->chans[c] ? 0 : -ST_NOMEM;
		if (!rc)
			l->chans[c]->lead = l;
	}
	if (!rc)
		rc = srv__ws_create(req->conn, SRV_DG_LIVE_MAX_MSG, &srv_dg_live_ws_cbs, l, &l->ws);
	if (rc) {
		for (int c = 1; l->chans && c < l->n_chan; c++)
			if (l->chans[c])
				srv_dg_live_discard(l->chans[c]);
		srv_dg_live_discard(l);
		return NULL;
	}
	for (int c = 1; c < l->n_chan; c++)
		l->chans[c]->ws = l->ws;
	return l;
}

void srv__h_deepgram_live(struct srv_req *req)
{
	char err[256] = "";
	int status = srv__ws_check_request(req, err, sizeof(err));
	if (status) {
		srv_dg_live_refuse(req, status, err);
		return;
	}
	struct srv_dg_live_opts o;
	int rc = srv__dg_live_query_parse(req->query, &o, err, sizeof(err));
	if (rc) {
		srv_dg_live_refuse(req, 400, err);
		return;
	}
	const struct eng_model *m = srv__audio_model(req, o.model, strlen(o.model));
	if (!m)
		return; /* answered (404, 400) */
	if (!eng_model_has_vad(m)) {
		srv_dg_live_refuse(req, 400, "live streaming needs the model's Silero VAD "
				   "(models[].vad_model), which is not loaded");
		return;
	}
	struct srv_dg_live *l = srv_dg_live_new(req, &o, m, err, sizeof(err));
	if (!l) {
		srv_dg_live_refuse(req, *err ? 400 : 503, *err ? err : "out of memory");
		return;
	}
	char extra[SRV_REQUEST_ID_MAX + 32];
	snprintf(extra, sizeof(extra), "dg-request-id: %s\r\n", l->request_id);
	/* each channel's stream holds the connection until it is freed */
	req->conn->n_work += l->n_chan;
	if (srv__ws_handshake(req, srv_dg_live_protocol(req), extra, &srv_dg_live_up, l)) {
		srv__ws_destroy(l->ws);
		srv_dg_live_detach(l);
		return;
	}
	srv_dg_live_idle_arm(l);
}
