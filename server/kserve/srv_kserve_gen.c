/* srv_kserve_gen.c - the answers of generation jobs from the KServe v2
 * infer route (TEXT_OUTPUT, JSON or binary tensor data) and Triton's
 * generate extension ({"model_name", "model_version", "text_output"};
 * generate_stream: one server-sent event of that shape per piece of text,
 * no closing event, {"error": "..."} on failure). Worker threads.
 */
#include <stdlib.h>
#include <string.h>

#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/kserve/srv_kserve.h"
#include "server/openai/srv_openai_gen.h"

int srv__ks_gen_render(struct srv_gen_job *job)
{
	const struct eng_gen_result *r = job->res[0];
	const char *model = eng_model_name(job->model);
	if (job->kind == SRV_GEN_KIND_TRITON_GENERATE) {
		json_t *text = srv__audio_json_str(r->text, r->text_len);
		json_t *o = text ? json_pack("{s:s,s:s,s:o}", "model_name", model, "model_version",
					     "1", "text_output", text)
				 : NULL;
		size_t none;
		struct srv_buf empty;
		srv_buf_init(&empty, 0);
		return srv__ks_finish(o, &empty, &job->out, &none);
	}
	json_t *outputs = json_array();
	struct srv_buf bin;
	srv_buf_init(&bin, SRV_GEN_OUT_MAX);
	int rc = outputs ? srv__ks_output(outputs, &bin, "TEXT_OUTPUT", r->text, r->text_len,
					  job->ks_binary)
			 : -ST_NOMEM;
	if (!rc)
		rc = srv__ks_finish(srv__ks_response(model, job->ks_id, outputs), &bin, &job->out,
				    &job->ks_header_len);
	else
		json_decref(outputs);
	srv_buf_fini(&bin);
	return rc;
}

int srv__ks_gen_on_text(struct srv_gen_choice *c, const char *text, size_t len)
{
	struct srv_gen_job *job = c->job;
	json_t *str = srv__audio_json_str(text, len);
	return srv__gen_push_json(job, str ? json_pack("{s:s,s:s,s:o}", "model_name",
						eng_model_name(job->model), "model_version", "1",
						"text_output", str)
				    : NULL);
}

int srv__ks_gen_error_event(struct srv_gen_job *job, const char *msg)
{
	return srv__gen_push_json(job, json_pack("{s:s}", "error", msg));
}
