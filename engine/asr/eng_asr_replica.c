/* eng_asr_replica.c - a transcription replica's loop: dynamic batching of
 * Whisper passes across requests.
 *
 * Each admitted request (up to max_batch_size at once) runs the whole
 * transcription algorithm (eng_asr_transcribe.c: features, windows, fallback,
 * long-form seeking) on a driver thread of its own, unchanged - except
 * that its encoder and decoder passes are not computed there: the driver
 * hands each pass to the replica's loop (struct eng_whisper_runner) and
 * waits. The loop runs in rounds: it lets every driver that can go on run
 * until its next pass (or its end), one driver at a time, then computes
 * what they asked for together - every requested 30-second window in ONE
 * encoder pass over the windows stacked (eng_whisper_encode_batch), and
 * every decode step and short prompt of every request in ONE decoder pass
 * (eng_whisper_decode_steps; prompts longer than ENG_WHISPER_STEP_MAX
 * tokens go one by one) - with the replica's compute team, and starts the
 * next round.
 *
 * Drivers run only while the compute team is idle, and at most as many at
 * once as the replica has threads (a mutex, a count and one condition
 * variable per driver hand out turns), pinned to the replica's cores: so
 * compute threads plus running drivers never exceed the cores given. A
 * request's results are those it would get alone: its passes compute the
 * same numbers batched or not (eng_whisper_encode_batch and
 * eng_whisper_decode_steps say why).
 *
 * Between rounds (and while a driver waits to be admitted) requests whose
 * client left or whose deadline passed are ended (eng__sched_sweep); a
 * driver stops at its next pass on cancel, deadline or shutdown.
 *
 * The batch class (ENG_PRIORITY_BATCH, the Batch API's items) runs on
 * what interactive requests leave: up to max_batch_size of each class are
 * admitted, batch ones only while fewer than max_batch_size run in all,
 * and while an interactive request is admitted (and for EA_BATCH_GRACE_MS
 * after one ended) the batch ones are parked - they keep their state and
 * slots but get no turn and no pass - so an interactive request waits at
 * most for the round in progress when it came, and its rounds are its
 * own.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"
#include "engine/models/eng_whisper.h"

enum ea_state {
	EA_RUN,    /* may run until its next pass */
	EA_ENCODE, /* waits for an encoder pass */
	EA_DECODE, /* waits for a decoder pass */
	EA_DONE,   /* finished (rc, t) */
};

struct ea_loop;

struct ea_driver {
	struct ea_loop *l;
	struct eng__asr_req *r;
	struct dev_queue *q;        /* its own one-thread queue on the replica's device:
				     * the passes its thread runs itself (word
				     * alignment, beam search's cache copies) */
	pthread_t thread;
	pthread_cond_t cv;          /* the driver waits here for the baton */
	bool turn;                  /* it holds the baton */
	enum ea_state state;
	struct eng_whisper_runner runner;
	double next_sweep;          /* ms: when its stop check sweeps the queue again */
	/* the pass asked for */
	struct eng_whisper_enc *enc;
	const struct eng_whisper_enc *dec_enc;
	const float *mel;
	size_t mel_stride, frame0, n_frames;
	struct eng_whisper_kv *kv;
	const int32_t *tokens;
	size_t n_tokens, at_index;
	float *logits, *logits_at;
	int pass_rc;
	/* the end */
	int rc;
	char err[512];
	struct eng_transcript *t;
	double audio_s;
	double t_admit;             /* monotonic ms: taken by the replica */
};

struct ea_loop {
	struct eng__replica *rp;
	struct dev_queue *q;        /* the replica's: every batched pass */
	const struct eng_whisper *w;
	cpu_set_t cores;            /* the replica's CPUs (drivers run there) */
	bool pin;                   /* cores is set */
	int width;                  /* drivers running at once at most: the replica's threads */
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* the loop waits here for turns to come back */
	int active;                 /* drivers holding a turn (under mu) */
	struct ea_driver **d;       /* [2 cap] admitted: cap of each class at most */
	int n, cap;
	int n_inter;                /* of them, not of the batch class (ea_count) */
	bool grace;                 /* within EA_BATCH_GRACE_MS of interactive work (ea_count) */
	double inter_seen_ms;       /* monotonic ms: interactive work last admitted or ended */
	struct eng__req **taken;    /* [2 cap] */
	struct eng_whisper_step *steps; /* [2 cap] */
	struct ea_driver **stepping;    /* [2 cap] the drivers of steps, or of windows */
	/* [2 cap] the round's encoder windows */
	struct eng_whisper_enc **encs;
	const float **mels;
	size_t *strides, *frame0, *n_frames;
};

/* --- turns ----------------------------------------------------------------------- */

/* Batch work waits this long after interactive work ended: a client's
 * next request, sent as its answer arrives, finds the replica free
 * rather than behind a batch driver's host step (decode, VAD, log-mel)
 * begun in between. */
#define EA_BATCH_GRACE_MS 20.0

/* Recount the interactive drivers admitted, and whether batch work is
 * within its grace time. */
static void ea_count(struct ea_loop *l)
{
	l->n_inter = 0;
	for (int i = 0; i < l->n; i++)
		l->n_inter += l->d[i]->r->base.priority != ENG_PRIORITY_BATCH;
	double now = st_now_ms();
	if (l->n_inter)
		l->inter_seen_ms = now;
	l->grace = l->inter_seen_ms > 0 && now - l->inter_seen_ms < EA_BATCH_GRACE_MS;
}

/* A batch-class driver gets no turn and no pass while an interactive
 * one is admitted, nor within the grace time after one (see the top). */
static bool ea_parked(const struct ea_loop *l, const struct ea_driver *d)
{
	return (l->n_inter > 0 || l->grace) && d->r->base.priority == ENG_PRIORITY_BATCH;
}

/* Interactive requests wait in the model's queue. */
static bool ea_interactive_waits(struct ea_loop *l)
{
	struct eng_sched *s = l->rp->s;
	pthread_mutex_lock(&s->mu);
	bool waits = s->n_waiting > s->n_waiting_batch;
	pthread_mutex_unlock(&s->mu);
	return waits;
}

/* Loop side: let every runnable driver go on until it asks for a pass or
 * ends, `width` of them at a time. */
static void ea_run_drivers(struct ea_loop *l)
{
	int next = 0;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (l->active < l->width && next < l->n) {
			struct ea_driver *d = l->d[next++];
			if (d->state != EA_RUN || ea_parked(l, d))
				continue;
			if (d->r->base.priority == ENG_PRIORITY_BATCH) {
				/* no new batch turn once interactive work waits: it
				 * is admitted at the next round, these are parked */
				pthread_mutex_unlock(&l->mu);
				bool waits = ea_interactive_waits(l);
				pthread_mutex_lock(&l->mu);
				if (waits)
					continue;
			}
			d->turn = true;
			l->active++;
			pthread_cond_signal(&d->cv);
		}
		if (!l->active && next >= l->n)
			break;
		pthread_cond_wait(&l->cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
}

/* Driver side: give the turn back (state set) and wait for the next one
 * (unless done). */
static void ea_yield(struct ea_driver *d, enum ea_state state)
{
	struct ea_loop *l = d->l;
	pthread_mutex_lock(&l->mu);
	d->state = state;
	d->turn = false;
	l->active--;
	pthread_cond_signal(&l->cv);
	while (state != EA_DONE && !d->turn)
		pthread_cond_wait(&d->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* --- the runner the driver's transcription calls --------------------------------- */

/* Before a pass goes to the replica's queue, dev_queue_sync: what the
 * driver's own queue wrote (beam search's cache copies) is on the device. */
static int ea_encode(void *ctx, struct eng_whisper_enc *e, const float *mel, size_t mel_stride,
		     size_t frame0, size_t n_frames)
{
	struct ea_driver *d = ctx;
	int rc = dev_queue_sync(d->q);
	if (rc)
		return rc;
	d->enc = e;
	d->mel = mel;
	d->mel_stride = mel_stride;
	d->frame0 = frame0;
	d->n_frames = n_frames;
	ea_yield(d, EA_ENCODE);
	return d->pass_rc;
}

static int ea_decode(void *ctx, const struct eng_whisper_enc *e, struct eng_whisper_kv *kv,
		     const int32_t *tokens, size_t n, float *logits, float *logits_at,
		     size_t at_index)
{
	struct ea_driver *d = ctx;
	int rc = dev_queue_sync(d->q);
	if (rc)
		return rc;
	d->dec_enc = e;
	d->kv = kv;
	d->tokens = tokens;
	d->n_tokens = n;
	d->logits = logits;
	d->logits_at = logits_at;
	d->at_index = at_index;
	ea_yield(d, EA_DECODE);
	return d->pass_rc;
}

/* Asked before every pass: the request's deadline and cancel flag,
 * shutdown; and at most every 20 ms the requests waiting in the queue
 * that were cancelled or expired meanwhile are ended. */
static int ea_stop(void *arg)
{
	struct ea_driver *d = arg;
	double now = st_now_ms();
	if (now >= d->next_sweep) {
		d->next_sweep = now + 20;
		if (eng__sched_sweep(d->l->rp))
			return -ST_CLOSED;
	}
	return eng__req_expired(&d->r->base, now);
}

/* Decode channel ch of the audio (-1: all of it, downmixed) when it came
 * encoded, then transcribe it into *t; *n_ch: the source's channels. */
static int ea_transcribe_one(struct ea_driver *d, int ch, struct eng_transcript **t, int *n_ch)
{
	struct eng__asr_req *r = d->r;
	struct eng_audio audio = { 0 };
	const float *samples = r->in.samples;
	size_t n = r->in.n_samples;
	*n_ch = 1;
	if (r->in.data) {
		int rc = eng_audio_decode_channel(r->in.data, r->in.len, r->in.raw,
						  ENG_AUDIO_MAX_SECONDS, ch, &audio, d->err,
						  sizeof(d->err));
		if (rc)
			return rc == -ST_IO ? -ST_INVAL : rc; /* gave up mid-stream: bad input */
		samples = audio.samples;
		n = audio.n_samples;
		*n_ch = audio.src_channels;
		if (ch >= 0 && *n_ch > ENG_ASR_MAX_CHANNELS) { /* each one a full pass */
			eng_audio_fini(&audio);
			return st_errf(-ST_INVAL, d->err, sizeof(d->err),
				       "multichannel: the audio has %d channels; at most %d are "
				       "transcribed one by one", *n_ch, ENG_ASR_MAX_CHANNELS);
		}
	}
	int rc = eng__transcribe_run(r->m, d->q, samples, n, &r->p, ea_stop, d, &d->runner,
				     t, d->err, sizeof(d->err));
	if (!rc && r->in.data)
		(*t)->duration_s = audio.duration_s;
	if (!rc)
		(*t)->channel = ch < 0 ? 0 : ch;
	eng_audio_fini(&audio);
	return rc;
}

/* The request's transcript: of the audio downmixed, or (per_channel) of
 * each channel in turn, chained by ->next. */
static int ea_transcribe(struct ea_driver *d)
{
	bool each = d->r->in.per_channel && d->r->in.data;
	int n_ch = 1, rc = ea_transcribe_one(d, each ? 0 : -1, &d->t, &n_ch);
	struct eng_transcript **tail = rc ? NULL : &d->t->next;
	for (int c = 1; !rc && each && c < n_ch; c++) {
		int unused;
		rc = ea_transcribe_one(d, c, tail, &unused);
		if (!rc)
			tail = &(*tail)->next;
	}
	if (rc) {
		eng_transcript_destroy(d->t);
		d->t = NULL;
	}
	d->audio_s = rc ? 0 : d->t->duration_s * (each ? n_ch : 1);
	return rc;
}

static void *ea_driver_main(void *arg)
{
	struct ea_driver *d = arg;
	struct ea_loop *l = d->l;
	pthread_mutex_lock(&l->mu);
	while (!d->turn)
		pthread_cond_wait(&d->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	d->rc = dev_queue_create(l->rp->dev, 1, &d->q, d->err, sizeof(d->err));
	if (!d->rc)
		d->rc = ea_transcribe(d);
	dev_queue_destroy(d->q);
	ea_yield(d, EA_DONE);
	return NULL;
}

/* --- the loop ---------------------------------------------------------------------- */

/* Report d's end to its caller and free it (its thread has returned). */
static void ea_finish(struct ea_loop *l, struct ea_driver *d)
{
	struct eng_sched *s = l->rp->s;
	struct eng__asr_req *r = d->r;
	double now = st_now_ms();
	if (r->base.priority != ENG_PRIORITY_BATCH)
		l->inter_seen_ms = now;
	struct eng_recent_req e = { .replica = l->rp->index, .rc = d->rc,
				    .priority = (int)r->base.priority,
				    .submitted_ms = r->base.t_submit, .admitted_ms = d->t_admit,
				    .ended_ms = now, .audio_seconds = d->audio_s };
	pthread_mutex_lock(&s->mu);
	s->st.audio_seconds += d->audio_s;
	eng_stats_ended(&s->st, &l->rp->st, &e);
	pthread_mutex_unlock(&s->mu);
	eng__sched_count(s, d->rc, now - r->base.t_submit);
	if (d->rc) {
		r->base.end(&r->base, d->rc, d->err[0] ? d->err : NULL);
	} else {
		eng_transcribe_done_fn done = r->done;
		void *ud = r->ud;
		mem_free(r);
		done(ud, 0, d->t, NULL);
	}
	pthread_cond_destroy(&d->cv);
	mem_free(d);
	eng__sched_finish(l->rp);
}

/* A driver for r, its thread waiting for the baton; NULL when it cannot
 * start (r then ended with -ST_NOMEM). */
static struct ea_driver *ea_start(struct ea_loop *l, struct eng__req *base)
{
	struct ea_driver *d = mem_calloc(1, sizeof(*d));
	pthread_attr_t attr;
	int ok = d && !pthread_attr_init(&attr);
	if (ok) {
		d->l = l;
		d->r = (struct eng__asr_req *)base;
		d->t_admit = st_now_ms();
		d->runner = (struct eng_whisper_runner){ ea_encode, ea_decode, d };
		pthread_cond_init(&d->cv, NULL);
		if (l->pin)
			pthread_attr_setaffinity_np(&attr, sizeof(l->cores), &l->cores);
		ok = !pthread_create(&d->thread, &attr, ea_driver_main, d);
		pthread_attr_destroy(&attr);
		if (!ok)
			pthread_cond_destroy(&d->cv);
	}
	if (ok)
		return d;
	mem_free(d);
	eng__sched_count(l->rp->s, -ST_NOMEM, 0);
	base->end(base, -ST_NOMEM, "cannot start the transcription (no thread)");
	eng__sched_finish(l->rp);
	return NULL;
}

static void ea_start_all(struct ea_loop *l, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		struct ea_driver *d = ea_start(l, l->taken[i]);
		if (d)
			l->d[l->n++] = d;
	}
}

/* True when one of the admitted requests should not wait any longer. */
static bool ea_any_expired(const struct ea_loop *l)
{
	double now = st_now_ms();
	for (int i = 0; i < l->n; i++)
		if (eng__req_expired(&l->d[i]->r->base, now))
			return true;
	return false;
}

/* Admit waiting requests up to max_batch_size. Idle, wait for the first;
 * then, when batching, up to max_queue_delay_ms for more to gather
 * (Triton's dynamic batcher) - in slices of 20 ms, stopping early when an
 * admitted request's client leaves or its deadline passes. Returns
 * whether the scheduler is closing. */
static bool ea_admit(struct ea_loop *l)
{
	struct eng_sched *s = l->rp->s;
	bool closing = false, idle = l->n == 0;
	ea_count(l);
	/* only parked batch work: wait for a request or the grace's end */
	bool hold = !idle && !l->n_inter && l->grace;
	size_t k = eng__sched_take(l->rp, l->taken, (size_t)(l->cap - l->n_inter),
				   l->n < l->cap ? (size_t)(l->cap - l->n) : 0, idle || hold,
				   hold ? l->inter_seen_ms + EA_BATCH_GRACE_MS : 0, &closing);
	ea_start_all(l, k);
	if (closing || !idle || !k || s->max_queue_delay_ms <= 0)
		return closing;
	double until = st_now_ms() + s->max_queue_delay_ms;
	while (l->n < l->cap && !closing && !ea_any_expired(l)) {
		double now = st_now_ms();
		if (now >= until)
			break;
		double slice = now + 20 < until ? now + 20 : until;
		ea_count(l);
		k = eng__sched_take(l->rp, l->taken, (size_t)(l->cap - l->n_inter),
				    (size_t)(l->cap - l->n), true, slice, &closing);
		ea_start_all(l, k);
		closing |= eng__sched_sweep(l->rp);
	}
	return closing;
}

/* Batch-class windows per encoder pass: between two such passes the
 * round stops when interactive work waits, so that it waits for one pass
 * of a few windows, not for a whole round of max_batch_size (a 30-second
 * window is 1500 rows: two already fill the products). */
#define EA_BATCH_ENC_GROUP 1

/* The round's encoder passes: its windows stacked in one pass
 * (eng_whisper_encode_batch) - a round of batch-class work in passes of
 * EA_BATCH_ENC_GROUP windows, stopping early when interactive work waits
 * (the windows left wait for a later round) - or one by one when the
 * scratch is not to be had; each driver's pass_rc says how its window
 * went. Returns how many windows were computed. */
static int ea_encode_all(struct ea_loop *l, uint64_t *positions)
{
	int n = 0;
	for (int i = 0; i < l->n; i++) {
		struct ea_driver *d = l->d[i];
		if (d->state != EA_ENCODE || ea_parked(l, d))
			continue;
		l->encs[n] = d->enc;
		l->mels[n] = d->mel;
		l->strides[n] = d->mel_stride;
		l->frame0[n] = d->frame0;
		l->n_frames[n] = d->n_frames;
		l->stepping[n] = d; /* free until the decoder passes */
		n++;
	}
	int group = l->n_inter ? n : EA_BATCH_ENC_GROUP, done = 0;
	while (done < n && !(done && ea_interactive_waits(l))) {
		int g = n - done < group ? n - done : group;
		bool alone = eng_whisper_encode_batch(l->w, l->q, l->encs + done, l->mels + done,
						      l->strides + done, l->frame0 + done,
						      l->n_frames + done, (size_t)g) != 0;
		for (int b = done; b < done + g; b++) {
			struct ea_driver *d = l->stepping[b];
			d->pass_rc = alone ? eng_whisper_encode(l->w, l->encs[b], l->q, l->mels[b],
								l->strides[b], l->frame0[b],
								l->n_frames[b])
					   : 0;
			d->state = EA_RUN;
			*positions += eng_whisper_enc_ctx(d->enc);
		}
		done += g;
	}
	return done;
}

/* Every waiting pass of the round, computed together: the encoder windows,
 * then every decode step and short prompt (up to ENG_WHISPER_STEP_MAX
 * tokens) in one decoder pass; longer prompts (with previous text) one by
 * one. */
static void ea_compute(struct ea_loop *l)
{
	double t0 = st_now_ms();
	uint64_t positions = 0;
	int n_enc = ea_encode_all(l, &positions), n_step = 0;
	double t1 = st_now_ms();
	for (int i = 0; i < l->n; i++) {
		struct ea_driver *d = l->d[i];
		if (ea_parked(l, d))
			continue;
		if (d->state == EA_DECODE && d->n_tokens > ENG_WHISPER_STEP_MAX) {
			d->pass_rc = eng_whisper_decode(l->w, d->dec_enc, d->kv, l->q, d->tokens,
							d->n_tokens, d->logits, d->logits_at,
							d->at_index);
			d->state = EA_RUN;
		} else if (d->state == EA_DECODE) {
			l->steps[n_step] = (struct eng_whisper_step){
				d->dec_enc, d->kv, d->tokens, d->n_tokens, d->logits, d->logits_at,
				d->at_index };
			l->stepping[n_step++] = d;
		}
	}
	int rc = eng_whisper_decode_steps(l->w, l->q, l->steps, (size_t)n_step);
	for (int i = 0; i < n_step; i++) {
		l->stepping[i]->pass_rc = rc;
		l->stepping[i]->state = EA_RUN;
	}
	double t2 = st_now_ms();
	struct eng_sched *s = l->rp->s;
	pthread_mutex_lock(&s->mu);
	eng_stats_batch(&s->st, n_enc, t1 - t0);
	eng_stats_batch(&s->st, n_step, t2 - t1);
	s->st.encoder_windows += (uint64_t)n_enc;
	s->st.encoder_positions += positions;
	s->st.batch_parked_steps += l->n_inter > 0 && l->n_inter < l->n;
	pthread_mutex_unlock(&s->mu);
}

/* One round: every runnable driver goes to its next pass, the finished
 * ones leave, then the passes are computed. */
static void ea_round(struct ea_loop *l)
{
	ea_count(l);
	ea_run_drivers(l);
	for (int i = l->n; i-- > 0;) {
		struct ea_driver *d = l->d[i];
		if (d->state != EA_DONE)
			continue;
		pthread_join(d->thread, NULL);
		memmove(l->d + i, l->d + i + 1, (size_t)(l->n - i - 1) * sizeof(*l->d));
		l->n--;
		ea_finish(l, d);
	}
	ea_count(l);
	double t0 = st_now_ms();
	ea_compute(l);
	double t1 = st_now_ms();
	struct eng_sched *s = l->rp->s;
	pthread_mutex_lock(&s->mu);
	l->rp->st.busy_ms += t1 - t0;
	l->rp->st.batches++;
	s->st.compute_ms += t1 - t0;
	pthread_mutex_unlock(&s->mu);
}

static int ea_init(struct ea_loop *l, struct eng__replica *rp)
{
	memset(l, 0, sizeof(*l));
	l->rp = rp;
	l->q = rp->q;
	l->w = rp->s->m->whisper;
	l->cap = rp->s->max_batch_size;
	size_t slots = 2 * (size_t)l->cap; /* cap of each class */
	int n_cpus;
	const int *cpus = dev_cpu_ids(rp->dev, &n_cpus);
	CPU_ZERO(&l->cores);
	for (int i = 0; i < n_cpus && i < rp->threads; i++)
		if (cpus[i] < CPU_SETSIZE)
			CPU_SET(cpus[i], &l->cores);
	l->pin = CPU_COUNT(&l->cores) > 0;
	l->width = rp->threads > 0 ? rp->threads : 1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->d = mem_calloc(slots, sizeof(*l->d));
	l->taken = mem_calloc(slots, sizeof(*l->taken));
	l->steps = mem_calloc(slots, sizeof(*l->steps));
	l->stepping = mem_calloc(slots, sizeof(*l->stepping));
	l->encs = mem_calloc(slots, sizeof(*l->encs));
	l->mels = mem_calloc(slots, sizeof(*l->mels));
	l->strides = mem_calloc(slots, sizeof(*l->strides));
	l->frame0 = mem_calloc(slots, sizeof(*l->frame0));
	l->n_frames = mem_calloc(slots, sizeof(*l->n_frames));
	return l->d && l->taken && l->steps && l->stepping && l->encs && l->mels && l->strides &&
	       l->frame0 && l->n_frames ? 0 : -ST_NOMEM;
}

static void ea_fini(struct ea_loop *l)
{
	mem_free(l->d);
	mem_free(l->taken);
	mem_free(l->steps);
	mem_free(l->stepping);
	mem_free(l->encs);
	mem_free(l->mels);
	mem_free(l->strides);
	mem_free(l->frame0);
	mem_free(l->n_frames);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
}

void eng__asr_loop(void *arg, struct dev_pool *pool)
{
	struct ea_loop l;
	(void)pool; /* the ops split over it through rp->q */
	if (ea_init(&l, arg)) {
		l.cap = 0; /* no arrays: end every request; the replica stays up */
		for (;;) {
			struct eng__req *r;
			bool closing;
			if (eng__sched_take(l.rp, &r, 1, 1, true, 0, &closing)) {
				eng__sched_count(l.rp->s, -ST_NOMEM, 0);
				r->end(r, -ST_NOMEM, "out of memory for this replica");
				eng__sched_finish(l.rp);
			} else if (closing) {
				break;
			}
		}
		ea_fini(&l);
		return;
	}
	for (;;) {
		bool closing = ea_admit(&l);
		closing |= eng__sched_sweep(l.rp);
		if (closing && !l.n)
			break;
		if (l.n)
			ea_round(&l); /* on closing, the drivers stop at their next pass */
	}
	ea_fini(&l);
}
