/* srv_kserve_out.c - the pieces of KServe v2 answers that REST inference
 * (srv_kserve.c), generation (srv_kserve_gen.c), the gRPC methods
 * (srv_kserve_grpc.c) and the metadata routes share: a model's tensors and
 * platform, output tensors (JSON or binary tensor data) and the response
 * object (srv_kserve.h). Any thread: they only build buffers.
 */
#include <stdio.h>
#include <string.h>

#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/kserve/srv_kserve.h"

const struct srv_ks_tensors *srv__ks_tensors(const struct eng_model *m)
{
	static const struct srv_ks_tensors asr = { "AUDIO", { "TRANSCRIPT", "SEGMENTS" }, 2 };
	static const struct srv_ks_tensors gen = { "TEXT_INPUT", { "TEXT_OUTPUT", NULL }, 1 };
	return eng_model_task(m) == ENG_TASK_TRANSCRIPTION ? &asr : &gen;
}

void srv__ks_platform(const struct eng_model *m, char *buf, size_t n)
{
	snprintf(buf, n, "inferd_%s_%s", eng_format_str(eng_model_format(m)), eng_model_arch(m));
}

int srv__ks_output(json_t *outputs, struct srv_buf *bin, const char *name, const char *s,
			 size_t n, bool binary)
{
	json_t *o;
	if (binary) {
		unsigned char len4[4] = { (unsigned char)n, (unsigned char)(n >> 8),
					  (unsigned char)(n >> 16), (unsigned char)(n >> 24) };
		if (srv_buf_append(bin, (const char *)len4, 4) || srv_buf_append(bin, s, n))
			return -ST_TOOBIG;
		o = json_pack("{s:s,s:s,s:[i],s:{s:I}}", "name", name, "datatype", "BYTES", "shape",
			      1, "parameters", "binary_data_size", (json_int_t)(n + 4));
	} else {
		json_t *str = srv__audio_json_str(s, n);
		o = str ? json_pack("{s:s,s:s,s:[i],s:[o]}", "name", name, "datatype", "BYTES",
				    "shape", 1, "data", str)
			: NULL;
	}
	return o && !json_array_append_new(outputs, o) ? 0 : -ST_NOMEM;
}

static int srv_ks_dump_cb(const char *buf, size_t size, void *data)
{
	return srv_buf_append(data, buf, size) ? -1 : 0;
}

int srv__ks_finish(json_t *resp, struct srv_buf *bin, struct srv_buf *out, size_t *header_len)
{
	if (!resp)
		return -ST_NOMEM;
	int rc = json_dump_callback(resp, srv_ks_dump_cb, out, JSON_COMPACT);
	json_decref(resp);
	if (rc)
		return out->len + 4096 > out->max_len ? -ST_TOOBIG : -ST_NOMEM;
	*header_len = bin->len ? out->len : 0;
	if (bin->len && srv_buf_append(out, bin->data, bin->len))
		return -ST_TOOBIG;
	return 0;
}

json_t *srv__ks_response(const char *model, const char *id, json_t *outputs)
{
	json_t *o = json_pack("{s:s,s:s,s:o}", "model_name", model, "model_version", "1",
			      "outputs", outputs);
	if (o && id && *id && json_object_set_new(o, "id", json_string(id))) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

json_t *srv__ks_segments(const struct eng_transcript *t)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < t->n_segments; i++) {
		const struct eng_segment *s = &t->segments[i];
		json_t *text = srv__audio_json_str(s->text, strlen(s->text));
		json_t *seg = json_pack("{s:I,s:f,s:f,s:o}", "id", (json_int_t)i, "start",
					s->start_s, "end", s->end_s, "text", text);
		json_t *words = seg && s->words ? json_array() : NULL;
		for (size_t k = 0; words && k < s->n_words; k++) {
			const struct eng_word *w = &s->words[k];
			if (json_array_append_new(words, json_pack("{s:o,s:f,s:f,s:f}", "word",
				srv__audio_json_str(w->word, strlen(w->word)), "start", w->start_s,
				"end", w->end_s, "probability", (double)w->probability))) {
				json_decref(words);
				words = NULL;
			}
		}
		if (!seg || (s->words && (!words || json_object_set_new(seg, "words", words))) ||
		    json_array_append_new(a, seg)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}
