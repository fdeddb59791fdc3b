/* srv_dg_live_out.c - the messages a live stream sends, with the fields
 * Deepgram's SDKs validate (deepgram-sdk 7's ListenV1Results,
 * ListenV1Metadata, ListenV1SpeechStarted, ListenV1UtteranceEnd): times are
 * seconds of audio since the stream began; words are the REST route's
 * (srv__dg_segment_words), shifted to the stream's timeline.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/deepgram/srv_dg_live_int.h"
#include "server/job/srv_audio_job.h"

static int srv_dg_live_dump_cb(const char *buf, size_t size, void *data)
{
	return srv_buf_append(data, buf, size) ? -1 : 0;
}

/* Dump obj (stolen; NULL: out of memory) into out. */
static int srv_dg_live_dump(json_t *obj, struct srv_buf *out)
{
	if (!obj)
		return -ST_NOMEM;
	int rc = json_dump_callback(obj, srv_dg_live_dump_cb, out,
				    JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(obj);
	if (rc)
		return out->len + 4096 > out->max_len ? -ST_TOOBIG : -ST_NOMEM;
	return 0;
}

static json_t *srv_dg_live_model_info(const struct srv_dg_live *l)
{
	return json_pack("{s:s,s:s,s:s}", "name", eng_model_name(l->model), "version",
			 INFERD_VERSION, "arch", eng_model_arch(l->model));
}

/* The words of t (NULL: none) into acc, shifted by offset_s: every
 * segment's, also those without word timestamps. */
static int srv_dg_live_words(const struct srv_dg_live_job *job, const struct eng_transcript *t,
			     double offset_s, struct srv_dg_acc *acc)
{
	size_t longest = 0;
	for (size_t i = 0; t && i < t->n_segments; i++) {
		size_t n = strlen(t->segments[i].text);
		longest = n > longest ? n : longest;
	}
	char *tmp = mem_alloc(longest + 1);
	int rc = tmp ? 0 : -ST_NOMEM;
	for (size_t i = 0; !rc && t && i < t->n_segments; i++)
		rc = srv__dg_segment_words(job->live->o.punctuate, offset_s, &t->segments[i], acc,
					   NULL, tmp);
	mem_free(tmp);
	return rc;
}

/* One Results message over [start_s, end_s) of the stream into out: the
 * words of seg (NULL: t's, every segment), or none. */
static int srv_dg_live_msg(struct srv_dg_live_job *job, const struct eng_transcript *t,
			   const struct eng_segment *seg, double start_s, double end_s,
			   bool is_final, struct srv_buf *out)
{
	const struct srv_dg_live *l = job->live;
	double offset_s = (double)job->seg.start / SRV_DG_LIVE_RATE;
	struct srv_dg_acc acc = { .words = json_array() };
	srv_buf_init(&acc.text, SRV_AUDIO_OUT_MAX_LIVE);
	size_t longest = 0;
	for (size_t i = 0; seg && i < seg->n_words; i++) {
		size_t n = strlen(seg->words[i].word);
		longest = n > longest ? n : longest;
	}
	char *tmp = seg ? mem_alloc(longest + 1) : NULL;
	int rc = !acc.words || (seg && !tmp) ? -ST_NOMEM
		: seg ? srv__dg_segment_words(l->o.punctuate, offset_s, seg, &acc, NULL, tmp)
		      : srv_dg_live_words(job, t, offset_s, &acc);
	mem_free(tmp);
	if (acc.n_words && is_final) {
		json_t *last = json_array_get(acc.words, acc.n_words - 1);
		double e = json_real_value(json_object_get(last, "end"));
		job->last_word_end = e > job->last_word_end ? e : job->last_word_end;
	}
	json_t *alt = rc ? NULL : json_pack("{s:o,s:f,s:O}", "transcript",
		srv__audio_json_str(acc.text.data ? acc.text.data : "", acc.text.len),
		"confidence", acc.n_words ? acc.conf_sum / (double)acc.n_words : 0.0,
		"words", acc.words);
	json_t *meta = alt ? json_pack("{s:s,s:o,s:s}", "request_id", l->request_id, "model_info",
				       srv_dg_live_model_info(l), "model_uuid", l->model_uuid)
			   : NULL;
	json_t *msg = meta ? json_pack("{s:s,s:[i,i],s:f,s:f,s:b,s:b,s:b,s:{s:[o]},s:o}",
		"type", "Results", "channel_index", l->chan, l->n_chan, "duration", end_s - start_s,
		"start", start_s, "is_final", is_final,
		"speech_final", is_final && job->is_final && job->seg.speech_final,
		"from_finalize", is_final && job->is_final && job->seg.from_finalize,
		"channel", "alternatives", alt, "metadata", meta) : NULL;
	/* (json_pack steals its "o" values even when it fails) */
	if (!rc)
		rc = srv_dg_live_dump(msg, out);
	json_decref(acc.words);
	srv_buf_fini(&acc.text);
	return rc;
}

/* --- LocalAgreement-2 (the policy: srv_dg_live_int.h) -------------------- */

/* w's letters and digits, ASCII lower-cased (bytes of other UTF-8
 * characters kept, ASCII punctuation and spaces dropped), into out. */
static void srv_dg_live_norm(const char *w, char out[SRV_DG_LIVE_NORM])
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)w; *p && n + 1 < SRV_DG_LIVE_NORM; p++)
		if (*p >= 0x80 || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))
			out[n++] = (char)*p;
		else if (*p >= 'A' && *p <= 'Z')
			out[n++] = (char)(*p - 'A' + 'a');
	out[n] = '\0';
}

/* The words of t (all with word times) in order, with their normalized
 * forms: *w and *norm owned, [*nw]. 0 or -ST_NOMEM. */
static int srv_dg_live_flatten(const struct eng_transcript *t, struct eng_word **w,
			       char (**norm)[SRV_DG_LIVE_NORM], size_t *nw)
{
	size_t n = 0;
	for (size_t i = 0; t && i < t->n_segments; i++)
		n += t->segments[i].n_words;
	*w = mem_calloc(n ? n : 1, sizeof(**w));
	*norm = mem_calloc(n ? n : 1, sizeof(**norm));
	*nw = n;
	if (!*w || !*norm)
		return -ST_NOMEM;
	for (size_t i = 0, k = 0; t && i < t->n_segments; i++)
		for (size_t j = 0; j < t->segments[i].n_words; j++, k++) {
			(*w)[k] = t->segments[i].words[j];
			srv_dg_live_norm((*w)[k].word, (*norm)[k]);
		}
	return 0;
}

/* How many of the first words were committed before job: those whose
 * midpoint is before committed_end, then a repeat of the last committed
 * words (job->la.tail) at the head, near the boundary. */
static size_t srv_dg_live_committed(const struct srv_dg_live_job *job, const struct eng_word *w,
				    char (*norm)[SRV_DG_LIVE_NORM], size_t nw)
{
	double off = (double)job->seg.start / SRV_DG_LIVE_RATE;
	double cend = (double)job->committed_end / SRV_DG_LIVE_RATE;
	size_t i0 = 0, nt = job->la.n_tail;
	while (i0 < nw && off + (w[i0].start_s + w[i0].end_s) / 2 < cend)
		i0++;
	for (size_t n = nt < nw - i0 ? nt : nw - i0; n > 0; n--) {
		size_t j = 0;
		while (j < n && !strcmp(norm[i0 + j], job->la.tail[nt - n + j]))
			j++;
		if (j == n && off + w[i0].start_s < cend + 1.0)
			return i0 + n;
	}
	return i0;
}

/* LocalAgreement-2: how many of the n words agree with job->la.hyp from
 * the start, the newest word left open. */
static size_t srv_dg_live_agree(const struct srv_dg_live_job *job, char (*norm)[SRV_DG_LIVE_NORM],
				size_t n)
{
	size_t k = 0;
	while (!job->is_final && k < job->la.n_hyp && k + 1 < n && !strcmp(job->la.hyp[k], norm[k]))
		k++;
	return k;
}

/* job->new_la: the uncommitted words [n] as the hyp (an interim's), the
 * tail with the k newly committed words ending it. 0 or -ST_NOMEM. */
static int srv_dg_live_remember(struct srv_dg_live_job *job, char (*committed)[SRV_DG_LIVE_NORM],
				size_t k, char (*rest)[SRV_DG_LIVE_NORM], size_t n)
{
	struct srv_dg_live_la *la = &job->new_la;
	if (job->is_final)
		return 0; /* the segment is over: nothing to remember */
	*la = job->la;
	la->hyp = n ? mem_alloc(sizeof(*la->hyp) * n) : NULL;
	la->n_hyp = la->hyp ? n : 0;
	if (n && !la->hyp)
		return -ST_NOMEM;
	if (n)
		memcpy(la->hyp, rest, sizeof(*la->hyp) * n);
	for (size_t i = 0; i < k; i++) {
		if (la->n_tail == SRV_DG_LIVE_TAIL_WORDS)
			memmove(la->tail, la->tail + 1, sizeof(la->tail[0]) * --la->n_tail);
		memcpy(la->tail[la->n_tail++], committed[i], sizeof(la->tail[0]));
	}
	return 0;
}

int srv__dg_live_render(struct srv_dg_live_job *job, const struct eng_transcript *t)
{
	double off = (double)job->seg.start / SRV_DG_LIVE_RATE;
	double cend = (double)job->committed_end / SRV_DG_LIVE_RATE;
	double start = off > cend ? off : cend, end = (double)job->seg.end / SRV_DG_LIVE_RATE;
	bool timed = true;
	for (size_t i = 0; t && i < t->n_segments; i++)
		timed = timed && (t->segments[i].words || !t->segments[i].n_tokens);
	job->new_committed_end = job->is_final ? job->seg.end : job->committed_end;
	if (!timed) /* no word times: nothing is committed early */
		return srv_dg_live_msg(job, t, NULL, start, end, job->is_final, &job->msg);
	struct eng_word *w = NULL;
	char (*norm)[SRV_DG_LIVE_NORM] = NULL;
	size_t nw = 0;
	int rc = srv_dg_live_flatten(t, &w, &norm, &nw);
	size_t i0 = rc ? 0 : srv_dg_live_committed(job, w, norm, nw);
	size_t k = rc ? 0 : srv_dg_live_agree(job, norm + i0, nw - i0);
	/* a message starts at the last commit's end, or at its first word when
	 * that starts sooner (word times of neighbours may overlap) */
	if (!rc && i0 < nw && off + w[i0].start_s < start)
		start = off + w[i0].start_s;
	if (!rc && k) {
		double cut = off + w[i0 + k - 1].end_s;
		struct eng_segment s = { .words = w + i0, .n_words = k, .text = "" };
		rc = srv_dg_live_msg(job, t, &s, start, cut, true, &job->commit_msg);
		job->new_committed_end = (int64_t)llround(cut * SRV_DG_LIVE_RATE);
		start = cut;
		if (i0 + k < nw && off + w[i0 + k].start_s < start)
			start = off + w[i0 + k].start_s;
	}
	if (!rc) {
		struct eng_segment s = { .words = w + i0 + k, .n_words = nw - i0 - k, .text = "" };
		rc = srv_dg_live_msg(job, t, &s, start, end, job->is_final, &job->msg);
	}
	if (!rc)
		rc = srv_dg_live_remember(job, norm + i0, k, norm + i0 + k, nw - i0 - k);
	mem_free(w);
	mem_free(norm);
	return rc;
}

int srv__dg_live_send_json(struct srv_dg_live *l, json_t *obj)
{
	struct srv_buf b;
	srv_buf_init(&b, SRV_AUDIO_OUT_MAX_LIVE);
	int rc = srv_dg_live_dump(obj, &b);
	if (!rc && l->ws)
		rc = srv__ws_send_text(l->ws, b.data, b.len);
	srv_buf_fini(&b);
	return rc == -ST_CLOSED ? 0 : rc;
}

int srv__dg_live_speech_started(struct srv_dg_live *l, double t)
{
	return srv__dg_live_send_json(l, json_pack("{s:s,s:[i,i],s:f}", "type", "SpeechStarted",
					    "channel", l->chan, l->n_chan, "timestamp", t));
}

int srv__dg_live_utterance_end(struct srv_dg_live *l)
{
	return srv__dg_live_send_json(l, json_pack("{s:s,s:[i,i],s:f}", "type", "UtteranceEnd",
					    "channel", l->chan, l->n_chan, "last_word_end",
					    l->last_word_end));
}

int srv__dg_live_metadata(struct srv_dg_live *l)
{
	unsigned char h[32];
	char hex[65];
	sha256_digest(&l->sha, SHA256_DIGEST_SIZE, h);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	double duration = (double)(l->audio_base + (int64_t)l->audio_n) / SRV_DG_LIVE_RATE;
	return srv__dg_live_send_json(l, json_pack("{s:s,s:s,s:s,s:s,s:s,s:f,s:i,s:[s],s:{s:o}}",
		"type", "Metadata", "transaction_key", "deprecated", "request_id", l->request_id,
		"sha256", hex, "created", l->created, "duration", duration, "channels", l->n_chan,
		"models", l->model_uuid, "model_info", l->model_uuid, srv_dg_live_model_info(l)));
}
