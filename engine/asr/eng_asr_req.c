/* eng_asr_req.c - one transcription request as the scheduler holds it
 * (struct eng__asr_req): made here, ended by the replica or, with an
 * error only, by the scheduler (ea_req_end); and the one-line errors of
 * queueing one. */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
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

int eng__asr_req_new(const struct eng_model *m, const struct eng_asr_input *in,
		     const struct eng_transcribe_params *p, eng_transcribe_done_fn done, void *ud,
		     struct eng__asr_req **out)
{
	struct eng__asr_req *r = mem_calloc(1, sizeof(*r));
	*out = r;
	if (!r)
		return -ST_NOMEM;
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
	return 0;
}

int eng__asr_submit_err(const struct eng_model *m, int rc, char *err, size_t errlen)
{
	return st_errf(rc, err, errlen,
		       rc == -ST_BUSY	 ? "model '%s' is busy: its queue is full, retry later"
		       : rc == -ST_NOMEM ? "out of memory (model '%s')"
					 : "model '%s' is shutting down",
		       m->name);
}

