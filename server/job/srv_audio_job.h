/* srv_audio_job.h - the transcription job the audio routes share (OpenAI
 * /v1/audio/transcriptions, Deepgram /v1/listen, KServe v2 infer).
 * Internal to server/.
 *
 * Life of a job: a handler validates the request on the loop thread, picks
 * the model, fills a job (srv__audio_job_new) and queues it
 * (srv__audio_job_queue) on the model's scheduler (eng_transcribe_submit:
 * 429 with Retry-After when its queue is full). A replica decodes the
 * audio and transcribes it; when it ends, on the replica thread, the job
 * calls the route's format function, which renders the response body into
 * job->out (JSON, text, SRT, VTT: cheap, but kept off the loop thread with
 * the rest), and posts itself to the loop thread (srv__post). There the
 * response, or the error in the route's protocol shape (504 past the
 * request's deadline), is sent unless the connection has closed
 * meanwhile. The job holds the connection (conn->n_work) so the
 * connection and its request body, which the job reads, outlive it.
 */
#ifndef SRV_AUDIO_JOB_H
#define SRV_AUDIO_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include <uv.h>

#include "engine/eng.h"
#include "server/srv_buf.h"
#include "server/srv_int.h"

#define SRV_AUDIO_OUT_MAX (64u << 20) /* ceiling on a rendered response body */

struct srv_audio_job;

/* Render the transcript job->t into job->out and set job->content_type.
 * Runs on the replica thread. Returns 0, -ST_NOMEM or -ST_TOOBIG. */
typedef int (*srv_audio_format_fn)(struct srv_audio_job *job);

/* One transcription. Routes embed it first in their own job struct (so a
 * pointer to theirs is a pointer to this) for protocol options. */
struct srv_audio_job {
	struct srv_post post;           /* back to the loop thread when done */
	struct srv_conn *conn;          /* held through conn->n_work */
	const struct eng_model *model;  /* borrowed (lives as long as the engine) */
	const char *audio;              /* bytes inside conn->req.body, borrowed */
	size_t audio_len;
	bool has_raw;                   /* headerless audio described by raw */
	bool per_channel;               /* each channel transcribed on its own
					 * (eng_asr_input per_channel; not batched) */
	struct eng_audio_raw raw;
	struct eng_transcribe_params params; /* language, prompt and cancel point below */
	struct eng_req_opts opts;       /* priority, deadline (request headers) */
	_Atomic int cancel;            /* set on the loop when the client goes away */
	char language[16];              /* ISO 639-1 code, or "" */
	char *prompt;                   /* new (mem.h) or NULL */
	bool want_sha256;               /* hash the audio bytes (Deepgram metadata) */
	unsigned char sha256[32];
	char request_id[SRV_REQUEST_ID_MAX + 1]; /* copied for the worker's formatter */
	srv_audio_format_fn format;
	void *owned_audio;              /* new (mem.h) or NULL: bytes `audio` points into
	                                 * when the route made them (KServe JSON samples) */
	/* batched long-form (params.batched): the audio is decoded on libuv's
	 * thread pool first, since the engine cuts decoded samples into chunks */
	uv_work_t decode_work;
	struct eng_audio decoded;       /* the samples submitted; freed with the job */
	int decode_rc;
	char decode_err[256];
	/* results, written by the worker */
	int rc;                         /* 0 or -ST_* */
	char err[512];                  /* message when rc != 0 */
	struct eng_transcript *t;       /* new on success */
	double duration_s;              /* source seconds */
	struct srv_buf out;             /* rendered body, SRV_AUDIO_OUT_MAX */
	const char *content_type;       /* static string set by format */
	size_t infer_header_len;        /* > 0: the JSON part of out (KServe binary tensor
	                                 * data), sent as Inference-Header-Content-Length */
};

/* srv__audio_job_new - a zeroed job of size bytes (>= sizeof(struct
 * srv_audio_job); a route's struct embedding the job first) for req, with
 * default transcription parameters and the request id copied. Loop thread.
 * Returns NULL when out of memory (the caller answers 503). */
struct srv_audio_job *srv__audio_job_new(struct srv_req *req, size_t size);

/* srv__audio_job_set_language / _prompt - copy [n] bytes (not
 * NUL-terminated) into the job and point params at them. Return 0,
 * -ST_INVAL for a language longer than 15 bytes, -ST_NOMEM. */
int srv__audio_job_set_language(struct srv_audio_job *job, const char *s, size_t n);
int srv__audio_job_set_prompt(struct srv_audio_job *job, const char *s, size_t n);

/* srv__audio_job_queue - hand job (stolen) to the model's scheduler. On
 * failure the job is freed and req has been answered (400 bad scheduling
 * headers, 429 queue full, 503 shutting down or out of memory). With
 * params.batched the audio is first decoded on libuv's thread pool (the
 * engine's batched long-form takes samples); its decoding errors are
 * answered as the replica's would be (400, 413, 415). Loop thread. */
void srv__audio_job_queue(struct srv_req *req, struct srv_audio_job *job);

/* srv__audio_job_free - free a job that was never queued; NULL is a no-op. */
void srv__audio_job_free(struct srv_audio_job *job);

/* srv__audio_fail - answer req with the HTTP status srv__status_from_st
 * gives for rc (-ST_INVAL 400, -ST_NOTFOUND 404, -ST_TOOBIG 413,
 * -ST_UNSUPPORTED 415, -ST_NOMEM 503 with Retry-After), in the route's
 * protocol shape, with msg. The one place audio errors become responses. */
void srv__audio_fail(struct srv_req *req, int rc, const char *msg);

/* srv__audio_fail_param - srv__audio_fail naming the request field at
 * fault, param (borrowed; NULL: none), in the OpenAI shape's "param", with
 * code (NULL: the status's own, as srv__audio_fail; "invalid_value" for a
 * value the field cannot take). The Deepgram shape keeps its reason phrase
 * and, as KServe's, has no param. Loop thread. */
void srv__audio_fail_param(struct srv_req *req, int rc, const char *code, const char *param,
			   const char *msg);

/* srv__audio_model - the transcription model named name [n] (n == 0: the
 * first transcription model). Answers req (404 unknown, 400 not a
 * transcription model) and returns NULL when there is none. */
const struct eng_model *srv__audio_model(struct srv_req *req, const char *name, size_t n);

/* srv__audio_language_name - Whisper's English name of an ISO 639-1 code
 * ("en" -> "english"), as OpenAI's verbose_json reports it; the code
 * itself when unknown. */
const char *srv__audio_language_name(const char *code);

/* srv__audio_json_out - dump obj (stolen; NULL means out of memory) as
 * compact JSON into job->out and set the content type. Worker thread.
 * Returns 0, -ST_NOMEM or -ST_TOOBIG. */
int srv__audio_json_out(struct srv_audio_job *job, json_t *obj);

/* srv__audio_json_str - a new JSON string of the UTF-8 text s; bytes that
 * are not valid UTF-8 become U+FFFD instead of failing (a byte-level
 * tokenizer can split a character). NULL when out of memory. */
json_t *srv__audio_json_str(const char *s, size_t n);

/* srv__sha256 - FIPS 180-4 SHA-256 of data [len] into out (nettle's
 * sha256). Any thread. */
void srv__sha256(const void *data, size_t len, unsigned char out[32]);

#endif /* SRV_AUDIO_JOB_H */
