/* eng_audio.c - audio bytes -> 16 kHz mono float32 (contract in eng_audio.h):
 * the public API (arguments, raw descriptors, encoding names, the final
 * checks and messages) over the FFmpeg pipeline of eng_audio_src.c (the
 * packet source) and eng_audio_av.c (decode, check, resample).
 */
#include "engine/audio/eng_audio.h"

#include <libavutil/log.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/audio/eng_audio_int.h"

static const char *const encoding_names[] = {
	[ENG_AUDIO_ENCODING_LINEAR16] = "linear16", [ENG_AUDIO_ENCODING_LINEAR32] = "linear32",
	[ENG_AUDIO_ENCODING_MULAW] = "mulaw",	    [ENG_AUDIO_ENCODING_ALAW] = "alaw",
	[ENG_AUDIO_ENCODING_FLAC] = "flac",	    [ENG_AUDIO_ENCODING_OGG_OPUS] = "ogg-opus",
	[ENG_AUDIO_ENCODING_OPUS] = "opus",
};
_Static_assert(sizeof(encoding_names) / sizeof(encoding_names[0]) == ENG_AUDIO_ENCODING_COUNT,
	       "one name per encoding");

int eng_audio_encoding_parse(const char *name, enum eng_audio_encoding *out)
{
	if (!name || !out)
		return -ST_INVAL;
	for (int i = 0; i < ENG_AUDIO_ENCODING_COUNT; i++) {
		if (i != ENG_AUDIO_ENCODING_OPUS && strcmp(name, encoding_names[i]) == 0) {
			*out = (enum eng_audio_encoding)i;
			return 0;
		}
	}
	return -ST_UNSUPPORTED;
}

const char *eng_audio_encoding_name(enum eng_audio_encoding enc)
{
	if ((unsigned)enc >= ENG_AUDIO_ENCODING_COUNT)
		return "?";
	return encoding_names[enc];
}

static int audio_check_args(const void *data, size_t len, double max_seconds, struct eng_audio *out,
			    char *err, size_t errlen)
{
	if (!out || (!data && len) || !(max_seconds > 0.0))
		return st_errf(-ST_INVAL, err, errlen, "bad arguments");
	if (len == 0)
		return st_errf(-ST_INVAL, err, errlen, "empty audio");
	if (len > (size_t)INT64_MAX / 2)
		return st_errf(-ST_TOOBIG, err, errlen, "audio too large");
	return 0;
}

int eng_audio_decode_max(const void *data, size_t len, const struct eng_audio_raw *raw,
			 double max_seconds, struct eng_audio *out, char *err, size_t errlen)
{
	return eng_audio_decode_channel(data, len, raw, max_seconds, -1, out, err, errlen);
}

/* FFmpeg's log goes nowhere: its warnings about request bytes would fill
 * the daemon's stderr; every failure is reported through err instead.
 * Process-wide, set once (like CPU feature detection). */
static once_flag audio_log_once = ONCE_FLAG_INIT;

static void audio_log_quiet(void)
{
	av_log_set_level(AV_LOG_QUIET);
}

void eng__audio_init(void)
{
	call_once(&audio_log_once, audio_log_quiet);
}

int eng__audio_raw_check(const struct eng_audio_raw *raw, bool stream, char *err, size_t errlen)
{
	if ((unsigned)raw->encoding >= ENG_AUDIO_ENCODING_COUNT)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "unsupported raw encoding %d",
			       (int)raw->encoding);
	if (raw->encoding == ENG_AUDIO_ENCODING_FLAC ||
	    raw->encoding == ENG_AUDIO_ENCODING_OGG_OPUS)
		return 0;
	if (raw->encoding == ENG_AUDIO_ENCODING_OPUS && !stream)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "raw opus packets can only be streamed");
	if (raw->encoding == ENG_AUDIO_ENCODING_OPUS && (raw->channels < 1 || raw->channels > 2))
		return st_errf(-ST_INVAL, err, errlen, "raw opus needs channels 1 or 2");
	if (raw->sample_rate < ENG_AUDIO_MIN_RATE || raw->sample_rate > ENG_AUDIO_MAX_RATE ||
	    raw->channels < 1 || raw->channels > ENG_AUDIO_MAX_CHANNELS)
		return st_errf(-ST_INVAL, err, errlen,
			       "raw audio needs sample_rate %d..%d and channels 1..%d",
			       ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE, ENG_AUDIO_MAX_CHANNELS);
	return 0;
}

/* "<container>/<codec>" in FFmpeg's names into dst (n bytes):
 * "wav/pcm_s16le", "ogg/opus", one name when they agree ("mp3", "flac"),
 * or "raw/linear16", ... */
static void audio_src_name(const struct audio_dec *d, char *dst, size_t n)
{
	if (!d->fmt) {
		snprintf(dst, n, "raw/%s", eng_audio_encoding_name(d->raw->encoding));
		return;
	}
	const char *box = d->fmt->iformat->name, *codec = avcodec_get_name(d->codec->codec_id);
	size_t box_len = strcspn(box, ","); /* "mov,mp4,m4a,..." -> "mov" */
	if (strlen(codec) == box_len && strncmp(box, codec, box_len) == 0)
		snprintf(dst, n, "%s", codec); /* "mp3", "flac": one name says it */
	else
		snprintf(dst, n, "%.*s/%s", (int)box_len, box, codec);
}

/* What the decode left in d, checked, moved into out. */
static int audio_finish(struct audio_dec *d, struct eng_audio *out, char *err, size_t errlen)
{
	if (d->n_bad)
		return st_errf(-ST_INVAL, err, errlen,
			       "audio sample at %.3f s is not a finite number (NaN or infinity; %zu "
			       "such sample%s)", (double)d->first_bad / d->rate, d->n_bad,
			       d->n_bad == 1 ? "" : "s");
	if (d->n_in == 0 || d->n_out == 0) /* one 48 kHz frame is a third of a 16 kHz sample */
		return st_errf(-ST_INVAL, err, errlen, "audio has no samples");
	out->samples = d->out;
	out->n_samples = d->n_out;
	d->out = NULL;
	out->duration_s = (double)d->n_in / d->rate;
	out->src_rate = d->rate;
	out->src_channels = d->channels;
	audio_src_name(d, out->src_format, sizeof(out->src_format));
	return 0;
}

int eng_audio_decode_channel(const void *data, size_t len, const struct eng_audio_raw *raw,
			     double max_seconds, int channel, struct eng_audio *out, char *err,
			     size_t errlen)
{
	if (out)
		memset(out, 0, sizeof(*out));
	int rc = audio_check_args(data, len, max_seconds, out, err, errlen);
	if (rc)
		return rc;
	if (raw && (rc = eng__audio_raw_check(raw, false, err, errlen)) != 0)
		return rc;
	eng__audio_init();
	struct audio_dec d = {
		.mem = {.data = data, .len = (int64_t)len},
		.raw = raw,
		.max_seconds = max_seconds,
		.channel = channel,
	};
	rc = eng__audio_src_open(&d, err, errlen);
	if (!rc)
		rc = eng__audio_run(&d, err, errlen);
	if (!rc)
		rc = audio_finish(&d, out, err, errlen);
	if (rc == -ST_NOMEM)
		st_errf(0, err, errlen, "out of memory decoding audio");
	mem_free(d.out);
	mem_free(d.s16);
	eng__audio_close(&d);
	return rc;
}

int eng_audio_decode(const void *data, size_t len, const struct eng_audio_raw *raw,
		     struct eng_audio *out, char *err, size_t errlen)
{
	return eng_audio_decode_max(data, len, raw, ENG_AUDIO_MAX_SECONDS, out, err, errlen);
}

void eng_audio_fini(struct eng_audio *a)
{
	if (!a)
		return;
	mem_free(a->samples);
	memset(a, 0, sizeof(*a));
}
