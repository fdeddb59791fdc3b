/* ib_rec.c - the run's clock and its per-request records: ib_now, the
 * records and inter-token gaps grown in place, and the allocator that
 * gives up on out of memory. A leaf: the connections (ib_conn.c), the
 * load loop (ib_load.c) and the summaries (ib_stats.c) all read the clock
 * and the records, and none of them is called from here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_int.h"

double ib_now(const struct ib_run *run)
{
	return (double)(uv_hrtime() - run->t0_ns) * 1e-9;
}

void *ib_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (!q) {
		fprintf(stderr, "inferd-bench: out of memory\n");
		exit(2);
	}
	return q;
}

size_t ib_rec_new(struct ib_run *run)
{
	if (run->n_recs == run->cap_recs) {
		run->cap_recs = run->cap_recs ? run->cap_recs * 2 : 4096;
		run->recs = ib_xrealloc(run->recs, run->cap_recs * sizeof(*run->recs));
	}
	struct ib_rec *r = &run->recs[run->n_recs];
	memset(r, 0, sizeof(*r));
	r->stage = run->stage;
	r->ttft = -1.0;
	r->itl0 = run->n_itl;
	return run->n_recs++;
}

/* Streams side by side interleave their events, so a request's gaps are
 * kept by its connection and copied here in one block when it ends. */
void ib_rec_set_itl(struct ib_run *run, size_t rec, const float *gaps, size_t n)
{
	struct ib_rec *r = &run->recs[rec];
	if (run->n_itl + n > run->cap_itl) {
		size_t cap = run->cap_itl ? run->cap_itl : 65536;
		while (cap < run->n_itl + n)
			cap *= 2;
		run->itl = ib_xrealloc(run->itl, cap * sizeof(*run->itl));
		run->cap_itl = cap;
	}
	memcpy(run->itl + run->n_itl, gaps, n * sizeof(*gaps));
	r->itl0 = run->n_itl;
	r->n_itl = n;
	run->n_itl += n;
}

void ib_rec_free_all(struct ib_run *run)
{
	for (size_t i = 0; i < run->n_recs; i++) {
		struct ib_live_rec *l = run->recs[i].live;
		if (!l)
			continue;
		free(l->final_lat);
		free(l->interim_lat);
		free(l->transcript);
		free(l);
	}
	free(run->recs);
	free(run->itl);
	run->recs = NULL;
	run->itl = NULL;
	run->n_recs = run->cap_recs = run->n_itl = run->cap_itl = 0;
}
