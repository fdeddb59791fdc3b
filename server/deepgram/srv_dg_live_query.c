/* srv_dg_live_query.c - the query string of Deepgram's live API
 * (https://developers.deepgram.com/reference/speech-to-text-api/listen-streaming):
 * every setting of a stream arrives there, and what cannot be served is
 * refused before the WebSocket opens (contract in srv_dg_int.h).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/st.h"
#include "server/deepgram/srv_dg_int.h"
#include "server/job/srv_audio_job.h"

/* What the keys set besides the options, for the checks at the end. */
struct srv_dg_live_seen {
	bool encoding, rate, multichannel, language;
	bool punctuate, smart_format; /* their last values: either one punctuates */
};

/* encoding: the headerless ones, flac and ogg-opus (containers that
 * describe themselves) and opus (raw packets, one per binary message). */
static int srv_dg_live_encoding(struct srv_dg_live_opts *o, const char *v, char *err, size_t n)
{
	if (!strcmp(v, "opus")) {
		o->raw.encoding = ENG_AUDIO_ENCODING_OPUS;
		return 0;
	}
	if (eng_audio_encoding_parse(v, &o->raw.encoding))
		return snprintf(err, n, "invalid value for query parameter 'encoding' (supported "
				"on live streams: linear16, linear32, mulaw, alaw, opus, ogg-opus, "
				"flac, or none for containerised audio)"), -ST_INVAL;
	return 0;
}

static int srv_dg_live_endpointing(struct srv_dg_live_opts *o, const char *v)
{
	bool b;
	if (!srv__dg_bool(v, &b)) {
		o->endpointing_ms = b ? 10 : -1;
		return 0;
	}
	return srv__dg_int(v, 0, SRV_DG_LIVE_MAX_ENDPOINTING_MS, &o->endpointing_ms);
}

/* The language tag's primary subtag ("en-US" -> "en"), known to Whisper. */
static int srv_dg_live_language(struct srv_dg_live_opts *o, const char *v)
{
	size_t len = strcspn(v, "-_");
	if (len == 0 || len >= sizeof(o->language))
		return -1;
	snprintf(o->language, sizeof(o->language), "%.*s", (int)len, v);
	for (char *c = o->language; *c; c++)
		*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
	return strcmp(srv__audio_language_name(o->language), o->language) ? 0 : -1;
}

/* The keys read; the values of others (keywords, keyterm, tag, ...) are
 * not even decoded. */
static const char *const srv_dg_live_known[] = {
	"model", "language", "encoding", "sample_rate", "channels", "multichannel",
	"interim_results", "vad_events", "punctuate", "smart_format", "endpointing",
	"utterance_end_ms",
};

/* Apply one key=value. */
static int srv_dg_live_param(struct srv_dg_live_opts *o, struct srv_dg_live_seen *seen,
			     const char *k, const char *v, char *err, size_t n)
{
	int rc = 0;
	if (!strcmp(k, "model"))
		snprintf(o->model, sizeof(o->model), "%s", v);
	else if (!strcmp(k, "language"))
		rc = (seen->language = true, srv_dg_live_language(o, v));
	else if (!strcmp(k, "encoding"))
		return (seen->encoding = true, srv_dg_live_encoding(o, v, err, n));
	else if (!strcmp(k, "sample_rate"))
		rc = (seen->rate = true,
		      srv__dg_int(v, ENG_AUDIO_MIN_RATE, ENG_AUDIO_MAX_RATE, &o->raw.sample_rate));
	else if (!strcmp(k, "channels"))
		rc = srv__dg_int(v, 1, ENG_AUDIO_MAX_CHANNELS, &o->raw.channels);
	else if (!strcmp(k, "multichannel"))
		rc = srv__dg_bool(v, &seen->multichannel);
	else if (!strcmp(k, "interim_results"))
		rc = srv__dg_bool(v, &o->interim_results);
	else if (!strcmp(k, "vad_events"))
		rc = srv__dg_bool(v, &o->vad_events);
	else if (!strcmp(k, "punctuate"))
		rc = srv__dg_bool(v, &seen->punctuate);
	else if (!strcmp(k, "smart_format"))
		rc = srv__dg_bool(v, &seen->smart_format);
	else if (!strcmp(k, "endpointing"))
		rc = srv_dg_live_endpointing(o, v);
	else if (!strcmp(k, "utterance_end_ms"))
		rc = srv__dg_int(v, SRV_DG_LIVE_MIN_UTTERANCE_END_MS,
				 SRV_DG_LIVE_MAX_UTTERANCE_END_MS, &o->utterance_end_ms);
	if (rc)
		snprintf(err, n, "invalid value for query parameter '%s'", k);
	return rc ? -ST_INVAL : 0;
}

/* The checks that need every key: 0 or an error with err set. */
static int srv_dg_live_check(const struct srv_dg_live_opts *o, const struct srv_dg_live_seen *seen,
			     char *err, size_t n)
{
	bool boxed = !seen->encoding || o->raw.encoding == ENG_AUDIO_ENCODING_FLAC ||
		     o->raw.encoding == ENG_AUDIO_ENCODING_OGG_OPUS;
	if (!boxed && !seen->rate) /* a container's own rate wins: sample_rate is ignored */
		return snprintf(err, n, "encoding '%s' needs a sample_rate query parameter",
				eng_audio_encoding_name(o->raw.encoding)), -ST_INVAL;
	if (o->raw.encoding == ENG_AUDIO_ENCODING_OPUS && o->raw.channels > 2)
		return snprintf(err, n, "encoding 'opus' takes channels 1 or 2"), -ST_INVAL;
	if (seen->multichannel && boxed)
		return snprintf(err, n, "multichannel=true is not supported on containerised live "
				"audio (send raw audio with encoding, sample_rate and channels; "
				"without multichannel the channels are mixed to one)"),
		       -ST_UNSUPPORTED;
	if (seen->multichannel && o->raw.channels > SRV_DG_LIVE_MAX_CHANNELS)
		return snprintf(err, n, "multichannel=true takes at most %d channels on live streams",
				SRV_DG_LIVE_MAX_CHANNELS), -ST_INVAL;
	if (o->utterance_end_ms && !o->interim_results)
		return snprintf(err, n, "utterance_end_ms needs interim_results=true"), -ST_INVAL;
	return 0;
}

/* srv_dg_param_fn over struct srv_dg_live_parse */
struct srv_dg_live_parse {
	struct srv_dg_live_opts *o;
	struct srv_dg_live_seen seen;
};

static int srv_dg_live_param_cb(void *ctx, const char *k, const char *v, char *err, size_t n)
{
	struct srv_dg_live_parse *p = ctx;
	return srv_dg_live_param(p->o, &p->seen, k, v, err, n);
}

int srv__dg_live_query_parse(const char *q, struct srv_dg_live_opts *o, char *err, size_t errlen)
{
	*o = (struct srv_dg_live_opts){ .raw = { .channels = 1 }, .endpointing_ms = 10 };
	struct srv_dg_live_parse p = { .o = o };
	int rc = srv__dg_query_each(q, srv_dg_live_known,
				    sizeof(srv_dg_live_known) / sizeof(srv_dg_live_known[0]),
				    srv_dg_live_param_cb, &p, err, errlen);
	if (rc)
		return rc;
	if (!p.seen.language)
		snprintf(o->language, sizeof(o->language), "en");
	rc = srv_dg_live_check(o, &p.seen, err, errlen);
	o->punctuate = p.seen.punctuate || p.seen.smart_format;
	o->container = !rc && !p.seen.encoding;
	o->n_channels = !rc && p.seen.multichannel ? o->raw.channels : 1;
	return rc;
}
