/* ib_pcm.c - an audio file decoded to what a deepgram-live stream sends:
 * 16 kHz mono signed 16-bit samples (the query's encoding=linear16 and
 * sample_rate=16000). libavformat reads the first audio stream, its
 * decoder decodes it and libswresample converts it, with the daemon's
 * REST decoder's settings (engine/audio/eng_audio_av.c: a float internal
 * format, swresample's default downmix), so that a streamed file carries
 * the samples an upload of it is transcribed from.
 */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <stdlib.h>
#include <string.h>

#include "ib_int.h"

#define IB_PCM_RATE 16000

/* The decoding of one file; ib_pcm_close frees what it holds. */
struct ib_pcm_dec {
	AVFormatContext *fmt;
	AVCodecContext *codec;
	SwrContext *swr;
	AVPacket *pkt;
	AVFrame *frame;
	int stream;
	int16_t *out; /* [n] samples so far, [cap] allocated */
	size_t n, cap;
};

static void ib_pcm_close(struct ib_pcm_dec *d)
{
	swr_free(&d->swr);
	avcodec_free_context(&d->codec);
	avformat_close_input(&d->fmt);
	av_packet_free(&d->pkt);
	av_frame_free(&d->frame);
}

/* Open path's first audio stream and its decoder; -1 when it cannot. */
static int ib_pcm_open(struct ib_pcm_dec *d, const char *path)
{
	if (avformat_open_input(&d->fmt, path, NULL, NULL) < 0 ||
	    avformat_find_stream_info(d->fmt, NULL) < 0)
		return -1;
	const AVCodec *dec = NULL;
	d->stream = av_find_best_stream(d->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &dec, 0);
	if (d->stream < 0 || !dec)
		return -1;
	d->codec = avcodec_alloc_context3(dec);
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (!d->codec || !d->pkt || !d->frame ||
	    avcodec_parameters_to_context(d->codec, d->fmt->streams[d->stream]->codecpar) < 0 ||
	    avcodec_open2(d->codec, dec, NULL) < 0)
		return -1;
	return 0;
}

/* The resampler, from the first decoded frame f's format. */
static int ib_pcm_swr(struct ib_pcm_dec *d, const AVFrame *f)
{
	AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO, in;
	if (f->ch_layout.order == AV_CHANNEL_ORDER_NATIVE)
		av_channel_layout_copy(&in, &f->ch_layout);
	else
		av_channel_layout_default(&in, f->ch_layout.nb_channels);
	int rc = swr_alloc_set_opts2(&d->swr, &mono, AV_SAMPLE_FMT_S16, IB_PCM_RATE, &in, f->format,
				     f->sample_rate, 0, NULL);
	av_channel_layout_uninit(&in);
	if (rc < 0)
		return -1;
	enum AVSampleFormat internal =
		av_get_bytes_per_sample(f->format) <= 4 ? AV_SAMPLE_FMT_FLTP : AV_SAMPLE_FMT_DBLP;
	if (av_opt_set_sample_fmt(d->swr, "internal_sample_fmt", internal, 0) < 0)
		return -1;
	return swr_init(d->swr) < 0 ? -1 : 0;
}

/* Convert f (NULL: flush the resampler) onto the end of d->out. */
static int ib_pcm_convert(struct ib_pcm_dec *d, const AVFrame *f)
{
	if (!d->swr && (!f || ib_pcm_swr(d, f) != 0))
		return f ? -1 : 0;
	int room = swr_get_out_samples(d->swr, f ? f->nb_samples : 0);
	if (room < 0)
		return -1;
	if (d->n + (size_t)room > d->cap) {
		d->cap = (d->n + (size_t)room) * 2 + 4096;
		d->out = ib_xrealloc(d->out, d->cap * sizeof(*d->out));
	}
	uint8_t *dst = (uint8_t *)(d->out + d->n);
	int got = swr_convert(d->swr, &dst, room, f ? (const uint8_t **)f->extended_data : NULL,
			      f ? f->nb_samples : 0);
	if (got < 0)
		return -1;
	d->n += (size_t)got;
	return 0;
}

/* Every frame the decoder has ready; -1 on a conversion error. */
static int ib_pcm_drain(struct ib_pcm_dec *d)
{
	while (avcodec_receive_frame(d->codec, d->frame) == 0) {
		int rc = ib_pcm_convert(d, d->frame);
		av_frame_unref(d->frame);
		if (rc)
			return -1;
	}
	return 0;
}

/* Packets through the decoder to the end, then the flushes. */
static int ib_pcm_run(struct ib_pcm_dec *d)
{
	while (av_read_frame(d->fmt, d->pkt) >= 0) {
		int rc = 0;
		if (d->pkt->stream_index == d->stream && avcodec_send_packet(d->codec, d->pkt) == 0)
			rc = ib_pcm_drain(d);
		av_packet_unref(d->pkt);
		if (rc)
			return -1;
	}
	avcodec_send_packet(d->codec, NULL);
	if (ib_pcm_drain(d) != 0)
		return -1;
	return ib_pcm_convert(d, NULL);
}

int ib_pcm_decode(const char *path, int16_t **pcm, size_t *n)
{
	struct ib_pcm_dec d = {0};
	*pcm = NULL;
	*n = 0;
	int rc = ib_pcm_open(&d, path);
	if (!rc)
		rc = ib_pcm_run(&d);
	if (!rc && d.n == 0)
		rc = -1;
	ib_pcm_close(&d);
	if (rc) {
		fprintf(stderr, "inferd-bench: %s: cannot decode it to 16 kHz mono PCM\n", path);
		free(d.out);
		return -1;
	}
	*pcm = d.out;
	*n = d.n;
	return 0;
}
