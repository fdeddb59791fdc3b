/* eng_audio_src.c - the packet source of one decode: a container read by
 * libavformat from memory, or headerless PCM given to libavcodec's PCM
 * decoder (contract in eng_audio_int.h).
 *
 * The demuxers are limited to audio containers (format_whitelist) and a
 * container can open nothing else (io_open refuses: no playlists, no
 * references to other files or URLs), so request bytes reach no file.
 *
 * A live container (d->io_read, a pipe whose read blocks until the client
 * sends more) cannot seek, so the probe is strict (libavformat probes
 * 2, 4, 8 then 16 KiB; what scores under AVPROBE_SCORE_RETRY is not
 * taken for audio, where an upload's probe takes any match at its end),
 * and avformat_find_stream_info, which would wait for seconds of audio,
 * runs only when the header leaves the codec unknown; the decoder learns
 * the rate and layout from its first frame anyway.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/st.h"
#include "engine/audio/eng_audio_int.h"

#define AUDIO_IO_BLOCK	 4096 /* bytes per AVIOContext read */
#define AUDIO_PIPE_PROBE 16384 /* bytes a live container's probe reads at most */

/* Demuxers a request may use (libavformat's names; "matroska" covers
 * WebM, "mov" MP4/M4A/3GP). */
static const char audio_formats[] = "wav,w64,rf64,flac,mp3,ogg,matroska,webm,mov,mp4,m4a,3gp,"
				    "aac,aiff,caf,au,amr,ac3,eac3,wv,ape,tta,voc,asf,avi";

static int mem_read(void *user, uint8_t *buf, int size)
{
	struct audio_mem *m = user;
	int64_t n = m->len - m->pos < size ? m->len - m->pos : size;
	if (n <= 0)
		return AVERROR_EOF;
	memcpy(buf, m->data + m->pos, (size_t)n);
	m->pos += n;
	return (int)n;
}

static int64_t mem_seek(void *user, int64_t off, int whence)
{
	struct audio_mem *m = user;
	if (whence & AVSEEK_SIZE)
		return m->len;
	whence &= ~AVSEEK_FORCE;
	int64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
	if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
		return AVERROR(EINVAL);
	if ((off < 0 && base < -off) || (off > 0 && off > m->len - base))
		return AVERROR(EINVAL); /* outside the buffer: refuse */
	m->pos = base + off;
	return m->pos;
}

/* A container asking for another file or URL (HLS, concat, a reference
 * movie) is refused. */
static int audio_no_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
			 AVDictionary **options)
{
	(void)s, (void)pb, (void)url, (void)flags, (void)options;
	return AVERROR(EPERM);
}

/* Open the decoder for codec parameters par (borrowed). */
static int audio_codec_open(struct audio_dec *d, const AVCodecParameters *par, char *err,
			    size_t errlen)
{
	const AVCodec *c = avcodec_find_decoder(par->codec_id);
	if (!c)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "unsupported audio codec %s",
			       avcodec_get_name(par->codec_id));
	d->codec = avcodec_alloc_context3(c);
	if (!d->codec)
		return -ST_NOMEM;
	if (avcodec_parameters_to_context(d->codec, par) < 0)
		return -ST_NOMEM;
	d->codec->thread_count = 1; /* the request runs on one worker already */
	int rc = avcodec_open2(d->codec, c, NULL);
	if (rc < 0)
		return st_errf(rc == AVERROR(ENOMEM) ? -ST_NOMEM : -ST_UNSUPPORTED, err, errlen,
			       "cannot decode %s audio: %s", c->name, av_err2str(rc));
	return 0;
}

/* A duration the container states (not one guessed from the bitrate)
 * past the ceiling: refused before anything is decoded. */
static int audio_stated_duration(struct audio_dec *d, char *err, size_t errlen)
{
	const AVStream *st = d->fmt->streams[d->stream];
	double s = -1.0;
	if (d->fmt->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE)
		return 0;
	if (st->duration > 0 && st->time_base.num > 0)
		s = (double)st->duration * av_q2d(st->time_base);
	else if (d->fmt->duration > 0)
		s = (double)d->fmt->duration / AV_TIME_BASE;
	if (s > d->max_seconds + 1.0) /* a second of slack: stated lengths round */
		return st_errf(-ST_TOOBIG, err, errlen,
			       "audio longer than the %.0f s limit (the container states %.0f s)",
			       d->max_seconds, s);
	return 0;
}

/* The index of fmt's first audio stream (PyAV's decode(audio=0)), -1 none. */
static int audio_first_stream(const AVFormatContext *fmt)
{
	for (unsigned i = 0; i < fmt->nb_streams; i++)
		if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO)
			return (int)i;
	return -1;
}

/* The audio stream: the first one, its decoder open; an upload's stated
 * duration checked first. */
static int audio_container_stream(struct audio_dec *d, char *err, size_t errlen)
{
	d->stream = audio_first_stream(d->fmt);
	if (d->stream < 0)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "no audio stream in the %s data",
			       d->fmt->iformat->name);
	int rc = d->io_read ? 0 : audio_stated_duration(d, err, errlen);
	if (rc)
		return rc;
	return audio_codec_open(d, d->fmt->streams[d->stream]->codecpar, err, errlen);
}

/* Whether the header named the first audio stream's codec (a live
 * container skips avformat_find_stream_info then). */
static bool audio_codec_known(const AVFormatContext *fmt)
{
	int i = audio_first_stream(fmt);
	return i >= 0 && fmt->streams[i]->codecpar->codec_id != AV_CODEC_ID_NONE;
}

/* A live container's format, probed strictly from the pipe. */
static int audio_pipe_probe(struct audio_dec *d, const AVInputFormat **fmt, char *err,
			    size_t errlen)
{
	int score = av_probe_input_buffer2(d->pio, fmt, "", NULL, 0, AUDIO_PIPE_PROBE);
	if (score == AVERROR(ENOMEM))
		return -ST_NOMEM;
	if (score < AVPROBE_SCORE_RETRY)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "unrecognised or unsupported audio format (no container recognised in "
			       "the first bytes; headerless audio needs encoding and sample_rate)");
	return 0;
}

static int audio_container_open(struct audio_dec *d, char *err, size_t errlen)
{
	uint8_t *buf = av_malloc(AUDIO_IO_BLOCK);
	if (!buf)
		return -ST_NOMEM;
	d->pio = d->io_read ? avio_alloc_context(buf, AUDIO_IO_BLOCK, 0, d->io_user, d->io_read,
						 NULL, NULL)
			    : avio_alloc_context(buf, AUDIO_IO_BLOCK, 0, &d->mem, mem_read, NULL,
						 mem_seek);
	d->fmt = d->pio ? avformat_alloc_context() : NULL;
	if (!d->fmt) {
		if (!d->pio)
			av_free(buf);
		return -ST_NOMEM;
	}
	d->fmt->pb = d->pio;
	d->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
	d->fmt->io_open = audio_no_open;
	const AVInputFormat *probed = NULL;
	int rc = d->io_read ? audio_pipe_probe(d, &probed, err, errlen) : 0;
	if (rc)
		return rc;
	AVDictionary *opt = NULL;
	av_dict_set(&opt, "format_whitelist", audio_formats, 0);
	av_dict_set(&opt, "protocol_whitelist", "none", 0);
	if (d->io_read) { /* should the stream info be needed: read little ahead */
		av_dict_set(&opt, "probesize", "32768", 0);
		av_dict_set(&opt, "analyzeduration", "500000", 0);
	}
	rc = avformat_open_input(&d->fmt, NULL, probed, &opt); /* frees fmt on failure */
	av_dict_free(&opt);
	if (rc < 0)
		return st_errf(rc == AVERROR(ENOMEM) ? -ST_NOMEM : -ST_UNSUPPORTED, err, errlen,
			       "unrecognised or unsupported audio format: %s", av_err2str(rc));
	if (!d->io_read || !audio_codec_known(d->fmt)) {
		rc = avformat_find_stream_info(d->fmt, NULL);
		if (rc < 0)
			return st_errf(-ST_UNSUPPORTED, err, errlen, "unreadable audio: %s",
				       av_err2str(rc));
	}
	return audio_container_stream(d, err, errlen);
}

/* Headerless PCM: the caller's rate and channels, one of libavcodec's
 * PCM decoders (the packets are cut from the bytes in eng_audio_av.c);
 * raw Opus packets the same way with the Opus decoder. */
static int audio_raw_open(struct audio_dec *d, char *err, size_t errlen)
{
	static const enum AVCodecID ids[] = {
		[ENG_AUDIO_ENCODING_LINEAR16] = AV_CODEC_ID_PCM_S16LE,
		[ENG_AUDIO_ENCODING_LINEAR32] = AV_CODEC_ID_PCM_F32LE,
		[ENG_AUDIO_ENCODING_MULAW] = AV_CODEC_ID_PCM_MULAW,
		[ENG_AUDIO_ENCODING_ALAW] = AV_CODEC_ID_PCM_ALAW,
		[ENG_AUDIO_ENCODING_OPUS] = AV_CODEC_ID_OPUS,
	};
	static const int bytes[] = {[ENG_AUDIO_ENCODING_LINEAR16] = 2,
				    [ENG_AUDIO_ENCODING_LINEAR32] = 4,
				    [ENG_AUDIO_ENCODING_MULAW] = 1,
				    [ENG_AUDIO_ENCODING_ALAW] = 1,
				    [ENG_AUDIO_ENCODING_OPUS] = 1}; /* records, not frames */
	AVCodecParameters *par = avcodec_parameters_alloc();
	if (!par)
		return -ST_NOMEM;
	par->codec_type = AVMEDIA_TYPE_AUDIO;
	par->codec_id = ids[d->raw->encoding];
	/* raw Opus: 48 kHz whatever sample_rate says (the decoder's rate) */
	par->sample_rate = par->codec_id == AV_CODEC_ID_OPUS ? 48000 : d->raw->sample_rate;
	av_channel_layout_default(&par->ch_layout, d->raw->channels);
	d->raw_frame_bytes = (size_t)bytes[d->raw->encoding] * (size_t)d->raw->channels;
	par->block_align = (int)d->raw_frame_bytes;
	int rc = audio_codec_open(d, par, err, errlen);
	avcodec_parameters_free(&par);
	return rc;
}

int eng__audio_src_open(struct audio_dec *d, char *err, size_t errlen)
{
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (!d->pkt || !d->frame)
		return -ST_NOMEM;
	bool pcm = d->raw && d->raw->encoding != ENG_AUDIO_ENCODING_FLAC &&
		   d->raw->encoding != ENG_AUDIO_ENCODING_OGG_OPUS;
	return pcm ? audio_raw_open(d, err, errlen) : audio_container_open(d, err, errlen);
}

void eng__audio_close(struct audio_dec *d)
{
	swr_free(&d->swr);
	av_channel_layout_uninit(&d->layout);
	avcodec_free_context(&d->codec);
	av_frame_free(&d->frame);
	av_packet_free(&d->pkt);
	avformat_close_input(&d->fmt); /* with AVFMT_FLAG_CUSTOM_IO: pio stays ours */
	if (d->pio) {
		av_freep(&d->pio->buffer);
		avio_context_free(&d->pio);
	}
}
