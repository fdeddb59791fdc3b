/* eng_audio_stream.c - audio decoded as it arrives (contract and the three
 * modes in eng_audio.h): headerless PCM and raw Opus records are cut into
 * packets here between pushes (an incomplete frame or record waits in
 * buf); a container goes to its own thread (eng_audio_pipe.c).
 */
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/audio/eng_audio_int.h"

struct eng_audio_stream {
	bool container;		  /* decoded by a thread of its own (eng_audio_pipe.c) */
	int channel;		  /* the channel kept, -1 all mixed */
	struct audio_pipe *pipe;  /* a container's thread, from its first bytes on, or
				   * NULL: none yet (or d decodes here) */
	struct audio_dec d;	  /* the open decoder; d.raw points at raw */
	struct eng_audio_raw raw; /* copied from the caller */
	uint8_t *buf;		  /* [buf_cap]: an incomplete frame's bytes, then the new ones */
	size_t n_part;		  /* bytes of the incomplete frame at buf's start */
	size_t buf_cap;
	bool finished;		  /* eng_audio_stream_finish was called */
};

/* FLAC and ogg-opus describe themselves: decoded as containers. */
static bool audio_stream_is_container(const struct eng_audio_raw *raw)
{
	return !raw || raw->encoding == ENG_AUDIO_ENCODING_FLAC ||
	       raw->encoding == ENG_AUDIO_ENCODING_OGG_OPUS;
}

int eng_audio_stream_create(const struct eng_audio_raw *raw, int channel,
			    struct eng_audio_stream **out, char *err, size_t errlen)
{
	*out = NULL;
	int rc = raw ? eng__audio_raw_check(raw, true, err, errlen) : 0;
	if (rc)
		return rc;
	eng__audio_init();
	struct eng_audio_stream *s = mem_calloc(1, sizeof(*s));
	if (!s)
		return -ST_NOMEM;
	s->container = audio_stream_is_container(raw);
	s->channel = channel;
	if (s->container) { /* its thread starts with the first bytes */
		*out = s;
		return 0;
	}
	s->raw = *raw;
	s->d = (struct audio_dec){ .raw = &s->raw, .max_seconds = 1e18, .channel = channel,
				   .max_in = INT64_MAX / 2,
				   .max_dec_err = ENG__AUDIO_STREAM_MAX_DEC_ERR };
	rc = eng__audio_src_open(&s->d, err, errlen);
	if (rc) {
		eng_audio_stream_destroy(s);
		return rc;
	}
	*out = s;
	return 0;
}

/* Decode the held bytes and len more (last: to the end, flushing). */
static int audio_stream_feed(struct eng_audio_stream *s, const void *data, size_t len, bool last,
			     const float **samples, size_t *n, char *err, size_t errlen)
{
	if (s->n_part + len > s->buf_cap) {
		size_t cap = s->n_part + len;
		uint8_t *p = mem_realloc(s->buf, cap);
		if (!p)
			return -ST_NOMEM;
		s->buf = p;
		s->buf_cap = cap;
	}
	if (len)
		memcpy(s->buf + s->n_part, data, len);
	struct audio_dec *d = &s->d;
	d->mem = (struct audio_mem){ .data = s->buf, .len = (int64_t)(s->n_part + len) };
	d->n_out = 0;
	int rc = eng__audio_feed(d, last, err, errlen);
	if (!rc && d->n_bad)
		rc = st_errf(-ST_INVAL, err, errlen, "audio sample %lld is not a finite number",
			     (long long)d->first_bad);
	if (rc)
		return rc;
	s->n_part = (size_t)(d->mem.len - d->mem.pos); /* less than one frame or record */
	if (s->n_part) /* (buf is NULL until the first bytes: nothing to move) */
		memmove(s->buf, s->buf + d->mem.pos, s->n_part);
	*samples = d->out;
	*n = d->n_out;
	return 0;
}

int eng_audio_stream_push(struct eng_audio_stream *s, const void *data, size_t len,
			  const float **samples, size_t *n, char *err, size_t errlen)
{
	*samples = NULL;
	*n = 0;
	if (s->finished)
		return st_errf(-ST_INVAL, err, errlen, "audio after the end of the stream");
	if (len > ENG_AUDIO_STREAM_MAX_PUSH)
		return st_errf(-ST_TOOBIG, err, errlen, "more than %u bytes of audio at once",
			       ENG_AUDIO_STREAM_MAX_PUSH);
	int rc = 0;
	if (s->container && !s->pipe && len) /* no thread for a socket that sends nothing */
		rc = eng__audio_pipe_create(s->channel, &s->pipe, err, errlen);
	if (!rc && s->container)
		rc = s->pipe ? eng__audio_pipe_push(s->pipe, data, len, false, samples, n, err,
						    errlen) : 0;
	else if (!rc)
		rc = audio_stream_feed(s, data, len, false, samples, n, err, errlen);
	return rc == -ST_NOMEM ? st_errf(rc, err, errlen, "out of memory decoding audio") : rc;
}

int eng_audio_stream_finish(struct eng_audio_stream *s, const float **samples, size_t *n,
			    char *err, size_t errlen)
{
	*samples = NULL;
	*n = 0;
	if (s->finished)
		return 0;
	s->finished = true;
	if (s->container && !s->pipe)
		return 0; /* no byte came: an empty stream */
	int rc = s->pipe ? eng__audio_pipe_push(s->pipe, NULL, 0, true, samples, n, err, errlen)
			 : audio_stream_feed(s, NULL, 0, true, samples, n, err, errlen);
	return rc == -ST_NOMEM ? st_errf(rc, err, errlen, "out of memory decoding audio") : rc;
}

void eng_audio_stream_destroy(struct eng_audio_stream *s)
{
	if (!s)
		return;
	eng__audio_pipe_destroy(s->pipe);
	mem_free(s->d.out);
	mem_free(s->d.s16);
	eng__audio_close(&s->d);
	mem_free(s->buf);
	mem_free(s);
}
