/* srv_dg_live_out.c - the messages a live stream sends, with the fields
 * Deepgram's SDKs validate (deepgram-sdk 7's ListenV1Results,
 * ListenV1Metadata, ListenV1SpeechStarted, ListenV1UtteranceEnd): times are
 * seconds of audio since the stream began; words are the REST route's
 * (srv__dg_segment_words), shifted to the stream's timeline.
 */
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

/* The words of t (NULL: none) into acc, shifted by offset_s. */
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

int srv__dg_live_render(struct srv_dg_live_job *job, const struct eng_transcript *t)
{
	const struct srv_dg_live *l = job->live;
	double start = (double)job->seg.start / SRV_DG_LIVE_RATE;
	struct srv_dg_acc acc = { .words = json_array() };
	srv_buf_init(&acc.text, SRV_AUDIO_OUT_MAX_LIVE);
	int rc = acc.words ? srv_dg_live_words(job, t, start, &acc) : -ST_NOMEM;
	if (acc.n_words) {
		json_t *last = json_array_get(acc.words, acc.n_words - 1);
		job->last_word_end = json_real_value(json_object_get(last, "end"));
	}
	json_t *alt = rc ? NULL : json_pack("{s:o,s:f,s:O}", "transcript",
		srv__audio_json_str(acc.text.data ? acc.text.data : "", acc.text.len),
		"confidence", acc.n_words ? acc.conf_sum / (double)acc.n_words : 0.0,
		"words", acc.words);
	json_t *meta = alt ? json_pack("{s:s,s:o,s:s}", "request_id", l->request_id, "model_info",
				       srv_dg_live_model_info(l), "model_uuid", l->model_uuid)
			   : NULL;
	json_t *msg = meta ? json_pack("{s:s,s:[i,i],s:f,s:f,s:b,s:b,s:b,s:{s:[o]},s:o}",
		"type", "Results", "channel_index", 0, 1, "duration",
		(double)job->n / SRV_DG_LIVE_RATE, "start", start, "is_final", job->is_final,
		"speech_final", job->is_final && job->seg.speech_final, "from_finalize",
		job->is_final && job->seg.from_finalize, "channel", "alternatives", alt,
		"metadata", meta) : NULL;
	/* (json_pack steals its "o" values even when it fails) */
	if (!rc)
		rc = srv_dg_live_dump(msg, &job->msg);
	json_decref(acc.words);
	srv_buf_fini(&acc.text);
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
					    "channel", 0, 1, "timestamp", t));
}

int srv__dg_live_utterance_end(struct srv_dg_live *l)
{
	return srv__dg_live_send_json(l, json_pack("{s:s,s:[i,i],s:f}", "type", "UtteranceEnd",
					    "channel", 0, 1, "last_word_end", l->last_word_end));
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
		"sha256", hex, "created", l->created, "duration", duration, "channels", 1,
		"models", l->model_uuid, "model_info", l->model_uuid, srv_dg_live_model_info(l)));
}
