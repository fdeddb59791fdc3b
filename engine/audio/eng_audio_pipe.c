/* eng_audio_pipe.c - a live container decoded by its own thread (contract
 * in eng_audio_int.h).
 *
 * libavformat pulls its bytes through a read callback and cannot be fed
 * push-wise, so the demuxer, decoder and resampler of one stream run on a
 * thread of their own (eng__audio_src_open + eng__audio_feed, as an
 * upload's), whose AVIOContext reads from a pipe: the read blocks on the
 * condition variable until bytes are pushed, the end is declared (then
 * AVERROR_EOF), or the stream is destroyed (then AVERROR_EXIT, which
 * every demuxer returns from). A push appends its bytes, wakes the thread
 * and waits until the thread has taken them all and blocks in the read
 * again (or has stopped), so the caller gets every sample those bytes
 * completed, deterministically, and never more than one push's bytes
 * wait in the pipe. The thread holds a CPU only while it decodes; the
 * caller (a thread-pool worker) sleeps meanwhile.
 *
 * A thread that stops before the end was declared met data it could not
 * read (an unrecognised format, a broken page) or failed: pushes return
 * -ST_INVAL (or its failure) from then on.
 */
#include <stdio.h>
#include <string.h>
#include <pthread.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/audio/eng_audio_int.h"

struct audio_pipe {
	pthread_mutex_t mu;
	pthread_cond_t cv;	       /* any change below (both directions wait on it) */
	uint8_t *buf;	       /* [cap] pushed bytes, mem.h */
	size_t len, pos, cap;  /* bytes held, of which read */
	bool eof;	       /* the end was declared */
	bool abort;	       /* destroy: reads return AVERROR_EXIT */
	bool idle;	       /* the thread waits in the read with nothing to read */
	bool done;	       /* the thread has stopped (rc, err) */
	bool any;	       /* some push has returned samples */
	int rc;
	char err[256];
	struct audio_dec d;    /* the thread's; d.out / d.n_out read by a push once idle */
	pthread_t thread; /* (pthreads, not C11 threads: ThreadSanitizer intercepts only
			   * pthread_create) */
};

/* AVIOContext read: at most size bytes, blocking until some are pushed. */
static int audio_pipe_read(void *user, uint8_t *dst, int size)
{
	struct audio_pipe *p = user;
	pthread_mutex_lock(&p->mu);
	while (p->pos == p->len && !p->eof && !p->abort) {
		p->idle = true;
		pthread_cond_broadcast(&p->cv);
		pthread_cond_wait(&p->cv, &p->mu);
	}
	p->idle = false;
	int n = AVERROR_EXIT;
	if (!p->abort && p->pos == p->len)
		n = AVERROR_EOF;
	else if (!p->abort) {
		size_t k = p->len - p->pos < (size_t)size ? p->len - p->pos : (size_t)size;
		memcpy(dst, p->buf + p->pos, k);
		p->pos += k;
		n = (int)k;
	}
	pthread_mutex_unlock(&p->mu);
	return n;
}

static void *audio_pipe_main(void *arg)
{
	struct audio_pipe *p = arg;
	char err[sizeof(p->err)] = "";
	int rc = eng__audio_src_open(&p->d, err, sizeof(err));
	if (!rc)
		rc = eng__audio_feed(&p->d, true, err, sizeof(err));
	if (!rc && p->d.n_bad)
		rc = st_errf(-ST_INVAL, err, sizeof(err), "audio sample %lld is not a finite number",
			     (long long)p->d.first_bad);
	pthread_mutex_lock(&p->mu);
	if (rc && rc != -ST_NOMEM && p->eof && !p->any && !p->d.n_out)
		rc = 0; /* ended before any audio (a header, a few bytes): an empty stream,
			 * as a headerless one that got no whole frame */
	else if (!rc && !p->eof && !p->abort && p->d.fmt && strstr(p->d.fmt->iformat->name, "mp4"))
		/* its index (moov) after the audio: libavformat seeks there first.
		 * Short: a Deepgram close reason keeps 100 bytes */
		rc = st_errf(-ST_INVAL, err, sizeof(err),
			     "an MP4 whose moov box follows its audio cannot be streamed "
			     "(remux: ffmpeg -movflags +faststart)");
	else if (!rc && !p->eof && !p->abort)
		rc = st_errf(-ST_INVAL, err, sizeof(err), "the %s audio stops being readable",
			     p->d.fmt ? p->d.fmt->iformat->name : "container");
	else if (rc == -ST_UNSUPPORTED) /* the bytes are not audio we can read */
		rc = -ST_INVAL;
	p->rc = rc;
	memcpy(p->err, err, sizeof(err));
	p->done = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int eng__audio_pipe_create(int channel, struct audio_pipe **out, char *err, size_t errlen)
{
	*out = NULL;
	struct audio_pipe *p = mem_calloc(1, sizeof(*p));
	if (!p)
		return -ST_NOMEM;
	p->d = (struct audio_dec){ .io_read = audio_pipe_read, .io_user = p, .max_seconds = 1e18,
				   .channel = channel, .max_in = INT64_MAX / 2,
				   .max_dec_err = ENG__AUDIO_STREAM_MAX_DEC_ERR };
	if (pthread_mutex_init(&p->mu, NULL))
		goto out_free;
	if (pthread_cond_init(&p->cv, NULL))
		goto out_mtx;
	if (pthread_create(&p->thread, NULL, audio_pipe_main, p))
		goto out_cnd;
	*out = p;
	return 0;
out_cnd:
	pthread_cond_destroy(&p->cv);
out_mtx:
	pthread_mutex_destroy(&p->mu);
out_free:
	mem_free(p);
	return st_errf(-ST_IO, err, errlen, "cannot start the audio decoder thread");
}

/* Wait (p->mu held) until the thread has read everything and waits, or
 * stopped (last: until it stopped). */
static void audio_pipe_wait(struct audio_pipe *p, bool last)
{
	while (!p->done && (last || !(p->idle && p->pos == p->len)))
		pthread_cond_wait(&p->cv, &p->mu);
}

int eng__audio_pipe_push(struct audio_pipe *p, const void *data, size_t len, bool last,
			 const float **samples, size_t *n, char *err, size_t errlen)
{
	*samples = NULL;
	*n = 0;
	int rc = 0;
	pthread_mutex_lock(&p->mu);
	audio_pipe_wait(p, false); /* the thread may not have reached its first read yet */
	if (p->done)
		goto out_failed;
	if (len > p->cap) {
		uint8_t *b = mem_realloc(p->buf, len);
		if (!b) {
			rc = -ST_NOMEM;
			goto out_unlock;
		}
		p->buf = b;
		p->cap = len;
	}
	if (len)
		memcpy(p->buf, data, len);
	p->pos = 0;
	p->len = len;
	p->eof = last;
	p->d.n_out = 0;
	pthread_cond_broadcast(&p->cv);
	audio_pipe_wait(p, last);
	if (p->done && (!last || p->rc))
		goto out_failed;
	*samples = p->d.out;
	*n = p->d.n_out;
	p->any |= *n > 0;
	goto out_unlock;
out_failed:
	rc = p->rc ? p->rc : -ST_INVAL;
	if (rc == -ST_NOMEM)
		st_errf(0, err, errlen, "out of memory decoding audio");
	else
		st_errf(0, err, errlen, "%s", p->err[0] ? p->err : "the audio stream has ended");
out_unlock:
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void eng__audio_pipe_destroy(struct audio_pipe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->abort = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	mem_free(p->d.out);
	mem_free(p->d.s16);
	eng__audio_close(&p->d);
	mem_free(p->buf);
	mem_free(p);
}
