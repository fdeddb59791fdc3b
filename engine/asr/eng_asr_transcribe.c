/* eng_asr_transcribe.c - speech to text with a Whisper model: features,
 * 30-second windows, temperature fallback, long-form seeking, segments.
 *
 * Source followed: faster-whisper 1.2.1 transcribe.py (WhisperModel.
 * transcribe, generate_segments, generate_with_fallback, get_prompt,
 * _split_segments_by_timestamps), the reference the project's outputs are
 * compared with; openai/whisper transcribe.py has the same structure.
 * Word timestamps are eng_asr_words.c's, vad_filter eng_asr_vad.c's.
 * clip_timestamps, prefixes, hotwords and hallucination_silence_threshold
 * are not implemented.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "engine/eng.h"
#include "engine/format/eng_ct2.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"
#include "engine/models/eng_whisper.h"
#include "engine/models/eng_whisper_gen.h"
#include "engine/tok/eng_whisper_tok.h"
#include "devices/dev.h"

#define ET_TIME_PRECISION 0.02 /* seconds per timestamp token */
#define ET_INPUT_STRIDE ENG_WHISPER_INPUT_STRIDE /* mel frames per encoder position */
#define ET_FRAME_S 0.01        /* seconds per mel frame */

/* --- model load ---------------------------------------------------------- */

int eng__whisper_model_load(struct eng_model *m, char *err, size_t errlen)
{
	char msg[512];
	int rc = eng_whisper_load_ct(m->ct2, m->compute_type, &m->whisper, msg, sizeof(msg));
	if (rc)
		return st_errf(rc, err, errlen, "%s: %s", m->path, msg);
	const char *tj = eng_ct2_tokenizer_path(m->ct2);
	if (!tj)
		return st_errf(-ST_NOTFOUND, err, errlen,
			       "%s: tokenizer.json is needed to decode Whisper tokens", m->path);
	m->wtok = mem_calloc(1, sizeof(*m->wtok));
	if (!m->wtok)
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", m->path);
	const struct eng_whisper_hp *hp = eng_whisper_hp(m->whisper);
	rc = eng_whisper_tok_init(m->wtok, tj, eng_ct2_config(m->ct2), hp->n_vocab, msg, sizeof(msg));
	if (rc) {
		mem_free(m->wtok);
		m->wtok = NULL;
		return st_errf(rc, err, errlen, "%s: %s", m->path, msg);
	}
	if (dev_log_mel_create(hp->n_mels, &m->mel))
		return st_errf(-ST_NOMEM, err, errlen, "%s: out of memory", m->path);
	return 0;
}

void eng__whisper_model_fini(struct eng_model *m)
{
	eng_whisper_destroy(m->whisper);
	if (m->wtok)
		eng_whisper_tok_fini(m->wtok);
	mem_free(m->wtok);
	dev_log_mel_destroy(m->mel);
	m->whisper = NULL;
	m->wtok = NULL;
	m->mel = NULL;
}

void eng_transcribe_params_init(struct eng_transcribe_params *p)
{
	*p = (struct eng_transcribe_params){
		.task = "transcribe", .temperatures = { 0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f },
		.n_temperatures = 6, .beam_size = 1, .best_of = 5, .patience = 1.0f,
		.timestamps = true, .condition_on_previous_text = true,
		.compression_ratio_threshold = 2.4f, .log_prob_threshold = -1.0f,
		.no_speech_threshold = 0.6f,
	};
}

/* --- growable arrays -------------------------------------------------- */

struct et_tokens {
	int32_t *v;
	size_t n, cap;
};

static int et_tokens_push(struct et_tokens *t, const int32_t *ids, size_t n)
{
	if (t->n + n > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		while (cap < t->n + n)
			cap *= 2;
		int32_t *v = mem_realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -ST_NOMEM;
		t->v = v;
		t->cap = cap;
	}
	memcpy(t->v + t->n, ids, n * sizeof(*ids));
	t->n += n;
	return 0;
}

/* --- one transcription ------------------------------------------------- */

struct et {
	const struct eng_model *m;
	const struct eng_transcribe_params *p;
	const struct eng_whisper_tok *tok;
	const struct eng_whisper_hp *hp;
	float *mel;            /* [n_mels][n_frames] */
	size_t n_frames, content_frames;
	struct eng_whisper_enc *enc;
	struct dev_queue *q;   /* passes not handed to run (all when run is NULL) */
	int (*stop)(void *arg); /* non-zero ST_*: stop now (cancel, deadline); may be NULL */
	void *stop_arg;
	const struct eng_whisper_runner *run; /* passes handed to a batcher, or NULL */
	int32_t sot_seq[3];
	size_t n_sot_seq;
	struct et_tokens all;  /* every emitted segment's tokens (prompt history) */
	size_t prompt_reset_since;
	struct eng_transcript *out;
	size_t segs_cap;
	double last_speech;    /* word timestamps: the last word's end so far (s) */
};

/* zlib ratio of the UTF-8 text, as faster-whisper's get_compression_ratio. */
static double et_compression_ratio(const char *text)
{
	size_t n = strlen(text);
	uLongf zn = compressBound((uLong)n);
	unsigned char *z = mem_alloc(zn);
	if (!z || n == 0) {
		mem_free(z);
		return 0.0;
	}
	int zrc = compress2(z, &zn, (const Bytef *)text, (uLong)n, Z_DEFAULT_COMPRESSION);
	mem_free(z);
	return zrc == Z_OK && zn ? (double)n / (double)zn : 0.0;
}

static char *et_strip_dup(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		n--;
	return mem_strndup(s, n);
}

static int et_features(struct et *t, const float *samples, size_t n_samples)
{
	/* faster-whisper appends 160 zero samples, then one spectrogram. */
	size_t n = n_samples + ENG_WHISPER_HOP;
	float *padded = mem_calloc(n, sizeof(float));
	t->n_frames = dev_log_mel_frames(n);
	t->mel = mem_alloc(((size_t)t->hp->n_mels * t->n_frames + 1) * sizeof(float));
	size_t scratch_len = dev_log_mel_scratch_len(t->m->mel);
	float *scratch = mem_alloc(scratch_len * sizeof(float));
	int rc = (!padded || !t->mel || !scratch) ? -ST_NOMEM : 0;
	if (!rc) {
		memcpy(padded, samples, n_samples * sizeof(float));
		rc = dev_log_mel(t->m->mel, padded, n, t->mel, scratch, scratch_len);
	}
	t->content_frames = t->n_frames ? t->n_frames - 1 : 0;
	mem_free(padded);
	mem_free(scratch);
	return rc;
}

/* get_prompt: <|startofprev|> + the last (n_text_ctx/2 - 1) tokens of the
 * history, the SOT sequence, and <|notimestamps|> without timestamps. */
static int et_prompt(const struct et *t, struct et_tokens *prompt)
{
	const struct eng_whisper_tok *tok = t->tok;
	size_t n_prev = t->all.n - t->prompt_reset_since;
	size_t keep = (size_t)t->hp->n_text_ctx / 2 - 1;
	int rc = 0;
	prompt->n = 0;
	if (n_prev) {
		const int32_t *prev = t->all.v + t->prompt_reset_since;
		if (n_prev > keep) {
			prev += n_prev - keep;
			n_prev = keep;
		}
		rc = et_tokens_push(prompt, &tok->sot_prev, 1);
		if (!rc)
			rc = et_tokens_push(prompt, prev, n_prev);
	}
	if (!rc)
		rc = et_tokens_push(prompt, t->sot_seq, t->n_sot_seq);
	if (!rc && !t->p->timestamps)
		rc = et_tokens_push(prompt, &tok->no_timestamps, 1);
	return rc;
}

/* A decoded window with the fallback's measurements. */
struct et_decoded {
	struct eng_whisper_gen_result r;
	double compression_ratio;
	float temperature;
};

static void et_decoded_fini(struct et_decoded *d)
{
	eng_whisper_gen_result_fini(&d->r);
}

static int et_measure(const struct et *t, struct et_decoded *d)
{
	char *text = eng_whisper_tok_text(t->tok, d->r.tokens, d->r.n_tokens);
	char *s = text ? et_strip_dup(text) : NULL;
	d->compression_ratio = s ? et_compression_ratio(s) : 0.0;
	mem_free(text);
	mem_free(s);
	return s ? 0 : -ST_NOMEM;
}

/* The encoder positions for n mel frames of audio: all of them, or the
 * trimmed window the parameters ask for. */
static size_t et_window_ctx(const struct et *t, size_t n)
{
	const struct eng_transcribe_params *p = t->p;
	if (!(p->window_min_s > 0.0f))
		return 0;
	size_t frames = n + (size_t)(p->window_margin_s / ET_FRAME_S + 0.5);
	size_t min = (size_t)(p->window_min_s / ET_FRAME_S + 0.5);
	frames = frames < min ? min : frames;
	size_t pos = (frames + ET_INPUT_STRIDE - 1) / ET_INPUT_STRIDE;
	return (pos + ENG_WINDOW_ROUND - 1) / ENG_WINDOW_ROUND * ENG_WINDOW_ROUND;
}

/* The encoder on mel frames [frame0, frame0 + n): directly or through the
 * runner. */
static int et_encode(struct et *t, size_t frame0, size_t n)
{
	eng_whisper_enc_trim(t->m->whisper, t->enc, et_window_ctx(t, n));
	if (t->run)
		return t->run->encode(t->run->ctx, t->enc, t->mel, t->n_frames, frame0, n);
	return eng_whisper_encode(t->m->whisper, t->enc, t->q, t->mel, t->n_frames, frame0, n);
}

/* Between decoder passes: the cancel flag, then the caller's check. */
static int et_stop(void *arg)
{
	const struct et *t = arg;
	if (t->p->cancel && *t->p->cancel)
		return -ST_CANCELED;
	return t->stop ? t->stop(t->stop_arg) : 0;
}

/* Decode the window at temperature index i into d. */
static int et_try(struct et *t, const int32_t *prompt, size_t n_prompt, int i,
		  struct et_decoded *d)
{
	const struct eng_transcribe_params *p = t->p;
	struct eng_whisper_gen_opts o = {
		.beam_size = p->temperatures[i] > 0 ? 1 : p->beam_size,
		.patience = p->patience, .temperature = p->temperatures[i],
		.best_of = p->best_of, .timestamps = p->timestamps,
		.max_initial_timestamp_index = (int)lround(1.0 / ET_TIME_PRECISION),
		.suppress_blank = true, .seed = p->seed + (uint64_t)i,
		.stop = et_stop, .stop_arg = t, .runner = t->run,
	};
	memset(d, 0, sizeof(*d));
	d->temperature = p->temperatures[i];
	int rc = eng_whisper_generate(t->m->whisper, t->tok, t->enc, t->q, prompt, n_prompt, &o,
				  &d->r);
	if (!rc)
		rc = et_measure(t, d);
	if (rc)
		et_decoded_fini(d);
	return rc;
}

/* generate_with_fallback: try each temperature until the result is neither
 * too repetitive (compression ratio) nor too unlikely (average log
 * probability) - or is silence. When every try fails, keep the likeliest
 * of those under the compression threshold (else of all), reporting the
 * last temperature (it drives prompt_reset_on_temperature). */
static int et_generate(struct et *t, const int32_t *prompt, size_t n_prompt,
		       struct et_decoded *out)
{
	const struct eng_transcribe_params *p = t->p;
	struct et_decoded tried[8];
	bool cr_ok[8];
	int n = 0, rc = 0, pick = -1;
	for (int i = 0; i < p->n_temperatures && i < 8; i++) {
		struct et_decoded *d = &tried[n];
		if ((rc = et_try(t, prompt, n_prompt, i, d)) != 0)
			break;
		n++;
		cr_ok[n - 1] = !(p->compression_ratio_threshold > 0 &&
				 d->compression_ratio > p->compression_ratio_threshold);
		bool lp_bad = d->r.avg_logprob < p->log_prob_threshold;
		bool silence = d->r.no_speech_prob > p->no_speech_threshold && lp_bad;
		if ((cr_ok[n - 1] && !lp_bad) || silence) {
			pick = n - 1;
			break;
		}
	}
	for (int pass = 0; !rc && pick < 0 && pass < 2; pass++)
		for (int i = 0; i < n; i++)
			if ((pass == 1 || cr_ok[i]) &&
			    (pick < 0 || tried[i].r.avg_logprob > tried[pick].r.avg_logprob))
				pick = i;
	for (int i = 0; i < n; i++)
		if (i != pick || rc)
			et_decoded_fini(&tried[i]);
	if (rc)
		return rc;
	*out = tried[pick];
	out->temperature = tried[n - 1].temperature;
	return 0;
}

/* Append cut c as a segment (tokens copied, words taken) unless it is
 * empty or has no text. */
static int et_emit(struct et *t, struct eng__asr_cut *c, const struct et_decoded *d)
{
	/* Timestamp tokens may point past the audio (the window is padded to
	 * 30 s); a segment never does. */
	double dur = t->out->duration_s;
	double start = c->start < dur ? c->start : dur, end = c->end < dur ? c->end : dur;
	char *text = eng_whisper_tok_text(t->tok, c->tokens, c->n_tokens);
	if (!text)
		return -ST_NOMEM;
	char *stripped = et_strip_dup(text);
	bool empty = !stripped || !stripped[0];
	mem_free(stripped);
	if (start == end || empty) {
		mem_free(text);
		return 0;
	}
	struct eng_transcript *o = t->out;
	if (o->n_segments == t->segs_cap) {
		size_t cap = t->segs_cap ? 2 * t->segs_cap : 16;
		struct eng_segment *s = mem_realloc(o->segments, cap * sizeof(*s));
		if (!s) {
			mem_free(text);
			return -ST_NOMEM;
		}
		o->segments = s;
		t->segs_cap = cap;
	}
	size_t n = c->n_tokens;
	int32_t *copy = mem_alloc((n + 1) * sizeof(*copy));
	if (!copy || et_tokens_push(&t->all, c->tokens, n)) {
		mem_free(copy);
		mem_free(text);
		return -ST_NOMEM;
	}
	memcpy(copy, c->tokens, n * sizeof(*copy));
	o->segments[o->n_segments] = (struct eng_segment){
		.id = (int)o->n_segments + 1, .start_s = start, .end_s = end, .text = text,
		.tokens = copy, .n_tokens = n, .avg_logprob = d->r.avg_logprob,
		.compression_ratio = d->compression_ratio, .no_speech_prob = d->r.no_speech_prob,
		.temperature = d->temperature, .words = c->words, .n_words = c->n_words,
	};
	c->words = NULL;
	c->n_words = 0;
	o->n_segments++;
	return 0;
}

/* A window's cuts. */
struct et_cuts {
	struct eng__asr_cut *v;
	size_t n, cap;
};

static int et_cut(struct et_cuts *c, double start, double end, const int32_t *tok, size_t n)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8;
		struct eng__asr_cut *v = mem_realloc(c->v, cap * sizeof(*v));
		if (!v)
			return -ST_NOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct eng__asr_cut){ .start = start, .end = end, .tokens = tok,
					      .n_tokens = n };
	return 0;
}

static void et_cuts_fini(struct et_cuts *c)
{
	for (size_t i = 0; i < c->n; i++)
		eng__asr_cut_fini(&c->v[i]);
	mem_free(c->v);
}

/* _split_segments_by_timestamps: cut the window's tokens at consecutive
 * timestamp pairs into cuts; the next seek (in mel frames) into
 * *next_seek, and whether the tokens end on a single timestamp. */
static int et_split(struct et *t, const struct et_decoded *d, size_t seek, size_t segment_size,
		    struct et_cuts *cuts, size_t *next_seek, bool *single_end)
{
	const int32_t *tk = d->r.tokens;
	size_t n = d->r.n_tokens;
	int32_t tb = t->tok->ts_begin;
	double offset = (double)seek * ET_FRAME_S;
	size_t last = 0;
	bool any_pair = false;
	int rc = 0;
	*single_end = n >= 2 && tk[n - 2] < tb && tk[n - 1] >= tb;
	for (size_t i = 1; i < n && !rc; i++) {
		if (!(tk[i] >= tb && tk[i - 1] >= tb))
			continue;
		any_pair = true;
		rc = et_cut(cuts, offset + (tk[last] - tb) * ET_TIME_PRECISION,
			    offset + (tk[i - 1] - tb) * ET_TIME_PRECISION, tk + last, i - last);
		last = i;
	}
	if (rc)
		return rc;
	if (any_pair && *single_end) {
		rc = et_cut(cuts, offset + (tk[last] - tb) * ET_TIME_PRECISION,
			    offset + (tk[n - 1] - tb) * ET_TIME_PRECISION, tk + last, n - last);
		*next_seek = seek + segment_size; /* nothing spoken after the last timestamp */
	} else if (any_pair) {
		/* ignore the unfinished segment; seek to the last timestamp */
		*next_seek = seek + (size_t)(tk[last - 1] - tb) * ET_INPUT_STRIDE;
	} else {
		double duration = (double)segment_size * ET_FRAME_S;
		for (size_t i = n; i-- > 0;)
			if (tk[i] >= tb) {
				if (tk[i] != tb)
					duration = (tk[i] - tb) * ET_TIME_PRECISION;
				break;
			}
		rc = et_cut(cuts, offset, offset + duration, tk, n);
		*next_seek = seek + segment_size;
	}
	return rc;
}

/* Word timestamps of the window's cuts, then (get_end) the last word's end
 * resumes the window unless it ended on a single timestamp. */
static int et_words(struct et *t, struct et_cuts *cuts, size_t seek, size_t segment_size,
		    bool single_end, size_t *next)
{
	struct eng__asr_words_in in = {
		.w = t->m->whisper, .q = t->q, .tok = t->tok, .e = t->enc, .sot = t->sot_seq,
		.n_sot = t->n_sot_seq, .seek = seek, .n_frames = segment_size,
		.last_speech = t->last_speech, .language = t->out->language,
	};
	int rc = eng__asr_words(&in, cuts->v, cuts->n);
	if (rc || cuts->n == 0)
		return rc;
	double end = cuts->v[cuts->n - 1].end;
	for (size_t i = cuts->n, found = 0; i-- > 0 && !found;)
		if (cuts->v[i].n_words) {
			end = cuts->v[i].words[cuts->v[i].n_words - 1].end_s;
			found = 1;
		}
	if (!single_end && end > (double)seek * ET_FRAME_S)
		*next = (size_t)nearbyint(end / ET_FRAME_S);
	t->last_speech = end;
	return 0;
}

/* One 30-second window starting at mel frame *seek. */
static int et_window(struct et *t, size_t *seek, struct et_tokens *prompt)
{
	const struct eng_transcribe_params *p = t->p;
	size_t segment_size = t->content_frames - *seek;
	if (segment_size > ENG_WHISPER_N_FRAMES)
		segment_size = ENG_WHISPER_N_FRAMES;
	int rc = et_encode(t, *seek, segment_size);
	if (!rc)
		rc = et_prompt(t, prompt);
	struct et_decoded d;
	if (!rc)
		rc = et_generate(t, prompt->v, prompt->n, &d);
	if (rc)
		return rc;
	bool skip = d.r.no_speech_prob > p->no_speech_threshold &&
		    !(d.r.avg_logprob > p->log_prob_threshold);
	size_t next = *seek + segment_size;
	struct et_cuts cuts = { 0 };
	bool single_end = false;
	if (!skip)
		rc = et_split(t, &d, *seek, segment_size, &cuts, &next, &single_end);
	if (!skip && !rc && p->word_timestamps)
		rc = et_words(t, &cuts, *seek, segment_size, single_end, &next);
	for (size_t i = 0; !rc && i < cuts.n; i++)
		rc = et_emit(t, &cuts.v[i], &d);
	et_cuts_fini(&cuts);
	if (!rc && (!p->condition_on_previous_text || d.temperature > 0.5f))
		t->prompt_reset_since = t->all.n; /* prompt_reset_on_temperature 0.5 */
	/* Always move forward, even on a window whose timestamps say 0. */
	*seek = next > *seek ? next : *seek + segment_size;
	et_decoded_fini(&d);
	return rc;
}

/* Language detection (multilingual models): the most likely language
 * token after <|startoftranscript|> on the first window, *prob its softmax
 * over the language tokens' logits alone (CTranslate2's detect_language,
 * faster-whisper's language_detection_segments=1). The window is every
 * frame of the spectrogram up to 3000, the one the 160 padding samples
 * add included: faster-whisper's detect_language takes features[...,
 * :3000] where its decoding windows stop at content_frames. */
static int et_detect_language(struct et *t, int32_t *lang, float *prob)
{
	const struct eng_whisper_tok *tok = t->tok;
	struct eng_whisper_kv *kv;
	float *logits = mem_alloc((size_t)t->hp->n_vocab * sizeof(float));
	int rc = logits ? eng_whisper_kv_create(t->m->whisper, dev_queue_device(t->q), &kv)
			: -ST_NOMEM;
	if (rc) {
		mem_free(logits);
		return rc;
	}
	size_t n = t->n_frames < ENG_WHISPER_N_FRAMES ? t->n_frames : ENG_WHISPER_N_FRAMES;
	rc = et_encode(t, 0, n);
	if (!rc)
		rc = t->run ? t->run->decode(t->run->ctx, t->enc, kv, &tok->sot, 1, logits, NULL,
					     0)
			    : eng_whisper_decode(t->m->whisper, t->enc, kv, t->q, &tok->sot, 1,
						 logits, NULL, 0);
	double mx = -INFINITY, sum = 0;
	for (size_t i = 0; !rc && i < tok->n_langs; i++)
		if (logits[tok->lang_ids[i]] > mx) {
			mx = logits[tok->lang_ids[i]];
			*lang = tok->lang_ids[i];
		}
	for (size_t i = 0; !rc && i < tok->n_langs; i++)
		sum += exp(logits[tok->lang_ids[i]] - mx);
	*prob = rc ? 0.0f : (float)(1.0 / sum);
	eng_whisper_kv_destroy(kv);
	mem_free(logits);
	return rc;
}

/* The SOT sequence: <|startoftranscript|> [<|lang|> <|task|>]. */
static int et_sot_sequence(struct et *t, char *err, size_t errlen)
{
	const struct eng_whisper_tok *tok = t->tok;
	const struct eng_transcribe_params *p = t->p;
	struct eng_transcript *o = t->out;
	t->sot_seq[0] = tok->sot;
	t->n_sot_seq = 1;
	o->language_prob = 1.0f;
	if (!tok->multilingual) {
		snprintf(o->language, sizeof(o->language), "en"); /* English-only model */
		return 0;
	}
	int32_t lang = -1;
	int rc = 0;
	if (p->language) {
		lang = eng_whisper_tok_lang(tok, p->language);
		if (lang < 0)
			return st_errf(-ST_INVAL, err, errlen, "language: unknown code '%s'",
				       p->language);
	} else if ((rc = et_detect_language(t, &lang, &o->language_prob)) != 0) {
		return rc;
	}
	eng_whisper_tok_lang_code(tok, lang, o->language, sizeof(o->language));
	t->sot_seq[1] = lang;
	t->sot_seq[2] = strcmp(p->task, "translate") ? tok->transcribe : tok->translate;
	t->n_sot_seq = 3;
	return 0;
}

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int et_check_params(const struct eng_model *m, const struct eng_transcribe_params *p,
			   char *err, size_t errlen)
{
	if (!m->whisper)
		return st_errf(-ST_INVAL, err, errlen, "model '%s' is not a transcription model",
			       m->name);
	if (p->beam_size < 1 || p->beam_size > 16)
		return st_errf(-ST_INVAL, err, errlen, "beam_size: expected 1..16");
	if (p->best_of < 1 || p->best_of > 16)
		return st_errf(-ST_INVAL, err, errlen, "best_of: expected 1..16");
	if (p->n_temperatures < 1 || p->n_temperatures > 8)
		return st_errf(-ST_INVAL, err, errlen, "temperature: expected 1..8 values");
	for (int i = 0; i < p->n_temperatures; i++)
		if (!(p->temperatures[i] >= 0.0f && p->temperatures[i] <= 2.0f))
			return st_errf(-ST_INVAL, err, errlen, "temperature: expected 0..2");
	if (p->language && !eng_whisper_tok_lang_known(m->wtok, p->language))
		return st_errf(-ST_INVAL, err, errlen,
			       "language: '%.16s' is not a language code Whisper knows (ISO 639-1, "
			       "e.g. en, de)",
			       p->language);
	if (!(p->window_min_s >= 0.0f && p->window_min_s <= 30.0f) ||
	    !(p->window_margin_s >= 0.0f && p->window_margin_s <= 30.0f))
		return st_errf(-ST_INVAL, err, errlen, "window_min_s, window_margin_s: expected 0..30");
	if (p->prompt && !st_utf8_valid(p->prompt, strlen(p->prompt)))
		return st_errf(-ST_INVAL, err, errlen, "prompt: not valid UTF-8");
	if (p->task && strcmp(p->task, "transcribe") && strcmp(p->task, "translate"))
		return st_errf(-ST_INVAL, err, errlen,
			       "task: expected \"transcribe\" or \"translate\"");
	/* An English-only model has no <|translate|> in its SOT sequence:
	 * faster-whisper would quietly transcribe instead. */
	if (p->task && !strcmp(p->task, "translate") && !m->wtok->multilingual)
		return st_errf(-ST_INVAL, err, errlen,
			       "translation needs a multilingual model: '%s' is English-only",
			       m->name);
	return 0;
}

/* The initial prompt: " " + prompt.strip(), encoded, starts the history. */
static int et_initial_prompt(struct et *t)
{
	if (!t->p->prompt || !t->p->prompt[0])
		return 0;
	char *s = et_strip_dup(t->p->prompt);
	size_t n = s ? strlen(s) : 0;
	char *spaced = s ? mem_alloc(n + 2) : NULL;
	int32_t *ids = NULL;
	size_t n_ids = 0;
	int rc = spaced ? 0 : -ST_NOMEM;
	if (!rc) {
		spaced[0] = ' ';
		memcpy(spaced + 1, s, n + 1);
		rc = eng_whisper_tok_encode(t->tok, spaced, &ids, &n_ids);
	}
	if (!rc)
		rc = et_tokens_push(&t->all, ids, n_ids);
	mem_free(ids);
	mem_free(spaced);
	mem_free(s);
	return rc;
}

static int et_join_text(struct eng_transcript *o)
{
	size_t n = 0;
	for (size_t i = 0; i < o->n_segments; i++)
		n += strlen(o->segments[i].text);
	char *all = mem_alloc(n + 1);
	if (!all)
		return -ST_NOMEM;
	all[0] = '\0';
	for (size_t i = 0, at = 0; i < o->n_segments; i++) {
		size_t l = strlen(o->segments[i].text);
		memcpy(all + at, o->segments[i].text, l + 1);
		at += l;
	}
	o->text = et_strip_dup(all);
	mem_free(all);
	return o->text ? 0 : -ST_NOMEM;
}

static int et_run(struct et *t, const float *samples, size_t n_samples, char *err,
		  size_t errlen)
{
	struct et_tokens prompt = { 0 };
	int rc = et_features(t, samples, n_samples);
	if (!rc)
		rc = eng_whisper_enc_create(t->m->whisper, dev_queue_device(t->q), &t->enc, err,
					    errlen);
	if (!rc)
		rc = et_sot_sequence(t, err, errlen);
	if (!rc)
		rc = et_initial_prompt(t);
	for (size_t seek = 0; !rc && seek < t->content_frames;) {
		if (t->p->cancel && *t->p->cancel)
			rc = -ST_CANCELED;
		else if (t->stop && (rc = t->stop(t->stop_arg)) != 0)
			;
		else
			rc = et_window(t, &seek, &prompt);
	}
	if (!rc)
		rc = et_join_text(t->out);
	mem_free(prompt.v);
	return rc;
}

int eng__transcribe_check(const struct eng_model *m, const struct eng_transcribe_params *p,
			  char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	return et_check_params(m, p, err, errlen);
}

int eng__transcribe_plain(const struct eng_model *m, struct dev_queue *q,
			  const float *samples, size_t n_samples,
			  const struct eng_transcribe_params *p, int (*stop)(void *arg),
			  void *stop_arg, const struct eng_whisper_runner *run,
			  struct eng_transcript **out, char *err, size_t errlen)
{
	*out = NULL;
	int rc = 0;
	struct et t = { .m = m, .p = p, .tok = m->wtok, .hp = eng_whisper_hp(m->whisper),
			.q = q, .stop = stop, .stop_arg = stop_arg, .run = run };
	t.out = mem_calloc(1, sizeof(*t.out));
	if (!t.out)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	t.out->duration_s = (double)n_samples / ENG_WHISPER_SAMPLE_RATE;
	rc = et_run(&t, samples, n_samples, err, errlen);
	eng_whisper_enc_destroy(t.enc);
	mem_free(t.mel);
	mem_free(t.all.v);
	if (rc) {
		if (rc == -ST_NOMEM)
			st_errf(rc, err, errlen, "out of memory");
		else if (rc == -ST_CANCELED)
			st_errf(rc, err, errlen, "the request was cancelled");
		else if (rc == -ST_TIMEDOUT)
			st_errf(rc, err, errlen, "the request's deadline passed");
		else if (err && errlen && !err[0])
			st_errf(rc, err, errlen, "transcription failed (%s)", st_str(rc));
		eng_transcript_destroy(t.out);
		return rc;
	}
	*out = t.out;
	return 0;
}

void eng_transcript_destroy(struct eng_transcript *t)
{
	while (t) {
		struct eng_transcript *next = t->next;
		for (size_t i = 0; i < t->n_segments; i++) {
			struct eng_segment *g = &t->segments[i];
			for (size_t k = 0; k < g->n_words; k++)
				mem_free(g->words[k].word);
			mem_free(g->words);
			mem_free(g->text);
			mem_free(g->tokens);
		}
		mem_free(t->segments);
		mem_free(t->text);
		mem_free(t);
		t = next;
	}
}
