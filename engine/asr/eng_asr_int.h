/* eng_asr_int.h - a transcription request between the three files of
 * asr/: submitted by eng_asr_submit.c, taken by the replica loop
 * (eng_asr_replica.c), which runs the algorithm (eng_asr_transcribe.c) on
 * it. Internal to engine/. */
#ifndef ENG_ASR_INT_H
#define ENG_ASR_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "engine/eng.h"
#include "engine/models/eng_whisper.h"
#include "engine/sched/eng_sched.h"

struct dev_pool;
struct dev_queue;
struct eng_whisper_runner;

/* A submitted transcription (eng_transcribe_submit). */
struct eng__asr_req {
	struct eng__req base;          /* first: the scheduler's view */
	const struct eng_model *m;
	struct eng_asr_input in;       /* borrowed until done */
	struct eng_audio_raw raw;      /* a copy of *in.raw (in.raw points here) */
	struct eng_transcribe_params p; /* a copy; strings borrowed */
	eng_transcribe_done_fn done;
	void *ud;
};

/* eng__asr_req_new - a request for in with p (copied), done(ud) at its
 * end, not queued: *out, or -ST_NOMEM. Freed by its end. */
int eng__asr_req_new(const struct eng_model *m, const struct eng_asr_input *in,
		     const struct eng_transcribe_params *p, eng_transcribe_done_fn done, void *ud,
		     struct eng__asr_req **out);

/* eng__asr_submit_err - err for a queueing error rc of model m (-ST_BUSY,
 * -ST_CLOSED, -ST_NOMEM); returns rc. */
int eng__asr_submit_err(const struct eng_model *m, int rc, char *err, size_t errlen);

/* Samples a chunk of batched long-form transcription holds at most: one
 * 30-second window. */
#define ENG_ASR_CHUNK_MAX_SAMPLES (30u * ENG_WHISPER_SAMPLE_RATE)

/* eng__asr_chunks - cut samples x[n] into chunks of at most
 * ENG_ASR_CHUNK_MAX_SAMPLES, each cut in the quietest 200 ms of the
 * chunk's last 10 s (signal energy; faster-whisper's batched pipeline
 * cuts with its VAD). Writes the first sample of each chunk to start[]
 * (up to cap; start may be NULL) and returns the number of chunks
 * (0 for n = 0). */
size_t eng__asr_chunks(const float *x, size_t n, size_t *start, size_t cap);

/* eng__asr_submit_chunked - eng_transcribe_submit for p->batched with
 * decoded samples (eng_asr_chunked.c): the chunks queued as one group,
 * done called once with their transcripts joined (or the first chunk's
 * error). Returns as eng_transcribe_submit does. */
int eng__asr_submit_chunked(const struct eng_model *m, const struct eng_asr_input *in,
			    const struct eng_transcribe_params *p, const struct eng_req_opts *o,
			    eng_transcribe_done_fn done, void *ud, char *err, size_t errlen);

/* eng__transcribe_check - the parameter checks of eng_transcribe_submit
 * (err cleared first). 0 or -ST_INVAL with err. */
int eng__transcribe_check(const struct eng_model *m, const struct eng_transcribe_params *p,
			  char *err, size_t errlen);

/* eng__transcribe_run - the whole transcription of samples [n] on the
 * calling (replica) thread: with vad_filter (eng__asr_vad_is_on) the
 * speech spans' audio through eng__transcribe_plain and the times mapped
 * back (eng_asr_vad.c), else eng__transcribe_plain. Arguments and errors
 * as eng__transcribe_plain's. */
int eng__transcribe_run(const struct eng_model *m, struct dev_queue *q, const float *samples,
			size_t n_samples, const struct eng_transcribe_params *p,
			int (*stop)(void *arg), void *stop_arg,
			const struct eng_whisper_runner *run, struct eng_transcript **out,
			char *err, size_t errlen);

/* eng__asr_vad_is_on - whether p filters with the VAD: ON, or DEFAULT on
 * a model whose default is on. */
bool eng__asr_vad_is_on(const struct eng_model *m, const struct eng_transcribe_params *p);

/* eng__asr_vad_check - (eng_transcribe_submit, after eng__transcribe_check)
 * p->vad_filter is a known value, and ON only on a
 * model with a VAD loaded: 0 or -ST_INVAL with err. */
int eng__asr_vad_check(const struct eng_model *m, const struct eng_transcribe_params *p,
		       char *err, size_t errlen);

/* eng__transcribe_plain - the whole transcription of samples [n] on the
 * calling thread, its passes on queue q (ops called from this thread: a
 * queue no other thread uses meanwhile).
 * p checked already. Before every window and every decoder pass it stops
 * on p->cancel (-ST_CANCELED) or when stop(stop_arg) returns non-zero (that
 * status: the deadline, shutdown). Encoder and decoder passes go through
 * run when it is not NULL (a batcher on another queue of q's device; q
 * then runs the word alignment and beam search's cache copies). On
 * success *out is new. Errors: -ST_NOMEM, others with err. */
int eng__transcribe_plain(const struct eng_model *m, struct dev_queue *q,
			  const float *samples, size_t n_samples,
			  const struct eng_transcribe_params *p, int (*stop)(void *arg),
			  void *stop_arg, const struct eng_whisper_runner *run,
			  struct eng_transcript **out, char *err, size_t errlen);

/* A segment of a window as _split_segments_by_timestamps cuts it, before
 * it is emitted (eng_asr_transcribe.c). */
struct eng__asr_cut {
	double start, end;      /* seconds from the audio start */
	const int32_t *tokens;  /* the window's result, borrowed */
	size_t n_tokens;
	struct eng_word *words; /* word timestamps: new (eng__asr_cut_fini), or NULL */
	size_t n_words;
};

/* What word timing needs of a window (borrowed). */
struct eng__asr_words_in {
	const struct eng_whisper *w;
	struct dev_queue *q;             /* the alignment pass runs here */
	const struct eng_whisper_tok *tok;
	const struct eng_whisper_enc *e; /* the window's encoder output */
	const int32_t *sot;              /* the SOT sequence [n_sot] */
	size_t n_sot;
	size_t seek;                     /* the window's first mel frame */
	size_t n_frames;                 /* its mel frames (segment_size) */
	double last_speech;              /* seconds: the previous window's last word end */
	const char *language;            /* ISO code of the transcript ("ja": words are
					  * characters), or NULL */
};

/* eng__asr_words - word timestamps of a window's cuts (eng_asr_words.c;
 * faster-whisper's add_word_timestamps): each cut's words (text with its
 * leading space, start/end in seconds rounded to 10 ms, probability) into
 * cuts[i].words, and cuts[i].start/end moved to its words as there. The
 * alignment pass runs on the calling thread. Cuts without text get no
 * words; a window with no frames to align or a model without alignment
 * heads gives none. Returns 0, -ST_NOMEM or a device error (cuts may then hold words:
 * eng__asr_cut_fini). */
int eng__asr_words(const struct eng__asr_words_in *in, struct eng__asr_cut *cuts, size_t n_cuts);

/* eng__asr_round2 - Python's round(x, 2), as word times are rounded: the
 * two-decimal value nearest x's exact binary value, ties to even (glibc's
 * printf rounds so). */
double eng__asr_round2(double x);

/* eng__asr_cut_fini - free c's words. */
void eng__asr_cut_fini(struct eng__asr_cut *c);

/* eng__asr_loop - a transcription replica's work item (dev_work_fn). */
void eng__asr_loop(void *arg, struct dev_pool *pool);

#endif /* ENG_ASR_INT_H */
