/* eng_asr_submit.c - transcription requests: submission to the model's
 * scheduler (eng_transcribe_submit; batched long-form goes to
 * eng_asr_chunked.c) and the waiting form (eng_transcribe). The replicas
 * run them in eng_asr_replica.c. */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"

int eng_transcribe_submit(const struct eng_model *m, const struct eng_asr_input *in,
			  const struct eng_transcribe_params *p, const struct eng_req_opts *o,
			  eng_transcribe_done_fn done, void *ud, char *err, size_t errlen)
{
	int rc = eng__transcribe_check(m, p, err, errlen);
	if (!rc)
		rc = eng__asr_vad_check(m, p, err, errlen);
	if (rc)
		return rc;
	if (!in || (!in->data && !in->samples))
		return st_errf(-ST_INVAL, err, errlen, "no audio");
	if (!m->sched)
		return st_errf(-ST_CLOSED, err, errlen, "model '%s' has no replica running",
			       m->name);
	if (p->batched && in->data)
		return st_errf(-ST_INVAL, err, errlen,
			       "batched long-form transcription takes decoded samples");
	if (p->batched && in->n_samples > ENG_ASR_CHUNK_MAX_SAMPLES)
		return eng__asr_submit_chunked(m, in, p, o, done, ud, err, errlen);
	struct eng__asr_req *r;
	if (eng__asr_req_new(m, in, p, done, ud, &r))
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	struct eng__req *base = &r->base;
	rc = eng__sched_submit(m->sched, &base, 1, o);
	if (rc) {
		mem_free(r);
		return eng__asr_submit_err(m, rc, err, errlen);
	}
	return 0;
}

static void ea_wait_done(void *ud, int rc, struct eng_transcript *t, const char *err)
{
	eng__waiter_done(ud, rc, t, err);
}

int eng_transcribe(const struct eng_model *m, const float *samples, size_t n_samples,
		   const struct eng_transcribe_params *p, struct eng_transcript **out, char *err,
		   size_t errlen)
{
	struct eng__waiter w;
	struct eng_asr_input in = { .samples = samples, .n_samples = n_samples };
	void *t = NULL;
	*out = NULL;
	eng__waiter_init(&w, err, errlen);
	int rc = eng_transcribe_submit(m, &in, p, NULL, ea_wait_done, &w, err, errlen);
	if (rc)
		eng__waiter_fini(&w);
	else
		rc = eng__waiter_wait(&w, &t);
	*out = t;
	return rc;
}
