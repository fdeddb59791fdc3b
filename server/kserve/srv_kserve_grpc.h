/* srv_kserve_grpc.h - what the gRPC method handlers (srv_kserve_grpc.c) and
 * ModelStreamInfer (srv_kserve_grpc_stream.c) share: the job of one ModelInfer
 * request and its helpers. Internal to server/; loop thread unless said.
 */
#ifndef SRV_KSERVE_GRPC_H
#define SRV_KSERVE_GRPC_H

#include "engine/eng.h"
#include "kserve_v2.pb-c.h"
#include "server/grpc/srv_grpc.h"

/* One ModelInfer request on its way through the engine. */
struct srv_grpc_job {
	struct srv_post post;		/* back to the loop thread */
	struct srv_grpc_conn *conn;	/* held through conn->n_work */
	int32_t stream_id;
	_Atomic int cancel;
	const struct eng_model *model;
	Inference__ModelInferRequest *req; /* new; audio and prompt bytes point into it */
	bool want[2];			/* outputs asked for: [0] TRANSCRIPT / TEXT_OUTPUT, [1] SEGMENTS */
	struct eng_transcribe_params tparams;
	struct eng_gen_params gparams;
	struct eng_audio_raw raw;
	unsigned char *owned_audio;	/* new: FP32 contents as bytes */
	/* results, replica thread */
	int rc;
	char err[512];
	struct eng_transcript *t;
	struct eng_gen_result *res;
};

/* srv__grpc_send - answer s with the packed message m (status OK). */
void srv__grpc_send(struct srv_grpc_stream *s, const ProtobufCMessage *m);
/* srv__grpc_srv - the server s belongs to. */
struct srv *srv__grpc_srv(struct srv_grpc_stream *s);
/* srv__grpc_job_free - free job and what it owns (the request included);
 * NULL is a no-op. Any thread once the engine is done with it. */
void srv__grpc_job_free(struct srv_grpc_job *job);
/* srv__grpc_raw_bytes - raw->data (new, mem.h) = one BYTES element: a
 * 4-byte little-endian length, then s [n]. 0 or -ST_NOMEM. */
int srv__grpc_raw_bytes(ProtobufCBinaryData *raw, const char *s, size_t n);
/* srv__grpc_infer_submit_cb - validate job->req for job->model and submit
 * it: asr_done / gen_done get ud when it ends (replica thread), on_text
 * (or NULL) gets generated text as it is released. 0, or -ST_* with err. */
int srv__grpc_infer_submit_cb(struct srv_grpc_stream *s, struct srv_grpc_job *job,
			      eng_transcribe_done_fn asr_done, eng_gen_done_fn gen_done,
			      int (*on_text)(void *, const char *, size_t,
					     const struct eng_gen_token *, size_t),
			      void *ud, char *err, size_t errlen);

/* The methods behind the gRPC transport (srv.c puts them in struct
 * srv_grpc_cbs). Loop thread. */
/* srv__ks_grpc_dispatch - run the unary method of s (s->path) on its
 * request message msg [n] (unframed, decompressed); answers now or later
 * (jobs). */
void srv__ks_grpc_dispatch(struct srv_grpc_stream *s, const uint8_t *msg, size_t n);
/* srv__ks_grpc_stream_message - ModelStreamInfer: run one request message
 * (srv_kserve_grpc_stream.c). */
void srv__ks_grpc_stream_message(struct srv_grpc_stream *s, const uint8_t *msg, size_t n);
/* srv__ks_grpc_stream_gone - s is closing: cancel its jobs (which then find
 * no stream and drop their answers). */
void srv__ks_grpc_stream_gone(struct srv_grpc_stream *s);

#endif /* SRV_KSERVE_GRPC_H */
