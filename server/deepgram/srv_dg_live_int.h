/* srv_dg_live_int.h - one live stream of Deepgram's streaming API
 * (GET /v1/listen over a WebSocket), shared by srv_dg_live.c (the socket:
 * handshake, client messages, timers, closing), srv_dg_live_audio.c (the
 * audio: decoding and Silero VAD on libuv's thread pool, segments,
 * transcription jobs) and srv_dg_live_out.c (the JSON messages).
 *
 * The policy (part 1): the audio since the last final is kept; Silero VAD
 * scores each 32 ms window as it arrives; speech opens a segment (with
 * SRV_DG_LIVE_PREROLL of audio before it), enough silence after speech
 * (endpointing, at least SRV_DG_LIVE_MIN_ENDPOINT) closes it. A closed segment is transcribed once more, as
 * a final (is_final, speech_final at an endpoint); while one is open and
 * interim_results is on, its audio so far is transcribed every
 * SRV_DG_LIVE_INTERIM of new audio (is_final false). Finalize and
 * CloseStream close the open segment at once; a segment never passes
 * SRV_DG_LIVE_MAX_SEGMENT. Every transcription is one job on the model's
 * scheduler (the REST path's eng_transcribe_submit on 16 kHz samples), at
 * most one per stream in flight; finals wait in order in finals[]. Jobs
 * run before uploads (ENG_PRIORITY_HIGH), finals before other streams'
 * interims (ENG_PRIORITY_URGENT), and their encoder windows are trimmed to
 * the audio plus SRV_DG_LIVE_WINDOW_MARGIN_S, at least the model's
 * live_window_ms (eng_transcribe_params.window_min_s; whisper.cpp's
 * audio_ctx), since re-encoding a padded 30 s window every 0.5 s is what
 * limits the streams per core.
 *
 * Inside a segment, words are committed by LocalAgreement-2 (Machacek,
 * Dabre and Bojar 2023, whisper_streaming's policy): the words two
 * consecutive interim transcriptions agree on (their longest common
 * prefix, compared lower-cased without punctuation, the newest word always
 * left open) go out at once as a final (is_final, not speech_final), and
 * interims then show only the uncommitted tail. Every later transcription
 * of the segment, interim or final, still hears the segment from its start
 * (Whisper needs the context; cutting at a word's estimated end would cut
 * into words) and drops what was committed: the words whose midpoint lies
 * before committed_end, then a repeat of the last committed words at its
 * head (up to SRV_DG_LIVE_TAIL_WORDS, as whisper_streaming checks
 * n-grams). A model without word timestamps commits nothing early.
 *
 * Threading: everything belongs to the loop thread except the fields the
 * decode work (work_*) and a job (struct srv_dg_live_job) own while they
 * run on other threads. Lifetime: a stream holds its connection
 * (conn->n_work) and is freed once the connection has gone and neither
 * the decode work nor a job is in flight.
 */
#ifndef SRV_DG_LIVE_INT_H
#define SRV_DG_LIVE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <nettle/sha2.h>

#include "server/deepgram/srv_dg_int.h"
#include "server/srv_int.h"
#include "server/ws/srv_ws.h"

#define SRV_DG_LIVE_RATE         16000        /* Hz of the timeline (samples) */
#define SRV_DG_LIVE_WIN          512          /* samples per VAD window (32 ms) */
#define SRV_DG_LIVE_VAD_CTX      (32 * 512)   /* samples of context the VAD re-reads (1 s) */
#define SRV_DG_LIVE_PREROLL      3200         /* samples kept before speech (200 ms) */
#define SRV_DG_LIVE_TAIL         3200         /* most silence kept after speech (200 ms) */
#define SRV_DG_LIVE_INTERIM      8000         /* new samples between interim results (0.5 s) */
#define SRV_DG_LIVE_MAX_SEGMENT  (29 * 16000) /* samples: a final before Whisper's 30 s window */
#define SRV_DG_LIVE_MIN_ENDPOINT 8000         /* samples: shorter endpointing acts as 500 ms,
					       * since Whisper needs whole phrases (a 10 ms
					       * endpoint cuts between words) */
#define SRV_DG_LIVE_QUIET_CLOSE  16000        /* endpointing off: silence that still closes
					       * a segment (1 s, is_final without speech_final) */
#define SRV_DG_LIVE_MAX_FINALS   64           /* closed segments waiting for their final */
#define SRV_DG_LIVE_MAX_KEEP     (300 * 16000) /* samples held at most (5 min): past it the
						* client sends faster than we transcribe */
#define SRV_DG_LIVE_MAX_RAW      (8u << 20)   /* undecoded bytes held at most */
#define SRV_DG_LIVE_MAX_MSG      (1u << 20)   /* largest WebSocket message (bytes) */
#define SRV_AUDIO_OUT_MAX_LIVE   (4u << 20)   /* ceiling on one rendered Results message */
#define SRV_DG_LIVE_SPEECH_ON    0.5f         /* VAD probability that starts speech */
#define SRV_DG_LIVE_SPEECH_OFF   0.35f        /* ... below which it is silence */
#define SRV_DG_LIVE_WINDOW_MARGIN_S 2.0f /* seconds of padding past the audio in a trimmed
					  * encoder window (models[].live_window_ms) */
#define SRV_DG_LIVE_TAIL_WORDS   5            /* committed words kept to drop their repeat */
#define SRV_DG_LIVE_NORM         64           /* bytes of a word compared by LocalAgreement */

/* Where a stream is; transitions: OPEN -> FLUSHING (CloseStream, an empty
 * binary frame, or drain) -> DONE once its finals and Metadata are sent
 * and the close frame queued; any -> DONE on the idle timeout, an error or
 * the peer's close. */
enum srv_dg_live_state {
	SRV_DG_LIVE_STATE_OPEN = 0,
	SRV_DG_LIVE_STATE_FLUSHING,
	SRV_DG_LIVE_STATE_DONE,
};

/* A closed segment waiting for its final: [start, end) in samples. */
struct srv_dg_live_seg {
	int64_t start, end;
	bool speech_final;  /* closed at an endpoint */
	bool from_finalize; /* closed by Finalize */
};

struct srv_dg_live;

/* LocalAgreement-2's memory of the open segment, in normalized words. */
struct srv_dg_live_la {
	char (*hyp)[SRV_DG_LIVE_NORM]; /* the last interim's uncommitted words [n_hyp],
					* mem.h, NULL when none */
	size_t n_hyp;
	char tail[SRV_DG_LIVE_TAIL_WORDS][SRV_DG_LIVE_NORM]; /* the last committed [n_tail] */
	size_t n_tail;
};

/* One transcription of a stream, in flight on the engine. */
struct srv_dg_live_job {
	struct srv_post post;         /* back to the loop thread */
	struct srv_dg_live *live;     /* owner; outlives the job */
	float *samples;               /* [n] copied from the timeline, mem.h */
	size_t n;
	struct srv_dg_live_seg seg;   /* what it covers (start = samples[0]) */
	bool is_final;
	struct eng_transcribe_params params;
	int rc;                       /* 0 or -ST_* from the engine */
	char err[256];
	struct srv_buf msg;           /* the Results message, rendered by the worker */
	double last_word_end;         /* stream seconds, 0 with no words */
	/* LocalAgreement-2: the stream's state when submitted (owned copies),
	 * and what the worker made of it */
	int64_t committed_end;        /* samples: words before it were final */
	struct srv_dg_live_la la;     /* (a final's has no hyp) */
	struct srv_buf commit_msg;    /* interim: a final of the newly committed words,
				       * or empty */
	int64_t new_committed_end;    /* what committed_end becomes */
	struct srv_dg_live_la new_la; /* what la becomes */
};

struct srv_dg_live {
	struct srv *srv;
	struct srv_conn *conn;        /* held through conn->n_work until freed */
	struct srv_ws *ws;            /* NULL once the connection has gone */
	/* multichannel=true: each channel of the audio is a stream of its own
	 * (all of this struct but the socket, which they share); the lead,
	 * channel 0, gets the socket's and the connection's events and hands
	 * them to every channel, and sends Metadata and the close once all
	 * are flushed. Without it one stream (n_chan 1) hears the channels
	 * mixed. The other channels reach the lead only while ws is set. */
	struct srv_dg_live *lead;     /* channel 0 (itself for the lead) */
	struct srv_dg_live **chans;   /* lead only: [n_chan], chans[0] the lead, mem.h */
	int chan, n_chan;             /* this stream's channel_index, of how many */
	bool flushed;                 /* FLUSHING and all its finals out */
	struct srv_dg_live_opts o;
	const struct eng_model *model;
	enum srv_dg_live_state state;
	int depth;                    /* entry points on the stack (srv__dg_live_enter): the
				       * stream is freed only when the outermost leaves */
	uint16_t close_code;          /* FLUSHING: the code to close with (1000, 1001) */
	uint16_t close_sent;          /* the close code sent, 0 none (the access log) */
	uint64_t start_ns;            /* uv_hrtime at the handshake */
	unsigned n_finals_sent;       /* final Results sent (the access log) */
	_Atomic int cancel;           /* set when the client goes: jobs stop early */
	char request_id[SRV_REQUEST_ID_MAX + 1];
	char created[40];
	char model_uuid[37];
	/* input: bytes received, waiting for the decode work */
	struct srv_buf raw;
	/* the decode + VAD work on libuv's thread pool */
	uv_work_t work;
	bool work_busy;
	struct srv_buf work_raw;      /* the bytes it decodes */
	float *work_in;               /* [work_n]: VAD context, then the new samples */
	size_t work_n, work_ctx;      /* samples, of which context */
	size_t work_old;              /* samples copied in (context + unscored): new ones follow */
	float *work_probs;            /* [work_n_win] probabilities of the new windows */
	size_t work_n_win;
	int work_rc;
	char work_err[256];
	struct eng_audio_stream *dec; /* the decoder (work thread while busy) */
	struct sha256_ctx sha;        /* of every audio byte (work thread while busy) */
	/* the timeline: samples [audio_base, audio_base + audio_n) at 16 kHz */
	float *audio;
	size_t audio_n, audio_cap;
	int64_t audio_base;
	int64_t vad_pos;              /* samples scored by the VAD (a multiple of 512) */
	/* the segmenter */
	bool in_speech;
	int64_t silence_run;          /* samples of silence since speech was last heard */
	bool seg_open;
	int64_t seg_start;            /* the open segment's first sample */
	int64_t seg_floor;            /* no segment starts before this (the last one's end) */
	int64_t interim_at;           /* the open segment's audio the last interim covered */
	int64_t committed_end;        /* LocalAgreement-2: samples before it are final */
	struct srv_dg_live_la la;     /* LocalAgreement-2's words */
	struct srv_dg_live_seg finals[SRV_DG_LIVE_MAX_FINALS];
	size_t n_finals;
	struct srv_dg_live_job *job;  /* in flight, or NULL */
	bool want_finalize;           /* Finalize/CloseStream waits for the audio before it */
	bool want_eof;                /* CloseStream: the decoder is told the audio ended */
	bool eof_done;                /* ... and that work has started */
	bool work_eof;                /* the work running is that end (eng_audio_stream_finish) */
	bool finalize_flag;           /* that flush came from Finalize */
	/* UtteranceEnd: a gap of utterance_end_ms after speech is seen by the
	 * VAD (ue_due_at: where the gap began, -1 none); the message goes once
	 * every final before the gap is sent (final_end reaches it), with the
	 * last word's end (none: no message) */
	int64_t quiet_since;          /* first silent sample since speech, -1 in speech */
	bool heard_speech;            /* speech since the last gap was marked */
	int64_t ue_due_at;
	int64_t final_end;            /* end of the last final sent (samples) */
	double last_word_end;         /* the latest word's end (s), 0 none */
	double ue_word_end;           /* last_word_end of the last UtteranceEnd sent */
};

/* srv_dg_live_audio.c */
/* srv__dg_live_audio - a binary message: queue its bytes for decoding. */
void srv__dg_live_audio(struct srv_dg_live *l, const uint8_t *data, size_t n);
/* srv__dg_live_flush - Finalize (from_finalize true) or CloseStream:
 * once the audio received so far is decoded, close the open segment (or
 * queue an empty final) and let the finals go out. */
void srv__dg_live_flush(struct srv_dg_live *l, bool from_finalize);
/* srv__dg_live_pump - start what can start: the decode work, the next
 * job; and when FLUSHING and nothing is left, the Metadata and close. */
void srv__dg_live_pump(struct srv_dg_live *l);
/* srv__dg_live_release - free l if its connection has gone, no work or
 * job is in flight and no entry point is running; true when freed. */
bool srv__dg_live_release(struct srv_dg_live *l);
/* srv__dg_live_enter / _leave - bracket an entry point from the loop
 * (a socket event, a timer, a finished work or job), so that a connection
 * closing inside it does not free l under it; _leave frees l when it can
 * (true: freed, do not touch it). */
void srv__dg_live_enter(struct srv_dg_live *l);
bool srv__dg_live_leave(struct srv_dg_live *l);
/* srv__dg_live_fail - send nothing more: close with code and reason. */
void srv__dg_live_fail(struct srv_dg_live *l, uint16_t code, const char *reason);

/* srv_dg_live_out.c (loop thread unless said) */
/* srv__dg_live_render - job's messages: with LocalAgreement-2 (see above)
 * its words less those committed before it, then for an interim the final
 * of the words it agrees on with job->la.hyp into job->commit_msg and the
 * rest as the interim into job->msg; for a final all of them into
 * job->msg. Sets last_word_end, new_committed_end and new_la.
 * Worker thread. 0, -ST_NOMEM, -ST_TOOBIG. */
int srv__dg_live_render(struct srv_dg_live_job *job, const struct eng_transcript *t);
/* srv__dg_live_send_json - dump obj (stolen) and send it as a text
 * message; 0 (also when the socket is closing), -ST_NOMEM, -ST_TOOBIG. */
int srv__dg_live_send_json(struct srv_dg_live *l, json_t *obj);
/* SpeechStarted at stream second t; UtteranceEnd after l->last_word_end
 * (both with l's channel); the closing Metadata (the lead's: all
 * channels). Errors as srv__dg_live_send_json. */
int srv__dg_live_speech_started(struct srv_dg_live *l, double t);
int srv__dg_live_utterance_end(struct srv_dg_live *l);
int srv__dg_live_metadata(struct srv_dg_live *l);

#endif /* SRV_DG_LIVE_INT_H */
