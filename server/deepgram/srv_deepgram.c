/* srv_deepgram.c - POST /v1/listen, Deepgram's pre-recorded transcription
 * API (https://developers.deepgram.com/reference/listen-file): the audio
 * bytes are the body, options are query parameters, auth is
 * "Authorization: Token KEY".
 *
 * Body: audio/..., video/..., application/octet-stream or no Content-Type go to
 * the audio decoder (libavformat detects the container); application/json
 * ({"url": ...}, Deepgram's remote-audio form) is refused with 400, as this
 * server fetches no URLs; any other type is 415.
 *
 * Query parameters read (others are ignored, as Deepgram's many
 * intelligence options would be):
 *   model        a transcription model's name; default the first one
 *   language     BCP-47 tag; its primary subtag goes to Whisper ("en-US" ->
 *                "en"; one Whisper does not know: 400); "multi" detects;
 *                absent: "en", Deepgram's default (an English-only model
 *                is English whatever the tag)
 *   detect_language  true: the language is detected (on the first 30 s of
 *                each channel, whatever language says) and each
 *                results.channels entry carries detected_language (the
 *                ISO 639-1 code) and language_confidence (Whisper's
 *                probability of that language token), as Deepgram's do
 *   punctuate    true: transcript and punctuated_word keep the model's
 *                casing and punctuation; false (default): lowercase words
 *                without punctuation, as Deepgram gives; smart_format=true
 *                implies punctuate, as in Deepgram
 *   utterances   true: results.utterances, one per Whisper segment
 *   encoding     headerless audio: linear16, linear32, mulaw, alaw (need
 *                sample_rate), or flac / ogg-opus (self-describing)
 *   sample_rate, channels   the layout of headerless audio
 *   multichannel true: each channel transcribed on its own, in turn on one
 *                replica, one results.channels entry per channel (utterances
 *                carry their channel), at most ENG_ASR_MAX_CHANNELS (16)
 *                channels (each is a full pass; more is a 400); false
 *                (default): the channels' mean, one entry. batched is not
 *                applied with it.
 *   batched      inferd extension, true: batched long-form (audio over 30 s
 *                cut at quiet moments into chunks transcribed together,
 *                no text carried across them; eng_transcribe_params.batched)
 *   vad_filter   inferd extension (Deepgram has no such parameter), true or
 *                false: faster-whisper's vad_filter, only the speech Silero
 *                VAD finds is transcribed, word times stay the file's;
 *                absent: the model's config default. true on a model
 *                without a VAD loaded: 400
 * Any other key is ignored, as Deepgram's clients add keys over time; among
 * them features this server does not have: diarize (no speaker labels),
 * paragraphs, callback (the answer comes in the response, not by a later
 * POST), keywords / keyterm, redact, numerals and the other formatters.
 *
 * Words carry the engine's word timestamps (eng_transcribe_params.
 * word_timestamps, always on here: the cross-attention alignment that
 * faster-whisper's word_timestamps=True computes); a word's confidence is
 * its probability (the mean of its tokens'); an alternative's or
 * utterance's is the mean over its words. A model without alignment heads
 * falls back to segment-level timing (each word an equal share of its
 * segment's span, confidence exp(avg_logprob)).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/deepgram/srv_deepgram.h"
#include "server/deepgram/srv_dg_int.h"
#include "server/job/srv_audio_job.h"


/* Options from the query string. */
struct srv_dg_opts {
	char model[SRV_DG_VALUE_MAX];
	char language[16];
	bool punctuate, smart_format, utterances, batched, multichannel; /* a repeated key:
									  * its last value */
	bool detect_language, has_language;
	bool has_encoding, has_rate;
	enum eng_vad_filter vad_filter; /* DEFAULT: not in the query */
	struct eng_audio_raw raw;
};

/* A Deepgram transcription: the shared job plus what the response needs. */
struct srv_dg_job {
	struct srv_audio_job base; /* first: a srv_dg_job * is a srv_audio_job * */
	bool punctuate, utterances;
	bool detect_language;      /* report each channel's detected language */
	char created[40];          /* ISO-8601 UTC, ms */
};

/* --- query parameters --------------------------------------------------- */

/* Apply one key=value; 0, or -ST_INVAL with err set. */
static int srv_dg_param(struct srv_dg_opts *o, const char *k, const char *v, char *err, size_t n)
{
	int rc = 0;
	bool b = false;
	if (!strcmp(k, "model"))
		snprintf(o->model, sizeof(o->model), "%s", v);
	else if (!strcmp(k, "language")) {
		size_t len = strcmp(v, "multi") ? strcspn(v, "-_") : 0;
		if (len >= sizeof(o->language))
			rc = -1;
		else
			snprintf(o->language, sizeof(o->language), "%.*s", (int)len, v);
		o->has_language = true;
	} else if (!strcmp(k, "detect_language")) {
		rc = srv__dg_bool(v, &o->detect_language);
	} else if (!strcmp(k, "punctuate")) {
		rc = srv__dg_bool(v, &o->punctuate);
	} else if (!strcmp(k, "smart_format")) {
		rc = srv__dg_bool(v, &o->smart_format);
	} else if (!strcmp(k, "utterances"))
		rc = srv__dg_bool(v, &o->utterances);
	else if (!strcmp(k, "batched"))
		rc = srv__dg_bool(v, &o->batched);
	else if (!strcmp(k, "multichannel"))
		rc = srv__dg_bool(v, &o->multichannel);
	else if (!strcmp(k, "vad_filter")) {
		rc = srv__dg_bool(v, &b);
		o->vad_filter = b ? ENG_VAD_FILTER_ON : ENG_VAD_FILTER_OFF;
	}
	else if (!strcmp(k, "encoding")) {
		rc = eng_audio_encoding_parse(v, &o->raw.encoding) ? -1 : 0;
		o->has_encoding = true;
	} else if (!strcmp(k, "sample_rate")) {
		rc = srv__dg_int(v, ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE, &o->raw.sample_rate);
		o->has_rate = true;
	} else if (!strcmp(k, "channels"))
		rc = srv__dg_int(v, 1, ENG_AUDIO_MAX_CHANNELS, &o->raw.channels);
	if (rc)
		snprintf(err, n, "invalid value for query parameter '%s'%s", k,
			 !strcmp(k, "encoding") ? " (supported: linear16, linear32, mulaw, alaw, flac, ogg-opus)"
						: "");
	return rc ? -ST_INVAL : 0;
}

/* The query parameters we read; values of the others are not even decoded. */
static const char *const srv_dg_known[] = {
	"model", "language", "punctuate", "smart_format", "utterances",
	"encoding", "sample_rate", "channels", "batched", "multichannel", "detect_language",
	"vad_filter",
};

static int srv_dg_param_cb(void *ctx, const char *k, const char *v, char *err, size_t n)
{
	return srv_dg_param(ctx, k, v, err, n);
}

static int srv_dg_query_read(const char *q, struct srv_dg_opts *o, char *err, size_t n)
{
	*o = (struct srv_dg_opts){ .raw = { .channels = 1 } };
	int rc = srv__dg_query_each(q, srv_dg_known, sizeof(srv_dg_known) / sizeof(srv_dg_known[0]),
				    srv_dg_param_cb, o, err, n);
	if (rc)
		return rc;
	bool self_describing = o->raw.encoding == ENG_AUDIO_ENCODING_FLAC ||
			       o->raw.encoding == ENG_AUDIO_ENCODING_OGG_OPUS;
	if (o->has_encoding && !o->has_rate && !self_describing)
		return snprintf(err, n, "encoding '%s' needs a sample_rate query parameter",
				eng_audio_encoding_name(o->raw.encoding)), -ST_INVAL;
	if (o->has_encoding && !o->has_rate)
		o->raw.sample_rate = ENG_AUDIO_RATE; /* unused: the stream's own rate wins */
	if (o->detect_language)
		o->language[0] = '\0'; /* "": detect */
	else if (!o->has_language)
		snprintf(o->language, sizeof(o->language), "en");
	return 0;
}

/* --- body ---------------------------------------------------------------- */

/* Is the Content-Type media type (before ';') equal to / prefixed by s? */
static bool srv_dg_type_is(const char *ct, const char *s, bool prefix)
{
	size_t n = strlen(s);
	ct += strspn(ct, " \t");
	if (strncasecmp(ct, s, n))
		return false;
	return prefix || ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t';
}

/* Refuse bodies that are not audio bytes; 0 or -ST_* with err set. */
static int srv_dg_body_check(const struct srv_req *req, char *err, size_t n)
{
	const char *ct = srv__req_header(req, "Content-Type");
	if (ct && srv_dg_type_is(ct, "application/json", false)) {
		json_t *j = json_loadb(req->body.data ? req->body.data : "", req->body.len, 0, NULL);
		bool url = json_is_string(json_object_get(j, "url"));
		json_decref(j);
		return snprintf(err, n, url ? "fetching URLs is disabled on this server: send the "
					     "audio bytes as the request body"
					   : "a JSON body must be {\"url\": ...} (and fetching URLs is "
					     "disabled on this server)"), -ST_INVAL;
	}
	if (ct && !srv_dg_type_is(ct, "audio/", true) && !srv_dg_type_is(ct, "video/", true) &&
	    !srv_dg_type_is(ct, "application/octet-stream", false))
		return snprintf(err, n, "unsupported Content-Type (send audio/*, video/* or "
				"application/octet-stream)"), -ST_UNSUPPORTED;
	if (req->body.len == 0)
		return snprintf(err, n, "the request body is empty: send the audio bytes"),
		       -ST_INVAL;
	return 0;
}

static int srv_dg_format(struct srv_audio_job *job);

void srv__h_deepgram_listen(struct srv_req *req)
{
	struct srv_dg_opts o;
	char err[256] = "";
	int rc = srv_dg_query_read(req->query, &o, err, sizeof(err));
	if (!rc)
		rc = srv_dg_body_check(req, err, sizeof(err));
	if (rc) {
		srv__audio_fail(req, rc, err);
		return;
	}
	const struct eng_model *m = srv__audio_model(req, o.model, strlen(o.model));
	if (!m)
		return;
	struct srv_dg_job *job = (struct srv_dg_job *)srv__audio_job_new(req, sizeof(*job));
	if (!job) {
		srv__audio_fail(req, -ST_NOMEM, "out of memory");
		return;
	}
	job->base.model = m;
	job->base.audio = req->body.data;
	job->base.audio_len = req->body.len;
	job->base.has_raw = o.has_encoding;
	job->base.raw = o.raw;
	job->base.want_sha256 = true;
	job->base.format = srv_dg_format;
	job->base.per_channel = o.multichannel;
	job->base.params.batched = o.batched && !o.multichannel;
	job->base.params.word_timestamps = true;
	job->base.params.vad_filter = o.vad_filter;
	srv__audio_job_set_language(&job->base, o.language, strlen(o.language));
	job->punctuate = o.punctuate || o.smart_format; /* smart_format implies punctuate */
	job->utterances = o.utterances;
	job->detect_language = o.detect_language;
	srv__dg_created(job->created);
	srv__audio_job_queue(req, &job->base);
}

/* --- response (worker thread) -------------------------------------------- */

/* One utterance (a segment): words (stolen) and the transcript text. */
static json_t *srv_dg_utterance(const struct srv_dg_job *job, const struct eng_segment *s,
				size_t i, int channel, json_t *words, const char *text,
				size_t text_n, double conf)
{
	char id[37];
	srv__dg_uuid(job->base.request_id, i, id);
	return json_pack("{s:f,s:f,s:f,s:i,s:o,s:o,s:i,s:s}", "start", s->start_s, "end",
		s->end_s, "confidence", conf, "channel", channel, "transcript",
		srv__audio_json_str(text, text_n), "words", words, "speaker", 0, "id", id);
}

/* Walk t's segments: words into acc, one utterance each into utts
 * (numbered from *n_utt on). */
static int srv_dg_walk(const struct srv_dg_job *job, const struct eng_transcript *t,
		       struct srv_dg_acc *acc, json_t *utts, size_t *n_utt, char *tmp)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < t->n_segments; i++) {
		const struct eng_segment *s = &t->segments[i];
		json_t *uw = utts ? json_array() : NULL;
		size_t n0 = acc->n_words, t0 = acc->text.len;
		double c0 = acc->conf_sum;
		rc = utts && !uw ? -ST_NOMEM : srv__dg_segment_words(job->punctuate, 0, s, acc, uw, tmp);
		if (rc || !utts) {
			json_decref(uw);
			continue;
		}
		size_t nw = acc->n_words - n0, skip = t0 && acc->text.len > t0 ? 1 : 0;
		const char *text = acc->text.data ? acc->text.data + t0 + skip : "";
		json_t *u = srv_dg_utterance(job, s, (*n_utt)++, t->channel, uw, text,
					     acc->text.len - t0 - skip,
					     nw ? (acc->conf_sum - c0) / (double)nw : 0);
		rc = json_array_append_new(utts, u) ? -ST_NOMEM : 0;
	}
	return rc;
}

static json_t *srv_dg_metadata(const struct srv_dg_job *job, size_t n_channels)
{
	const char *name = eng_model_name(job->base.model);
	char hex[65];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", job->base.sha256[i]);
	json_t *info = json_pack("{s:{s:s,s:s,s:s}}", name, "name", name, "version",
				 INFERD_VERSION, "arch", eng_model_arch(job->base.model));
	return json_pack("{s:s,s:s,s:s,s:s,s:f,s:i,s:[s],s:o}", "transaction_key", "deprecated",
		"request_id", job->base.request_id, "sha256", hex, "created", job->created,
		"duration", job->base.duration_s, "channels", (int)n_channels, "models", name,
		"model_info", info);
}

/* One channel's entry of results.channels: its transcript and words,
 * and with detect_language t's language and its probability. */
static json_t *srv_dg_channel(const struct srv_dg_job *job, const struct eng_transcript *t,
			      struct srv_dg_acc *acc)
{
	double conf = acc->n_words ? acc->conf_sum / (double)acc->n_words : 0;
	json_t *alt = json_pack("{s:o,s:f,s:O}", "transcript",
		srv__audio_json_str(acc->text.data ? acc->text.data : "", acc->text.len),
		"confidence", conf, "words", acc->words);
	if (!job->detect_language)
		return json_pack("{s:[o]}", "alternatives", alt);
	return json_pack("{s:[o],s:s,s:f}", "alternatives", alt, "detected_language",
			 t->language, "language_confidence", (double)t->language_prob);
}

/* results.channels[c] for channel c of t's chain (one without
 * multichannel), utterances of every channel into utts. */
static int srv_dg_channels(struct srv_dg_job *job, json_t *chans, json_t *utts, char *tmp)
{
	size_t n_utt = 0;
	int rc = 0;
	for (const struct eng_transcript *t = job->base.t; t && !rc; t = t->next) {
		struct srv_dg_acc acc = { .words = json_array() };
		srv_buf_init(&acc.text, SRV_AUDIO_OUT_MAX);
		rc = acc.words ? srv_dg_walk(job, t, &acc, utts, &n_utt, tmp) : -ST_NOMEM;
		if (!rc && json_array_append_new(chans, srv_dg_channel(job, t, &acc)))
			rc = -ST_NOMEM;
		json_decref(acc.words);
		srv_buf_fini(&acc.text);
	}
	return rc;
}

static int srv_dg_format(struct srv_audio_job *base)
{
	struct srv_dg_job *job = (struct srv_dg_job *)base;
	size_t longest = 0;
	for (const struct eng_transcript *t = base->t; t; t = t->next)
		for (size_t i = 0; i < t->n_segments; i++) {
			size_t n = strlen(t->segments[i].text);
			longest = n > longest ? n : longest;
		}
	json_t *utts = job->utterances ? json_array() : NULL, *chans = json_array();
	char *tmp = mem_alloc(longest + 1);
	int rc = chans && tmp && (utts || !job->utterances) ? 0 : -ST_NOMEM;
	if (!rc)
		rc = srv_dg_channels(job, chans, utts, tmp);
	json_t *results = rc ? NULL : json_pack("{s:O}", "channels", chans);
	if (results && utts)
		json_object_set(results, "utterances", utts);
	if (!rc)
		rc = srv__audio_json_out(base, json_pack("{s:o,s:o}", "metadata",
			srv_dg_metadata(job, json_array_size(chans)), "results", results));
	json_decref(utts);
	json_decref(chans);
	mem_free(tmp);
	return rc;
}
