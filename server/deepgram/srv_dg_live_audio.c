/* srv_dg_live_audio.c - a live stream's audio (the policy is described in
 * srv_dg_live_int.h): bytes are decoded to 16 kHz and scored by Silero
 * VAD on libuv's thread pool (never on the loop thread), the windows'
 * probabilities drive the segmenter on the loop thread, and segments go to
 * the engine as transcription jobs, one at a time per stream.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/deepgram/srv_dg_live_int.h"

static void srv_dg_live_free(struct srv_dg_live *l)
{
	struct srv_conn *conn = l->conn;
	eng_audio_stream_destroy(l->dec);
	srv_buf_fini(&l->raw);
	srv_buf_fini(&l->work_raw);
	mem_free(l->work_in);
	mem_free(l->work_probs);
	mem_free(l->audio);
	mem_free(l->la.hyp);
	mem_free(l->chans);
	mem_free(l);
	srv__conn_work_done(conn);
}

bool srv__dg_live_release(struct srv_dg_live *l)
{
	if (l->depth || l->ws || l->work_busy || l->job)
		return false;
	srv_dg_live_free(l);
	return true;
}

void srv__dg_live_enter(struct srv_dg_live *l)
{
	l->depth++;
}

bool srv__dg_live_leave(struct srv_dg_live *l)
{
	l->depth--;
	return srv__dg_live_release(l);
}

void srv__dg_live_fail(struct srv_dg_live *l, uint16_t code, const char *reason)
{
	if (l->state == SRV_DG_LIVE_STATE_DONE || !l->ws)
		return;
	struct srv_dg_live *lead = l->lead; /* every channel ends with the socket */
	for (int i = 0; i < lead->n_chan; i++) {
		lead->chans[i]->state = SRV_DG_LIVE_STATE_DONE;
		lead->chans[i]->cancel = 1;
	}
	lead->close_sent = code;
	srv__ws_close(lead->ws, code, reason);
}

/* --- the decode + VAD work (thread pool) ------------------------------------ */

/* Decode the bytes, append the samples after the context, score the whole
 * windows that follow the context. */
static void srv_dg_live_work(uv_work_t *w)
{
	struct srv_dg_live *l = w->data;
	const float *s;
	size_t n;
	if (l->chan == 0) /* Metadata's hash; every channel gets the same bytes */
		sha256_update(&l->sha, l->work_raw.len, (const uint8_t *)l->work_raw.data);
	if (l->work_eof) /* CloseStream: what the decoder held back for more bytes */
		l->work_rc = eng_audio_stream_finish(l->dec, &s, &n, l->work_err,
						     sizeof(l->work_err));
	else
		l->work_rc = eng_audio_stream_push(l->dec, l->work_raw.data, l->work_raw.len, &s,
						   &n, l->work_err, sizeof(l->work_err));
	if (l->work_rc)
		return;
	float *in = mem_realloc(l->work_in, sizeof(*in) * (l->work_n + n + 1));
	if (!in) {
		l->work_rc = -ST_NOMEM;
		return;
	}
	l->work_in = in;
	if (n)
		memcpy(in + l->work_n, s, sizeof(*s) * n);
	l->work_n += n;
	l->work_n_win = (l->work_n - l->work_ctx) / SRV_DG_LIVE_WIN;
	if (!l->work_n_win)
		return;
	size_t scored = l->work_ctx + l->work_n_win * SRV_DG_LIVE_WIN;
	float *probs = mem_alloc(sizeof(*probs) * (scored / SRV_DG_LIVE_WIN + 1));
	l->work_rc = probs ? eng_model_vad_probs(l->model, in, scored, probs) : -ST_NOMEM;
	if (!l->work_rc)
		memmove(probs, probs + l->work_ctx / SRV_DG_LIVE_WIN, sizeof(*probs) * l->work_n_win);
	mem_free(l->work_probs);
	l->work_probs = probs;
}

static void srv_dg_live_work_done(uv_work_t *w, int status);

/* Start decoding what arrived (or, after CloseStream and the bytes before
 * it, the end of the stream): the context and the samples not yet scored
 * are copied in, the bytes handed over. */
static void srv_dg_live_work_start(struct srv_dg_live *l)
{
	if (l->work_busy || !l->ws || l->state == SRV_DG_LIVE_STATE_DONE)
		return;
	bool eof = l->raw.len == 0 && l->want_eof && !l->eof_done;
	if (l->raw.len == 0 && !eof)
		return;
	int64_t from = l->vad_pos - SRV_DG_LIVE_VAD_CTX;
	from = from < l->audio_base ? l->audio_base : from;
	size_t n = (size_t)(l->audio_base + (int64_t)l->audio_n - from);
	float *in = mem_realloc(l->work_in, sizeof(*in) * (n + 1));
	if (!in) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "out of memory");
		return;
	}
	if (n)
		memcpy(in, l->audio + (from - l->audio_base), sizeof(*in) * n);
	l->work_in = in;
	l->work_n = l->work_old = n;
	l->work_ctx = (size_t)(l->vad_pos - from);
	l->work_n_win = 0;
	struct srv_buf t = l->work_raw; /* swap: raw's bytes go to the work */
	l->work_raw = l->raw;
	l->raw = t;
	l->raw.len = 0;
	l->work.data = l;
	l->work_eof = eof;
	l->eof_done |= eof;
	if (uv_queue_work(&l->srv->loop, &l->work, srv_dg_live_work, srv_dg_live_work_done)) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "could not queue the audio decoder");
		return;
	}
	l->work_busy = true;
}

void srv__dg_live_audio(struct srv_dg_live *l, const uint8_t *data, size_t n)
{
	if (l->state != SRV_DG_LIVE_STATE_OPEN)
		return;
	/* raw Opus: one packet per message, and messages are joined before
	 * they are decoded, so each keeps its length (eng_audio.h's records) */
	uint8_t len_le[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
			      (uint8_t)(n >> 24) };
	bool opus = !l->o.container && l->o.raw.encoding == ENG_AUDIO_ENCODING_OPUS;
	if ((opus && srv_buf_append(&l->raw, len_le, sizeof(len_le))) ||
	    srv_buf_append(&l->raw, data, n)) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "audio arrives faster than it can be "
				  "decoded (more than 8 MiB waiting)");
		return;
	}
	srv_dg_live_work_start(l);
}

/* --- the timeline ------------------------------------------------------------ */

/* The first sample still needed: the open segment's, the oldest waiting
 * final's, the VAD's context, the pre-roll before speech that may start. */
static int64_t srv_dg_live_needed(const struct srv_dg_live *l)
{
	int64_t end = l->audio_base + (int64_t)l->audio_n;
	int64_t keep = l->vad_pos - SRV_DG_LIVE_VAD_CTX;
	keep = end - SRV_DG_LIVE_PREROLL < keep ? end - SRV_DG_LIVE_PREROLL : keep;
	if (l->seg_open && l->seg_start < keep)
		keep = l->seg_start;
	if (l->n_finals && l->finals[0].start < keep)
		keep = l->finals[0].start;
	return keep < l->audio_base ? l->audio_base : keep;
}

/* Append n new samples, dropping what is no longer needed first. */
static int srv_dg_live_append(struct srv_dg_live *l, const float *s, size_t n)
{
	int64_t drop = srv_dg_live_needed(l) - l->audio_base;
	if (drop >= SRV_DG_LIVE_RATE) { /* a second or more: worth the move */
		l->audio_n -= (size_t)drop;
		memmove(l->audio, l->audio + drop, sizeof(*l->audio) * l->audio_n);
		l->audio_base += drop;
	}
	if (l->audio_n + n > SRV_DG_LIVE_MAX_KEEP)
		return -ST_TOOBIG;
	if (l->audio_n + n > l->audio_cap) {
		size_t cap = l->audio_cap ? l->audio_cap : SRV_DG_LIVE_RATE * 4;
		while (cap < l->audio_n + n)
			cap *= 2;
		float *p = mem_realloc(l->audio, sizeof(*p) * cap);
		if (!p)
			return -ST_NOMEM;
		l->audio = p;
		l->audio_cap = cap;
	}
	if (n) /* a container's first bytes may complete no sample yet (audio still NULL) */
		memcpy(l->audio + l->audio_n, s, sizeof(*s) * n);
	l->audio_n += n;
	return 0;
}

/* --- the segmenter ------------------------------------------------------------ */

static void srv_dg_live_close_seg(struct srv_dg_live *l, int64_t end, bool speech_final,
				  bool from_finalize)
{
	if (l->n_finals == SRV_DG_LIVE_MAX_FINALS) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "audio arrives faster than it can be "
				  "transcribed (too many finals waiting)");
		return;
	}
	int64_t start = l->seg_open ? l->seg_start : end;
	l->finals[l->n_finals++] = (struct srv_dg_live_seg){ .start = start, .end = end,
		.speech_final = speech_final, .from_finalize = from_finalize };
	l->seg_open = false;
	l->seg_floor = end;
}

static void srv_dg_live_open_seg(struct srv_dg_live *l, int64_t at)
{
	int64_t start = at - SRV_DG_LIVE_PREROLL;
	start = start < l->seg_floor ? l->seg_floor : start;
	l->seg_open = true;
	l->seg_start = start < l->audio_base ? l->audio_base : start;
	l->interim_at = at;
}

/* UtteranceEnd's gap detector, fed every window (speechy: the VAD hears
 * speech in it, with the segmenter's hysteresis). */
static void srv_dg_live_gap(struct srv_dg_live *l, int64_t w0, bool speechy)
{
	if (!l->o.utterance_end_ms)
		return;
	if (speechy) {
		l->quiet_since = -1;
		l->heard_speech = true;
		return;
	}
	if (l->quiet_since < 0)
		l->quiet_since = w0;
	int64_t need = (int64_t)l->o.utterance_end_ms * SRV_DG_LIVE_RATE / 1000;
	if (l->heard_speech && w0 + SRV_DG_LIVE_WIN - l->quiet_since >= need) {
		l->heard_speech = false;
		l->ue_due_at = l->quiet_since;
	}
}

/* One scored window [w0, w0 + 512) with speech probability p. */
static void srv_dg_live_window(struct srv_dg_live *l, int64_t w0, float p)
{
	int64_t w1 = w0 + SRV_DG_LIVE_WIN;
	srv_dg_live_gap(l, w0, p >= SRV_DG_LIVE_SPEECH_ON || (l->in_speech && p >= SRV_DG_LIVE_SPEECH_OFF));
	if (!l->in_speech && p >= SRV_DG_LIVE_SPEECH_ON) {
		l->in_speech = true;
		l->silence_run = 0;
		if (!l->seg_open)
			srv_dg_live_open_seg(l, w0);
		if (l->o.vad_events && srv__dg_live_speech_started(l, (double)w0 / SRV_DG_LIVE_RATE))
			srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "out of memory");
	} else if (l->in_speech && p < SRV_DG_LIVE_SPEECH_OFF) {
		l->silence_run += SRV_DG_LIVE_WIN;
	} else if (l->in_speech) {
		l->silence_run = 0;
	}
	int64_t need = l->o.endpointing_ms >= 0
			       ? (int64_t)l->o.endpointing_ms * SRV_DG_LIVE_RATE / 1000
			       : SRV_DG_LIVE_QUIET_CLOSE;
	need = need < SRV_DG_LIVE_MIN_ENDPOINT ? SRV_DG_LIVE_MIN_ENDPOINT : need;
	if (l->in_speech && l->silence_run > 0 && l->silence_run >= need) {
		int64_t speech_end = w1 - l->silence_run;
		int64_t tail = l->silence_run < SRV_DG_LIVE_TAIL ? l->silence_run : SRV_DG_LIVE_TAIL;
		l->in_speech = false;
		if (l->seg_open)
			srv_dg_live_close_seg(l, speech_end + tail, l->o.endpointing_ms >= 0, false);
	} else if (l->seg_open && w1 - l->seg_start >= SRV_DG_LIVE_MAX_SEGMENT) {
		srv_dg_live_close_seg(l, w1, false, false);
		if (l->in_speech)
			srv_dg_live_open_seg(l, w1);
	}
}

/* --- the work's results (loop thread) -------------------------------------- */

/* The flush Finalize / CloseStream asked for, once every byte received
 * before it is decoded: the open segment (or an empty one) becomes a final. */
static void srv_dg_live_flush_now(struct srv_dg_live *l)
{
	if (!l->want_finalize || l->work_busy || l->raw.len || (l->want_eof && !l->eof_done))
		return;
	l->want_finalize = false;
	int64_t end = l->audio_base + (int64_t)l->audio_n;
	if (l->seg_open || l->finalize_flag)
		srv_dg_live_close_seg(l, end, false, l->finalize_flag);
	l->in_speech = false;
	l->silence_run = 0;
}

static void srv_dg_live_work_done(uv_work_t *w, int status)
{
	struct srv_dg_live *l = w->data;
	l->work_busy = false;
	if (srv__dg_live_release(l))
		return;
	srv__dg_live_enter(l);
	int rc = status ? -ST_CANCELED : l->work_rc;
	if (!rc)
		rc = srv_dg_live_append(l, l->work_in + l->work_old, l->work_n - l->work_old);
	if (rc == -ST_INVAL) {
		char reason[124];
		snprintf(reason, sizeof(reason), "DATA-0000: %.100s", l->work_err);
		srv__dg_live_fail(l, SRV_WS_CLOSE_PROTOCOL, reason);
	} else if (rc) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, rc == -ST_TOOBIG
			? "audio arrives faster than it can be transcribed" : st_str(rc));
	}
	for (size_t i = 0; !rc && i < l->work_n_win && l->state != SRV_DG_LIVE_STATE_DONE; i++) {
		srv_dg_live_window(l, l->vad_pos, l->work_probs[i]);
		l->vad_pos += SRV_DG_LIVE_WIN;
	}
	srv_dg_live_flush_now(l);
	srv__dg_live_pump(l);
	srv__dg_live_leave(l);
}

void srv__dg_live_flush(struct srv_dg_live *l, bool from_finalize)
{
	if (l->state != SRV_DG_LIVE_STATE_OPEN)
		return;
	if (!from_finalize) {
		l->state = SRV_DG_LIVE_STATE_FLUSHING;
		srv__conn_timer_start(l->conn, 0); /* no idle timeout while we answer */
	}
	l->want_eof |= !from_finalize;
	l->finalize_flag = (l->want_finalize && l->finalize_flag) || from_finalize;
	l->want_finalize = true;
	srv_dg_live_flush_now(l);
	srv__dg_live_pump(l);
}

/* --- transcription jobs -------------------------------------------------------- */

static void srv_dg_live_job_free(struct srv_dg_live_job *job)
{
	mem_free(job->samples);
	srv_buf_fini(&job->msg);
	srv_buf_fini(&job->commit_msg);
	mem_free(job->la.hyp);
	mem_free(job->new_la.hyp);
	mem_free(job);
}

/* The loop side of a finished job: send its Results, go on. */
static void srv_dg_live_job_after(struct srv_post *post)
{
	struct srv_dg_live_job *job = (struct srv_dg_live_job *)post;
	struct srv_dg_live *l = job->live;
	l->job = NULL;
	srv__jobs_end(l->srv);
	srv__dg_live_enter(l);
	bool sendable = l->ws && l->state != SRV_DG_LIVE_STATE_DONE;
	if (sendable && job->rc && job->is_final) {
		char reason[124];
		snprintf(reason, sizeof(reason), "transcription failed: %.90s", job->err);
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, reason);
	} else if (sendable && job->rc) {
		fprintf(stderr, "inferd: live %s: interim transcription failed: %s\n",
			l->request_id, job->err);
	} else if (sendable) {
		if (job->commit_msg.len) /* LocalAgreement-2's final, before the interim */
			srv__ws_send_text(l->ws, job->commit_msg.data, job->commit_msg.len);
		srv__ws_send_text(l->ws, job->msg.data, job->msg.len);
		l->n_finals_sent += job->is_final + (job->commit_msg.len > 0);
		if (job->is_final) /* a segment's end (UtteranceEnd waits for it), not a commit */
			l->final_end = job->seg.end;
		if (job->last_word_end > l->last_word_end)
			l->last_word_end = job->last_word_end;
		if (job->new_committed_end > l->committed_end)
			l->committed_end = job->new_committed_end;
		mem_free(l->la.hyp);
		l->la = job->new_la;
		job->new_la.hyp = NULL;
	}
	srv_dg_live_job_free(job);
	srv__dg_live_pump(l);
	srv__dg_live_leave(l);
}

/* eng_transcribe_done_fn, on a replica thread: render, then to the loop. */
static void srv_dg_live_job_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	struct srv_dg_live_job *job = ud;
	if (!rc)
		rc = srv__dg_live_render(job, t);
	else
		snprintf(job->err, sizeof(job->err), "%s", err ? err : st_str(rc));
	if (rc == -ST_NOMEM || rc == -ST_TOOBIG)
		snprintf(job->err, sizeof(job->err), "%s", st_str(rc));
	job->rc = rc;
	eng_transcript_destroy(t);
	srv__post(job->live->srv, &job->post, srv_dg_live_job_after);
}

/* A job over seg's samples (copied from the timeline). */
static struct srv_dg_live_job *srv_dg_live_job_new(struct srv_dg_live *l,
						   const struct srv_dg_live_seg *seg, bool is_final)
{
	struct srv_dg_live_job *job = mem_calloc(1, sizeof(*job));
	size_t n = (size_t)(seg->end - seg->start);
	float *s = mem_alloc(sizeof(*s) * (n ? n : 1));
	if (!job || !s) {
		mem_free(job);
		mem_free(s);
		return NULL;
	}
	if (n)
		memcpy(s, l->audio + (seg->start - l->audio_base), sizeof(*s) * n);
	*job = (struct srv_dg_live_job){ .live = l, .samples = s, .n = n, .seg = *seg,
					 .is_final = is_final, .committed_end = l->committed_end };
	srv_buf_init(&job->msg, SRV_AUDIO_OUT_MAX_LIVE);
	srv_buf_init(&job->commit_msg, SRV_AUDIO_OUT_MAX_LIVE);
	job->la = l->la; /* the tail; the hyp is the job's own copy */
	job->la.hyp = NULL;
	job->la.n_hyp = is_final ? 0 : l->la.n_hyp;
	if (job->la.n_hyp) {
		job->la.hyp = mem_alloc(sizeof(*job->la.hyp) * job->la.n_hyp);
		if (!job->la.hyp) {
			srv_dg_live_job_free(job);
			return NULL;
		}
		memcpy(job->la.hyp, l->la.hyp, sizeof(*job->la.hyp) * job->la.n_hyp);
	}
	eng_transcribe_params_init(&job->params);
	job->params.language = l->o.language;
	job->params.word_timestamps = true;
	job->params.vad_filter = ENG_VAD_FILTER_OFF; /* the segment is speech already */
	job->params.condition_on_previous_text = false;
	job->params.cancel = &l->cancel;
	job->params.window_min_s = (float)eng_model_live_window_ms(l->model) / 1000.0f;
	job->params.window_margin_s = SRV_DG_LIVE_WINDOW_MARGIN_S;
	if (!is_final)
		job->params.n_temperatures = 1; /* interims: greedy at 0 only, no fallback */
	return job;
}

/* Transcribe seg (an empty one is answered at once, without the engine). */
static void srv_dg_live_submit(struct srv_dg_live *l, const struct srv_dg_live_seg *seg,
			       bool is_final)
{
	struct srv_dg_live_job *job = srv_dg_live_job_new(l, seg, is_final);
	char err[256];
	if (!job) {
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "out of memory");
		return;
	}
	l->job = job;
	srv__jobs_begin(l->srv);
	if (job->n < SRV_DG_LIVE_WIN) { /* nothing to hear: an empty result */
		srv_dg_live_job_done(job, 0, NULL, NULL);
		return;
	}
	struct eng_asr_input in = { .samples = job->samples, .n_samples = job->n };
	/* live work before REST work, and a final (a caption someone waits
	 * for) before other streams' interims */
	struct eng_req_opts opts = { .priority = is_final ? ENG_PRIORITY_URGENT
							  : ENG_PRIORITY_HIGH };
	int rc = eng_transcribe_submit(l->model, &in, &job->params, &opts, srv_dg_live_job_done,
				       job, err, sizeof(err));
	if (!rc)
		return;
	l->job = NULL;
	srv__jobs_end(l->srv);
	srv_dg_live_job_free(job);
	if (is_final || rc != -ST_BUSY)
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, rc == -ST_BUSY ? "the server is busy" : err);
}

/* UtteranceEnd, once the finals before the gap are out: with the last
 * word's end, unless no word came since the previous one. */
static void srv_dg_live_check_utterance_end(struct srv_dg_live *l)
{
	if (l->ue_due_at < 0 || l->final_end < l->ue_due_at)
		return;
	l->ue_due_at = -1;
	if (l->last_word_end <= l->ue_word_end)
		return;
	l->ue_word_end = l->last_word_end;
	if (srv__dg_live_utterance_end(l))
		srv__dg_live_fail(l, SRV_WS_CLOSE_ERROR, "out of memory");
}

/* The lead's Metadata and close, once every channel has flushed. */
static void srv_dg_live_close_all(struct srv_dg_live *lead)
{
	for (int i = 0; i < lead->n_chan; i++)
		if (!lead->chans[i]->flushed)
			return;
	int rc = srv__dg_live_metadata(lead);
	if (rc) {
		srv__dg_live_fail(lead, SRV_WS_CLOSE_ERROR, st_str(rc));
		return;
	}
	for (int i = 0; i < lead->n_chan; i++)
		lead->chans[i]->state = SRV_DG_LIVE_STATE_DONE;
	lead->close_sent = lead->close_code;
	srv__ws_close(lead->ws, lead->close_code, "");
}

void srv__dg_live_pump(struct srv_dg_live *l)
{
	if (!l->ws || l->state == SRV_DG_LIVE_STATE_DONE)
		return;
	srv_dg_live_work_start(l);
	srv_dg_live_check_utterance_end(l);
	if (l->job)
		return;
	if (l->n_finals) {
		struct srv_dg_live_seg seg = l->finals[0];
		memmove(l->finals, l->finals + 1, sizeof(*l->finals) * --l->n_finals);
		srv_dg_live_submit(l, &seg, true);
		return;
	}
	int64_t scored = l->vad_pos;
	if (l->o.interim_results && l->seg_open && l->in_speech && l->state == SRV_DG_LIVE_STATE_OPEN &&
	    scored - l->interim_at >= SRV_DG_LIVE_INTERIM) {
		struct srv_dg_live_seg seg = { .start = l->seg_start, .end = scored };
		l->interim_at = scored;
		srv_dg_live_submit(l, &seg, false);
		return;
	}
	if (l->state == SRV_DG_LIVE_STATE_FLUSHING && !l->want_finalize && !l->work_busy &&
	    !l->seg_open && !l->flushed) {
		l->flushed = true;
		srv_dg_live_close_all(l->lead);
	}
}
