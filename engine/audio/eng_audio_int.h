/* eng_audio_int.h - the audio decoder's shared state (engine/audio/ only).
 *
 * eng_audio.c owns the public API (arguments, raw descriptors, names,
 * messages); eng_audio_src.c opens the packet source over the request
 * bytes (a container through libavformat, or headerless PCM fed to one of
 * libavcodec's PCM decoders); eng_audio_av.c decodes the packets, checks
 * the samples and resamples them with libswresample to 16 kHz mono s16,
 * the way faster-whisper 1.2.1 (faster_whisper/audio.py, PyAV) does.
 */
#ifndef ENG_AUDIO_INT_H
#define ENG_AUDIO_INT_H

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswresample/swresample.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/audio/eng_audio.h"

/* A read-only stream over the caller's bytes (the AVIOContext's opaque). */
struct audio_mem {
	const uint8_t *data; /* borrowed */
	int64_t len;	     /* bytes */
	int64_t pos;	     /* read position, 0..len */
};

/* One eng_audio_decode_channel call's state; zero-initialised, then
 * eng__audio_src_open, eng__audio_run, eng__audio_close. */
struct audio_dec {
	/* packet source */
	struct audio_mem mem;		     /* the request bytes */
	const struct eng_audio_raw *raw;     /* headerless layout, or NULL */
	int (*io_read)(void *, uint8_t *, int); /* a live container's pipe (no seeking,
					      * probed strictly, not read ahead), or
					      * NULL: the container is in mem */
	void *io_user;			     /* io_read's first argument */
	AVIOContext *pio;		     /* custom I/O over mem (containers) */
	AVFormatContext *fmt;		     /* demuxer (containers), or NULL */
	int stream;			     /* index of the first audio stream */
	size_t raw_frame_bytes;		     /* headerless: bytes per frame */
	AVCodecContext *codec;		     /* decoder */
	AVPacket *pkt;			     /* packet being fed */
	AVFrame *frame;			     /* frame being drained */
	/* resampling */
	SwrContext *swr;		     /* set up from the first frame */
	AVChannelLayout layout;		     /* the first frame's layout (swr's input) */
	int fmt_in;			     /* its enum AVSampleFormat */
	int16_t *s16;			     /* (s16_cap) swr's output block, mem.h */
	int s16_cap;			     /* samples */
	/* what was asked and what was seen */
	double max_seconds;		     /* ceiling on source frames / rate */
	int channel;			     /* channel kept alone, or -1: downmix */
	int rate;			     /* Hz of the source (first frame) */
	int channels;			     /* channels of the source */
	int64_t n_in;			     /* source frames decoded */
	int64_t max_in;			     /* ceiling on n_in, from max_seconds */
	size_t n_bad;			     /* samples that were NaN or infinite */
	int64_t first_bad;		     /* source frame of the first of them */
	int n_dec_err;			     /* packets in a row the decoder refused */
	int max_dec_err;		     /* 0: stop quietly after 1000 of them (an
					      * upload keeps what came before); a
					      * stream: fail (-ST_INVAL) after this many */
	/* output */
	float *out;			     /* (cap) mono 16 kHz samples, mem.h */
	size_t n_out, cap;		     /* samples held, capacity */
};

/* eng__audio_src_open - open d's packet source over d->mem (d->raw: a PCM
 * decoder; else libavformat with a custom AVIOContext, the first audio
 * stream's decoder; a duration the container states past
 * d->max_seconds is refused before decoding). Errors: -ST_UNSUPPORTED
 * (not audio, no audio stream, no decoder), -ST_TOOBIG, -ST_NOMEM; the
 * message in err. */
int eng__audio_src_open(struct audio_dec *d, char *err, size_t errlen);

/* eng__audio_run - decode every packet, check the samples, resample into
 * d->out (grown with mem.h). Truncated or corrupt data ends the stream
 * quietly. Errors: -ST_TOOBIG, -ST_INVAL (a channel the audio lacks),
 * -ST_UNSUPPORTED (rate or layout out of range or changing), -ST_IO
 * (resampler), -ST_NOMEM; the message in err. */
int eng__audio_run(struct audio_dec *d, char *err, size_t errlen);

/* eng__audio_feed - eng__audio_run over the bytes d->mem holds now; with
 * last false the decoder is not flushed and the resampler keeps its
 * filter state, so that the next bytes continue the same stream
 * (eng_audio_stream). Headerless sources only when last is false. */
int eng__audio_feed(struct audio_dec *d, bool last, char *err, size_t errlen);

/* eng__audio_close - free everything d holds but d->out. */
void eng__audio_close(struct audio_dec *d);

/* eng__audio_init - once per process: FFmpeg's log silenced. */
void eng__audio_init(void);

/* eng__audio_raw_check - raw's descriptor in range (FLAC and ogg-opus
 * describe themselves; raw Opus packets only when stream is true).
 * -ST_UNSUPPORTED or -ST_INVAL with err set. */
int eng__audio_raw_check(const struct eng_audio_raw *raw, bool stream, char *err, size_t errlen);

/* A container decoded by its own thread as its bytes arrive
 * (eng_audio_pipe.c; the stream modes are described in eng_audio.h). */
struct audio_pipe;

#define ENG__AUDIO_STREAM_MAX_DEC_ERR 50 /* a stream's undecodable packets in a row before
					  * it fails (1 s of 20 ms Opus packets) */

/* eng__audio_pipe_create - start the thread, which keeps the given
 * channel (-1: all mixed); *out new. -ST_NOMEM, -ST_IO. */
int eng__audio_pipe_create(int channel, struct audio_pipe **out, char *err, size_t errlen);

/* eng__audio_pipe_push - hand len bytes (borrowed) to the thread (last:
 * the end of the stream after them) and wait until it has used them all
 * and waits for more (last: until it has stopped); *samples / *n the
 * samples made meanwhile (owned by p, valid until the next push).
 * Errors as eng_audio_stream_push. */
int eng__audio_pipe_push(struct audio_pipe *p, const void *data, size_t len, bool last,
			 const float **samples, size_t *n, char *err, size_t errlen);

/* eng__audio_pipe_destroy - wake the thread wherever it waits, join it,
 * free; NULL is a no-op. */
void eng__audio_pipe_destroy(struct audio_pipe *p);

#endif /* ENG_AUDIO_INT_H */
