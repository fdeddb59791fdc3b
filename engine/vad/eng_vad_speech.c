/* eng_vad_speech.c - faster-whisper 1.2.1's speech-span logic on Silero
 * probabilities (faster_whisper/vad.py, itself adapted from silero-vad's
 * get_speech_timestamps): VadOptions' defaults, get_speech_timestamps,
 * collect_chunks and SpeechTimestampsMap, with the same integer and
 * floating-point steps (durations in samples as doubles, int() truncation,
 * floor division, Python's round) so the spans agree to the sample.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/vad/eng_vad.h"

void eng_vad_params_init(struct eng_vad_params *p)
{
	*p = (struct eng_vad_params){
		.threshold = 0.5,
		.neg_threshold = -1.0,
		.min_speech_duration_ms = 0,
		.max_speech_duration_s = INFINITY,
		.min_silence_duration_ms = 2000,
		.speech_pad_ms = 400,
	};
}

/* A growable span list (at most one span per window, so n_windows bounds it). */
struct ev_list {
	struct eng_vad_span *v;
	size_t n, cap;
};

static int ev_push(struct ev_list *l, int64_t start, int64_t end)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct eng_vad_span *v = mem_realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ST_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (struct eng_vad_span){start, end};
	return 0;
}

/* The thresholds in samples, as get_speech_timestamps derives them. */
struct ev_lim {
	double thr, neg;	/* probability thresholds */
	double min_speech;	/* samples */
	double max_speech;	/* samples: max_s * sr - 512 - 2 * pad */
	double min_silence;	/* samples */
	double min_silence_max; /* samples: 98 ms, where a long span may be cut */
	double pad;		/* samples */
};

/* The scan's state: python's triggered, current_speech, temp_end,
 * prev_end, next_start (0 meaning unset, as there). */
struct ev_scan {
	bool triggered, has_cur;
	int64_t cur_start, temp_end, prev_end, next_start;
};

static void ev_reset(struct ev_scan *s)
{
	s->prev_end = s->next_start = s->temp_end = 0;
}

/* ev_max_split - the max_speech_duration_s cut at position pos; *skip
 * tells the caller to go on to the next window. */
static int ev_max_split(struct ev_scan *s, struct ev_list *l, int64_t pos, bool *skip)
{
	int rc;
	if (s->prev_end) {
		rc = ev_push(l, s->cur_start, s->prev_end);
		s->has_cur = false;
		if (s->next_start < s->prev_end) {
			s->triggered = false;
		} else {
			s->cur_start = s->next_start;
			s->has_cur = true;
		}
		ev_reset(s);
		return rc;
	}
	rc = ev_push(l, s->cur_start, pos);
	s->has_cur = false;
	ev_reset(s);
	s->triggered = false;
	*skip = true;
	return rc;
}

/* ev_silence - a window below neg_threshold while triggered. */
static int ev_silence(struct ev_scan *s, struct ev_list *l, const struct ev_lim *lim, int64_t pos)
{
	if (!s->temp_end)
		s->temp_end = pos;
	if ((double)(pos - s->temp_end) > lim->min_silence_max)
		s->prev_end = s->temp_end;
	if ((double)(pos - s->temp_end) < lim->min_silence)
		return 0;
	int rc = 0;
	if ((double)(s->temp_end - s->cur_start) > lim->min_speech)
		rc = ev_push(l, s->cur_start, s->temp_end);
	s->has_cur = false;
	ev_reset(s);
	s->triggered = false;
	return rc;
}

static int ev_window(struct ev_scan *s, struct ev_list *l, const struct ev_lim *lim, double prob,
		     int64_t pos)
{
	if (prob >= lim->thr && s->temp_end) {
		s->temp_end = 0;
		if (s->next_start < s->prev_end)
			s->next_start = pos;
	}
	if (prob >= lim->thr && !s->triggered) {
		s->triggered = true;
		s->cur_start = pos;
		s->has_cur = true;
		return 0;
	}
	if (s->triggered && (double)(pos - s->cur_start) > lim->max_speech) {
		bool skip = false;
		int rc = ev_max_split(s, l, pos, &skip);
		if (rc || skip)
			return rc;
	}
	if (prob < lim->neg && s->triggered)
		return ev_silence(s, l, lim, pos);
	return 0;
}

static int64_t ev_floordiv2(int64_t x)
{
	return x >= 0 ? x / 2 : -((-x + 1) / 2);
}

/* ev_pad - the padding pass over spans v[n] of an input of len samples. */
static void ev_pad(struct eng_vad_span *v, size_t n, int64_t len, double pad)
{
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			v[0].start = (int64_t)fmax(0.0, (double)v[0].start - pad);
		if (i == n - 1) {
			v[i].end = (int64_t)fmin((double)len, (double)v[i].end + pad);
			continue;
		}
		int64_t silence = v[i + 1].start - v[i].end;
		if ((double)silence < 2 * pad) {
			v[i].end += ev_floordiv2(silence);
			int64_t s = v[i + 1].start - ev_floordiv2(silence);
			v[i + 1].start = s > 0 ? s : 0;
		} else {
			v[i].end = (int64_t)fmin((double)len, (double)v[i].end + pad);
			v[i + 1].start = (int64_t)fmax(0.0, (double)v[i + 1].start - pad);
		}
	}
}

static int ev_limits(const struct eng_vad_params *p, struct ev_lim *lim)
{
	const double sr = ENG_VAD_SAMPLE_RATE;
	if (!(p->threshold >= 0 && p->threshold <= 1) || !(p->min_speech_duration_ms >= 0) ||
	    !(p->max_speech_duration_s > 0) || !(p->min_silence_duration_ms >= 0) ||
	    !(p->speech_pad_ms >= 0) || isnan(p->neg_threshold))
		return -ST_INVAL;
	lim->thr = p->threshold;
	lim->neg = p->neg_threshold >= 0 ? p->neg_threshold : fmax(p->threshold - 0.15, 0.01);
	lim->min_speech = sr * p->min_speech_duration_ms / 1000;
	lim->pad = sr * p->speech_pad_ms / 1000;
	lim->max_speech = sr * p->max_speech_duration_s - ENG_VAD_WINDOW - 2 * lim->pad;
	lim->min_silence = sr * p->min_silence_duration_ms / 1000;
	lim->min_silence_max = sr * 98 / 1000;
	return 0;
}

int eng_vad_spans_from_probs(const float *probs, size_t n_windows, size_t n_samples,
			     const struct eng_vad_params *p, struct eng_vad_span **spans,
			     size_t *n_spans)
{
	*spans = NULL;
	*n_spans = 0;
	struct ev_lim lim;
	int rc = ev_limits(p, &lim);
	if (rc)
		return rc;
	struct ev_list l = {0};
	struct ev_scan s = {0};
	for (size_t i = 0; i < n_windows && !rc; i++)
		rc = ev_window(&s, &l, &lim, probs[i], (int64_t)(i * ENG_VAD_WINDOW));
	if (!rc && s.has_cur && (double)((int64_t)n_samples - s.cur_start) > lim.min_speech)
		rc = ev_push(&l, s.cur_start, (int64_t)n_samples);
	if (rc) {
		mem_free(l.v);
		return rc;
	}
	ev_pad(l.v, l.n, (int64_t)n_samples, lim.pad);
	*spans = l.v;
	*n_spans = l.n;
	return 0;
}

int eng_vad_speech(const struct eng_vad *vad, const float *samples, size_t n,
		   const struct eng_vad_params *p, struct eng_vad_span **spans, size_t *n_spans)
{
	*spans = NULL;
	*n_spans = 0;
	struct eng_vad_params def;
	if (!p) {
		eng_vad_params_init(&def);
		p = &def;
	}
	size_t nw = eng_vad_n_windows(n);
	float *probs = mem_alloc(nw * sizeof(*probs));
	if (!probs)
		return -ST_NOMEM;
	int rc = eng_vad_probs(vad, samples, n, probs);
	if (!rc)
		rc = eng_vad_spans_from_probs(probs, nw, n, p, spans, n_spans);
	mem_free(probs);
	return rc;
}
