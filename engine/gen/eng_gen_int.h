/* eng_gen_int.h - a completion as the generation loop (eng_gen_replica.c)
 * drives it: the submitted request and its sequence (eng_generate.c).
 * Internal to engine/.
 *
 * A sequence holds its tokens (prompt, then generated), its KV cache, its
 * sampler and the text released so far. The loop asks it what to feed
 * (eng__gseq_next: a prompt chunk, or the token just sampled), runs the
 * batched forward pass, tells it what was fed (eng__gseq_fed) and, when
 * the logits of its last token are there, lets it sample (eng__gseq_pick,
 * which the pool's threads may run for several sequences at once, then
 * eng__gseq_take: records, streams final text to on_text, checks the stop
 * conditions). Thread: one loop thread at a time, but for the picks.
 */
#ifndef ENG_GEN_INT_H
#define ENG_GEN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/eng.h"
#include "engine/sched/eng_sched.h"

struct dev;
struct eng__gseq;
struct eng_llm_kv;

/* A submitted completion (eng_generate_submit). */
struct eng__gen_req {
	struct eng__req base;        /* first: the scheduler's view */
	const struct eng_model *m;
	struct eng_gen_params p;     /* a copy; strings borrowed until done */
	eng_gen_done_fn done;
	void *ud;
	struct eng__gseq *seq;       /* set once admitted */
	double t_admit, t_first, t_last; /* monotonic ms: admitted, first and latest token */
};

/* eng__gen_req_end - struct eng__req's end for completions: the result
 * (rc 0) or the error goes to done; the request is freed. */
void eng__gen_req_end(struct eng__req *r, int rc, const char *err);

/* eng__gseq_start - tokenise p->prompt (special tokens parsed, BOS as the
 * model wants), check it fits the context with max_tokens, allocate the
 * KV cache (on device d, the replica's: it outlives the sequence), logits
 * and sampler. Errors: -ST_TOOBIG (err gives the numbers), -ST_INVAL
 * (empty prompt), -ST_NOMEM. p must outlive it. */
int eng__gseq_start(const struct eng_model *m, struct dev *d, const struct eng_gen_params *p,
		    struct eng__gseq **out, char *err, size_t errlen);
void eng__gseq_destroy(struct eng__gseq *g);

/* eng__gseq_next - the tokens to feed next (*tokens, at most max; 0 when
 * there are none) and where the pass must put the logits of the last of
 * them (*logits; NULL when more prompt follows). greedy NULL, or where to
 * say where the pass may put only the logits' argmax instead, when that
 * is all the pick needs (greedy decoding with no bias, penalty or
 * logprobs: *logits is then NULL); else *greedy is NULL. */
size_t eng__gseq_next(struct eng__gseq *g, size_t max, const int32_t **tokens,
		      float **logits, int32_t **greedy);

/* eng__gseq_fed - n tokens went through a pass; true when the logits of
 * the last token are in place (sample next). */
bool eng__gseq_fed(struct eng__gseq *g, size_t n);

/* eng__gseq_pick - apply the logit bias and penalties and pick the next
 * token (-1 when no logits are due). It touches only this sequence's
 * logits, history and sampler, so the picks of several sequences may run
 * on different threads at once. */
int32_t eng__gseq_pick(struct eng__gseq *g);

/* eng__gseq_take - record the token id that eng__gseq_pick gave (logprobs),
 * release final text to on_text; *done when an end-of-generation token, a
 * stop string or max_tokens ended it. -ST_INVAL when no logits were due,
 * -ST_CANCELED when on_text asked to stop, -ST_NOMEM. */
int eng__gseq_take(struct eng__gseq *g, int32_t id, bool *done);

/* eng__gseq_end - release the text still held back and hand over the
 * result (*out: new; the sequence keeps nothing of it). */
int eng__gseq_end(struct eng__gseq *g, struct eng_gen_result **out);

struct eng_llm_kv *eng__gseq_kv(struct eng__gseq *g);
size_t eng__gseq_generated(const struct eng__gseq *g);
size_t eng__gseq_prompt_tokens(const struct eng__gseq *g);

/* eng__gseq_prefix_of - how many tokens at the start of s's prompt, all
 * but its last (whose logits s must compute), toks [n_toks] begin with; 0
 * unless s has fed none yet, or below ENG_GEN_SHARE_MIN. */
#define ENG_GEN_SHARE_MIN 32
size_t eng__gseq_prefix_of(const struct eng__gseq *s, const int32_t *toks, size_t n_toks);

/* eng__gseq_prefix - eng__gseq_prefix_of another sequence t's tokens (0
 * when t is s). *ready: t's KV cache holds them already (eng__gseq_share
 * may copy them now); else t has yet to feed some of them. */
size_t eng__gseq_prefix(const struct eng__gseq *s, const struct eng__gseq *t, bool *ready);

/* eng__gseq_share - s's first n prompt tokens' keys and values copied
 * from t's cache (n from eng__gseq_prefix, ready): s feeds only the rest,
 * as for prefix caching, but from a sequence running beside it (n
 * choices of one prompt prefill it once). 0, or
 * eng_llm_kv_copy_prefix's errors with s as it was (it then prefills
 * everything itself). */
int eng__gseq_share(struct eng__gseq *s, const struct eng__gseq *t, size_t n);

/* eng__gseq_share_kv - eng__gseq_share from a cache kv holding at least n
 * positions of the tokens s begins with (the replica's prefix cache:
 * eng__gseq_keep). Same returns. */
int eng__gseq_share_kv(struct eng__gseq *s, const struct eng_llm_kv *kv, size_t n);

/* eng__gseq_prompt_fed - how many of g's prompt tokens its KV cache holds,
 * and where its tokens are (*toks, g's: valid while g is). */
size_t eng__gseq_prompt_fed(const struct eng__gseq *g, const int32_t **toks);

/* eng__gseq_keep - for the replica's prefix cache, copies of g's first n
 * prompt positions in its KV cache (a cache with room for exactly those:
 * eng_llm_kv_clone_prefix) and of their tokens: *kv and *toks, new, the
 * caller's. Only prompt positions (n at most eng__gseq_prompt_fed): a
 * prompt's keys and values are the same bits in forward chunks of any
 * size, so a later sequence that copies them answers as if it had
 * computed them; a generated token's were computed in decode steps. 0,
 * -ST_INVAL (n 0 or past them), -ST_NOMEM. */
int eng__gseq_keep(const struct eng__gseq *g, size_t n, struct eng_llm_kv **kv, int32_t **toks);

/* eng__gseq_shared_tokens - the prompt tokens s took from another's cache. */
size_t eng__gseq_shared_tokens(const struct eng__gseq *g);

/* eng__gen_loop - a generation replica's work item (dev_work_fn). */
struct dev_pool;
void eng__gen_loop(void *arg, struct dev_pool *pool);

#endif /* ENG_GEN_INT_H */
