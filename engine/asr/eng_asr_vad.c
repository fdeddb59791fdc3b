/* eng_asr_vad.c - vad_filter: transcription of the speech only.
 *
 * Source followed: faster-whisper 1.2.1 WhisperModel.transcribe with
 * vad_filter=True and the default VadOptions: get_speech_timestamps on
 * the decoded audio, collect_chunks (no length limit: one chunk), the
 * concatenated speech transcribed as any audio, then
 * restore_speech_timestamps: a segment's start and end mapped through
 * SpeechTimestampsMap; with word timestamps each word's start and end
 * through the span of the word's middle, and the segment's times become
 * its first word's start and last word's end. No speech at all gives no
 * segments (faster-whisper transcribes an empty array; here nothing is
 * computed). The duration stays the original audio's.
 *
 * The VAD (engine/vad) is loaded once per Whisper model at eng_create and
 * shared read-only by its replicas; it runs on the request's driver
 * thread before the features, like them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"
#include "engine/tok/eng_whisper_tok.h"
#include "engine/vad/eng_vad.h"

int eng__asr_vad_load(struct eng_model *m, const struct eng_model_spec *spec, char *err,
		      size_t errlen)
{
	char msg[512], beside[4096];
	const char *path = spec->vad_model;
	m->vad_filter = spec->vad_filter;
	if (!path && spec->vad_model_optional) {
		/* the folder holding the model (trailing slashes dropped) */
		size_t n = strlen(spec->path);
		while (n > 1 && spec->path[n - 1] == '/')
			n--;
		while (n > 0 && spec->path[n - 1] != '/')
			n--;
		if (snprintf(beside, sizeof(beside), "%.*s%s", (int)n, spec->path,
			     ENG_VAD_MODEL_BESIDE) < (int)sizeof(beside))
			path = beside;
	}
	if (!path || !path[0]) {
		m->vad_err = mem_strdup("no vad_model configured");
		if (spec->vad_filter)
			return st_errf(-ST_INVAL, err, errlen,
				       "%s: vad_filter needs a vad_model (Silero VAD's "
				       "silero_vad_16k.safetensors)", m->path);
		return m->vad_err ? 0 : st_errf(-ST_NOMEM, err, errlen, "out of memory");
	}
	int rc = eng_vad_load(path, &m->vad, msg, sizeof(msg));
	if (!rc)
		return 0;
	if (spec->vad_filter || !spec->vad_model_optional || rc == -ST_NOMEM)
		return st_errf(rc, err, errlen, "vad_model %s", msg);
	m->vad_err = mem_strdup(msg);
	return m->vad_err ? 0 : st_errf(-ST_NOMEM, err, errlen, "out of memory");
}

void eng__asr_vad_fini(struct eng_model *m)
{
	eng_vad_destroy(m->vad);
	mem_free(m->vad_err);
	m->vad = NULL;
	m->vad_err = NULL;
}

bool eng__asr_vad_is_on(const struct eng_model *m, const struct eng_transcribe_params *p)
{
	return p->vad_filter == ENG_VAD_FILTER_ON ||
	       (p->vad_filter == ENG_VAD_FILTER_DEFAULT && m->vad_filter);
}

int eng__asr_vad_check(const struct eng_model *m, const struct eng_transcribe_params *p,
		       char *err, size_t errlen)
{
	if ((unsigned)p->vad_filter >= ENG_VAD_FILTER_COUNT)
		return st_errf(-ST_INVAL, err, errlen, "vad_filter: unknown value %d",
			       (int)p->vad_filter);
	if (eng__asr_vad_is_on(m, p) && !m->vad)
		return st_errf(-ST_INVAL, err, errlen,
			       "vad_filter: model '%s' has no VAD loaded (%s)", m->name,
			       m->vad_err ? m->vad_err : "none configured");
	return 0;
}

/* The transcript of audio without speech: no segments, empty text, the
 * language asked for or the model's only one ("en" with probability 0
 * when a multilingual model would have to guess from silence). */
static int ev_empty(const struct eng_model *m, const struct eng_transcribe_params *p,
		    struct eng_transcript **out)
{
	struct eng_transcript *t = mem_calloc(1, sizeof(*t));
	if (t)
		t->text = mem_strdup("");
	if (!t || !t->text) {
		eng_transcript_destroy(t);
		return -ST_NOMEM;
	}
	bool guess = m->wtok->multilingual && !p->language;
	snprintf(t->language, sizeof(t->language), "%s",
		 m->wtok->multilingual && p->language ? p->language : "en");
	t->language_prob = guess ? 0.0f : 1.0f;
	*out = t;
	return 0;
}

/* restore_speech_timestamps on every segment of t (times in the
 * concatenated speech) through map. */
static void ev_restore(struct eng_transcript *t, const struct eng_vad_map *map)
{
	for (size_t i = 0; i < t->n_segments; i++) {
		struct eng_segment *g = &t->segments[i];
		for (size_t k = 0; k < g->n_words; k++) {
			struct eng_word *w = &g->words[k];
			long c = eng_vad_map_chunk(map, (w->start_s + w->end_s) / 2, 0);
			w->start_s = eng_vad_map_time(map, w->start_s, c, 0);
			w->end_s = eng_vad_map_time(map, w->end_s, c, 0);
		}
		if (g->n_words) {
			g->start_s = g->words[0].start_s;
			g->end_s = g->words[g->n_words - 1].end_s;
		} else {
			g->start_s = eng_vad_map_time(map, g->start_s, -1, 0);
			g->end_s = eng_vad_map_time(map, g->end_s, -1, 1);
		}
	}
}

/* The speech spans' audio, concatenated: *speech new (mem_free) with
 * *n_speech samples; 0 spans give NULL, 0. */
static int ev_speech_audio(const float *samples, const struct eng_vad_span *spans,
			   size_t n_spans, float **speech, size_t *n_speech)
{
	struct eng_vad_chunk *chunks = NULL;
	size_t n_chunks = 0;
	*speech = NULL;
	*n_speech = 0;
	if (!n_spans)
		return 0;
	int rc = eng_vad_collect(spans, n_spans, INFINITY, &chunks, &n_chunks);
	if (rc)
		return rc;
	*speech = mem_alloc((size_t)chunks[0].n_samples * sizeof(float) + 1);
	if (*speech) {
		eng_vad_chunk_audio(samples, spans, &chunks[0], *speech);
		*n_speech = (size_t)chunks[0].n_samples;
	}
	mem_free(chunks);
	return *speech ? 0 : -ST_NOMEM;
}

/* vad_filter's transcription of samples[n] (arguments as
 * eng__transcribe_run's). */
static int ev_run(const struct eng_model *m, struct dev_queue *q, const float *samples,
		  size_t n, const struct eng_transcribe_params *p, int (*stop)(void *arg),
		  void *stop_arg, const struct eng_whisper_runner *run,
		  struct eng_transcript **out, char *err, size_t errlen)
{
	struct eng_vad_span *spans = NULL;
	struct eng_vad_map map = { 0 };
	float *speech = NULL;
	size_t n_spans = 0, n_speech = 0;
	int rc = eng_vad_speech(m->vad, samples, n, NULL, &spans, &n_spans);
	if (!rc && stop)
		rc = stop(stop_arg); /* the VAD took a while on long audio */
	if (!rc)
		rc = ev_speech_audio(samples, spans, n_spans, &speech, &n_speech);
	if (!rc && n_spans)
		rc = eng_vad_map_init(&map, spans, n_spans);
	if (rc)
		goto out_free;
	if (!n_spans)
		rc = ev_empty(m, p, out);
	else
		rc = eng__transcribe_plain(m, q, speech, n_speech, p, stop, stop_arg, run, out,
					   err, errlen);
	if (!rc && n_spans)
		ev_restore(*out, &map);
	if (!rc)
		(*out)->duration_s = (double)n / ENG_WHISPER_SAMPLE_RATE;
out_free:
	eng_vad_map_fini(&map);
	mem_free(speech);
	mem_free(spans);
	if (rc == -ST_NOMEM)
		st_errf(rc, err, errlen, "out of memory");
	else if (rc && err && errlen && !err[0])
		st_errf(rc, err, errlen, "%s", rc == -ST_CANCELED ? "the request was cancelled"
					       : rc == -ST_TIMEDOUT ? "the request's deadline passed"
								    : st_str(rc));
	return rc;
}

int eng__transcribe_run(const struct eng_model *m, struct dev_queue *q, const float *samples,
			size_t n_samples, const struct eng_transcribe_params *p,
			int (*stop)(void *arg), void *stop_arg,
			const struct eng_whisper_runner *run, struct eng_transcript **out,
			char *err, size_t errlen)
{
	*out = NULL;
	if (eng__asr_vad_is_on(m, p) && m->vad)
		return ev_run(m, q, samples, n_samples, p, stop, stop_arg, run, out, err,
			      errlen);
	return eng__transcribe_plain(m, q, samples, n_samples, p, stop, stop_arg, run, out,
				     err, errlen);
}
