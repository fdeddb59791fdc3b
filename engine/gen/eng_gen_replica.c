/* eng_gen_replica.c - a generation replica's loop: continuous batching.
 *
 * Every step the loop (1) admits waiting requests while it runs fewer than
 * max_num_seqs sequences, (2) ends the ones whose client left or whose
 * deadline passed, (3) builds one batch - a token for every sequence that
 * is decoding, then prompt chunks of the prefilling ones in admission
 * order while max_batch_tokens allows (chunked prefill mixed with decode
 * steps, as vLLM's scheduler does) - (4) runs one forward pass over it
 * (eng_llm_forward_batch: one pass over each weight matrix for all rows)
 * and (5) samples every sequence whose logits are due; finished ones
 * leave, their slots go to the next waiting requests at the next step.
 * Sequences therefore join and leave at every step.
 *
 * With nothing running the loop sleeps in eng__sched_take until work or
 * shutdown arrives. On shutdown running sequences end with -ST_CLOSED.
 *
 * The batch class (ENG_PRIORITY_BATCH, the Batch API's items) runs on
 * what interactive requests leave: up to max_num_seqs of each class run,
 * batch ones admitted only while fewer than max_num_seqs run in all, and
 * while an interactive sequence runs the batch ones are parked - they
 * keep their KV caches and slots but join no batch - so an interactive
 * request waits at most for the step in progress when it came, and its
 * steps are its own.
 *
 * Prefix caching: a sequence whose prompt begins with 32 or more tokens
 * another has in its KV cache copies their keys and values instead of
 * computing them - from a running sequence (the n choices of a request,
 * requests that begin alike), or from a finished one's prompt that the
 * replica kept (prefix_cache_mb of them, least recently used out first:
 * vLLM's automatic prefix caching, llama-server's cache_prompt), so a
 * chat's next turn prefills only what is new.
 */
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev.h"
#include "engine/gen/eng_gen_int.h"
#include "engine/eng_int.h"
#include "engine/sched/eng_sched.h"
#include "engine/models/eng_llm.h"

struct egl {
	struct eng__replica *rp;
	struct eng_sched *s;
	struct dev_queue *q; /* the replica's */
	struct eng_llm_scratch *scratch;
	struct eng__gen_req **run;  /* [2 max_num_seqs] running (max_num_seqs of each class at
				     * most), in admission order */
	size_t n_run;
	struct eng__req **taken;    /* [2 max_num_seqs] */
	struct eng_llm_seq *seqs;   /* [2 max_num_seqs] this step's batch */
	struct eng__gen_req **in;   /* [2 max_num_seqs] who is in it */
	size_t *due;                /* [2 max_num_seqs] batch slots whose logits are due */
	int32_t *ids;               /* [2 max_num_seqs] their picks */
	bool *wait;                 /* [2 max_num_seqs] running ones waiting for another's prompt */
	struct egl_kept *kept;      /* [n_kept] finished sequences' prompts (prefix cache) */
	size_t n_kept, cap_kept;
	size_t kept_bytes;          /* their KV caches' bytes, <= s->prefix_cache_bytes */
	uint64_t clock;             /* ticks at each keep and copy: kept[].used */
};

/* A finished sequence's prompt positions: tokens and their KV cache. */
struct egl_kept {
	int32_t *toks;
	size_t n;
	struct eng_llm_kv *kv;
	size_t bytes;
	uint64_t used; /* the clock when kept or last copied from */
};

/* How many tokens a [na] and b [nb] begin with alike. */
static size_t egl_common(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	size_t n = 0, max = na < nb ? na : nb;
	while (n < max && a[n] == b[n])
		n++;
	return n;
}

/* Drop kept entry i. */
static void egl_drop(struct egl *l, size_t i)
{
	struct egl_kept *e = &l->kept[i];
	l->kept_bytes -= e->bytes;
	eng_llm_kv_destroy(e->kv);
	mem_free(e->toks);
	l->kept[i] = l->kept[--l->n_kept];
}

/* Keep g's prompt positions for later sequences (see the top), those of
 * its first ones that fit the whole budget (a long prompt's system prompt
 * and first turns are what a later one shares): not when an entry holds
 * them all already (it is marked used); entries the new one holds all of
 * go, then the least recently used while the budget is exceeded. Out of
 * memory keeps nothing. */
static void egl_keep(struct egl *l, struct eng__gseq *g)
{
	const int32_t *toks;
	size_t n = eng__gseq_prompt_fed(g, &toks), budget = l->s->prefix_cache_bytes;
	size_t fit = budget / eng_llm_kv_position_bytes(eng__gseq_kv(g));
	n = n < fit ? n : fit;
	if (n < ENG_GEN_SHARE_MIN)
		return;
	l->clock++;
	for (size_t i = 0; i < l->n_kept; i++)
		if (egl_common(l->kept[i].toks, l->kept[i].n, toks, n) == n) {
			l->kept[i].used = l->clock;
			return;
		}
	struct egl_kept e = { .n = n, .used = l->clock };
	if (l->n_kept == l->cap_kept) {
		size_t cap = l->cap_kept ? 2 * l->cap_kept : 8;
		struct egl_kept *grown = mem_realloc(l->kept, cap * sizeof(*grown));
		if (!grown)
			return;
		l->kept = grown;
		l->cap_kept = cap;
	}
	if (eng__gseq_keep(g, n, &e.kv, &e.toks))
		return;
	e.bytes = eng_llm_kv_bytes(e.kv);
	for (size_t i = l->n_kept; i-- > 0;)
		if (egl_common(l->kept[i].toks, l->kept[i].n, e.toks, e.n) == l->kept[i].n)
			egl_drop(l, i);
	while (l->kept_bytes + e.bytes > budget) {
		size_t lru = 0;
		for (size_t i = 1; i < l->n_kept; i++)
			lru = l->kept[i].used < l->kept[lru].used ? i : lru;
		egl_drop(l, lru);
	}
	l->kept[l->n_kept++] = e;
	l->kept_bytes += e.bytes;
}

/* End running request i (moved out of the running list). */
static void egl_end(struct egl *l, size_t i, int rc, const char *err)
{
	struct eng__gen_req *r = l->run[i];
	memmove(l->run + i, l->run + i + 1, (l->n_run - i - 1) * sizeof(*l->run));
	l->n_run--;
	if (r->seq && rc != -ST_NOMEM && rc != -ST_CLOSED)
		egl_keep(l, r->seq);
	struct eng_sched *s = l->s;
	size_t gen = r->seq ? eng__gseq_generated(r->seq) : 0;
	size_t prompt = r->seq ? eng__gseq_prompt_tokens(r->seq) : 0;
	double now = st_now_ms();
	struct eng_recent_req e = { .replica = l->rp->index, .rc = rc,
				    .priority = (int)r->base.priority,
				    .submitted_ms = r->base.t_submit, .admitted_ms = r->t_admit,
				    .ended_ms = now, .prompt_tokens = prompt,
				    .generated_tokens = gen };
	pthread_mutex_lock(&s->mu);
	s->st.generated_tokens += gen;
	s->st.prompt_tokens += prompt;
	s->st.prompt_tokens_shared += r->seq ? eng__gseq_shared_tokens(r->seq) : 0;
	eng_stats_ended(&s->st, &l->rp->st, &e);
	pthread_mutex_unlock(&s->mu);
	eng__sched_count(s, rc, now - r->base.t_submit);
	r->base.end(&r->base, rc, err);
	eng__sched_finish(l->rp);
}

/* Running sequences not of the batch class. */
static size_t egl_interactive(const struct egl *l)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n_run; i++)
		n += l->run[i]->base.priority != ENG_PRIORITY_BATCH;
	return n;
}

/* Admit up to the free slots of each class (see the top); a prompt that
 * cannot start ends at once. */
static bool egl_admit(struct egl *l)
{
	bool closing;
	size_t seqs = (size_t)l->s->max_num_seqs, inter = egl_interactive(l);
	size_t room = seqs - inter, room_batch = l->n_run < seqs ? seqs - l->n_run : 0;
	size_t k = room || room_batch ? eng__sched_take(l->rp, l->taken, room, room_batch,
							l->n_run == 0, 0, &closing)
				      : 0;
	if (!room && !room_batch) {
		pthread_mutex_lock(&l->s->mu);
		closing = l->s->closing;
		pthread_mutex_unlock(&l->s->mu);
	}
	for (size_t i = 0; i < k; i++) {
		struct eng__gen_req *r = (struct eng__gen_req *)l->taken[i];
		char err[512] = "";
		r->t_admit = st_now_ms();
		l->run[l->n_run++] = r;
		int rc = eng__gseq_start(r->m, l->rp->dev, &r->p, &r->seq, err, sizeof(err));
		if (rc)
			egl_end(l, l->n_run - 1, rc, err);
	}
	return closing;
}

/* Whether running request r sits out this step (a batch one while an
 * interactive one runs: see the top). */
static bool egl_parked(const struct egl *l, const struct eng__gen_req *r)
{
	return r->base.priority == ENG_PRIORITY_BATCH && egl_interactive(l) > 0;
}

/* Before running request i's first prompt chunk: its prompt's longest
 * prefix another running sequence or a kept prompt has in its KV cache is
 * copied from there (eng__gseq_share: the n choices of one request, or
 * requests that begin alike, prefill it once); true when it should wait
 * instead (may_wait), for an earlier sequence, not parked, that is
 * computing a longer prefix than any there is. */
static bool egl_share(struct egl *l, size_t i, bool may_wait)
{
	struct eng__gseq *s = l->run[i]->seq;
	const struct eng__gseq *from = NULL;
	struct egl_kept *kept = NULL;
	size_t best = 0, pending = 0;
	for (size_t j = 0; j < l->n_run; j++) {
		bool ready;
		size_t m = eng__gseq_prefix(s, l->run[j]->seq, &ready);
		if (m && ready && m > best) {
			best = m;
			from = l->run[j]->seq;
		} else if (m && !ready && j < i && may_wait && !egl_parked(l, l->run[j])) {
			pending = m > pending ? m : pending;
		}
	}
	for (size_t k = 0; k < l->n_kept; k++) {
		size_t m = eng__gseq_prefix_of(s, l->kept[k].toks, l->kept[k].n);
		if (m > best) {
			best = m;
			from = NULL;
			kept = &l->kept[k];
		}
	}
	if (pending > best)
		return true;
	/* on failure it computes them itself */
	if (from)
		(void)eng__gseq_share(s, from, best);
	if (kept && !eng__gseq_share_kv(s, kept->kv, best))
		kept->used = ++l->clock;
	return false;
}

/* Build this step's batch: a token for every decoding sequence first,
 * then prompt chunks. The budget left for prompts is shared among the
 * prefilling sequences (at least 32 tokens each, in admission order), so
 * a short prompt that arrives behind a long one is not held back for the
 * whole of the long one's prefill. */
static size_t egl_batch(struct egl *l)
{
	size_t budget = (size_t)l->s->max_batch_tokens, n = 0, n_prefill = 0;
	bool park = egl_interactive(l) > 0; /* the batch class waits */
	for (size_t i = 0; i < l->n_run; i++) {
		struct eng__gen_req *r = l->run[i];
		bool prefill = eng__gseq_generated(r->seq) == 0 &&
			       !(park && r->base.priority == ENG_PRIORITY_BATCH);
		l->wait[i] = prefill && egl_share(l, i, true);
		n_prefill += prefill && !l->wait[i];
	}
	for (int pass = 0; pass < 2; pass++) {
		size_t share = n_prefill ? budget / n_prefill : budget;
		share = share < 32 ? 32 : share;
		for (size_t i = 0; i < l->n_run && budget; i++) {
			struct eng__gen_req *r = l->run[i];
			bool decoding = eng__gseq_generated(r->seq) > 0;
			if (decoding != (pass == 0) ||
			    (park && r->base.priority == ENG_PRIORITY_BATCH))
				continue;
			if (l->wait[i])
				continue;
			size_t want = decoding ? budget : (share < budget ? share : budget);
			struct eng_llm_seq *q = &l->seqs[n];
			q->n = eng__gseq_next(r->seq, want, &q->tokens, &q->logits, &q->greedy);
			if (!q->n)
				continue;
			q->kv = eng__gseq_kv(r->seq);
			q->all_logits = false;
			q->prompt = !decoding;
			l->in[n++] = r;
			budget -= q->n;
		}
	}
	return n;
}

struct egl_picks {
	struct egl *l;
	size_t n;
};

static void egl_pick_part(void *arg, int ith, int nth)
{
	const struct egl_picks *a = arg;
	size_t i0 = a->n * (size_t)ith / (size_t)nth, i1 = a->n * (size_t)(ith + 1) / (size_t)nth;
	for (size_t i = i0; i < i1; i++)
		a->l->ids[i] = eng__gseq_pick(a->l->in[a->l->due[i]]->seq);
}

/* After the pass: sample every sequence whose logits are due. The picks
 * (a scan of the vocabulary each) run across the queue's host threads,
 * each sequence's on its own state, so the thread that picks changes
 * nothing; the tokens are then taken in batch order on this thread. */
static void egl_sample(struct egl *l, size_t n_batch)
{
	double now = st_now_ms();
	struct egl_picks pk = { l, 0 };
	for (size_t b = 0; b < n_batch; b++)
		if (eng__gseq_fed(l->in[b]->seq, l->seqs[b].n))
			l->due[pk.n++] = b;
	/* a sequence that waited for another's prompt takes it now: that one
	 * may end at its first token below, its cache with it */
	for (size_t i = 0; i < l->n_run; i++)
		(void)egl_share(l, i, false);
	if (pk.n > 1)
		dev_queue_parallel(l->q, egl_pick_part, &pk);
	else
		egl_pick_part(&pk, 0, 1);
	for (size_t i = 0; i < pk.n; i++) {
		struct eng__gen_req *r = l->in[l->due[i]];
		bool done = false;
		int rc = eng__gseq_take(r->seq, l->ids[i], &done);
		pthread_mutex_lock(&l->s->mu);
		if (!r->t_first) {
			r->t_first = now;
			eng_hist_add(&l->s->st.ttft_ms, now - r->base.t_submit);
		} else {
			eng_hist_add(&l->s->st.itl_ms, now - r->t_last);
		}
		pthread_mutex_unlock(&l->s->mu);
		r->t_last = now;
		if (rc || done)
			for (size_t j = 0; j < l->n_run; j++)
				if (l->run[j] == r) {
					egl_end(l, j, rc, NULL);
					break;
				}
	}
}

static void egl_step(struct egl *l)
{
	size_t n = egl_batch(l), inter = egl_interactive(l);
	bool parked = inter > 0 && inter < l->n_run;
	double t0 = st_now_ms();
	int rc = eng_llm_forward_batch(l->s->m->llm, l->scratch, l->seqs, n);
	double t1 = st_now_ms();
	struct eng_sched *s = l->s;
	pthread_mutex_lock(&s->mu);
	l->rp->st.busy_ms += t1 - t0;
	l->rp->st.batches++;
	s->st.compute_ms += t1 - t0;
	s->st.batch_parked_steps += parked;
	eng_stats_batch(&s->st, (int)n, t1 - t0);
	pthread_mutex_unlock(&s->mu);
	if (!rc) {
		egl_sample(l, n);
		return;
	}
	/* A pass that fails (out of memory) fails the sequences in it. */
	for (size_t b = 0; b < n; b++)
		for (size_t i = 0; i < l->n_run; i++)
			if (l->run[i] == l->in[b]) {
				egl_end(l, i, rc, NULL);
				break;
			}
}

static void egl_expire(struct egl *l, bool closing)
{
	closing |= eng__sched_sweep(l->rp); /* waiting ones too */
	double now = st_now_ms();
	for (size_t i = l->n_run; i-- > 0;) {
		int rc = closing ? -ST_CLOSED : eng__req_expired(&l->run[i]->base, now);
		if (rc)
			egl_end(l, i, rc, rc == -ST_CLOSED ? "the server is shutting down" : NULL);
	}
}

static int egl_init(struct egl *l, struct eng__replica *rp)
{
	struct eng_sched *s = rp->s;
	size_t seqs = 2 * (size_t)s->max_num_seqs; /* max_num_seqs of each class */
	memset(l, 0, sizeof(*l));
	l->rp = rp;
	l->s = s;
	l->q = rp->q;
	l->run = mem_calloc(seqs, sizeof(*l->run));
	l->taken = mem_calloc(seqs, sizeof(*l->taken));
	l->seqs = mem_calloc(seqs, sizeof(*l->seqs));
	l->in = mem_calloc(seqs, sizeof(*l->in));
	l->due = mem_calloc(seqs, sizeof(*l->due));
	l->ids = mem_calloc(seqs, sizeof(*l->ids));
	l->wait = mem_calloc(seqs, sizeof(*l->wait));
	if (!l->run || !l->taken || !l->seqs || !l->in || !l->due || !l->ids || !l->wait)
		return -ST_NOMEM;
	char err[256];
	int rc = eng_llm_scratch_create(s->m->llm, rp->q, (size_t)s->max_batch_tokens,
					eng_model_context(s->m), &l->scratch, err, sizeof(err));
	if (rc)
		fprintf(stderr, "inferd: %s on %s: %s\n", s->m->name, dev_caps(rp->dev)->name, err);
	return rc;
}

static void egl_fini(struct egl *l)
{
	while (l->n_kept)
		egl_drop(l, l->n_kept - 1);
	mem_free(l->kept);
	eng_llm_scratch_destroy(l->scratch);
	mem_free(l->run);
	mem_free(l->taken);
	mem_free(l->seqs);
	mem_free(l->in);
	mem_free(l->due);
	mem_free(l->ids);
	mem_free(l->wait);
}

/* The replica's work item: runs until the scheduler closes. */
void eng__gen_loop(void *arg, struct dev_pool *pool)
{
	struct egl l;
	(void)pool; /* the ops split over it through the replica's queue */
	int rc = egl_init(&l, arg);
	for (;;) {
		bool closing = egl_admit(&l);
		if (rc) /* no scratch: every request fails, the replica stays up */
			while (l.n_run)
				egl_end(&l, l.n_run - 1, rc, "out of memory for this replica");
		egl_expire(&l, closing);
		if (closing && !l.n_run)
			break;
		if (l.n_run)
			egl_step(&l);
	}
	egl_fini(&l);
}
