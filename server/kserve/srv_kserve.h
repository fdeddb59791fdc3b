/* srv_kserve.h - KServe v2 pieces shared by the infer handlers
 * (srv_kserve.c), generation (srv_kserve_gen.c) and the gRPC methods
 * (srv_kserve_grpc.c); the answers' pieces live in srv_kserve_out.c.
 * Internal to server/. Any thread (they only build buffers) unless said.
 */
#ifndef SRV_KSERVE_H
#define SRV_KSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>

#include "engine/eng.h"
#include "server/srv_buf.h"
#include "server/srv_int.h"

/* The KServe v2 tensors of a model (docs/kserve.md): one input, one or two
 * outputs, every one BYTES [1]. AUDIO in, TRANSCRIPT and SEGMENTS out for
 * transcription; TEXT_INPUT in, TEXT_OUTPUT out for generation (the names
 * Triton's LLM back ends use). */
struct srv_ks_tensors {
	const char *input;
	const char *outputs[2];
	int n_outputs;
};
const struct srv_ks_tensors *srv__ks_tensors(const struct eng_model *m);

/* srv__ks_platform - the model's platform, "inferd_<format>_<arch>", into
 * buf [n]. */
void srv__ks_platform(const struct eng_model *m, char *buf, size_t n);

/* srv__ks_output - append the output tensor name, BYTES [1] holding s [n],
 * to outputs: in JSON, or (binary) as parameters.binary_data_size with
 * its 4-byte little-endian length and bytes appended to bin. Returns 0,
 * -ST_NOMEM or -ST_TOOBIG. */
int srv__ks_output(json_t *outputs, struct srv_buf *bin, const char *name, const char *s,
		   size_t n, bool binary);

/* srv__ks_segments - the SEGMENTS tensor's JSON array of t's segments,
 * [{"id", "start", "end", "text"[, "words": [{"word", "start", "end",
 * "probability"}]]}] (words when the transcription had word_timestamps);
 * new, NULL when out of memory. REST and gRPC answer with the same. */
json_t *srv__ks_segments(const struct eng_transcript *t);

/* srv__ks_response - {"model_name", "model_version": "1", "id" (when id is
 * not empty), "outputs"} around outputs (stolen); new, NULL when out of
 * memory. */
json_t *srv__ks_response(const char *model, const char *id, json_t *outputs);

/* srv__ks_finish - out = the JSON of resp (stolen; NULL: out of memory),
 * then bin; *header_len = the JSON's length when bin has binary tensor
 * data (the Inference-Header-Content-Length to send), else 0. Returns 0,
 * -ST_NOMEM or -ST_TOOBIG. */
int srv__ks_finish(json_t *resp, struct srv_buf *bin, struct srv_buf *out, size_t *header_len);

/* srv__ks_gen_submit - answer req by generating from m (a generation
 * model) the completion of prompt [n] (valid UTF-8) with the request
 * parameters params (borrowed; may be NULL): max_tokens, temperature,
 * top_p, top_k, min_p, seed, stop, repetition_penalty, presence_penalty,
 * frequency_penalty, with /v1/completions' ranges and messages (a bad one
 * is a 400 {"error"}). triton: Triton's generate shape (stream: its
 * generate_stream events), else the infer route's TEXT_OUTPUT (binary:
 * as binary tensor data; id echoed when not NULL). Loop thread. */
void srv__ks_gen_submit(struct srv_req *req, const struct eng_model *m, const char *prompt,
			size_t n, json_t *params, bool stream, bool triton, bool binary,
			const char *id);

/* Route handlers (srv_kserve.c): POST /v2/models/{name}/infer, /generate
 * and /generate_stream. Loop thread. */
void srv__h_kserve_infer(struct srv_req *req);
void srv__h_kserve_generate(struct srv_req *req);
void srv__h_kserve_generate_stream(struct srv_req *req);

#endif /* SRV_KSERVE_H */
