/* eng_asr_chunked.c - batched long-form transcription: audio longer than
 * one 30-second window is cut at its quietest moments into chunks of at
 * most 30 s, and every chunk is queued as a transcription of its own, all
 * in one group, so that the replica computes the chunks' encoder windows
 * and decode steps together (eng_asr_replica.c) instead of one window
 * after the other. No text is carried from one chunk to the next (each
 * starts from the caller's prompt, if any), which is what makes them
 * independent: faster-whisper's BatchedInferencePipeline does the same,
 * with its VAD choosing the cuts where this uses the signal energy. When
 * every chunk has ended the transcripts are joined in order, segment
 * times shifted by the chunk's start and segment ids renumbered.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"

#define EC_RATE     ENG_WHISPER_SAMPLE_RATE
#define EC_SEARCH_S 10                  /* the cut lies in the chunk's last 10 s */
#define EC_HOP      160                 /* energy in 10 ms hops */
#define EC_QUIET    20                  /* the quietest 200 ms (hops) */

struct ec_job {
	pthread_mutex_t mu;
	size_t n, left;
	struct eng__asr_req **reqs;    /* [n] the chunks' requests (the scheduler's once queued) */
	struct eng__req **bases;       /* [n] the same, as the scheduler sees them */
	struct eng_transcript **parts; /* [n] */
	size_t *start;                 /* [n] first sample of each chunk */
	size_t n_samples;
	int rc;                        /* the first error of a chunk */
	char err[512];
	eng_transcribe_done_fn done;
	void *ud;
};

struct ec_part {
	struct ec_job *job;
	size_t i;
};

/* The sample where a chunk starting at s and longer than
 * ENG_ASR_CHUNK_MAX_SAMPLES ends:
 * the middle of the quietest EC_QUIET hops in its last EC_SEARCH_S. */
static size_t ec_cut(const float *x, size_t s)
{
	size_t lo = s + ENG_ASR_CHUNK_MAX_SAMPLES - (size_t)EC_SEARCH_S * EC_RATE;
	size_t n_hops = (size_t)EC_SEARCH_S * EC_RATE / EC_HOP;
	double e[(size_t)EC_SEARCH_S * EC_RATE / EC_HOP];
	for (size_t h = 0; h < n_hops; h++) {
		const float *f = x + lo + h * EC_HOP;
		double sum = 0;
		for (size_t k = 0; k < EC_HOP; k++)
			sum += (double)f[k] * f[k];
		e[h] = sum;
	}
	double win = 0, best = 0;
	size_t at = n_hops - 1;
	for (size_t h = 0; h < n_hops; h++) {
		win += e[h];
		if (h >= EC_QUIET)
			win -= e[h - EC_QUIET];
		if (h + 1 >= EC_QUIET && (h + 1 == EC_QUIET || win < best)) {
			best = win;
			at = h + 1 - EC_QUIET / 2;
		}
	}
	return lo + at * EC_HOP;
}

size_t eng__asr_chunks(const float *x, size_t n, size_t *start, size_t cap)
{
	size_t k = 0, s = 0, max = ENG_ASR_CHUNK_MAX_SAMPLES;
	while (s < n) {
		if (start && k < cap)
			start[k] = s;
		k++;
		s = n - s <= max ? n : ec_cut(x, s);
	}
	return k;
}

/* Move every segment of the parts into one transcript (texts joined). */
static int ec_join(struct ec_job *j, struct eng_transcript **out)
{
	size_t n_seg = 0, n_text = 1;
	for (size_t i = 0; i < j->n; i++) {
		n_seg += j->parts[i]->n_segments;
		n_text += strlen(j->parts[i]->text) + 1;
	}
	struct eng_transcript *t = mem_calloc(1, sizeof(*t));
	if (t) {
		t->segments = mem_calloc(n_seg ? n_seg : 1, sizeof(*t->segments));
		t->text = mem_alloc(n_text);
	}
	if (!t || !t->segments || !t->text) {
		eng_transcript_destroy(t);
		return -ST_NOMEM;
	}
	t->text[0] = '\0';
	size_t at = 0;
	for (size_t i = 0; i < j->n; i++) {
		struct eng_transcript *p = j->parts[i];
		double off = (double)j->start[i] / EC_RATE;
		for (size_t s = 0; s < p->n_segments; s++) {
			struct eng_segment *g = &t->segments[t->n_segments++];
			*g = p->segments[s];
			g->id = (int)t->n_segments;
			g->start_s += off;
			g->end_s += off;
			for (size_t k = 0; k < g->n_words; k++) {
				g->words[k].start_s = eng__asr_round2(g->words[k].start_s + off);
				g->words[k].end_s = eng__asr_round2(g->words[k].end_s + off);
			}
			p->segments[s].text = NULL;
			p->segments[s].tokens = NULL;
			p->segments[s].words = NULL;
			p->segments[s].n_words = 0;
		}
		size_t l = strlen(p->text);
		if (l && at)
			t->text[at++] = ' ';
		memcpy(t->text + at, p->text, l + 1);
		at += l;
	}
	t->duration_s = (double)j->n_samples / EC_RATE;
	memcpy(t->language, j->parts[0]->language, sizeof(t->language));
	t->language_prob = j->parts[0]->language_prob;
	*out = t;
	return 0;
}

static void ec_job_free(struct ec_job *j)
{
	for (size_t i = 0; i < j->n; i++)
		eng_transcript_destroy(j->parts[i]);
	pthread_mutex_destroy(&j->mu);
	mem_free(j->parts);
	mem_free(j->start);
	mem_free(j->reqs);
	mem_free(j->bases);
	mem_free(j);
}

/* A chunk's end (on a replica thread); the last one ends the job. */
static void ec_part_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	struct ec_part *pt = ud;
	struct ec_job *j = pt->job;
	size_t i = pt->i;
	mem_free(pt);
	pthread_mutex_lock(&j->mu);
	j->parts[i] = t;
	if (rc && !j->rc) {
		j->rc = rc;
		snprintf(j->err, sizeof(j->err), "%s", err ? err : st_str(rc));
	}
	bool last = --j->left == 0;
	pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	struct eng_transcript *out = NULL;
	rc = j->rc ? j->rc : ec_join(j, &out);
	j->done(j->ud, rc, out, rc ? (j->rc ? j->err : "out of memory") : NULL);
	ec_job_free(j);
}

/* Job, chunk starts and one request per chunk, not yet queued. */
static int ec_job_new(const struct eng_model *m, const struct eng_asr_input *in,
		      const struct eng_transcribe_params *p, eng_transcribe_done_fn done,
		      void *ud, struct ec_job **out)
{
	struct ec_job *j = mem_calloc(1, sizeof(*j));
	if (!j)
		return -ST_NOMEM;
	pthread_mutex_init(&j->mu, NULL);
	j->n = j->left = eng__asr_chunks(in->samples, in->n_samples, NULL, 0);
	j->n_samples = in->n_samples;
	j->done = done;
	j->ud = ud;
	j->parts = mem_calloc(j->n, sizeof(*j->parts));
	j->start = mem_calloc(j->n, sizeof(*j->start));
	j->reqs = mem_calloc(j->n, sizeof(*j->reqs));
	j->bases = mem_calloc(j->n, sizeof(*j->bases));
	int rc = j->parts && j->start && j->reqs && j->bases ? 0 : -ST_NOMEM;
	if (!rc)
		eng__asr_chunks(in->samples, in->n_samples, j->start, j->n);
	for (size_t i = 0; !rc && i < j->n; i++) {
		size_t end = i + 1 < j->n ? j->start[i + 1] : in->n_samples;
		struct ec_part *pt = mem_alloc(sizeof(*pt));
		struct eng_asr_input ci = { .samples = in->samples + j->start[i],
					    .n_samples = end - j->start[i] };
		if (!pt || eng__asr_req_new(m, &ci, p, ec_part_done, pt, &j->reqs[i])) {
			mem_free(pt);
			rc = -ST_NOMEM;
			break;
		}
		*pt = (struct ec_part){ .job = j, .i = i };
		j->reqs[i]->p.batched = false;
		j->bases[i] = &j->reqs[i]->base;
	}
	*out = j;
	return rc;
}

int eng__asr_submit_chunked(const struct eng_model *m, const struct eng_asr_input *in,
			    const struct eng_transcribe_params *p, const struct eng_req_opts *o,
			    eng_transcribe_done_fn done, void *ud, char *err, size_t errlen)
{
	struct ec_job *j = NULL;
	int rc = ec_job_new(m, in, p, done, ud, &j);
	if (!rc)
		rc = eng__sched_submit(m->sched, j->bases, j->n, o);
	if (!rc)
		return 0; /* the chunks own the job now */
	for (size_t i = 0; j && i < j->n && j->reqs[i]; i++) {
		mem_free(j->reqs[i]->ud);
		mem_free(j->reqs[i]);
	}
	if (j)
		ec_job_free(j);
	return eng__asr_submit_err(m, rc, err, errlen);
}
