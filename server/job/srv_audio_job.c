/* srv_audio_job.c - the transcription job shared by the audio routes:
 * submission to the model's scheduler (eng_transcribe_submit: the replica
 * decodes and transcribes), formatting on the replica thread when it ends,
 * the response or the error on the loop thread (srv__post), and the
 * mapping of engine statuses to each protocol's error shape.
 */
#include <stdio.h>
#include <string.h>

#include <nettle/sha2.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "server/job/srv_audio_job.h"
#include "server/srv_status.h"

struct srv_audio_job *srv__audio_job_new(struct srv_req *req, size_t size)
{
	if (size < sizeof(struct srv_audio_job))
		return NULL;
	struct srv_audio_job *job = mem_calloc(1, size);
	if (!job)
		return NULL;
	job->conn = req->conn;
	eng_transcribe_params_init(&job->params);
	memcpy(job->request_id, req->request_id, sizeof(job->request_id));
	srv_buf_init(&job->out, SRV_AUDIO_OUT_MAX);
	return job;
}

int srv__audio_job_set_language(struct srv_audio_job *job, const char *s, size_t n)
{
	if (n >= sizeof(job->language))
		return -ST_INVAL;
	if (n)
		memcpy(job->language, s, n);
	job->language[n] = '\0';
	job->params.language = n ? job->language : NULL;
	return 0;
}

int srv__audio_job_set_prompt(struct srv_audio_job *job, const char *s, size_t n)
{
	mem_free(job->prompt);
	job->prompt = mem_strndup(s, n);
	job->params.prompt = job->prompt;
	return job->prompt ? 0 : -ST_NOMEM;
}

void srv__audio_job_free(struct srv_audio_job *job)
{
	if (!job)
		return;
	eng_transcript_destroy(job->t);
	srv_buf_fini(&job->out);
	mem_free(job->prompt);
	mem_free(job->owned_audio);
	eng_audio_fini(&job->decoded);
	mem_free(job);
}

/* --- the job ------------------------------------------------------------- */

static void srv_audio_respond(struct srv_req *req, struct srv_audio_job *job)
{
	/* the exact audio length (usage.seconds is whole seconds), for the
	 * Batch API's figures and any client that wants it */
	char secs[32];
	snprintf(secs, sizeof(secs), "%.3f", job->duration_s);
	srv__req_add_header(req, "Inferd-Audio-Seconds", secs);
	if (job->infer_header_len) {
		char n[32];
		snprintf(n, sizeof(n), "%zu", job->infer_header_len);
		srv__req_add_header(req, "Inference-Header-Content-Length", n);
	}
	srv__req_respond(req, 200, job->content_type, job->out.data, job->out.len);
}

/* Answer an engine error (a refused submit or a failed job). The engine
 * starts the message of a parameter it refuses with the parameter's name
 * ("language: unknown code 'zz'"); where that is also the request field's
 * name, the OpenAI shape names it in "param" with code invalid_value. */
static void srv_audio_engine_fail(struct srv_req *req, int rc, const char *err)
{
	static const char *const fields[] = { "language", "prompt", "temperature", "beam_size",
					      "vad_filter" };
	const char *param = NULL;
	for (size_t i = 0; rc == -ST_INVAL && !param && i < sizeof(fields) / sizeof(fields[0]);
	     i++) {
		size_t n = strlen(fields[i]);
		if (!strncmp(err, fields[i], n) && err[n] == ':')
			param = fields[i];
	}
	srv__audio_fail_param(req, rc, param ? "invalid_value" : NULL, param, err);
}

static void srv_audio_after(struct srv_post *post)
{
	struct srv_audio_job *job = (struct srv_audio_job *)post;
	struct srv_conn *conn = job->conn;
	struct srv *srv = conn->srv;
	srv__conn_watch(conn, NULL); /* job->cancel is freed below */
	if (conn->state == SRV_CONN_STATE_HANDLING) {
		struct srv_req *req = &conn->req;
		if (job->rc)
			srv_audio_engine_fail(req, job->rc, job->err);
		else
			srv_audio_respond(req, job);
	} else {
		srv__req_log_gone(&conn->req);
	}
	srv__audio_job_free(job);
	srv__conn_work_done(conn);
	srv__jobs_end(srv);
}

/* eng_transcribe_done_fn; replica thread: render, then back to the loop. */
static void srv_audio_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	struct srv_audio_job *job = ud;
	job->t = t;
	if (rc) {
		snprintf(job->err, sizeof(job->err), "%s", err ? err : "");
	} else {
		if (job->want_sha256)
			srv__sha256(job->audio, job->audio_len, job->sha256);
		job->duration_s = t->duration_s;
		rc = job->format(job);
		if (rc == -ST_TOOBIG)
			snprintf(job->err, sizeof(job->err),
				 "the response would be larger than %u bytes", SRV_AUDIO_OUT_MAX);
		else if (rc == -ST_NOMEM)
			snprintf(job->err, sizeof(job->err), "out of memory for this transcription");
	}
	job->rc = rc;
	srv__post(job->conn->srv, &job->post, srv_audio_after);
}

/* Submit job with its scheduling options read from req; 0, or the error
 * (err set) after which the caller answers and frees the job. */
static int srv_audio_submit(struct srv_req *req, struct srv_audio_job *job,
			    const struct eng_asr_input *in, char *err, size_t errlen)
{
	int rc = srv__req_sched_opts(req, &job->opts, err, errlen);
	if (!rc)
		rc = eng_transcribe_submit(job->model, in, &job->params, &job->opts, srv_audio_done,
					   job, err, errlen);
	return rc;
}

/* libuv thread pool: decode the audio of a batched job. */
static void srv_audio_decode_work(uv_work_t *w)
{
	struct srv_audio_job *job = w->data;
	int rc = eng_audio_decode(job->audio, job->audio_len, job->has_raw ? &job->raw : NULL,
				  &job->decoded, job->decode_err, sizeof(job->decode_err));
	job->decode_rc = rc == -ST_IO ? -ST_INVAL : rc; /* gave up mid-stream: bad input */
}

/* Loop thread: submit the decoded samples, or answer the decoding error;
 * the job already counts as the connection's work and in flight. */
static void srv_audio_decode_done(uv_work_t *w, int status)
{
	struct srv_audio_job *job = w->data;
	struct srv_conn *conn = job->conn;
	char err[256];
	int rc = status ? -ST_CANCELED : job->decode_rc;
	snprintf(err, sizeof(err), "%s", status ? "shutting down" : job->decode_err);
	if (conn->state != SRV_CONN_STATE_HANDLING) {
		srv__req_log_gone(&conn->req);
		goto done;
	}
	if (!rc) {
		struct eng_asr_input in = { .samples = job->decoded.samples,
					    .n_samples = job->decoded.n_samples };
		rc = srv_audio_submit(&conn->req, job, &in, err, sizeof(err));
	}
	if (rc) {
		srv_audio_engine_fail(&conn->req, rc, err);
		goto done;
	}
	/* as srv__audio_job_queue: a client that hangs up stops the work */
	srv__conn_watch(conn, &job->cancel);
	return;
done:
	srv__audio_job_free(job);
	srv__conn_work_done(conn);
	srv__jobs_end(conn->srv);
}

void srv__audio_job_queue(struct srv_req *req, struct srv_audio_job *job)
{
	struct srv_conn *conn = req->conn;
	char err[256];
	job->params.cancel = &job->cancel; /* before the engine can read params */
	int rc = 0;
	if (job->params.batched) {
		job->decode_work.data = job;
		if (uv_queue_work(&conn->srv->loop, &job->decode_work, srv_audio_decode_work,
				  srv_audio_decode_done))
			rc = (snprintf(err, sizeof(err), "could not queue the audio decoder"),
			      -ST_NOMEM);
	} else {
		struct eng_asr_input in = { .data = job->audio, .len = job->audio_len,
					    .raw = job->has_raw ? &job->raw : NULL,
					    .per_channel = job->per_channel };
		rc = srv_audio_submit(req, job, &in, err, sizeof(err));
	}
	if (rc) {
		srv__audio_job_free(job);
		srv_audio_engine_fail(req, rc, err);
		return;
	}
	conn->n_work++;
	srv__jobs_begin(conn->srv);
	/* A client that hangs up (or a drain timeout) stops the work at its
	 * next encoder or decoder pass instead of letting it run for nobody.
	 * (A batched job starts watching once its audio is decoded.) */
	if (!job->params.batched)
		srv__conn_watch(conn, &job->cancel);
}

/* --- errors and models ------------------------------------------------- */

/* OpenAI "code" per HTTP status; Deepgram uses the reason phrase, as its
 * API does ("Bad Request"). */
static const char *srv_audio_code(int status)
{
	switch (status) {
	case 400: return "invalid_request";
	case 404: return "model_not_found";
	case 413: return "audio_too_large";
	case 415: return "unsupported_media_type";
	case 429: return "rate_limit_exceeded";
	case 499: return "cancelled";
	case 503: return "server_overloaded";
	case 504: return "timeout";
	default: return "server_error";
	}
}

void srv__audio_fail(struct srv_req *req, int rc, const char *msg)
{
	srv__audio_fail_param(req, rc, NULL, NULL, msg);
}

void srv__audio_fail_param(struct srv_req *req, int rc, const char *code, const char *param,
			   const char *msg)
{
	int status = srv__status_from_st(rc);
	if (status == 503 || status == 429)
		srv__req_add_header(req, "Retry-After", "1");
	if (req->proto == SRV_PROTO_DEEPGRAM)
		code = NULL; /* the reason phrase, as Deepgram's API */
	else if (!code)
		code = srv_audio_code(status);
	srv__req_respond_error_param(req, status, code, param, "%s",
				     msg && *msg ? msg : st_str(rc));
}

const struct eng_model *srv__audio_model(struct srv_req *req, const char *name, size_t n)
{
	const struct eng *eng = req->conn->srv->eng;
	char buf[128], msg[256];
	if (n == 0) {
		for (size_t i = 0; i < eng_model_count(eng); i++)
			if (eng_model_task(eng_model_at(eng, i)) == ENG_TASK_TRANSCRIPTION)
				return eng_model_at(eng, i);
		srv__audio_fail(req, -ST_NOTFOUND, "no transcription model is configured");
		return NULL;
	}
	const struct eng_model *m = NULL;
	if (n < sizeof(buf)) {
		memcpy(buf, name, n);
		buf[n] = '\0';
		m = memchr(buf, '\0', n) ? NULL : eng_model_find(eng, buf);
	}
	if (!m) {
		snprintf(msg, sizeof(msg), "The model '%.*s' does not exist",
			 (int)(n < 64 ? n : 64), name);
		srv__audio_fail_param(req, -ST_NOTFOUND, NULL, "model", msg);
	} else if (eng_model_task(m) != ENG_TASK_TRANSCRIPTION) {
		snprintf(msg, sizeof(msg), "model '%s' is a %s model, not a transcription model",
			 buf, eng_task_str(eng_model_task(m)));
		srv__audio_fail_param(req, -ST_INVAL, "invalid_value", "model", msg);
		m = NULL;
	}
	return m;
}

/* Whisper's language table (openai/whisper tokenizer.py LANGUAGES), code
 * then name, for verbose_json's "language". */
static const char *const srv_languages[][2] = {
	{ "en", "english" }, { "zh", "chinese" }, { "de", "german" }, { "es", "spanish" },
	{ "ru", "russian" }, { "ko", "korean" }, { "fr", "french" }, { "ja", "japanese" },
	{ "pt", "portuguese" }, { "tr", "turkish" }, { "pl", "polish" }, { "ca", "catalan" },
	{ "nl", "dutch" }, { "ar", "arabic" }, { "sv", "swedish" }, { "it", "italian" },
	{ "id", "indonesian" }, { "hi", "hindi" }, { "fi", "finnish" }, { "vi", "vietnamese" },
	{ "he", "hebrew" }, { "uk", "ukrainian" }, { "el", "greek" }, { "ms", "malay" },
	{ "cs", "czech" }, { "ro", "romanian" }, { "da", "danish" }, { "hu", "hungarian" },
	{ "ta", "tamil" }, { "no", "norwegian" }, { "th", "thai" }, { "ur", "urdu" },
	{ "hr", "croatian" }, { "bg", "bulgarian" }, { "lt", "lithuanian" }, { "la", "latin" },
	{ "mi", "maori" }, { "ml", "malayalam" }, { "cy", "welsh" }, { "sk", "slovak" },
	{ "te", "telugu" }, { "fa", "persian" }, { "lv", "latvian" }, { "bn", "bengali" },
	{ "sr", "serbian" }, { "az", "azerbaijani" }, { "sl", "slovenian" }, { "kn", "kannada" },
	{ "et", "estonian" }, { "mk", "macedonian" }, { "br", "breton" }, { "eu", "basque" },
	{ "is", "icelandic" }, { "hy", "armenian" }, { "ne", "nepali" }, { "mn", "mongolian" },
	{ "bs", "bosnian" }, { "kk", "kazakh" }, { "sq", "albanian" }, { "sw", "swahili" },
	{ "gl", "galician" }, { "mr", "marathi" }, { "pa", "punjabi" }, { "si", "sinhala" },
	{ "km", "khmer" }, { "sn", "shona" }, { "yo", "yoruba" }, { "so", "somali" },
	{ "af", "afrikaans" }, { "oc", "occitan" }, { "ka", "georgian" }, { "be", "belarusian" },
	{ "tg", "tajik" }, { "sd", "sindhi" }, { "gu", "gujarati" }, { "am", "amharic" },
	{ "yi", "yiddish" }, { "lo", "lao" }, { "uz", "uzbek" }, { "fo", "faroese" },
	{ "ht", "haitian creole" }, { "ps", "pashto" }, { "tk", "turkmen" }, { "nn", "nynorsk" },
	{ "mt", "maltese" }, { "sa", "sanskrit" }, { "lb", "luxembourgish" }, { "my", "myanmar" },
	{ "bo", "tibetan" }, { "tl", "tagalog" }, { "mg", "malagasy" }, { "as", "assamese" },
	{ "tt", "tatar" }, { "haw", "hawaiian" }, { "ln", "lingala" }, { "ha", "hausa" },
	{ "ba", "bashkir" }, { "jw", "javanese" }, { "su", "sundanese" }, { "yue", "cantonese" },
};

const char *srv__audio_language_name(const char *code)
{
	for (size_t i = 0; i < sizeof(srv_languages) / sizeof(srv_languages[0]); i++)
		if (!strcmp(srv_languages[i][0], code))
			return srv_languages[i][1];
	return code;
}

/* --- JSON output (worker thread) --------------------------------------- */

static int srv_audio_dump_cb(const char *buf, size_t size, void *data)
{
	return srv_buf_append(data, buf, size) ? -1 : 0;
}

int srv__audio_json_out(struct srv_audio_job *job, json_t *obj)
{
	if (!obj)
		return -ST_NOMEM;
	int rc = json_dump_callback(obj, srv_audio_dump_cb, &job->out,
				    JSON_COMPACT | JSON_REAL_PRECISION(9));
	json_decref(obj);
	job->content_type = "application/json";
	if (rc)
		return job->out.len + 4096 > job->out.max_len ? -ST_TOOBIG : -ST_NOMEM;
	return 0;
}

json_t *srv__audio_json_str(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	if (j || !s)
		return j;
	struct srv_buf b;
	srv_buf_init(&b, n * 3 + 1);
	int rc = 0;
	uint32_t cp;
	for (size_t i = 0; i < n && !rc;) {
		size_t k = st_utf8_decode(s + i, n - i, &cp);
		rc = k ? srv_buf_append(&b, s + i, k) : srv_buf_append(&b, "\xef\xbf\xbd", 3);
		i += k ? k : 1;
	}
	j = rc ? NULL : json_stringn(b.data ? b.data : "", b.len);
	srv_buf_fini(&b);
	return j;
}

void srv__sha256(const void *data, size_t len, unsigned char out[32])
{
	struct sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, len, data);
	sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}
