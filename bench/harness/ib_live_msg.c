/* ib_live_msg.c - the handshake values, the server messages and the
 * latencies of a deepgram-live stream (contract in ib_live_msg.h).
 *
 * The messages are Deepgram's live API's as its documentation and SDKs
 * give them (https://developers.deepgram.com/reference/speech-to-text-api/listen-streaming):
 * {"type": "Results", "is_final", "start", "duration", "channel":
 * {"alternatives": [{"transcript", "words": [{"word", "start", "end",
 * ...}]}]}, ...}, "Metadata", "SpeechStarted", "UtteranceEnd". The
 * interim latency is the one Deepgram's guide to measuring streaming
 * latency defines: audio cursor (seconds sent) minus transcript cursor
 * (start + duration).
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <nettle/base64.h>
#include <nettle/sha1.h>

#include "ib_live_msg.h"

#define IB_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 1.3 */

void ib_ws_key(const uint8_t nonce[16], char out[IB_WS_KEY_LEN + 1])
{
	base64_encode_raw(out, 16, nonce);
	out[IB_WS_KEY_LEN] = '\0';
}

void ib_ws_accept(const char *key, char out[IB_WS_ACCEPT_LEN + 1])
{
	struct sha1_ctx c;
	uint8_t digest[SHA1_DIGEST_SIZE];
	sha1_init(&c);
	sha1_update(&c, strlen(key), (const uint8_t *)key);
	sha1_update(&c, sizeof(IB_WS_GUID) - 1, (const uint8_t *)IB_WS_GUID);
	sha1_digest(&c, SHA1_DIGEST_SIZE, digest);
	base64_encode_raw(out, SHA1_DIGEST_SIZE, digest);
	out[IB_WS_ACCEPT_LEN] = '\0';
}

bool ib_ws_accept_is_valid(const char *key, const char *v, size_t n)
{
	char want[IB_WS_ACCEPT_LEN + 1];
	while (n && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	ib_ws_accept(key, want);
	/* base64 is case-sensitive: compared byte for byte */
	return n == IB_WS_ACCEPT_LEN && !memcmp(v, want, n);
}

/* The last word's end of words (an array of objects with a number end)
 * into *last_end (-1 for none); false when a word is not such an object. */
static bool ib_live_words(json_t *words, double *last_end)
{
	size_t i;
	json_t *w;
	*last_end = -1.0;
	json_array_foreach(words, i, w)
	{
		json_t *end = json_object_get(w, "end");
		if (!json_is_number(end))
			return false;
		*last_end = json_number_value(end);
	}
	return true;
}

/* The Results fields of j into m; -1 when one is missing or mistyped. */
static int ib_live_results(json_t *j, struct ib_live_msg *m)
{
	json_t *fin = json_object_get(j, "is_final"), *start = json_object_get(j, "start");
	json_t *dur = json_object_get(j, "duration");
	json_t *alts = json_object_get(json_object_get(j, "channel"), "alternatives");
	json_t *alt = json_array_get(alts, 0);
	json_t *text = json_object_get(alt, "transcript"), *words = json_object_get(alt, "words");
	if (!json_is_boolean(fin) || !json_is_number(start) || !json_is_number(dur) ||
	    !json_is_string(text) || !json_is_array(words))
		return -1;
	m->is_final = json_is_true(fin);
	m->start = json_number_value(start);
	m->duration = json_number_value(dur);
	m->n_words = (long)json_array_size(words);
	if (!ib_live_words(words, &m->last_end))
		return -1;
	m->transcript = strdup(json_string_value(text));
	return m->transcript ? 0 : -1;
}

int ib_live_msg_parse(const char *s, size_t n, struct ib_live_msg *m)
{
	*m = (struct ib_live_msg){.last_end = -1.0};
	json_t *j = json_loadb(s, n, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	int rc = type ? 0 : -1;
	if (rc)
		goto out;
	if (!strcmp(type, "Results")) {
		m->type = IB_LIVE_MSG_RESULTS;
		rc = ib_live_results(j, m);
	} else {
		m->type = !strcmp(type, "Metadata") ? IB_LIVE_MSG_METADATA : IB_LIVE_MSG_OTHER;
		m->transcript = strdup("");
		rc = m->transcript ? 0 : -1;
	}
out:
	json_decref(j);
	if (rc)
		ib_live_msg_fini(m);
	return rc;
}

void ib_live_msg_fini(struct ib_live_msg *m)
{
	free(m->transcript);
	m->transcript = NULL;
}

double ib_live_final_latency(double t_arr, const double *t_frame, size_t n_sent, double frame_s,
			     double end_s)
{
	/* audio up to end_s went out with frame ceil(end_s / frame_s) - 1
	 * (the 1e-9: an end on a frame's edge, 0.3 / 0.1 = 3.0000000000000004,
	 * is still in the frame before it) */
	double k = ceil(end_s / frame_s - 1e-9) - 1.0;
	size_t i = k <= 0.0 ? 0 : k >= (double)(n_sent - 1) ? n_sent - 1 : (size_t)k;
	return t_arr - t_frame[i];
}

double ib_live_interim_latency(double sent_s, const struct ib_live_msg *m)
{
	return sent_s - (m->start + m->duration);
}
