/* srv_dg_int.h - what the Deepgram routes share inside server/deepgram/:
 * query-string decoding and transcript words (srv_dg_common.c), and the
 * live API's query options (srv_dg_live_query.c).
 */
#ifndef SRV_DG_INT_H
#define SRV_DG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "engine/eng.h"
#include "server/srv_buf.h"

#define SRV_DG_VALUE_MAX 128 /* longest query value we read */

/* srv__dg_unescape - percent-decode [s, s + n) ('+' is a space) into
 * out [cap], NUL-terminated; -1 when the result does not fit, has a NUL or
 * a bad escape. */
int srv__dg_unescape(const char *s, size_t n, char *out, size_t cap);

/* srv__dg_bool - "true"/"false" in any case, "1"/"0" -> *out; -1 else. */
int srv__dg_bool(const char *v, bool *out);

/* srv__dg_int - a decimal integer in [lo, hi] -> *out; -1 else. */
int srv__dg_int(const char *v, long lo, long hi, int *out);

/* One query parameter, key and value percent-decoded: 0, or an error
 * status with err [errlen] set. */
typedef int (*srv_dg_param_fn)(void *ctx, const char *key, const char *val, char *err,
			       size_t errlen);

/* srv__dg_query_each - call fn(ctx, ...) for each key=value of the query
 * string q (after '?') whose key is one of known [n_known], in order;
 * other keys (and over-long ones) are skipped with their values not even
 * decoded. Stops at fn's first error and returns it; a known key's
 * malformed or over-long value is -ST_INVAL with err set. */
int srv__dg_query_each(const char *q, const char *const *known, size_t n_known,
		       srv_dg_param_fn fn, void *ctx, char *err, size_t errlen);

/* srv__dg_uuid - a UUID-shaped id (version 4 layout) derived from
 * request_id and i by SHA-256, into out (37 bytes with the NUL). */
void srv__dg_uuid(const char *request_id, size_t i, char out[37]);

/* srv__dg_created - now as ISO-8601 UTC with milliseconds
 * ("2026-01-02T03:04:05.678Z"), Deepgram's metadata.created. */
void srv__dg_created(char out[40]);

/* The words and transcript of one alternative as they are gathered. */
struct srv_dg_acc {
	json_t *words;          /* the alternative's words (borrowed array) */
	struct srv_buf text;    /* the alternative's transcript */
	double conf_sum;        /* over words */
	size_t n_words;
};

/* srv__dg_segment_words - append segment s's words to acc (and to
 * utt_words when not NULL), their times shifted by offset_s seconds:
 * Deepgram's word objects (word, start, end, confidence, and with
 * punctuate the punctuated_word), from the engine's word timestamps (a
 * word that starts with punctuation joined to the one before it, as the
 * segment's text has them: "fat-mutten", not "fat" and "-mutten"), or
 * for a model without alignment heads equal shares of the segment's span
 * and exp(avg_logprob). tmp has room for strlen(s->text) + 1 bytes.
 * 0, -ST_NOMEM or -ST_TOOBIG. Any thread. */
int srv__dg_segment_words(bool punctuate, double offset_s, const struct eng_segment *s,
			  struct srv_dg_acc *acc, json_t *utt_words, char *tmp);

/* --- live streaming (GET /v1/listen) ----------------------------------- */

/* The live API's query options. */
struct srv_dg_live_opts {
	char model[SRV_DG_VALUE_MAX]; /* "": the first transcription model */
	char language[16];            /* ISO 639-1 code given to Whisper ("en" default) */
	struct eng_audio_raw raw;     /* encoding, sample_rate, channels */
	bool container;               /* no encoding: containerised audio, detected */
	int n_channels;               /* result streams: raw.channels with multichannel=true,
				       * else 1 (the channels mixed) */
	bool interim_results;         /* default false */
	bool punctuate;               /* punctuate or smart_format */
	bool vad_events;              /* SpeechStarted messages */
	int endpointing_ms;           /* silence that ends speech, default 10; -1 off */
	int utterance_end_ms;         /* 0: no UtteranceEnd messages */
};

#define SRV_DG_LIVE_MAX_ENDPOINTING_MS 60000
#define SRV_DG_LIVE_MIN_UTTERANCE_END_MS 1000 /* Deepgram's floor */
#define SRV_DG_LIVE_MAX_UTTERANCE_END_MS 60000
#define SRV_DG_LIVE_MAX_CHANNELS 8 /* multichannel: each channel is a stream of its own */

/* srv__dg_live_query_parse - read the live API's query string q (after
 * '?') into *o: booleans true/false/True/False/1/0, a repeated key's last
 * value wins, unknown keys (keywords, keyterm, tier, ...) are ignored.
 * No encoding is containerised audio (o->container; o->raw unused), as
 * are flac and ogg-opus (their sample_rate optional and ignored); opus is
 * raw Opus packets, one per binary message.
 * Refused (-ST_INVAL, err says why): a malformed value, an unknown
 * encoding, a headerless encoding without sample_rate, opus with more
 * than 2 channels, utterance_end_ms without interim_results or below
 * 1000, a language Whisper does not know.
 * multichannel=true with channels N > 1 transcribes each channel as a
 * stream of its own (o->n_channels = N, at most SRV_DG_LIVE_MAX_CHANNELS);
 * with a container it is -ST_UNSUPPORTED (the channels are not known at
 * the handshake).
 * Any thread; no allocation. */
int srv__dg_live_query_parse(const char *q, struct srv_dg_live_opts *o, char *err, size_t errlen);

#endif /* SRV_DG_INT_H */
