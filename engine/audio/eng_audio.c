/* eng_audio.c - audio bytes -> 16 kHz mono float32 (contract in eng_audio.h).
 *
 * Pipeline: libsndfile reads the bytes through a virtual I/O over the
 * caller's buffer (no temp files), in blocks of frames; each block is
 * downmixed to mono into a growing buffer that never passes the
 * max_seconds ceiling; libsoxr then resamples the whole signal in one shot
 * (SOXR_HQ) unless it is already at 16 kHz.
 *
 * libsndfile reports open failures through a process-wide error slot
 * (sf_strerror(NULL)); under concurrent failures the message may name the
 * other thread's error, the status code is still ours.
 */
#include "engine/audio/eng_audio.h"

#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"

#define AUDIO_BLOCK_SAMPLES 65536      /* interleaved samples read per sf_readf_double */
#define AUDIO_INIT_FRAMES   65536      /* first mono capacity when the length is unknown */
#define AUDIO_HINT_CAP	    (1u << 24) /* never trust a header for more than this up front */
#define AUDIO_MAX_ABS                                                                              \
	1e6f /* float input clamped to +-this: keeps sums, the                                     \
	      * resampler and the spectrogram finite */

/* A read-only file over the caller's bytes for sf_open_virtual. */
struct audio_mem {
	const unsigned char *data; /* borrowed */
	sf_count_t len;		   /* bytes */
	sf_count_t pos;		   /* read position, 0..len */
};

/* Decoding state shared by the steps of one eng_audio_decode_max call. */
struct audio_dec {
	SNDFILE *sf;	   /* open decoder */
	SF_INFO info;	   /* its rate, channels, format */
	float *mono;	   /* (cap) mono samples at the source rate, mem.h */
	size_t n, cap;	   /* frames held, capacity */
	size_t max_frames; /* ceiling from max_seconds */
	int channel;	   /* the one channel kept, or -1: the mean of all */
	size_t n_bad;	   /* samples that were NaN or infinite */
	size_t first_bad;  /* frame of the first of them */
};

static sf_count_t vio_len(void *user)
{
	return ((struct audio_mem *)user)->len;
}

static sf_count_t vio_seek(sf_count_t off, int whence, void *user)
{
	struct audio_mem *m = user;
	sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
	if ((off < 0 && base < -off) || (off > 0 && off > m->len - base))
		return -1; /* outside the buffer: refuse, position unchanged */
	m->pos = base + off;
	return m->pos;
}

static sf_count_t vio_read(void *ptr, sf_count_t count, void *user)
{
	struct audio_mem *m = user;
	if (count <= 0)
		return 0;
	sf_count_t n = m->len - m->pos < count ? m->len - m->pos : count;
	memcpy(ptr, m->data + m->pos, (size_t)n);
	m->pos += n;
	return n;
}

static sf_count_t vio_write(const void *ptr, sf_count_t count, void *user)
{
	(void)ptr, (void)count, (void)user;
	return 0;
}

static sf_count_t vio_tell(void *user)
{
	return ((struct audio_mem *)user)->pos;
}

static const char *const encoding_names[] = {
	[ENG_AUDIO_ENCODING_LINEAR16] = "linear16", [ENG_AUDIO_ENCODING_LINEAR32] = "linear32",
	[ENG_AUDIO_ENCODING_MULAW] = "mulaw",	    [ENG_AUDIO_ENCODING_ALAW] = "alaw",
	[ENG_AUDIO_ENCODING_FLAC] = "flac",	    [ENG_AUDIO_ENCODING_OGG_OPUS] = "ogg-opus",
};
_Static_assert(sizeof(encoding_names) / sizeof(encoding_names[0]) == ENG_AUDIO_ENCODING_COUNT,
	       "one name per encoding");

int eng_audio_encoding_parse(const char *name, enum eng_audio_encoding *out)
{
	if (!name || !out)
		return -ST_INVAL;
	for (int i = 0; i < ENG_AUDIO_ENCODING_COUNT; i++) {
		if (strcmp(name, encoding_names[i]) == 0) {
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

/* Short names for src_format: container, then sample encoding. */
static const char *major_name(int major)
{
	switch (major) {
	case SF_FORMAT_WAV:
		return "wav";
	case SF_FORMAT_WAVEX:
		return "wav";
	case SF_FORMAT_RF64:
		return "rf64";
	case SF_FORMAT_W64:
		return "w64";
	case SF_FORMAT_AIFF:
		return "aiff";
	case SF_FORMAT_AU:
		return "au";
	case SF_FORMAT_CAF:
		return "caf";
	case SF_FORMAT_FLAC:
		return "flac";
	case SF_FORMAT_OGG:
		return "ogg";
	case SF_FORMAT_MPEG:
		return "mpeg";
	case SF_FORMAT_RAW:
		return "raw";
	default:
		return "other";
	}
}

static const char *sub_name(int sub)
{
	switch (sub) {
	case SF_FORMAT_PCM_S8:
		return "pcm_s8";
	case SF_FORMAT_PCM_U8:
		return "pcm_u8";
	case SF_FORMAT_PCM_16:
		return "pcm_16";
	case SF_FORMAT_PCM_24:
		return "pcm_24";
	case SF_FORMAT_PCM_32:
		return "pcm_32";
	case SF_FORMAT_FLOAT:
		return "float";
	case SF_FORMAT_DOUBLE:
		return "double";
	case SF_FORMAT_ULAW:
		return "ulaw";
	case SF_FORMAT_ALAW:
		return "alaw";
	case SF_FORMAT_IMA_ADPCM:
		return "ima_adpcm";
	case SF_FORMAT_MS_ADPCM:
		return "ms_adpcm";
	case SF_FORMAT_GSM610:
		return "gsm610";
	case SF_FORMAT_VORBIS:
		return "vorbis";
	case SF_FORMAT_OPUS:
		return "opus";
	case SF_FORMAT_MPEG_LAYER_I:
		return "layer1";
	case SF_FORMAT_MPEG_LAYER_II:
		return "layer2";
	case SF_FORMAT_MPEG_LAYER_III:
		return "layer3";
	default:
		return "other";
	}
}

static void audio_format_name(const SF_INFO *info, const struct eng_audio_raw *raw, char *dst,
			      size_t n)
{
	int major = info->format & SF_FORMAT_TYPEMASK, sub = info->format & SF_FORMAT_SUBMASK;
	if (major == SF_FORMAT_RAW && raw)
		snprintf(dst, n, "raw/%s", eng_audio_encoding_name(raw->encoding));
	else if (major == SF_FORMAT_MPEG && sub == SF_FORMAT_MPEG_LAYER_III)
		snprintf(dst, n, "mp3");
	else
		snprintf(dst, n, "%s/%s", major_name(major), sub_name(sub));
}

/* SF_INFO for headerless input, or -ST_INVAL/-ST_UNSUPPORTED. FLAC and
 * ogg-opus describe themselves: format 0 lets libsndfile detect them. */
static int audio_raw_info(const struct eng_audio_raw *raw, SF_INFO *info, char *err, size_t errlen)
{
	static const int subtype[] = {
		[ENG_AUDIO_ENCODING_LINEAR16] = SF_FORMAT_PCM_16,
		[ENG_AUDIO_ENCODING_LINEAR32] = SF_FORMAT_FLOAT,
		[ENG_AUDIO_ENCODING_MULAW] = SF_FORMAT_ULAW,
		[ENG_AUDIO_ENCODING_ALAW] = SF_FORMAT_ALAW,
	};
	memset(info, 0, sizeof(*info));
	if ((unsigned)raw->encoding >= ENG_AUDIO_ENCODING_COUNT)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "unsupported raw encoding %d",
			       (int)raw->encoding);
	if (raw->encoding == ENG_AUDIO_ENCODING_FLAC ||
	    raw->encoding == ENG_AUDIO_ENCODING_OGG_OPUS)
		return 0;
	if (raw->sample_rate < ENG_AUDIO_MIN_RATE || raw->sample_rate > ENG_AUDIO_MAX_RATE ||
	    raw->channels < 1 || raw->channels > ENG_AUDIO_MAX_CHANNELS)
		return st_errf(-ST_INVAL, err, errlen,
			       "raw audio needs sample_rate %d..%d and channels 1..%d",
			       ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE, ENG_AUDIO_MAX_CHANNELS);
	info->samplerate = raw->sample_rate;
	info->channels = raw->channels;
	info->format = SF_FORMAT_RAW | subtype[raw->encoding] | SF_ENDIAN_LITTLE;
	return 0;
}

/* Open the decoder over mem and check rate and channel count. */
static int audio_open(struct audio_dec *d, struct audio_mem *mem, char *err, size_t errlen)
{
	SF_VIRTUAL_IO io = {.get_filelen = vio_len,
			    .seek = vio_seek,
			    .read = vio_read,
			    .write = vio_write,
			    .tell = vio_tell};
	d->sf = sf_open_virtual(&io, SFM_READ, &d->info, mem);
	if (!d->sf)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "unrecognised or unsupported audio format: %s", sf_strerror(NULL));
	if (d->info.samplerate < ENG_AUDIO_MIN_RATE || d->info.samplerate > ENG_AUDIO_MAX_RATE ||
	    d->info.channels < 1 || d->info.channels > ENG_AUDIO_MAX_CHANNELS)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "unsupported audio: %d Hz, %d channels", d->info.samplerate,
			       d->info.channels);
	return 0;
}

/* Ensure room for `more` frames beyond d->n, doubling; -ST_TOOBIG past
 * the ceiling, -ST_NOMEM. */
static int audio_reserve(struct audio_dec *d, size_t more)
{
	if (more > d->max_frames - d->n)
		return -ST_TOOBIG;
	if (d->n + more <= d->cap)
		return 0;
	size_t cap = d->cap ? d->cap : AUDIO_INIT_FRAMES;
	if (d->info.frames > 0 && (uint64_t)d->info.frames <= AUDIO_HINT_CAP && !d->cap)
		cap = (size_t)d->info.frames; /* header's length as a first guess only */
	while (cap < d->n + more) /* n + more <= max_frames <= SIZE_MAX / 8: no overflow */
		cap *= 2;
	if (cap > d->max_frames)
		cap = d->max_frames;
	float *p = mem_realloc(d->mono, cap * sizeof(*p));
	if (!p)
		return -ST_NOMEM;
	d->mono = p;
	d->cap = cap;
	return 0;
}

/* x with magnitudes above AUDIO_MAX_ABS clamped (so that the downmix and
 * the resampler's sums stay finite; audio_s16_clip clips them to +-1 after);
 * a NaN or infinity is counted in d (the decode then fails) and taken as 0. */
static float audio_sane(struct audio_dec *d, double x, size_t frame)
{
	if (!isfinite(x)) {
		if (d->n_bad++ == 0)
			d->first_bad = frame;
		return 0.0f;
	}
	return (float)(x > AUDIO_MAX_ABS ? AUDIO_MAX_ABS : x < -AUDIO_MAX_ABS ? -AUDIO_MAX_ABS : x);
}

/* Mean of each frame's channels appended to d->mono (sanitised). */
static void audio_downmix(struct audio_dec *d, const double *buf, size_t frames)
{
	int ch = d->info.channels;
	float *dst = d->mono + d->n;
	for (size_t f = 0; f < frames; f++) {
		const double *s = buf + f * (size_t)ch;
		float acc = 0.0f, one = 0.0f;
		for (int c = 0; c < ch; c++) {
			float v = audio_sane(d, s[c], d->n + f);
			acc += v;
			one = c == d->channel ? v : one;
		}
		dst[f] = d->channel >= 0 ? one : ch == 1 ? acc : acc / (float)ch;
	}
	d->n += frames;
}

/* Every sample clipped to the signed 16-bit range, [-1, 32767/32768], as
 * faster-whisper's decode clips it (PyAV's resampler to "s16", i.e.
 * libswresample's av_clip_int16(lrintf(x * 32768)), then / 32768.0): a
 * float sample of 1e6 becomes a full-scale click instead of the whole
 * log-mel range. Samples inside the range are kept as they are (not
 * rounded to 16 bits: the resampler is not faster-whisper's anyway, and
 * the rounding alone moved the int8 compute types' transcripts of the
 * resampled clips by words). */
static void audio_s16_clip(float *x, size_t n)
{
	const float hi = 32767.0f / 32768.0f;
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] > hi ? hi : x[i] < -1.0f ? -1.0f : x[i];
}

/* Read every frame libsndfile yields (stopping quietly at truncation). */
static int audio_read_all(struct audio_dec *d, char *err, size_t errlen)
{
	size_t block = AUDIO_BLOCK_SAMPLES / (size_t)d->info.channels;
	double *buf = mem_alloc(sizeof(*buf) * AUDIO_BLOCK_SAMPLES); /* doubles: a 64-bit
					* float file's samples past float's range stay finite */
	if (!buf)
		return -ST_NOMEM;
	int rc = 0;
	for (;;) {
		sf_count_t got = sf_readf_double(d->sf, buf, (sf_count_t)block);
		if (got <= 0)
			break;
		rc = audio_reserve(d, (size_t)got);
		if (rc)
			break;
		audio_downmix(d, buf, (size_t)got);
	}
	mem_free(buf);
	if (rc == -ST_TOOBIG)
		st_errf(0, err, errlen, "audio longer than the %.0f s limit",
			(double)d->max_frames / d->info.samplerate);
	return rc;
}

/* d->mono at the source rate -> out->samples at 16 kHz (new). */
static int audio_resample(struct audio_dec *d, struct eng_audio *out, char *err, size_t errlen)
{
	double rate = d->info.samplerate;
	if (d->info.samplerate == ENG_AUDIO_RATE) {
		out->samples = d->mono; /* steal: no resampling needed */
		out->n_samples = d->n;
		d->mono = NULL;
		return 0;
	}
	size_t olen = (size_t)((double)d->n * ENG_AUDIO_RATE / rate) + 2;
	float *dst = mem_alloc(sizeof(*dst) * olen);
	if (!dst)
		return -ST_NOMEM;
	soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
	soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
	size_t done = 0;
	soxr_error_t e = soxr_oneshot(rate, ENG_AUDIO_RATE, 1, d->mono, d->n, NULL, dst, olen,
				      &done, &io, &q, NULL);
	if (e) {
		mem_free(dst);
		return st_errf(-ST_IO, err, errlen, "resampling failed: %s", e);
	}
	out->samples = dst;
	out->n_samples = done;
	return 0;
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

int eng_audio_decode_channel(const void *data, size_t len, const struct eng_audio_raw *raw,
			     double max_seconds, int channel, struct eng_audio *out, char *err,
			     size_t errlen)
{
	if (out)
		memset(out, 0, sizeof(*out));
	int rc = audio_check_args(data, len, max_seconds, out, err, errlen);
	if (rc)
		return rc;
	struct audio_mem mem = {.data = data, .len = (sf_count_t)len, .pos = 0};
	struct audio_dec d = {.channel = channel};
	if (raw && (rc = audio_raw_info(raw, &d.info, err, errlen)) != 0)
		return rc;
	rc = audio_open(&d, &mem, err, errlen);
	if (!rc && channel >= d.info.channels)
		rc = st_errf(-ST_INVAL, err, errlen, "audio has %d channel%s, no channel %d",
			     d.info.channels, d.info.channels == 1 ? "" : "s", channel);
	if (rc)
		goto out_close;
	double maxf = floor(max_seconds * d.info.samplerate);
	d.max_frames = maxf < (double)(SIZE_MAX / 8) ? (size_t)maxf : SIZE_MAX / 8;
	rc = audio_read_all(&d, err, errlen);
	if (rc)
		goto out_close;
	if (d.n == 0) {
		rc = st_errf(-ST_INVAL, err, errlen, "audio has no samples");
		goto out_close;
	}
	if (d.n_bad) {
		rc = st_errf(-ST_INVAL, err, errlen,
			     "audio sample at %.3f s is not a finite number (NaN or infinity; %zu "
			     "such sample%s)", (double)d.first_bad / d.info.samplerate, d.n_bad,
			     d.n_bad == 1 ? "" : "s");
		goto out_close;
	}
	rc = audio_resample(&d, out, err, errlen);
	if (rc)
		goto out_close;
	audio_s16_clip(out->samples, out->n_samples);
	if (out->n_samples == 0) { /* e.g. one 48 kHz frame is a third of a 16 kHz sample */
		eng_audio_fini(out);
		rc = st_errf(-ST_INVAL, err, errlen, "audio has no samples");
		goto out_close;
	}
	out->duration_s = (double)d.n / d.info.samplerate;
	out->src_rate = d.info.samplerate;
	out->src_channels = d.info.channels;
	audio_format_name(&d.info, raw, out->src_format, sizeof(out->src_format));
out_close:
	if (rc == -ST_NOMEM)
		st_errf(0, err, errlen, "out of memory decoding audio");
	mem_free(d.mono);
	if (d.sf)
		sf_close(d.sf);
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
