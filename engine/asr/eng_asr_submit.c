/* eng_asr_submit.c - transcription requests: submission to the model's
 * scheduler (eng_transcribe_submit) and the waiting form (eng_transcribe).
 * The replicas run them in eng_asr_replica.c. */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev_pool.h"
#include "engine/asr/eng_asr_int.h"
#include "engine/eng_int.h"

static const char *ea_default_err(int rc)
{
	return rc == -ST_CANCELED ? "the request was cancelled"
	       : rc == -ST_TIMEDOUT ? "the request's deadline passed"
	       : rc == -ST_NOMEM ? "out of memory" : st_str(rc);
}

/* struct eng__req's end for transcriptions (no result: errors only). */
static void ea_req_end(struct eng__req *base, int rc, const char *err)
{
	struct eng__asr_req *r = (struct eng__asr_req *)base;
	eng_transcribe_done_fn done = r->done;
	void *ud = r->ud;
	mem_free(r);
	done(ud, rc, NULL, err ? err : ea_default_err(rc));
}

int eng_transcribe_submit(const struct eng_model *m, const struct eng_asr_input *in,
			  const struct eng_transcribe_params *p, const struct eng_req_opts *o,
			  eng_transcribe_done_fn done, void *ud, char *err, size_t errlen)
{
	int rc = eng__transcribe_check(m, p, err, errlen);
	if (rc)
		return rc;
	if (!in || (!in->data && !in->samples))
		return st_errf(-ST_INVAL, err, errlen, "no audio");
	if (!m->sched)
		return st_errf(-ST_CLOSED, err, errlen, "model '%s' has no replica running",
			       m->name);
	struct eng__asr_req *r = mem_calloc(1, sizeof(*r));
	if (!r)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	r->base.cancel = p->cancel;
	r->base.end = ea_req_end;
	r->m = m;
	r->in = *in;
	if (in->raw) {
		r->raw = *in->raw;
		r->in.raw = &r->raw;
	}
	r->p = *p;
	r->done = done;
	r->ud = ud;
	struct eng__req *base = &r->base;
	rc = eng__sched_submit(m->sched, &base, 1, o);
	if (rc) {
		mem_free(r);
		return st_errf(rc, err, errlen,
			       rc == -ST_BUSY ? "model '%s' is busy: its queue is full, retry later"
					      : "model '%s' is shutting down",
			       m->name);
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
