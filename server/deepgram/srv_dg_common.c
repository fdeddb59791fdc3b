/* srv_dg_common.c - what Deepgram's two /v1/listen routes share: the query
 * string's decoding (percent escapes, booleans, integers) and the words of
 * a transcript as Deepgram prints them (srv_deepgram.c for POST,
 * srv_dg_live.c for the live WebSocket).
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
#include "server/deepgram/srv_dg_int.h"
#include "server/job/srv_audio_job.h"

static int srv_dg_hex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode [s, s + n) ('+' is a space) into out [cap]; -1 when the
 * result does not fit, has a NUL or a bad escape. */
int srv__dg_unescape(const char *s, size_t n, char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '+')
			c = ' ';
		else if (c == '%') {
			int hi = i + 2 < n ? srv_dg_hex(s[i + 1]) : -1;
			int lo = hi >= 0 ? srv_dg_hex(s[i + 2]) : -1;
			if (lo < 0)
				return -1;
			c = hi * 16 + lo;
			i += 2;
		}
		if (c == 0 || k + 1 >= cap)
			return -1;
		out[k++] = (char)c;
	}
	out[k] = '\0';
	return 0;
}

int srv__dg_bool(const char *v, bool *out)
{
	if (!strcasecmp(v, "true") || !strcmp(v, "1"))
		*out = true;
	else if (!strcasecmp(v, "false") || !strcmp(v, "0"))
		*out = false;
	else
		return -1;
	return 0;
}

static bool srv_dg_key_known(const char *key, const char *const *known, size_t n_known)
{
	for (size_t i = 0; i < n_known; i++)
		if (!strcmp(key, known[i]))
			return true;
	return false;
}

int srv__dg_query_each(const char *q, const char *const *known, size_t n_known,
		       srv_dg_param_fn fn, void *ctx, char *err, size_t errlen)
{
	char key[32], val[SRV_DG_VALUE_MAX];
	while (*q) {
		size_t len = strcspn(q, "&"), klen = strcspn(q, "=&");
		const char *v = klen < len ? q + klen + 1 : q + len;
		bool skip = klen >= sizeof(key) || srv__dg_unescape(q, klen, key, sizeof(key)) ||
			    !srv_dg_key_known(key, known, n_known);
		if (!skip && srv__dg_unescape(v, (size_t)(q + len - v), val, sizeof(val)))
			return snprintf(err, errlen, "malformed or over-long value of query "
					"parameter '%s'", key), -ST_INVAL;
		int rc = skip ? 0 : fn(ctx, key, val, err, errlen);
		if (rc)
			return rc;
		q += len + (q[len] == '&');
	}
	return 0;
}

int srv__dg_int(const char *v, long lo, long hi, int *out)
{
	char *end;
	long x = strtol(v, &end, 10);
	if (end == v || *end || x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

/* The word as Deepgram prints it without punctuate: ASCII lowercased, ASCII
 * punctuation dropped except apostrophes and hyphens inside the word,
 * other bytes (UTF-8) kept. out has room for n + 1 bytes. */
static size_t srv_dg_plain(const char *w, size_t n, char *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)w[i];
		if (c >= 0x80 || isalnum(c))
			out[k++] = (char)tolower(c);
		else if ((c == '\'' || c == '-') && k > 0)
			out[k++] = (char)c;
	}
	while (k > 0 && (out[k - 1] == '\'' || out[k - 1] == '-'))
		k--;
	out[k] = '\0';
	return k;
}

/* Append one word, text p[0, wn) (tmp: its plain form's buffer), to acc
 * (and to utt_words when not NULL); punctuation alone is not a word. */
static int srv_dg_word(bool punctuate, const char *p, size_t wn, double start, double end,
		       double conf, struct srv_dg_acc *acc, json_t *utt_words, char *tmp)
{
	size_t pn = srv_dg_plain(p, wn, tmp);
	if (pn == 0)
		return 0;
	json_t *w = json_pack("{s:o,s:f,s:f,s:f}", "word", srv__audio_json_str(tmp, pn), "start",
			      start, "end", end, "confidence", conf);
	if (w && punctuate)
		json_object_set_new(w, "punctuated_word", srv__audio_json_str(p, wn));
	if (!w)
		return -ST_NOMEM;
	int rc = 0;
	if (utt_words && json_array_append(utt_words, w))
		rc = -ST_NOMEM;
	if (json_array_append_new(acc->words, w)) /* steals w either way */
		rc = -ST_NOMEM;
	if (!rc)
		rc = srv_buf_printf(&acc->text, "%s%.*s", acc->text.len ? " " : "",
				    (int)(punctuate ? wn : pn), punctuate ? p : tmp);
	acc->conf_sum += conf;
	acc->n_words++;
	return rc;
}

/* Whether engine word w continues the word before it: it starts with
 * ASCII punctuation, not a space. Whisper's word split starts a word at a
 * punctuation token, so "fat-mutten" comes as " fat" and "-mutten" (the
 * segment's text joins them; faster-whisper's words are the same); other
 * words (CJK ones included, which have no spaces) stay apart. */
static bool srv_dg_continues(const char *w)
{
	return ispunct((unsigned char)w[0]) != 0;
}

/* The engine's timed words of s into acc, each run of a word and those
 * continuing it (srv_dg_continues) as one Deepgram word: their texts
 * joined, from the first one's start to the last one's end, with the
 * lowest of their probabilities. */
static int srv_dg_timed_words(bool punctuate, double offset_s, const struct eng_segment *s,
			      struct srv_dg_acc *acc, json_t *utt_words)
{
	size_t total = 1;
	for (size_t i = 0; i < s->n_words; i++)
		total += strlen(s->words[i].word);
	char *buf = mem_alloc(2 * total); /* the joined text, then its plain form */
	if (!buf)
		return -ST_NOMEM;
	int rc = 0;
	for (size_t i = 0, j; i < s->n_words && !rc; i = j) {
		const char *p = s->words[i].word + strspn(s->words[i].word, " \t\r\n");
		size_t n = strlen(p);
		double conf = (double)s->words[i].probability;
		memcpy(buf, p, n);
		for (j = i + 1; j < s->n_words && srv_dg_continues(s->words[j].word); j++) {
			size_t wn = strlen(s->words[j].word);
			memcpy(buf + n, s->words[j].word, wn);
			n += wn;
			conf = fmin(conf, (double)s->words[j].probability);
		}
		while (n && strchr(" \t\r\n", buf[n - 1]))
			n--;
		rc = srv_dg_word(punctuate, buf, n, offset_s + s->words[i].start_s,
				 offset_s + s->words[j - 1].end_s, fmin(1.0, fmax(0.0, conf)), acc,
				 utt_words, buf + total);
	}
	mem_free(buf);
	return rc;
}

/* Append a segment's words to acc (and to utt_words when not NULL): the
 * engine's word timestamps, or (a model without alignment heads) the
 * segment's words with equal shares of its span and exp(avg_logprob). */
int srv__dg_segment_words(bool punctuate, double offset_s, const struct eng_segment *s,
			  struct srv_dg_acc *acc, json_t *utt_words, char *tmp)
{
	int rc = 0;
	if (s->words)
		return srv_dg_timed_words(punctuate, offset_s, s, acc, utt_words);
	const char *p = s->text;
	size_t n_words = 0;
	for (const char *q = p; *(q += strspn(q, " \t\r\n")); q += strcspn(q, " \t\r\n"))
		n_words++;
	double conf = fmin(1.0, fmax(0.0, exp(s->avg_logprob)));
	double span = (s->end_s - s->start_s) / (double)(n_words ? n_words : 1);
	for (size_t i = 0; i < n_words && !rc; i++) {
		p += strspn(p, " \t\r\n");
		size_t wn = strcspn(p, " \t\r\n");
		rc = srv_dg_word(punctuate, p, wn, offset_s + s->start_s + span * (double)i,
				 offset_s + s->start_s + span * (double)(i + 1), conf, acc, utt_words,
				 tmp);
		p += wn;
	}
	return rc;
}

/* A UUID-shaped id for utterance i, derived from the request id. */
void srv__dg_uuid(const char *request_id, size_t i, char out[37])
{
	char seed[SRV_REQUEST_ID_MAX + 24];
	unsigned char h[32];
	int n = snprintf(seed, sizeof(seed), "%s:%zu", request_id, i);
	srv__sha256(seed, (size_t)n, h);
	h[6] = (unsigned char)((h[6] & 0x0f) | 0x40); /* version 4 layout */
	h[8] = (unsigned char)((h[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
		 h[13], h[14], h[15]);
}


void srv__dg_created(char out[40])
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 40 - n, ".%03ldZ", ts.tv_nsec / 1000000);
}
