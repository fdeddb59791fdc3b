/* eng_audio_av.c - packets -> decoded frames -> checked samples ->
 * libswresample -> 16 kHz mono s16 -> float (contract in eng_audio_int.h).
 *
 * This is faster-whisper 1.2.1's decode_audio (faster_whisper/audio.py):
 * PyAV decodes the first audio stream and an AudioResampler(format="s16",
 * layout="mono", rate=16000) converts the frames (a libavfilter graph whose
 * auto-inserted aresample is a SwrContext with default options, here made
 * directly), then int16 / 32768.0. The frames go to swresample in the
 * decoder's own sample format and layout, as there, so the same
 * libswresample gives the same samples; the downmix is swresample's
 * default matrix for a mono output (stereo: the mean, rounded to s16).
 *
 * Before a frame is resampled its float samples are checked: a NaN or an
 * infinity fails the decode (-ST_INVAL, with the first one's time), and a
 * magnitude past AUDIO_MAX_ABS (32, 30 dB over full scale) is clamped
 * there: swresample's SIMD float -> s16 conversion turns anything past
 * 2^31 / 32768 = 65536 into -32768 (cvtps2dq's overflow value), so a huge
 * positive sample would become a negative click; clamped, it clips to
 * +32767 as it should. Audio within +-32 is untouched.
 */
#include <errno.h>
#include <libavutil/opt.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/audio/eng_audio_int.h"

#define AUDIO_MAX_ABS	      32.0 /* float input clamped to +-this before resampling */
#define AUDIO_RAW_PACKET      4096 /* headerless frames per packet */
#define AUDIO_SWR_MAX_CH      64   /* libswresample's SWR_CH_MAX (not public) */
#define AUDIO_MAX_DEC_ERRORS  1000 /* consecutive decoder errors before giving up */

/* Raw Opus: the next whole record (4-byte little-endian length, then
 * the packet) into d->pkt: 0, 1 when the bytes end before one,
 * -ST_INVAL for a length of 0 or past ENG_AUDIO_OPUS_MAX_PACKET,
 * -ST_NOMEM. */
static int audio_opus_record(struct audio_dec *d)
{
	const uint8_t *p = d->mem.data + d->mem.pos;
	int64_t left = d->mem.len - d->mem.pos;
	if (left < 4)
		return 1;
	uint32_t n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 24;
	if (n == 0 || n > ENG_AUDIO_OPUS_MAX_PACKET)
		return -ST_INVAL;
	if (left - 4 < (int64_t)n)
		return 1;
	if (av_new_packet(d->pkt, (int)n) < 0)
		return -ST_NOMEM;
	memcpy(d->pkt->data, p + 4, n);
	d->mem.pos += 4 + (int64_t)n;
	return 0;
}

/* Next packet of the audio stream into d->pkt: 0, 1 at the end (or at
 * data the demuxer cannot read: truncation ends the stream), -ST_NOMEM,
 * -ST_INVAL (a bad raw Opus record). */
static int audio_next_packet(struct audio_dec *d)
{
	if (!d->fmt && d->raw->encoding == ENG_AUDIO_ENCODING_OPUS)
		return audio_opus_record(d);
	if (!d->fmt) { /* headerless: whole frames, AUDIO_RAW_PACKET at a time */
		size_t left = (size_t)(d->mem.len - d->mem.pos) / d->raw_frame_bytes;
		size_t n = (left < AUDIO_RAW_PACKET ? left : AUDIO_RAW_PACKET) * d->raw_frame_bytes;
		if (n == 0)
			return 1;
		if (av_new_packet(d->pkt, (int)n) < 0)
			return -ST_NOMEM;
		memcpy(d->pkt->data, d->mem.data + d->mem.pos, n);
		d->mem.pos += (int64_t)n;
		return 0;
	}
	for (;;) {
		int rc = av_read_frame(d->fmt, d->pkt);
		if (rc == AVERROR(ENOMEM))
			return -ST_NOMEM;
		if (rc < 0)
			return 1;
		if (d->pkt->stream_index == d->stream)
			return 0;
		av_packet_unref(d->pkt);
	}
}

/* Set up the resampler from the first frame f: rate and channels in
 * range, the kept channel present; a layout without a channel order
 * takes the default one for its count (a mean where there is none). */
static int audio_swr_init(struct audio_dec *d, const AVFrame *f, char *err, size_t errlen)
{
	int ch = f->ch_layout.nb_channels;
	d->rate = f->sample_rate;
	d->channels = ch;
	if (f->sample_rate < ENG_AUDIO_MIN_RATE || f->sample_rate > ENG_AUDIO_MAX_RATE || ch < 1 ||
	    ch > AUDIO_SWR_MAX_CH)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "unsupported audio: %d Hz, %d channels",
			       f->sample_rate, ch);
	if (d->channel >= ch)
		return st_errf(-ST_INVAL, err, errlen, "audio has %d channel%s, no channel %d", ch,
			       ch == 1 ? "" : "s", d->channel);
	if (f->ch_layout.order == AV_CHANNEL_ORDER_NATIVE)
		av_channel_layout_copy(&d->layout, &f->ch_layout);
	else
		av_channel_layout_default(&d->layout, ch);
	d->fmt_in = f->format;
	AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
	if (swr_alloc_set_opts2(&d->swr, &mono, AV_SAMPLE_FMT_S16, ENG_AUDIO_RATE, &d->layout,
				f->format, f->sample_rate, 0, NULL) < 0)
		return -ST_NOMEM;
	/* FFmpeg >= 7 resamples 16-bit audio in float (FLTP); 5.1 (Debian 12)
	 * chose S16P when input and output are both 16-bit, 1 LSB away on a
	 * resampled clip's interpolated samples. faster-whisper's PyAV bundles
	 * FFmpeg 8: its choice, named. */
	enum AVSampleFormat internal =
		av_get_bytes_per_sample(f->format) <= 4 ? AV_SAMPLE_FMT_FLTP : AV_SAMPLE_FMT_DBLP;
	if (av_opt_set_sample_fmt(d->swr, "internal_sample_fmt", internal, 0) < 0)
		return st_errf(-ST_IO, err, errlen, "cannot configure the resampler");
	double m[AUDIO_SWR_MAX_CH] = {0}; /* (1, ch): output = sum of m[c] * input c */
	bool custom = d->channel >= 0 || d->layout.order != AV_CHANNEL_ORDER_NATIVE;
	for (int c = 0; c < ch; c++)
		m[c] = d->channel < 0 ? 1.0 / ch : c == d->channel;
	if (custom && swr_set_matrix(d->swr, m, ch) < 0)
		return st_errf(-ST_IO, err, errlen, "cannot downmix %d channels", ch);
	int rc = swr_init(d->swr);
	if (rc < 0)
		return st_errf(rc == AVERROR(ENOMEM) ? -ST_NOMEM : -ST_UNSUPPORTED, err, errlen,
			       "cannot resample %d Hz %d-channel %s audio: %s", f->sample_rate,
			       ch, av_get_sample_fmt_name(f->format), av_err2str(rc));
	double maxf = floor(d->max_seconds * f->sample_rate);
	d->max_in = maxf < (double)INT64_MAX / 2 ? (int64_t)maxf : INT64_MAX / 2;
	return 0;
}

/* Count the NaN/inf among n values of one plane (frame index = i / step);
 * true when one is past AUDIO_MAX_ABS. */
static bool audio_scan(struct audio_dec *d, const uint8_t *p, bool dbl, size_t n, size_t step)
{
	bool huge = false;
	for (size_t i = 0; i < n; i++) {
		double x = dbl ? ((const double *)p)[i] : ((const float *)p)[i];
		if (!isfinite(x)) {
			if (d->n_bad++ == 0)
				d->first_bad = d->n_in + (int64_t)(i / step);
		} else if (fabs(x) > AUDIO_MAX_ABS) {
			huge = true;
		}
	}
	return huge;
}

static void audio_clamp(uint8_t *p, bool dbl, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double x = dbl ? ((double *)p)[i] : ((float *)p)[i];
		x = x > AUDIO_MAX_ABS ? AUDIO_MAX_ABS : x < -AUDIO_MAX_ABS ? -AUDIO_MAX_ABS : x;
		if (dbl)
			((double *)p)[i] = x;
		else
			((float *)p)[i] = (float)x;
	}
}

/* Check a float or double frame's samples (integer ones are finite and
 * in range by construction); clamp huge ones in a writable copy. */
static int audio_check_frame(struct audio_dec *d, AVFrame *f)
{
	enum AVSampleFormat packed = av_get_packed_sample_fmt(f->format);
	if (packed != AV_SAMPLE_FMT_FLT && packed != AV_SAMPLE_FMT_DBL)
		return 0;
	bool dbl = packed == AV_SAMPLE_FMT_DBL, planar = av_sample_fmt_is_planar(f->format);
	int planes = planar ? d->channels : 1;
	size_t n = (size_t)f->nb_samples * (planar ? 1 : (size_t)d->channels);
	size_t step = planar ? 1 : (size_t)d->channels;
	bool huge = false;
	for (int p = 0; p < planes; p++)
		huge |= audio_scan(d, f->extended_data[p], dbl, n, step);
	if (!huge)
		return 0;
	if (av_frame_make_writable(f) < 0)
		return -ST_NOMEM;
	for (int p = 0; p < planes; p++)
		audio_clamp(f->extended_data[p], dbl, n);
	return 0;
}

/* Resample n frames at in (NULL: flush what swresample holds) and append
 * them to d->out as int16 / 32768. */
static int audio_resample(struct audio_dec *d, const uint8_t **in, int n)
{
	int want = swr_get_out_samples(d->swr, n);
	if (want < 0)
		return -ST_IO;
	if (want > d->s16_cap) {
		int16_t *p = mem_realloc(d->s16, sizeof(*p) * (size_t)want);
		if (!p)
			return -ST_NOMEM;
		d->s16 = p;
		d->s16_cap = want;
	}
	uint8_t *out = (uint8_t *)d->s16;
	int got = swr_convert(d->swr, &out, want, in, n);
	if (got < 0)
		return -ST_IO;
	if ((size_t)got > d->cap - d->n_out) {
		size_t cap = d->cap ? d->cap : 65536;
		while (cap - d->n_out < (size_t)got)
			cap *= 2;
		float *p = mem_realloc(d->out, sizeof(*p) * cap);
		if (!p)
			return -ST_NOMEM;
		d->out = p;
		d->cap = cap;
	}
	for (int i = 0; i < got; i++)
		d->out[d->n_out + (size_t)i] = (float)d->s16[i] / 32768.0f;
	d->n_out += (size_t)got;
	return 0;
}

/* One decoded frame: the first sets the resampler up; each must keep the
 * first one's rate, layout and format (PyAV's resampler refuses a change
 * as well), stay under the ceiling, and be finite. */
static int audio_frame(struct audio_dec *d, AVFrame *f, char *err, size_t errlen)
{
	int rc = d->swr ? 0 : audio_swr_init(d, f, err, errlen);
	if (rc)
		return rc;
	if (f->sample_rate != d->rate || f->ch_layout.nb_channels != d->channels ||
	    f->format != d->fmt_in)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "audio changes its sample rate, channels or format mid-stream");
	if (f->nb_samples > d->max_in - d->n_in)
		return st_errf(-ST_TOOBIG, err, errlen, "audio longer than the %.0f s limit",
			       d->max_seconds);
	rc = audio_check_frame(d, f);
	if (!rc && !d->n_bad)
		rc = audio_resample(d, (const uint8_t **)f->extended_data, f->nb_samples);
	d->n_in += f->nb_samples;
	return rc == -ST_IO ? st_errf(rc, err, errlen, "resampling failed") : rc;
}

/* Every frame the decoder has ready. A decoding error drops the rest of
 * that packet's output (counted in *n_err), as ffmpeg's CLI goes on. */
static int audio_drain(struct audio_dec *d, int *n_err, char *err, size_t errlen)
{
	for (;;) {
		int rc = avcodec_receive_frame(d->codec, d->frame);
		if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
			return 0;
		if (rc == AVERROR(ENOMEM))
			return -ST_NOMEM;
		if (rc < 0) {
			(*n_err)++;
			return 0;
		}
		*n_err = 0;
		rc = audio_frame(d, d->frame, err, errlen);
		av_frame_unref(d->frame);
		if (rc)
			return rc;
	}
}

int eng__audio_feed(struct audio_dec *d, bool last, char *err, size_t errlen)
{
	int end = 0, rc = 0;
	int *n_err = &d->n_dec_err; /* across feeds: a stream's pushes are one decode */
	int max_err = d->max_dec_err ? d->max_dec_err : AUDIO_MAX_DEC_ERRORS;
	while (!end && !rc && *n_err < max_err) {
		end = audio_next_packet(d);
		if (end == -ST_INVAL) /* the server frames each message as one record */
			return st_errf(end, err, errlen, "a raw Opus packet of more than %d bytes "
				       "(encoding=opus takes one Opus packet per binary message)",
				       ENG_AUDIO_OPUS_MAX_PACKET);
		if (end < 0)
			return end;
		if (end && !last)
			break; /* more bytes may come: the decoder and resampler keep their state */
		rc = avcodec_send_packet(d->codec, end ? NULL : d->pkt);
		av_packet_unref(d->pkt);
		if (rc == AVERROR(ENOMEM))
			return -ST_NOMEM;
		if (rc < 0) { /* a corrupt packet: skip it */
			(*n_err)++;
			rc = 0;
			continue;
		}
		rc = audio_drain(d, n_err, err, errlen);
	}
	if (!rc && d->max_dec_err && *n_err >= d->max_dec_err)
		return st_errf(-ST_INVAL, err, errlen, "the audio cannot be decoded (%d %s packets in "
			       "a row refused by the decoder)", *n_err,
			       d->codec ? d->codec->codec->name : "audio");
	while (last && !rc && d->swr && !d->n_bad) { /* what the resampler still holds */
		size_t before = d->n_out;
		rc = audio_resample(d, NULL, 0);
		if (d->n_out == before)
			break;
	}
	return rc == -ST_IO ? st_errf(rc, err, errlen, "resampling failed") : rc;
}

int eng__audio_run(struct audio_dec *d, char *err, size_t errlen)
{
	return eng__audio_feed(d, true, err, errlen);
}
