/* eng_bpe.c - the byte-level BPE tokenizer's tables, merge loop, encode
 * and decode (contract in eng_bpe.h; pre-tokenizers in eng_bpe_pretok.c,
 * the tokenizer.json reader in eng_bpe_hf.c).
 *
 * Invariants after eng_bpe_create:
 *   - every token string lives NUL-terminated in `pool` at off[id] (len[id]
 *     bytes); its decoded bytes live in `bytes` at the same offset
 *     (blen[id] <= len[id], since each character decodes to one byte or,
 *     outside the byte alphabet, to its own UTF-8);
 *   - `slots` is an open-addressing table (linear probing, power-of-two
 *     size, at most half full) of ids keyed by their strings;
 *   - `mslots` maps a pair of ids to its merge (rank, result id), same
 *     scheme keyed by (left << 32 | right);
 *   - byte_id[b] is the id of byte b's single-character token, or -1 when
 *     the vocabulary has none (SmolLM2's lacks a few control bytes): such
 *     a byte never merges and is dropped when encoding, as llama.cpp's
 *     BPE session drops a byte it finds no token for.
 * Nothing changes after creation, so concurrent readers need no locks.
 */
#include "engine/tok/eng_bpe.h"

#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "engine/tok/eng_bpe_int.h"

#define BPE_INLINE_WORD 64 /* words up to this many bytes encode without allocating */
#define BPE_NO_MERGE UINT32_MAX

/* One merge: the pair (left, right) becomes `id`, tried in `rank` order. */
struct bpe_merge {
	uint64_t key; /* left << 32 | right; UINT64_MAX = empty slot */
	uint32_t rank; /* index in the merges list */
	int32_t id;    /* token of left + right */
};

struct eng_bpe {
	size_t n;                 /* ids */
	char *pool;               /* token strings, each NUL-terminated */
	char *bytes;              /* decoded bytes of each token, same offsets */
	uint32_t *off;            /* [n] offset in pool and bytes */
	uint32_t *len;            /* [n] string bytes */
	uint32_t *blen;           /* [n] decoded bytes */
	uint8_t *special;         /* [n] 1 when special */
	int32_t *slots;           /* [mask + 1] id or -1 */
	size_t mask;              /* string table size - 1 */
	struct bpe_merge *mslots; /* [mmask + 1] merges */
	size_t mmask;             /* merge table size - 1 */
	int32_t byte_id[256];     /* token of each byte */
	enum eng_bpe_pretok pretok; /* how text splits into words */
};

/* ---- GPT-2's bytes_to_unicode ---- */

/* byte_cp - the code point byte b is written as: printable Latin-1 bytes
 * stand for themselves, the other 68 map in order to U+0100... */
static uint32_t byte_cp(unsigned b)
{
	unsigned n = 0;

	if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
		return b;
	for (unsigned c = 0; c < b; c++)
		if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
			n++;
	return 256 + n;
}

/* cp_byte - inverse of byte_cp, -1 for code points outside the alphabet. */
static int cp_byte(uint32_t cp)
{
	static const uint8_t extra[68] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B,
		0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x7F, 0x80, 0x81,
		0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8B, 0x8C, 0x8D,
		0x8E, 0x8F, 0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99,
		0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F, 0xA0, 0xAD,
	};

	if (cp < 256)
		return byte_cp(cp) == cp ? (int)cp : -1;
	return cp < 256 + 68 ? extra[cp - 256] : -1;
}

/* ---- the string -> id table ---- */

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

/* find_slot - the slot holding string s[0, n), or the empty one ending its probe. */
static size_t find_slot(const struct eng_bpe *b, const char *s, size_t n)
{
	size_t i = (size_t)str_hash(s, n) & b->mask;
	for (;; i = (i + 1) & b->mask) {
		int32_t id = b->slots[i];
		if (id < 0 || (b->len[id] == n && memcmp(b->pool + b->off[id], s, n) == 0))
			return i;
	}
}

static int32_t lookup(const struct eng_bpe *b, const char *s, size_t n)
{
	return b->slots[find_slot(b, s, n)];
}

int32_t eng_bpe_token_id(const struct eng_bpe *b, const char *token)
{
	return b && token ? lookup(b, token, strlen(token)) : -1;
}

/* table_size - a power of two at least twice n. */
static size_t table_size(size_t n)
{
	size_t s = 16;
	while (s < 2 * n)
		s *= 2;
	return s;
}

/* ---- the pair -> merge table ---- */

static uint64_t pair_key(int32_t l, int32_t r)
{
	return (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
}

static struct bpe_merge *merge_slot(const struct eng_bpe *b, uint64_t key)
{
	size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & b->mmask;
	while (b->mslots[i].key != key && b->mslots[i].key != UINT64_MAX)
		i = (i + 1) & b->mmask;
	return &b->mslots[i];
}

/* merge_find - rank of merging l and r (id in *id), BPE_NO_MERGE if none. */
static uint32_t merge_find(const struct eng_bpe *b, int32_t l, int32_t r, int32_t *id)
{
	const struct bpe_merge *m = merge_slot(b, pair_key(l, r));
	if (m->key == UINT64_MAX)
		return BPE_NO_MERGE;
	*id = m->id;
	return m->rank;
}

/* ---- construction ---- */

void eng_bpe_destroy(struct eng_bpe *b)
{
	if (!b)
		return;
	mem_free(b->pool);
	mem_free(b->bytes);
	mem_free(b->off);
	mem_free(b->len);
	mem_free(b->blen);
	mem_free(b->special);
	mem_free(b->slots);
	mem_free(b->mslots);
	mem_free(b);
}

/* alloc_strings - size and allocate the per-token arrays and the pools. */
static int alloc_strings(struct eng_bpe *b, const char *const *tokens, size_t n, char *err,
			 size_t errlen)
{
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++) {
		if (!tokens[i])
			return st_errf(-ST_INVAL, err, errlen, "token %zu is NULL", i);
		size_t l = strlen(tokens[i]);
		if (l > ENG_BPE_MAX_TOKEN_BYTES)
			return st_errf(-ST_TOOBIG, err, errlen, "token %zu is %zu bytes (limit %u)",
				       i, l, ENG_BPE_MAX_TOKEN_BYTES);
		total += l + 1;
	}
	if (total > UINT32_MAX)
		return st_errf(-ST_TOOBIG, err, errlen, "token strings total %llu bytes",
			       (unsigned long long)total);
	b->n = n;
	b->mask = table_size(n) - 1;
	b->pool = mem_alloc((size_t)total);
	b->bytes = mem_alloc((size_t)total);
	b->off = mem_alloc(n * sizeof(*b->off));
	b->len = mem_alloc(n * sizeof(*b->len));
	b->blen = mem_alloc(n * sizeof(*b->blen));
	b->special = mem_calloc(n, sizeof(*b->special));
	b->slots = mem_alloc((b->mask + 1) * sizeof(*b->slots));
	if (!b->pool || !b->bytes || !b->off || !b->len || !b->blen || !b->special || !b->slots)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for %zu tokens", n);
	memset(b->slots, 0xFF, (b->mask + 1) * sizeof(*b->slots));
	return 0;
}

/* add_strings - copy the tokens into the pool and index them; a repeated
 * string keeps its first id. */
static int add_strings(struct eng_bpe *b, const char *const *tokens, size_t n, char *err,
		       size_t errlen)
{
	int rc = alloc_strings(b, tokens, n, err, errlen);
	uint32_t at = 0;

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		uint32_t l = (uint32_t)strlen(tokens[i]);
		memcpy(b->pool + at, tokens[i], (size_t)l + 1);
		b->off[i] = at;
		b->len[i] = l;
		at += l + 1;
		size_t s = find_slot(b, tokens[i], l);
		if (b->slots[s] < 0)
			b->slots[s] = (int32_t)i;
	}
	return 0;
}

/* byte_level_char - the code point of the 1- or 2-byte UTF-8 character at
 * s[0, n) and its length in *w; false for anything longer or malformed
 * (none of those is in the byte alphabet). */
static bool byte_level_char(const uint8_t *s, size_t n, uint32_t *cp, size_t *w)
{
	if (s[0] < 0x80) {
		*cp = s[0], *w = 1;
		return true;
	}
	if ((s[0] & 0xE0) != 0xC0 || n < 2 || (s[1] & 0xC0) != 0x80)
		return false;
	*cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F), *w = 2;
	return true;
}

/* decode_token - fill the token's decoded bytes: each character's byte, or
 * the string itself when a character is outside the byte alphabet (HF's
 * ByteLevel decoder does the same per token). */
static void decode_token(struct eng_bpe *b, size_t id)
{
	const uint8_t *s = (const uint8_t *)b->pool + b->off[id];
	char *o = b->bytes + b->off[id];
	size_t n = b->len[id], k = 0, w;
	uint32_t cp;

	for (size_t i = 0; i < n; i += w) {
		int byte = byte_level_char(s + i, n - i, &cp, &w) ? cp_byte(cp) : -1;
		if (byte < 0) {
			memcpy(o, s, n);
			b->blen[id] = (uint32_t)n;
			return;
		}
		o[k++] = (char)byte;
	}
	b->blen[id] = (uint32_t)k;
}

/* add_bytes - byte_id[] from bytes_to_unicode (-1 for a byte without a
 * token), and every token's bytes; a vocabulary with none of the 256 is
 * not a byte-level one. */
static int add_bytes(struct eng_bpe *b, char *err, size_t errlen)
{
	char ch[4];
	int found = 0;

	for (unsigned v = 0; v < 256; v++) {
		size_t l = st_utf8_encode(byte_cp(v), ch); /* cp < 0x144: 1 or 2 bytes */
		b->byte_id[v] = lookup(b, ch, l);
		found += b->byte_id[v] >= 0;
	}
	if (!found)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "no byte-level tokens (\"!\", \"A\", \"\u0120\" ...) in the vocabulary");
	for (size_t i = 0; i < b->n; i++)
		decode_token(b, i);
	return 0;
}

static int add_special(struct eng_bpe *b, const int32_t *ids, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || (size_t)ids[i] >= b->n)
			return st_errf(-ST_CORRUPT, err, errlen,
				       "special id %ld is outside the vocabulary (%zu ids)",
				       (long)ids[i], b->n);
		b->special[ids[i]] = 1;
	}
	return 0;
}

/* add_merge - parse "LEFT RIGHT" and enter it with rank r. */
static int add_merge(struct eng_bpe *b, const char *m, uint32_t r, char *err, size_t errlen)
{
	char cat[2 * ENG_BPE_MAX_TOKEN_BYTES];
	const char *sp = m ? strchr(m, ' ') : NULL;

	if (!sp || strchr(sp + 1, ' '))
		return st_errf(-ST_CORRUPT, err, errlen,
			       "merge %lu \"%.60s\" is not two tokens separated by one space",
			       (unsigned long)r, m ? m : "(null)");
	size_t ll = (size_t)(sp - m), rl = strlen(sp + 1);
	int32_t l = lookup(b, m, ll), rt = lookup(b, sp + 1, rl), id = -1;
	if (l >= 0 && rt >= 0) {
		memcpy(cat, m, ll); /* both fit: they are tokens */
		memcpy(cat + ll, sp + 1, rl);
		id = lookup(b, cat, ll + rl);
	}
	if (id < 0)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "merge %lu \"%.60s\": %s is not in the vocabulary", (unsigned long)r,
			       m,
			       l < 0	? "the left token"
			       : rt < 0 ? "the right token"
					: "the merged token");
	struct bpe_merge *s = merge_slot(b, pair_key(l, rt));
	*s = (struct bpe_merge){ .key = pair_key(l, rt), .rank = r, .id = id };
	return 0;
}

static int add_merges(struct eng_bpe *b, const char *const *merges, size_t n, char *err,
		      size_t errlen)
{
	b->mmask = table_size(n) - 1;
	b->mslots = mem_alloc((b->mmask + 1) * sizeof(*b->mslots));
	if (!b->mslots)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for %zu merges", n);
	memset(b->mslots, 0xFF, (b->mmask + 1) * sizeof(*b->mslots));
	for (size_t i = 0; i < n; i++) {
		int rc = add_merge(b, merges[i], (uint32_t)i, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

int eng_bpe_create(const char *const *tokens, size_t n_tokens, const char *const *merges,
		   size_t n_merges, const int32_t *special_ids, size_t n_special,
		   enum eng_bpe_pretok pretok, struct eng_bpe **out, char *err, size_t errlen)
{
	struct eng_bpe *b;
	int rc;

	if (out)
		*out = NULL;
	if (!out || !tokens || (n_merges && !merges) || (n_special && !special_ids) ||
	    (unsigned)pretok >= ENG_BPE_PRETOK_COUNT)
		return st_errf(-ST_INVAL, err, errlen, "eng_bpe_create: invalid argument");
	if (n_tokens == 0 || n_tokens > ENG_BPE_MAX_TOKENS || n_merges > ENG_BPE_MAX_MERGES)
		return st_errf(-ST_TOOBIG, err, errlen, "%zu tokens, %zu merges (limits 1..%u, %u)",
			       n_tokens, n_merges, ENG_BPE_MAX_TOKENS, ENG_BPE_MAX_MERGES);
	b = mem_calloc(1, sizeof(*b));
	if (!b)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	b->pretok = pretok;
	rc = add_strings(b, tokens, n_tokens, err, errlen);
	if (!rc)
		rc = add_bytes(b, err, errlen);
	if (!rc)
		rc = add_special(b, special_ids, n_special, err, errlen);
	if (!rc)
		rc = add_merges(b, merges, n_merges, err, errlen);
	if (rc)
		goto out_destroy;
	*out = b;
	return 0;
out_destroy:
	eng_bpe_destroy(b);
	return rc;
}

/* ---- accessors ---- */

size_t eng_bpe_n_vocab(const struct eng_bpe *b)
{
	return b ? b->n : 0;
}

static bool valid_id(const struct eng_bpe *b, int32_t id)
{
	return b && id >= 0 && (size_t)id < b->n;
}

const char *eng_bpe_token_str(const struct eng_bpe *b, int32_t id)
{
	return valid_id(b, id) ? b->pool + b->off[id] : NULL;
}

bool eng_bpe_is_special(const struct eng_bpe *b, int32_t id)
{
	return valid_id(b, id) && b->special[id];
}

size_t eng_bpe_token_bytes(const struct eng_bpe *b, int32_t id, char *out, size_t cap)
{
	if (!valid_id(b, id))
		return 0;
	size_t n = b->blen[id];
	if (out && cap)
		memcpy(out, b->bytes + b->off[id], n < cap ? n : cap);
	return n;
}

/* ---- the merge loop (HF models/bpe/word.rs merge_all) ---- */

/* One symbol of a word being merged; merged-away symbols have len 0. */
struct bpe_sym {
	int32_t id;   /* current token */
	int32_t prev; /* previous live symbol, -1 at the start */
	int32_t next; /* next live symbol, -1 at the end */
	uint32_t len; /* bytes covered; 0 once merged into its left neighbour */
};

/* A candidate merge of the symbol at pos with its right neighbour. */
struct bpe_cand {
	uint32_t rank; /* merge rank: lower first */
	uint32_t pos;  /* left symbol: lower first among equal ranks */
	int32_t id;    /* result token, to spot stale candidates */
};

/* Scratch for one word: inline for short words, heap for longer ones. */
struct bpe_work {
	struct bpe_sym *sym;   /* [cap] symbols */
	struct bpe_cand *heap; /* [3 * cap] min-heap of candidates */
	size_t cap;            /* word bytes the arrays hold */
	size_t n_heap;         /* candidates in the heap */
	struct bpe_sym sym_in[BPE_INLINE_WORD];
	struct bpe_cand heap_in[3 * BPE_INLINE_WORD];
};

static void work_init(struct bpe_work *w)
{
	w->sym = w->sym_in;
	w->heap = w->heap_in;
	w->cap = BPE_INLINE_WORD;
	w->n_heap = 0;
}

static void work_fini(struct bpe_work *w)
{
	if (w->sym != w->sym_in) {
		mem_free(w->sym);
		mem_free(w->heap);
	}
}

/* work_reserve - room for a word of n bytes (at most 3n - 3 candidates:
 * n - 1 initial ones, two per merge). */
static int work_reserve(struct bpe_work *w, size_t n)
{
	if (n <= w->cap)
		return 0;
	if (n > INT32_MAX / 4)
		return -ST_TOOBIG;
	size_t cap = n > 2 * w->cap ? n : 2 * w->cap;
	struct bpe_sym *s = mem_alloc(cap * sizeof(*s));
	struct bpe_cand *h = mem_alloc(3 * cap * sizeof(*h));
	if (!s || !h) {
		mem_free(s);
		mem_free(h);
		return -ST_NOMEM;
	}
	work_fini(w);
	w->sym = s, w->heap = h, w->cap = cap;
	return 0;
}

static bool cand_less(const struct bpe_cand *a, const struct bpe_cand *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* push_pair - queue the merge of symbol pos with its right neighbour, if any. */
static void push_pair(const struct eng_bpe *b, struct bpe_work *w, int32_t pos)
{
	int32_t id, nx = w->sym[pos].next;
	uint32_t rank;

	if (nx < 0 || w->sym[pos].id < 0 || w->sym[nx].id < 0 ||
	    (rank = merge_find(b, w->sym[pos].id, w->sym[nx].id, &id)) == BPE_NO_MERGE)
		return;
	size_t i = w->n_heap++;
	struct bpe_cand c = { .rank = rank, .pos = (uint32_t)pos, .id = id };
	while (i > 0 && cand_less(&c, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = c;
}

static struct bpe_cand pop_cand(struct bpe_work *w)
{
	struct bpe_cand top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, n = w->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && cand_less(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!cand_less(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n)
		w->heap[i] = last;
	return top;
}

/* merge_word - apply merges to the n symbols in w, lowest rank first. */
static void merge_word(const struct eng_bpe *b, struct bpe_work *w, size_t n)
{
	w->n_heap = 0;
	for (size_t i = 0; i + 1 < n; i++)
		push_pair(b, w, (int32_t)i);
	while (w->n_heap) {
		struct bpe_cand c = pop_cand(w);
		struct bpe_sym *l = &w->sym[c.pos];
		int32_t id;
		if (l->len == 0 || l->next < 0)
			continue;
		struct bpe_sym *r = &w->sym[l->next];
		if (merge_find(b, l->id, r->id, &id) == BPE_NO_MERGE || id != c.id)
			continue; /* stale: one side changed since it was queued */
		l->id = id;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (l->next >= 0)
			w->sym[l->next].prev = (int32_t)c.pos;
		if (l->prev >= 0)
			push_pair(b, w, l->prev);
		push_pair(b, w, (int32_t)c.pos);
	}
}

/* Append id (-1, a byte without a token: nothing). */
static void emit(int32_t id, int32_t *ids, size_t max_ids, size_t *count)
{
	if (id < 0)
		return;
	if (*count < max_ids)
		ids[*count] = id;
	(*count)++;
}

/* whole_word_id - ignore_merges (llama 3): the id of the word s[0, n)
 * when its byte-level string is itself a token, else -1. */
static int32_t whole_word_id(const struct eng_bpe *b, const uint8_t *s, size_t n)
{
	char buf[ENG_BPE_MAX_TOKEN_BYTES];
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		int32_t bid = b->byte_id[s[i]];
		if (bid < 0)
			return -1; /* no token holds a byte that has none of its own */
		uint32_t l = b->len[bid];
		if (at + l > sizeof(buf))
			return -1; /* longer than any token */
		memcpy(buf + at, b->pool + b->off[bid], l);
		at += l;
	}
	return lookup(b, buf, at);
}

/* encode_word - the ids of one pre-token s[0, n), n >= 1. */
static int encode_word(const struct eng_bpe *b, struct bpe_work *w, const uint8_t *s, size_t n,
		       int32_t *ids, size_t max_ids, size_t *count)
{
	if (n == 1) {
		emit(b->byte_id[s[0]], ids, max_ids, count);
		return 0;
	}
	if (b->pretok == ENG_BPE_PRETOK_LLAMA3) {
		int32_t whole = whole_word_id(b, s, n);
		if (whole >= 0) {
			emit(whole, ids, max_ids, count);
			return 0;
		}
	}
	int rc = work_reserve(w, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		w->sym[i] = (struct bpe_sym){ .id = b->byte_id[s[i]], .prev = (int32_t)i - 1,
					      .next = i + 1 < n ? (int32_t)i + 1 : -1, .len = 1 };
	merge_word(b, w, n);
	for (int32_t i = 0; i >= 0; i = w->sym[i].next)
		emit(w->sym[i].id, ids, max_ids, count);
	return 0;
}

int eng_bpe_encode(const struct eng_bpe *b, const char *text, size_t len, int32_t *ids,
		   size_t max_ids, size_t *n_ids)
{
	const uint8_t *t = (const uint8_t *)text;
	struct bpe_work w;
	size_t pos = 0, count = 0;
	int rc = 0;

	if (n_ids)
		*n_ids = 0;
	if (!b || !n_ids || (len && !text) || (max_ids && !ids))
		return -ST_INVAL;
	work_init(&w);
	while (pos < len && !rc) {
		size_t wl = eng__bpe_pretok_next(b->pretok, t, len, pos);
		rc = encode_word(b, &w, t + pos, wl, ids, max_ids, &count);
		pos += wl;
	}
	work_fini(&w);
	*n_ids = count;
	if (!rc && count > max_ids)
		rc = -ST_TOOBIG;
	return rc;
}

/* ---- decode ---- */

int eng_bpe_decode(const struct eng_bpe *b, const int32_t *ids, size_t n, bool skip_special,
		   char *out, size_t cap, size_t *out_len)
{
	size_t total = 0;

	if (out_len)
		*out_len = 0;
	if (!b || !out_len || (n && !ids) || (cap && !out))
		return -ST_INVAL;
	for (size_t i = 0; i < n; i++) {
		if (!valid_id(b, ids[i]))
			return -ST_INVAL;
		if (!(skip_special && b->special[ids[i]]))
			total += b->blen[ids[i]];
	}
	if (cap < total + 1) {
		*out_len = total + 1;
		return -ST_TOOBIG;
	}
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		if (skip_special && b->special[ids[i]])
			continue;
		memcpy(out + at, b->bytes + b->off[ids[i]], b->blen[ids[i]]);
		at += b->blen[ids[i]];
	}
	out[at] = 0;
	*out_len = at;
	return 0;
}
