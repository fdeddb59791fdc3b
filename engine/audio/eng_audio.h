/* eng_audio.h - decode request audio to 16 kHz mono float32 for Whisper.
 *
 * FFmpeg's libraries (libavformat, libavcodec, libswresample) read the
 * bytes from memory, the way faster-whisper 1.2.1 decodes
 * (faster_whisper/audio.py through PyAV): the first audio stream of the
 * container is decoded and resampled by libswresample to signed 16-bit
 * mono at 16000 Hz (default options; the downmix is swresample's matrix
 * for a mono layout: stereo is the mean of the two channels), then each
 * sample is int16 / 32768. So the output is on the s16 grid, clipped to
 * [-1, 32767/32768], and equal to faster-whisper's for the same bytes.
 * Containers: WAV/W64/RF64 (PCM 8..32-bit, float32/64, extensible,
 * mu-law, A-law, ...), FLAC, MP3, Ogg Vorbis/Opus, WebM/Matroska
 * (MediaRecorder files without duration or cues too), MP4/M4A/AAC, AIFF,
 * CAF, AU and a few more audio containers (no playlists, no video-only
 * files; a container cannot open other files or URLs). Headerless PCM is
 * described by the caller with Deepgram's query parameters (encoding,
 * sample_rate, channels; see https://developers.deepgram.com/docs/encoding)
 * and decoded by FFmpeg's PCM decoders. Float input is checked before
 * resampling: a NaN or infinite sample anywhere is an error (-ST_INVAL);
 * magnitudes beyond 32 are clamped there (full scale at s16 either way).
 *
 * Truncated or corrupt data after a valid header is not an error: the
 * frames decoded before it are the audio (a WAV whose header claims more
 * data than the body holds yields the shorter audio). A truncated or
 * unrecognisable header is -ST_UNSUPPORTED.
 *
 * Thread: any (FFmpeg's logging is silenced process-wide on first use).
 * Memory: FFmpeg allocates internally through av_malloc; everything
 * returned goes through mem.h.
 */
#ifndef ENG_AUDIO_H
#define ENG_AUDIO_H

#include <stddef.h>

#define ENG_AUDIO_RATE	       16000  /* Hz of every decoded output */
#define ENG_AUDIO_MAX_SECONDS  7200   /* default decoded-length ceiling (2 h, 460 MB) */
#define ENG_AUDIO_MIN_RATE     1000   /* Hz, lowest source rate accepted */
#define ENG_AUDIO_MAX_RATE     384000 /* Hz, highest source rate accepted */
#define ENG_AUDIO_MAX_CHANNELS 64     /* highest channel count accepted (libswresample's) */

/* Headerless encodings, named as Deepgram's `encoding` parameter. */
enum eng_audio_encoding {
	ENG_AUDIO_ENCODING_LINEAR16 = 0, /* "linear16": signed 16-bit little-endian PCM */
	ENG_AUDIO_ENCODING_LINEAR32,	 /* "linear32": 32-bit little-endian float PCM
					  * (Deepgram's docs: "floating-point PCM") */
	ENG_AUDIO_ENCODING_MULAW,	 /* "mulaw": G.711 mu-law, 8 bits */
	ENG_AUDIO_ENCODING_ALAW,	 /* "alaw": G.711 A-law, 8 bits */
	ENG_AUDIO_ENCODING_FLAC,	 /* "flac": self-describing; decoded as a container */
	ENG_AUDIO_ENCODING_OGG_OPUS,	 /* "ogg-opus": self-describing; decoded as a container */
	ENG_AUDIO_ENCODING_OPUS,	 /* "opus": raw Opus packets, streams only (see
					  * eng_audio_stream_push); eng_audio_encoding_parse
					  * does not return it, uploads refuse it */
	ENG_AUDIO_ENCODING_COUNT
};

/* How to read headerless audio (raw != NULL in eng_audio_decode). For
 * FLAC and ogg-opus the stream's own rate and channels win. */
struct eng_audio_raw {
	enum eng_audio_encoding encoding; /* sample format */
	int sample_rate;		  /* Hz, ENG_AUDIO_MIN_RATE..ENG_AUDIO_MAX_RATE */
	int channels;			  /* interleaved channels, 1..ENG_AUDIO_MAX_CHANNELS */
};

/* Decoded audio. Embedded by the caller; eng_audio_fini frees it. */
struct eng_audio {
	float *samples;	     /* (n_samples) f32 mono at 16 kHz, new (mem.h), owned */
	size_t n_samples;    /* samples at ENG_AUDIO_RATE */
	double duration_s;   /* source frames / source rate, seconds */
	int src_rate;	     /* Hz of the input */
	int src_channels;    /* channels of the input before downmix */
	char src_format[32]; /* "<container>/<codec>" in FFmpeg's names ("wav/pcm_s16le",
			      * "ogg/opus", "matroska/opus", "mov/aac"), one name when
			      * they agree ("mp3", "flac"), or "raw/linear16", ... */
};

/* eng_audio_encoding_parse - Deepgram `encoding` name -> enum. Other
 * Deepgram names (amr-nb, amr-wb, opus (raw packets: a live stream's
 * caller sets ENG_AUDIO_ENCODING_OPUS itself), speex, g729) and
 * anything unknown give -ST_UNSUPPORTED; NULL gives -ST_INVAL. */
int eng_audio_encoding_parse(const char *name, enum eng_audio_encoding *out);

/* eng_audio_encoding_name - the Deepgram name; "?" when out of range. */
const char *eng_audio_encoding_name(enum eng_audio_encoding enc);

/* eng_audio_decode_max - decode len bytes of data (borrowed) into *out.
 *   raw:         NULL to detect the container, else the headerless layout.
 *   max_seconds: ceiling on the decoded duration (source frames / rate).
 *   out:         zeroed on entry; on success owns samples (eng_audio_fini).
 *   err:         errlen bytes for a one-line message on failure (may be NULL).
 * Errors: -ST_INVAL empty input ("empty audio"), a valid header with no
 * frames ("audio has no samples"), a NaN or infinite sample, or a bad raw
 * descriptor;
 * -ST_UNSUPPORTED bytes that are not audio, a truncated header, an unknown
 * encoding, a rate or channel count outside the limits above;
 * -ST_TOOBIG longer than max_seconds (refused before decoding when the
 * container states its duration, else when the decoded frames pass it);
 * -ST_NOMEM; -ST_IO a resampler failure. On error *out holds nothing to free. */
int eng_audio_decode_max(const void *data, size_t len, const struct eng_audio_raw *raw,
			 double max_seconds, struct eng_audio *out, char *err, size_t errlen);

/* eng_audio_decode_channel - eng_audio_decode_max keeping channel
 * `channel` (0-based) alone instead of the mean of all (channel -1: the
 * mean): Deepgram's multichannel, each channel transcribed on its own.
 * A channel the audio does not have is -ST_INVAL. */
int eng_audio_decode_channel(const void *data, size_t len, const struct eng_audio_raw *raw,
			     double max_seconds, int channel, struct eng_audio *out, char *err,
			     size_t errlen);

/* eng_audio_decode - eng_audio_decode_max with ENG_AUDIO_MAX_SECONDS. */
int eng_audio_decode(const void *data, size_t len, const struct eng_audio_raw *raw,
		     struct eng_audio *out, char *err, size_t errlen);

/* Audio decoded as it arrives (Deepgram's live audio), in one of three
 * modes chosen at creation:
 *  - headerless PCM (linear16, linear32, mulaw, alaw): the same FFmpeg PCM
 *    decoder and libswresample resampler as eng_audio_decode, kept open
 *    between pushes so that the resampler's filter runs across chunk
 *    boundaries as over one file;
 *  - a container (raw NULL, or encoding flac / ogg-opus, which describe
 *    themselves; sample_rate and channels are then ignored): libavformat
 *    cannot be fed push-wise, so a thread per stream runs the demuxer,
 *    decoder and resampler over a pipe whose read blocks until bytes are
 *    pushed (eng_audio_pipe.c). The formats are eng_audio_decode's
 *    (WAV, Ogg Opus/Vorbis/FLAC, WebM/Matroska, MP3, FLAC, ...), detected
 *    from the first bytes (a probe needs 2 KiB at least, and up to 16 KiB
 *    of bytes that are not clearly audio are refused);
 *  - raw Opus packets (ENG_AUDIO_ENCODING_OPUS; libavcodec's Opus decoder
 *    at 48 kHz, channels 1 or 2 from raw, sample_rate ignored): the bytes
 *    pushed are a sequence of records, each a 4-byte little-endian packet
 *    length then the packet (ENG_AUDIO_OPUS_MAX_PACKET bytes at most); a
 *    record may span pushes. Deepgram's raw opus is one packet per
 *    WebSocket message: the server writes the length prefixes, since it
 *    joins messages before they are pushed.
 * Opaque; one thread at a time. */
struct eng_audio_stream;

#define ENG_AUDIO_OPUS_MAX_PACKET   (64 << 10)  /* bytes of one raw Opus packet */
#define ENG_AUDIO_STREAM_MAX_PUSH   (16u << 20) /* bytes one push may carry */

/* eng_audio_stream_create - a stream of audio laid out as raw (borrowed;
 * NULL: a container, detected), giving its channel `channel` alone
 * (Deepgram's multichannel, as eng_audio_decode_channel) or, with -1, the
 * mean of its channels. *out is new (eng_audio_stream_destroy); a
 * container stream owns a thread from its first bytes to destroy. Errors: -ST_INVAL
 * or -ST_UNSUPPORTED for a bad descriptor, -ST_NOMEM, -ST_IO (no thread);
 * err names it. A channel the audio does not have fails the first push
 * that decodes a frame (-ST_INVAL). */
int eng_audio_stream_create(const struct eng_audio_raw *raw, int channel,
			    struct eng_audio_stream **out, char *err, size_t errlen);

/* eng_audio_stream_push - decode len more bytes (borrowed; any length: a
 * partial frame, packet record or container page waits for the next push).
 * *samples points at the 16 kHz mono float samples they completed (*n of
 * them; owned by the stream, valid until the next push or finish). A
 * container stream's push returns once its thread has used every byte
 * pushed and waits for more (or has stopped), so everything decodable
 * from the bytes so far is out, but for what a demuxer reads in blocks
 * before it returns a packet (WAV: 4 KiB). Errors: -ST_INVAL (data that is
 * not decodable audio: a NaN or infinite sample, a container that cannot
 * be recognised or stops being readable, a bad Opus record, 50 packets in
 * a row the decoder refuses (ENG__AUDIO_STREAM_MAX_DEC_ERR); the stream is
 * unusable afterwards), -ST_TOOBIG (len past ENG_AUDIO_STREAM_MAX_PUSH),
 * -ST_NOMEM, -ST_IO; err says which. Not the loop thread (compute). */
int eng_audio_stream_push(struct eng_audio_stream *s, const void *data, size_t len,
			  const float **samples, size_t *n, char *err, size_t errlen);

/* eng_audio_stream_finish - the end of the stream (Deepgram's
 * CloseStream): decode what was held back waiting for more bytes (a
 * container's last block, the decoder's and resampler's delay) into
 * *samples / *n as push does. A container that ended before any audio
 * (no byte, a header alone, fewer bytes than its probe needs) is an empty
 * stream: no sample, no error. Pushes after it are -ST_INVAL. Errors as
 * push. Not the loop thread. */
int eng_audio_stream_finish(struct eng_audio_stream *s, const float **samples, size_t *n,
			    char *err, size_t errlen);

/* eng_audio_stream_destroy - free; a container stream's thread is woken
 * and joined, wherever it waits. NULL is a no-op. */
void eng_audio_stream_destroy(struct eng_audio_stream *s);

/* eng_audio_fini - free a's samples and zero it; NULL is a no-op. */
void eng_audio_fini(struct eng_audio *a);

#endif /* ENG_AUDIO_H */
