/* eng_spm.c - the SentencePiece-style BPE of tokenizer.ggml.model "llama"
 * (gemma, llama 1/2, mistral), as llama.cpp's llm_tokenizer_spm_session
 * does it (src/llama-vocab.cpp; contract of the front end in eng_tok.h).
 *
 * One fragment (text between special tokens):
 *   1. optionally prepend " ", then write every " " as U+2581 "▁";
 *   2. cut into UTF-8 characters by lead byte only (a truncated or stray
 *      byte is its own symbol, as unicode_len_utf8 does);
 *   3. queue every adjacent pair whose concatenation is a token, keyed by
 *      that token's score; pop the highest score (lowest left position
 *      among ties), merge if both sides are unchanged, queue the two new
 *      neighbour pairs; a binary heap makes this O(n log n);
 *   4. each final symbol is its token, or - a character not in the
 *      vocabulary - one byte token "<0xXX>" per byte (unk if even that is
 *      missing).
 */
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "engine/tok/eng_tok_int.h"

/* One symbol: a slice of the escaped text; merged-away symbols have n 0. */
struct spm_sym {
	const char *text; /* first byte */
	uint32_t n;       /* bytes; 0 once merged into its left neighbour */
	int32_t prev;     /* previous live symbol, -1 at the start */
	int32_t next;     /* next live symbol, -1 at the end */
};

/* A candidate merge of symbols left and right (adjacent when queued). */
struct spm_bigram {
	float score;   /* the merged token's score: higher first */
	int32_t left;  /* left symbol: lower first among equal scores */
	int32_t right; /* right symbol */
	uint32_t size; /* bytes of the pair when queued, to spot stale entries */
};

/* The state of one fragment's merge. */
struct spm_run {
	const struct eng_tok *t;
	struct spm_sym *sym;
	struct spm_bigram *heap; /* max-heap by bigram_before */
	size_t n_heap;
};

void eng__spm_work_fini(struct eng_spm_work *w)
{
	mem_free(w->esc);
	mem_free(w->sym);
	mem_free(w->heap);
	w->esc = NULL, w->sym = NULL, w->heap = NULL, w->cap_bytes = 0;
}

/* work_reserve - room for a fragment of n text bytes: 3n + 3 escaped
 * bytes, n + 1 symbols (escaping keeps the character count), at most
 * 3(n + 1) queued pairs (n initial, two per merge). */
static int work_reserve(struct eng_spm_work *w, size_t n)
{
	if (n < w->cap_bytes)
		return 0;
	if (n > INT32_MAX / 4)
		return -ST_TOOBIG;
	size_t cap = n + 1 > 2 * w->cap_bytes ? n + 1 : 2 * w->cap_bytes;
	char *e = mem_alloc(3 * cap);
	struct spm_sym *s = mem_alloc(cap * sizeof(*s));
	struct spm_bigram *h = mem_alloc(3 * cap * sizeof(*h));
	if (!e || !s || !h) {
		mem_free(e);
		mem_free(s);
		mem_free(h);
		return -ST_NOMEM;
	}
	eng__spm_work_fini(w);
	w->esc = e, w->sym = s, w->heap = h, w->cap_bytes = cap;
	return 0;
}

/* ---- the queue (llama.cpp llm_bigram_spm::comparator, inverted) ---- */

static bool bigram_before(const struct spm_bigram *a, const struct spm_bigram *b)
{
	return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(struct spm_run *r, struct spm_bigram c)
{
	size_t i = r->n_heap++;

	while (i > 0 && bigram_before(&c, &r->heap[(i - 1) / 2])) {
		r->heap[i] = r->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap[i] = c;
}

static struct spm_bigram heap_pop(struct spm_run *r)
{
	struct spm_bigram top = r->heap[0], last = r->heap[--r->n_heap];
	size_t i = 0, n = r->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && bigram_before(&r->heap[c + 1], &r->heap[c]))
			c++;
		if (!bigram_before(&r->heap[c], &last))
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (n)
		r->heap[i] = last;
	return top;
}

/* try_add_bigram - queue left+right when their concatenation is a token. */
static void try_add_bigram(struct spm_run *r, int32_t left, int32_t right)
{
	if (left < 0 || right < 0)
		return;
	const struct spm_sym *l = &r->sym[left];
	uint32_t size = l->n + r->sym[right].n; /* contiguous: right follows left */
	int32_t id = eng__tok_lookup(r->t, l->text, size);
	if (id < 0)
		return;
	heap_push(r, (struct spm_bigram){ .score = r->t->score[id], .left = left, .right = right,
					  .size = size });
}

/* ---- one fragment ---- */

/* escape - " "? + text with " " as U+2581 into out; returns bytes. */
static size_t escape(const char *text, size_t len, bool prefix_space, char *out)
{
	size_t k = 0;

	if (prefix_space) {
		memcpy(out, "\xE2\x96\x81", 3);
		k = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(out + k, "\xE2\x96\x81", 3);
			k += 3;
		} else {
			out[k++] = text[i];
		}
	}
	return k;
}

/* split_chars - one symbol per UTF-8 character of s[0, n) (length from the
 * lead byte, clipped at the end); returns the count. */
static size_t split_chars(struct spm_sym *sym, const char *s, size_t n)
{
	size_t k = 0;

	for (size_t at = 0; at < n; k++) {
		size_t l = st_utf8_lead_len((unsigned char)s[at]);
		if (l > n - at)
			l = n - at;
		sym[k] = (struct spm_sym){ .text = s + at, .n = (uint32_t)l, .prev = (int32_t)k - 1,
					   .next = at + l < n ? (int32_t)k + 1 : -1 };
		at += l;
	}
	return k;
}

/* merge_all - the greedy loop of llm_tokenizer_spm_session::tokenize. */
static void merge_all(struct spm_run *r, size_t n_sym)
{
	for (size_t i = 1; i < n_sym; i++)
		try_add_bigram(r, (int32_t)i - 1, (int32_t)i);
	while (r->n_heap) {
		struct spm_bigram b = heap_pop(r);
		struct spm_sym *l = &r->sym[b.left], *rt = &r->sym[b.right];
		if (l->n == 0 || rt->n == 0 || l->n + rt->n != b.size)
			continue; /* stale: a side was merged since it was queued */
		l->n += rt->n;
		rt->n = 0;
		l->next = rt->next;
		if (rt->next >= 0)
			r->sym[rt->next].prev = b.left;
		try_add_bigram(r, l->prev, b.left);
		try_add_bigram(r, b.left, l->next);
	}
}

/* emit_symbol - the token of one final symbol, or its bytes' tokens. */
static void emit_symbol(const struct eng_tok *t, const struct spm_sym *s, struct eng_tok_out *o)
{
	int32_t id = eng__tok_lookup(t, s->text, s->n);

	if (id >= 0) {
		eng__tok_emit(o, id);
		return;
	}
	for (uint32_t j = 0; j < s->n; j++) {
		int32_t b = t->byte_id[(uint8_t)s->text[j]];
		if (b < 0)
			b = t->unk;
		if (b >= 0)
			eng__tok_emit(o, b);
	}
}

int eng__spm_encode(const struct eng_tok *t, struct eng_spm_work *w, const char *text, size_t len,
		    bool prefix_space, struct eng_tok_out *o)
{
	int rc = work_reserve(w, len);
	if (rc)
		return rc;
	size_t n_esc = escape(text, len, prefix_space, w->esc);
	if (n_esc == 0)
		return 0;
	struct spm_run r = { .t = t, .sym = w->sym, .heap = w->heap, .n_heap = 0 };
	size_t n_sym = split_chars(r.sym, w->esc, n_esc);
	merge_all(&r, n_sym);
	for (int32_t i = 0; i >= 0; i = r.sym[i].next)
		emit_symbol(t, &r.sym[i], o);
	return 0;
}
