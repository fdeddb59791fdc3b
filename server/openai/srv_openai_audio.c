/* srv_openai_audio.c - POST /v1/audio/transcriptions and POST
 * /v1/audio/translations, OpenAI's API
 * (https://platform.openai.com/docs/api-reference/audio/createTranscription,
 * .../createTranslation): a multipart/form-data body with the fields
 * below, one of five response formats. A translation is Whisper's
 * task=translate: English text from speech in any language the model
 * knows (multilingual models; an English-only one answers 400); OpenAI's
 * translation form has no language field, here it is read as on the
 * transcription route (the spoken language: no detection).
 *
 *   file                      required, a file part (with filename=)
 *   model                     required, a transcription model's name
 *                             (unknown: 404 model_not_found; a generation
 *                             model: 400)
 *   language                  ISO 639-1 code (unknown: 400); absent:
 *                             detected on a multilingual model (English-only
 *                             models: en)
 *   prompt                    initial prompt
 *   temperature               one float in [0, 1]; 0 or absent: Whisper's
 *                             fallback list 0, 0.2, ..., 1.0 (OpenAI: "the
 *                             model will use log probability to
 *                             automatically increase the temperature");
 *                             t > 0: t only
 *   response_format           json (default), text, srt, verbose_json, vtt
 *   timestamp_granularities[] word and/or segment (the field repeated), with
 *                             verbose_json only (another format: 400); the
 *                             name without "[]" is read too. word: top-level
 *                             "words" [{"word","start","end","probability"}]
 *                             (word text without its leading space, as
 *                             OpenAI's; probability an inferd extension),
 *                             from the engine's word timestamps; "segments"
 *                             only when segment is asked for too (or
 *                             nothing is: segment is the default)
 *   stream                    false; true -> 400 (no streaming yet)
 *   beam_size                 inferd extension, 1..16 (default 1, greedy)
 *   batched                   inferd extension, true or false (default; any
 *                             case, or 1 / 0, as Deepgram's query reads it):
 *                             batched long-form (audio over 30 s cut at
 *                             quiet moments into chunks transcribed
 *                             together, no text carried across them)
 *   vad_filter                inferd extension, true or false (read as
 *                             batched): faster-whisper's vad_filter, only
 *                             the speech Silero VAD finds is transcribed,
 *                             times stay the file's; absent: the model's
 *                             config default (models[].vad_filter). true
 *                             on a model without a VAD loaded: 400
 * Other fields are ignored, as OpenAI's SDKs add fields over time (include[],
 * chunking_strategy) that a client may send to any server.
 * A value a field cannot take answers 400 with OpenAI's error naming the
 * field, as the generation routes do: "param" the field's name (as the
 * table below spells it), "code" "invalid_value"; other 400s (a body that
 * is no form, a missing field, audio that does not decode) keep param null
 * and code invalid_request.
 *
 * Response shapes and types follow OpenAI's: json {"text","usage"} and
 * verbose_json {"task","language","duration","text","segments","words",
 * "usage"}
 * as application/json; text, srt and vtt as text/plain; charset=utf-8.
 * verbose_json's "language" is the language's English name in lower case
 * as OpenAI writes it ("german"; Whisper's own table, tokenizer.py
 * LANGUAGES), not the ISO code faster-whisper-server and speaches put
 * there: the transcription's spoken language (given or detected) and a
 * translation's "english", "the language of the output translation
 * (always english)" in OpenAI's reference.
 * verbose_json's segment "seek" is the segment start in 10 ms frames (the
 * engine does not report the 30-second window a segment came from).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/openai/srv_openai_audio.h"
#include "server/srv_multipart.h"

#define SRV_OA_MAX_PARTS 64
#define SRV_OA_MAX_PART_HEADER_BYTES 8192
#define SRV_OA_MAX_FIELD_BYTES 65536
#define SRV_OA_TEXT_TYPE "text/plain; charset=utf-8"

enum srv_oa_format {
	SRV_OA_FORMAT_JSON = 0,
	SRV_OA_FORMAT_TEXT,
	SRV_OA_FORMAT_SRT,
	SRV_OA_FORMAT_VERBOSE_JSON,
	SRV_OA_FORMAT_VTT,
	SRV_OA_FORMAT_COUNT
};

static int srv_oa_json(struct srv_audio_job *job);
static int srv_oa_text(struct srv_audio_job *job);
static int srv_oa_srt(struct srv_audio_job *job);
static int srv_oa_verbose(struct srv_audio_job *job);
static int srv_oa_vtt(struct srv_audio_job *job);

static const struct {
	const char *name;
	srv_audio_format_fn fn;
} srv_oa_formats[] = {
	[SRV_OA_FORMAT_JSON] = { "json", srv_oa_json },
	[SRV_OA_FORMAT_TEXT] = { "text", srv_oa_text },
	[SRV_OA_FORMAT_SRT] = { "srt", srv_oa_srt },
	[SRV_OA_FORMAT_VERBOSE_JSON] = { "verbose_json", srv_oa_verbose },
	[SRV_OA_FORMAT_VTT] = { "vtt", srv_oa_vtt },
};
static_assert(sizeof(srv_oa_formats) / sizeof(srv_oa_formats[0]) == SRV_OA_FORMAT_COUNT,
	      "one row per format");

/* The form's fields as read (slices into the body). */
struct srv_oa_form {
	const struct srv_mp_part *file;
	struct srv_mp_str model, language, prompt;
	float temperature;  /* < 0: absent */
	int beam_size;      /* 0: absent */
	bool batched;
	enum eng_vad_filter vad_filter; /* DEFAULT: absent */
	bool gran_word, gran_segment; /* timestamp_granularities[] given */
	const char *gran_name; /* the field's name as sent: gran_buf */
	char gran_buf[48];     /* timestamp_granularities, ...[] or ...[N] */
	bool translate;     /* /v1/audio/translations */
	enum srv_oa_format format;
};

/* A transcription job with what verbose_json shows. */
struct srv_oa_job {
	struct srv_audio_job base; /* first: srv__audio_job_new's */
	bool words, segments;
};

/* --- fields ------------------------------------------------------------ */

/* Copy a short field value into buf as a C string; false when too long. */
static bool srv_oa_value(const struct srv_mp_part *p, char *buf, size_t cap)
{
	if (p->data.n >= cap || memchr(p->data.p, '\0', p->data.n))
		return false;
	memcpy(buf, p->data.p, p->data.n);
	buf[p->data.n] = '\0';
	return true;
}

static int srv_oa_f_file(struct srv_oa_form *f, const struct srv_mp_part *p, char *err, size_t n)
{
	if (f->file)
		return snprintf(err, n, "only one 'file' may be sent"), -ST_INVAL;
	if (!p->filename.p)
		return snprintf(err, n, "'file' must be a file upload (a part with a filename)"),
		       -ST_INVAL;
	f->file = p;
	return 0;
}

static int srv_oa_f_model(struct srv_oa_form *f, const struct srv_mp_part *p, char *err, size_t n)
{
	if (p->data.n == 0)
		return snprintf(err, n, "'model' must name a transcription model"), -ST_INVAL;
	f->model = p->data;
	return 0;
}

static int srv_oa_f_language(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
			     size_t n)
{
	if (p->data.n >= 16)
		return snprintf(err, n, "'language' must be an ISO 639-1 code such as 'en'"),
		       -ST_INVAL;
	f->language = p->data;
	return 0;
}

static int srv_oa_f_prompt(struct srv_oa_form *f, const struct srv_mp_part *p, char *err, size_t n)
{
	(void)err, (void)n;
	f->prompt = p->data;
	return 0;
}

static int srv_oa_f_temperature(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
				size_t n)
{
	char buf[32], *end;
	double t = srv_oa_value(p, buf, sizeof(buf)) ? strtod(buf, &end) : NAN;
	if (!isfinite(t) || end == buf || *end || t < 0 || t > 1)
		return snprintf(err, n, "'temperature' must be a number from 0 to 1"), -ST_INVAL;
	f->temperature = (float)t;
	return 0;
}

static int srv_oa_f_beam_size(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
			      size_t n)
{
	char buf[16], *end;
	long v = srv_oa_value(p, buf, sizeof(buf)) ? strtol(buf, &end, 10) : 0;
	if (v < 1 || v > 16 || *end)
		return snprintf(err, n, "'beam_size' must be an integer from 1 to 16"), -ST_INVAL;
	f->beam_size = (int)v;
	return 0;
}

/* A boolean field: true or false in any case, or 1 / 0; 1, 0 or -1. */
static int srv_oa_bool(const struct srv_mp_part *p)
{
	char buf[8];
	if (srv_oa_value(p, buf, sizeof(buf))) {
		if (!strcasecmp(buf, "true") || !strcmp(buf, "1"))
			return 1;
		if (!strcasecmp(buf, "false") || !strcmp(buf, "0"))
			return 0;
	}
	return -1;
}

static int srv_oa_f_batched(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
			    size_t n)
{
	int b = srv_oa_bool(p);
	if (b < 0)
		return snprintf(err, n, "'batched' must be true or false"), -ST_INVAL;
	f->batched = b;
	return 0;
}

static int srv_oa_f_vad_filter(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
			       size_t n)
{
	int b = srv_oa_bool(p);
	if (b < 0)
		return snprintf(err, n, "'vad_filter' must be true or false"), -ST_INVAL;
	f->vad_filter = b ? ENG_VAD_FILTER_ON : ENG_VAD_FILTER_OFF;
	return 0;
}

static int srv_oa_f_format(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
			   size_t n)
{
	for (int i = 0; i < SRV_OA_FORMAT_COUNT; i++)
		if (srv_mp_str_eq(p->data, srv_oa_formats[i].name)) {
			f->format = (enum srv_oa_format)i;
			return 0;
		}
	return snprintf(err, n, "'response_format' must be one of json, text, srt, verbose_json, vtt"),
	       -ST_INVAL;
}

static int srv_oa_f_granularity(struct srv_oa_form *f, const struct srv_mp_part *p, char *err,
				size_t n)
{
	if (srv_mp_str_eq(p->data, "segment"))
		return f->gran_segment = true, 0;
	if (srv_mp_str_eq(p->data, "word"))
		return f->gran_word = true, 0;
	return snprintf(err, n, "'%s' must be 'word' or 'segment'", f->gran_name), -ST_INVAL;
}

/* stream: false as any boolean field takes it (False, 0: what Python's
 * requests sends for a bool), anything else refused. */
static int srv_oa_f_stream(struct srv_oa_form *f, const struct srv_mp_part *p, char *err, size_t n)
{
	(void)f;
	if (srv_oa_bool(p) == 0)
		return 0;
	return snprintf(err, n, "streamed responses are not available ('stream' must be false)"),
	       -ST_INVAL;
}

/* Whether a part named name is field field: its name, or for
 * timestamp_granularities[] also an indexed one, [0], [1], ... (what PHP's
 * http_build_query and qs-style "indices" form encoders send). */
static bool srv_oa_name_is(struct srv_mp_str name, const char *field)
{
	static const char gran[] = "timestamp_granularities[";
	size_t g = sizeof(gran) - 1;
	if (srv_mp_str_eq(name, field))
		return true;
	if (strcmp(field, "timestamp_granularities[]") || name.n < g + 2 ||
	    memcmp(name.p, gran, g) || name.p[name.n - 1] != ']' || name.n - g - 1 > 3)
		return false;
	for (size_t i = g; i < name.n - 1; i++)
		if (name.p[i] < '0' || name.p[i] > '9')
			return false;
	return true;
}

static const struct {
	const char *name;
	int (*fn)(struct srv_oa_form *, const struct srv_mp_part *, char *, size_t);
} srv_oa_fields[] = {
	{ "file", srv_oa_f_file },
	{ "model", srv_oa_f_model },
	{ "language", srv_oa_f_language },
	{ "prompt", srv_oa_f_prompt },
	{ "temperature", srv_oa_f_temperature },
	{ "response_format", srv_oa_f_format },
	{ "timestamp_granularities[]", srv_oa_f_granularity },
	{ "timestamp_granularities", srv_oa_f_granularity },
	{ "stream", srv_oa_f_stream },
	{ "beam_size", srv_oa_f_beam_size },
	{ "batched", srv_oa_f_batched },
	{ "vad_filter", srv_oa_f_vad_filter },
};

/* Parse the body's parts into f; on error err holds the 400 message and
 * *param the field whose value is at fault (NULL: none, e.g. a body that is
 * no form or a missing field). */
static int srv_oa_form_read(struct srv_req *req, struct srv_mp_part *parts,
			    struct srv_oa_form *f, const char **param, char *err, size_t errlen)
{
	static const struct srv_mp_limits lim = { SRV_OA_MAX_PARTS, SRV_OA_MAX_PART_HEADER_BYTES,
						  SRV_OA_MAX_FIELD_BYTES };
	const char *ct = srv__req_header(req, "Content-Type");
	struct srv_mp_str boundary;
	size_t n = 0;
	*f = (struct srv_oa_form){ .temperature = -1 };
	*param = NULL;
	if (!ct)
		return snprintf(err, errlen, "Content-Type must be multipart/form-data"),
		       -ST_UNSUPPORTED;
	int rc = srv_mp_boundary(ct, &boundary, err, errlen);
	if (!rc)
		rc = srv_mp_parse(req->body.data, req->body.len, boundary, &lim, parts, &n, err, errlen);
	if (rc)
		return rc == -ST_UNSUPPORTED ? rc : -ST_INVAL;
	for (size_t i = 0; i < n && !rc; i++)
		for (size_t k = 0; k < sizeof(srv_oa_fields) / sizeof(srv_oa_fields[0]) && !rc; k++) {
			const struct srv_mp_part *p = &parts[i];
			const char *name = srv_oa_fields[k].name;
			if (!srv_oa_name_is(p->name, name))
				continue;
			if (srv_oa_fields[k].fn == srv_oa_f_granularity) { /* named as sent */
				snprintf(f->gran_buf, sizeof(f->gran_buf), "%.*s", (int)p->name.n,
					 p->name.p);
				name = f->gran_name = f->gran_buf;
			}
			/* a text field is text: a NUL byte would end it early,
			 * unseen (a model name, a language, a prompt cut there) */
			if (srv_oa_fields[k].fn != srv_oa_f_file && p->data.n &&
			    memchr(p->data.p, '\0', p->data.n))
				rc = (snprintf(err, errlen, "'%s' must be text (it holds a NUL byte)",
					       name),
				      -ST_INVAL);
			else
				rc = srv_oa_fields[k].fn(f, p, err, errlen);
			if (rc)
				*param = name;
		}
	if (!rc && !f->file)
		rc = (snprintf(err, errlen, "the 'file' field is required"), -ST_INVAL);
	if (!rc && !f->model.p)
		rc = (snprintf(err, errlen, "the 'model' field is required"), -ST_INVAL);
	if (!rc && (f->gran_word || f->gran_segment) && f->format != SRV_OA_FORMAT_VERBOSE_JSON) {
		*param = f->gran_name;
		rc = (snprintf(err, errlen,
			       "'%s' needs response_format=verbose_json "
			       "(the only format with timestamps per word or segment)",
			       f->gran_name),
		      -ST_INVAL);
	}
	return rc;
}

/* Fill the job from the form; 0 or -ST_INVAL (*param the field) /
 * -ST_NOMEM with err set. */
static int srv_oa_job_fill(struct srv_oa_job *oj, const struct srv_oa_form *f,
			   const char **param, char *err, size_t errlen)
{
	struct srv_audio_job *job = &oj->base;
	oj->words = f->gran_word;
	oj->segments = f->gran_segment || !f->gran_word;
	job->params.word_timestamps = f->gran_word;
	job->audio = f->file->data.p;
	job->audio_len = f->file->data.n;
	job->format = srv_oa_formats[f->format].fn;
	if (f->temperature > 0) {
		job->params.temperatures[0] = f->temperature;
		job->params.n_temperatures = 1;
	}
	if (f->beam_size)
		job->params.beam_size = f->beam_size;
	job->params.batched = f->batched;
	if (f->translate)
		job->params.task = "translate";
	job->params.vad_filter = f->vad_filter;
	int rc = srv__audio_job_set_language(job, f->language.p, f->language.n);
	if (!rc && f->prompt.p && f->prompt.n)
		rc = srv__audio_job_set_prompt(job, f->prompt.p, f->prompt.n);
	if (rc == -ST_INVAL)
		*param = "language";
	if (rc)
		snprintf(err, errlen, rc == -ST_NOMEM ? "out of memory" : "bad 'language'");
	return rc;
}

/* Either route: read the form, pick the model, queue the job. */
static void srv_oa_handle(struct srv_req *req, bool translate)
{
	char err[256] = "";
	const char *param = NULL; /* the field at fault, a value it cannot take */
	struct srv_oa_form f;
	struct srv_mp_part *parts = mem_calloc(SRV_OA_MAX_PARTS, sizeof(*parts));
	if (!parts) {
		srv__audio_fail(req, -ST_NOMEM, "out of memory");
		return;
	}
	int rc = srv_oa_form_read(req, parts, &f, &param, err, sizeof(err));
	f.translate = translate;
	const struct eng_model *m = NULL;
	if (!rc)
		m = srv__audio_model(req, f.model.p, f.model.n);
	struct srv_oa_job *oj = m ? (struct srv_oa_job *)srv__audio_job_new(req, sizeof(*oj)) : NULL;
	struct srv_audio_job *job = oj ? &oj->base : NULL;
	if (m && !job)
		rc = (snprintf(err, sizeof(err), "out of memory"), -ST_NOMEM);
	if (job) {
		job->model = m;
		rc = srv_oa_job_fill(oj, &f, &param, err, sizeof(err));
	}
	mem_free(parts);
	if (rc) {
		srv__audio_job_free(job);
		srv__audio_fail_param(req, rc, param ? "invalid_value" : NULL, param, err);
		return;
	}
	if (job)
		srv__audio_job_queue(req, job);
}

void srv__h_openai_transcriptions(struct srv_req *req)
{
	srv_oa_handle(req, false);
}

void srv__h_openai_translations(struct srv_req *req)
{
	srv_oa_handle(req, true);
}

/* --- response formats (worker thread) ---------------------------------- */

/* OpenAI reports usage of audio models billed by duration in whole seconds. */
static json_t *srv_oa_usage(const struct srv_audio_job *job)
{
	return json_pack("{s:s,s:I}", "type", "duration", "seconds",
			 (json_int_t)ceil(job->duration_s));
}

static int srv_oa_json(struct srv_audio_job *job)
{
	const char *text = job->t->text;
	return srv__audio_json_out(job, json_pack("{s:o,s:o}", "text",
		srv__audio_json_str(text, strlen(text)), "usage", srv_oa_usage(job)));
}

static int srv_oa_text(struct srv_audio_job *job)
{
	job->content_type = SRV_OA_TEXT_TYPE;
	return srv_buf_printf(&job->out, "%s\n", job->t->text);
}

/* "HH:MM:SS,mmm" (SRT, sep ',') or "HH:MM:SS.mmm" (WebVTT, sep '.'). */
static void srv_oa_timestamp(double s, char sep, char out[32])
{
	long long ms = llround(s > 0 && s < 3.6e8 ? s * 1000.0 : 0);
	snprintf(out, 32, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60,
		 ms / 1000 % 60, sep, ms % 1000);
}

/* The segment's text without surrounding white space: [*p, *p + *n). */
static void srv_oa_trim(const char *s, const char **p, int *n)
{
	size_t a = strspn(s, " \t\r\n"), b = strlen(s);
	while (b > a && strchr(" \t\r\n", s[b - 1]))
		b--;
	*p = s + a;
	*n = (int)(b - a);
}

/* SRT (numbered cues, comma before ms) or WebVTT (header, dot before ms). */
static int srv_oa_cues(struct srv_audio_job *job, bool vtt)
{
	job->content_type = SRV_OA_TEXT_TYPE;
	int rc = vtt ? srv_buf_printf(&job->out, "WEBVTT\n\n") : 0;
	for (size_t i = 0; !rc && i < job->t->n_segments; i++) {
		const struct eng_segment *s = &job->t->segments[i];
		char a[32], b[32];
		const char *text;
		int n;
		srv_oa_timestamp(s->start_s, vtt ? '.' : ',', a);
		srv_oa_timestamp(s->end_s, vtt ? '.' : ',', b);
		srv_oa_trim(s->text, &text, &n);
		if (!vtt)
			rc = srv_buf_printf(&job->out, "%zu\n", i + 1);
		if (!rc)
			rc = srv_buf_printf(&job->out, "%s --> %s\n%.*s\n\n", a, b, n, text);
	}
	return rc;
}

static int srv_oa_srt(struct srv_audio_job *job)
{
	return srv_oa_cues(job, false);
}

static int srv_oa_vtt(struct srv_audio_job *job)
{
	return srv_oa_cues(job, true);
}

static json_t *srv_oa_segment(const struct eng_segment *s, size_t i)
{
	json_t *tok = json_array();
	for (size_t k = 0; tok && k < s->n_tokens; k++)
		if (json_array_append_new(tok, json_integer(s->tokens[k]))) {
			json_decref(tok);
			tok = NULL;
		}
	return json_pack("{s:I,s:I,s:f,s:f,s:o,s:o,s:f,s:f,s:f,s:f}", "id", (json_int_t)i,
		"seek", (json_int_t)floor(s->start_s * 100.0), "start", s->start_s, "end", s->end_s,
		"text", srv__audio_json_str(s->text, strlen(s->text)), "tokens", tok,
		"temperature", (double)s->temperature, "avg_logprob", s->avg_logprob,
		"compression_ratio", s->compression_ratio, "no_speech_prob",
		(double)s->no_speech_prob);
}

/* Every segment's words: {"word" (no leading space), "start", "end",
 * "probability"}. */
static json_t *srv_oa_words(const struct eng_transcript *t)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < t->n_segments; i++)
		for (size_t k = 0; a && k < t->segments[i].n_words; k++) {
			const struct eng_word *w = &t->segments[i].words[k];
			const char *p = w->word + strspn(w->word, " ");
			if (json_array_append_new(a, json_pack("{s:o,s:f,s:f,s:f}", "word",
				srv__audio_json_str(p, strlen(p)), "start", w->start_s, "end",
				w->end_s, "probability", (double)w->probability))) {
				json_decref(a);
				a = NULL;
			}
		}
	return a;
}

static int srv_oa_verbose(struct srv_audio_job *job)
{
	const struct srv_oa_job *oj = (const struct srv_oa_job *)job;
	const struct eng_transcript *t = job->t;
	json_t *segs = json_array();
	for (size_t i = 0; segs && i < t->n_segments; i++)
		if (json_array_append_new(segs, srv_oa_segment(&t->segments[i], i))) {
			json_decref(segs);
			segs = NULL;
		}
	bool translate = job->params.task && !strcmp(job->params.task, "translate");
	json_t *o = json_pack("{s:s,s:s,s:f,s:o,s:o}", "task",
		translate ? "translate" : "transcribe", "language",
		translate ? "english" : srv__audio_language_name(t->language), "duration",
		job->duration_s, "text", srv__audio_json_str(t->text, strlen(t->text)), "usage",
		srv_oa_usage(job));
	if (!o || (oj->words && json_object_set_new(o, "words", srv_oa_words(t))))
		return json_decref(segs), json_decref(o), -ST_NOMEM;
	if (!oj->segments)
		json_decref(segs);
	else if (json_object_set_new(o, "segments", segs))
		return json_decref(o), -ST_NOMEM;
	return srv__audio_json_out(job, o);
}
