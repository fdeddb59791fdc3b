/* eng_tok_text.c - the GGUF tokenizer's text side: the special-token
 * partition (llama.cpp's tokenizer_st_partition), encode dispatch (SPM in
 * eng_spm.c, byte-level BPE in eng_bpe.c), pieces and detokenize.
 * Loading is in eng_tok.c. Source followed: llama.cpp src/llama-vocab.cpp.
 */
#include "engine/tok/eng_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/tok/eng_bpe.h"
#include "engine/tok/eng_tok_int.h"

/* ---- encode: the special-token partition (tokenizer_st_partition) ----
 *
 * llama.cpp takes the special tokens longest first and, for each, splits
 * every remaining text fragment at its leftmost non-overlapping
 * occurrences. Equivalently: list every occurrence (trie walk from each
 * byte), sort by (token rank, position), and accept an occurrence when none
 * of its bytes is taken yet. */

/* Occurrences: rank << 32 | position. */
struct tok_matches {
	uint64_t *m;
	size_t n, cap;
};

static int matches_push(struct tok_matches *ms, uint64_t v)
{
	if (ms->n == ms->cap) {
		size_t cap = ms->cap ? 2 * ms->cap : 64;
		uint64_t *m = mem_realloc(ms->m, cap * sizeof(*m));
		if (!m)
			return -ST_NOMEM;
		ms->m = m, ms->cap = cap;
	}
	ms->m[ms->n++] = v;
	return 0;
}

/* May token id be matched at s[p, p + len[id])? Control and unknown
 * tokens only when parsing specials and none of those bytes is plain. */
static bool special_allowed(const struct eng_tok *t, int32_t id, bool parse_special,
			    const uint8_t *plain, size_t p)
{
	if (!(t->attr[id] & (ENG_TOK_ATTR_CONTROL | ENG_TOK_ATTR_UNKNOWN)))
		return true;
	if (!parse_special)
		return false;
	for (size_t i = 0; plain && i < t->len[id]; i++)
		if (plain[p + i])
			return false;
	return true;
}

/* find_matches - every occurrence of an allowed special token in s[0, n). */
static int find_matches(const struct eng_tok *t, const uint8_t *s, size_t n, bool parse_special,
			const uint8_t *plain, struct tok_matches *ms)
{
	for (size_t p = 0; p < n; p++) {
		int32_t node = t->root[s[p]];
		for (size_t q = p; node >= 0;) {
			int32_t id = t->trie[node].id;
			if (id >= 0 && special_allowed(t, id, parse_special, plain, p) &&
			    matches_push(ms, (uint64_t)t->prio[id] << 32 | p))
				return -ST_NOMEM;
			if (++q == n)
				break;
			node = eng__tok_trie_child(t, node, s[q]);
		}
	}
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* place_matches - tok_at[p] = id of the special token accepted at p, -1
 * elsewhere; taken[] marks the bytes they cover. */
static void place_matches(const struct eng_tok *t, struct tok_matches *ms, int32_t *tok_at,
			  uint8_t *taken)
{
	qsort(ms->m, ms->n, sizeof(*ms->m), u64_cmp);
	for (size_t i = 0; i < ms->n; i++) {
		int32_t id = t->by_prio[ms->m[i] >> 32];
		size_t p = (size_t)(ms->m[i] & 0xFFFFFFFFu), l = t->len[id];
		if (memchr(taken + p, 1, l))
			continue;
		memset(taken + p, 1, l);
		tok_at[p] = id;
	}
}

/* partition - tok_at (new, [n], NULL when the text has no special token). */
static int partition(const struct eng_tok *t, const char *text, size_t n, bool parse_special,
		     const uint8_t *plain, int32_t **tok_at)
{
	struct tok_matches ms = { 0 };
	uint8_t *taken = NULL;
	int rc = find_matches(t, (const uint8_t *)text, n, parse_special, plain, &ms);

	*tok_at = NULL;
	if (rc || ms.n == 0)
		goto out_free;
	*tok_at = mem_alloc(n * sizeof(**tok_at));
	taken = mem_calloc(n, 1);
	if (!*tok_at || !taken) {
		rc = -ST_NOMEM;
		goto out_free;
	}
	memset(*tok_at, 0xFF, n * sizeof(**tok_at));
	place_matches(t, &ms, *tok_at, taken);
out_free:
	if (rc) {
		mem_free(*tok_at);
		*tok_at = NULL;
	}
	mem_free(taken);
	mem_free(ms.m);
	return rc;
}

/* ---- encode ---- */

/* The walk over fragments of one encode call. */
struct tok_enc {
	const struct eng_tok *t;
	struct eng_spm_work spm; /* SPM scratch, reused across fragments */
	struct eng_tok_out out;
	bool prev_special;       /* SPM: the previous fragment was a token (or none yet) */
};

/* encode_raw - one fragment of text without special tokens. */
static int encode_raw(struct tok_enc *e, const char *s, size_t n)
{
	const struct eng_tok *t = e->t;
	struct eng_tok_out *o = &e->out;
	size_t k = 0;

	if (t->kind == ENG_TOK_KIND_SPM) {
		bool prefix = t->add_space_prefix && e->prev_special;
		e->prev_special = false;
		return eng__spm_encode(t, &e->spm, s, n, prefix, o);
	}
	size_t room = o->n < o->max ? o->max - o->n : 0;
	int rc = eng_bpe_encode(t->bpe, s, n, room ? o->ids + o->n : NULL, room, &k);
	o->n += k;
	return rc == -ST_TOOBIG ? 0 : rc;
}

static int encode_fragments(struct tok_enc *e, const char *text, size_t len,
			    const int32_t *tok_at)
{
	size_t start = 0;
	int rc = 0;

	for (size_t i = 0; tok_at && i < len && !rc; i++) {
		if (tok_at[i] < 0)
			continue;
		if (i > start)
			rc = encode_raw(e, text + start, i - start);
		eng__tok_emit(&e->out, tok_at[i]);
		e->prev_special = true;
		start = i + e->t->len[tok_at[i]];
		i = start - 1;
	}
	if (!rc && start < len)
		rc = encode_raw(e, text + start, len - start);
	return rc;
}

static int tok_encode(const struct eng_tok *t, const char *text, size_t len, bool add_bos,
		      bool parse_special, const uint8_t *plain, int32_t *ids, size_t max_ids,
		      size_t *n_ids)
{
	struct tok_enc e = { .t = t, .out = { .ids = ids, .max = max_ids }, .prev_special = true };
	int32_t *tok_at = NULL;
	int rc;

	if (n_ids)
		*n_ids = 0;
	if (!t || !n_ids || (len && !text) || (max_ids && !ids) || (add_bos && t->bos < 0))
		return -ST_INVAL;
	if (len > UINT32_MAX)
		return -ST_TOOBIG;
	/* No token covers more than max_len bytes of text: a text that needs
	 * more than max_ids of them is refused before the work (and memory)
	 * of encoding it; *n_ids is then that lower bound. */
	if (max_ids && t->max_len && len / t->max_len > max_ids) {
		*n_ids = len / t->max_len + (add_bos ? 1 : 0);
		return -ST_TOOBIG;
	}
	if (add_bos)
		eng__tok_emit(&e.out, t->bos);
	rc = len ? partition(t, text, len, parse_special, plain, &tok_at) : 0;
	if (!rc)
		rc = encode_fragments(&e, text, len, tok_at);
	mem_free(tok_at);
	eng__spm_work_fini(&e.spm);
	*n_ids = e.out.n;
	if (!rc && e.out.n > max_ids)
		rc = -ST_TOOBIG;
	return rc;
}

int eng_tok_encode(const struct eng_tok *t, const char *text, size_t len, bool add_bos,
		   bool parse_special, int32_t *ids, size_t max_ids, size_t *n_ids)
{
	return tok_encode(t, text, len, add_bos, parse_special, NULL, ids, max_ids, n_ids);
}

int eng_tok_encode_marked(const struct eng_tok *t, const char *text, size_t len, bool add_bos,
			  const uint8_t *plain, int32_t *ids, size_t max_ids, size_t *n_ids)
{
	return tok_encode(t, text, len, add_bos, true, plain, ids, max_ids, n_ids);
}

/* ---- pieces and detokenize ---- */

/* copy_out - snprintf-like copy of s[0, n). */
static size_t copy_out(const char *s, size_t n, char *out, size_t cap)
{
	if (out && cap)
		memcpy(out, s, n < cap ? n : cap);
	return n;
}

/* unescape - the SPM piece: "▁" as " ". */
static size_t unescape(const char *s, size_t n, char *out, size_t cap)
{
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		bool sp = i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0;
		if (out && k < cap)
			out[k] = sp ? ' ' : s[i];
		i += sp ? 3 : 1;
	}
	return k;
}

/* byte_piece - "<0xXX>": the byte strtol(substr(3, 2), 16) gives. */
static size_t byte_piece(const char *s, size_t n, char *out, size_t cap)
{
	unsigned v = 0;

	for (size_t i = 3; i < 5 && i < n; i++) {
		char c = s[i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') :
			     (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (unsigned)((c | 0x20) - 'a' + 10) :
			     16;
		if (d == 16)
			break;
		v = v * 16 + d;
	}
	char b = (char)v;
	return copy_out(&b, 1, out, cap);
}

size_t eng_tok_piece(const struct eng_tok *t, int32_t id, bool render_special, char *out,
		     size_t cap)
{
	if (!eng__tok_valid_id(t, id))
		return 0;
	uint8_t a = t->attr[id];
	const char *s = t->pool + t->off[id];
	size_t n = t->len[id];
	if ((a & (ENG_TOK_ATTR_UNKNOWN | ENG_TOK_ATTR_CONTROL)) && !render_special)
		return 0;
	if (a & (ENG_TOK_ATTR_UNKNOWN | ENG_TOK_ATTR_CONTROL | ENG_TOK_ATTR_USER_DEFINED))
		return copy_out(s, n, out, cap);
	if (a & ENG_TOK_ATTR_NORMAL) {
		if (t->kind == ENG_TOK_KIND_SPM)
			return unescape(s, n, out, cap);
		return eng_bpe_token_bytes(t->bpe, id, out, cap);
	}
	if (a & ENG_TOK_ATTR_BYTE)
		return byte_piece(s, n, out, cap);
	return 0; /* UNUSED / UNDEFINED */
}

/* clean_spaces - llama.cpp detokenize's three in-place passes over
 * s[0, n): " ?" " !" " ." " ," lose the space; " ' " loses both; " 's"
 * " 'm" " 're" " 've" lose the space. Returns the new length. */
static size_t clean_spaces(char *s, size_t n)
{
	size_t total = n ? 1 : 0, n1 = n;

	for (size_t i = 1; i < n1; i++) {
		char x = s[i];
		if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
			total--;
		s[total++] = x;
	}
	size_t n2 = total;
	total = n2 ? 1 : 0;
	for (size_t i = 1; i < n2; i++) {
		char x = s[i];
		if (x == '\'' && i + 1 < n2 && s[i - 1] == ' ' && s[i + 1] == ' ') {
			total--;
			s[++i] = 0;
		}
		s[total++] = x;
	}
	size_t n3 = total;
	total = n3 ? 1 : 0;
	for (size_t i = 1; i < n3; i++) {
		char x = s[i];
		if (s[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
			char x1 = s[i + 1], x2 = i + 2 < n3 ? s[i + 2] : 0;
			if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
				total--;
		}
		s[total++] = x;
	}
	return total;
}

/* detok_pass - pieces of ids[0, n) into out (NULL: only count); the
 * first loses one leading space when strip. Returns the byte count. */
static size_t detok_pass(const struct eng_tok *t, const int32_t *ids, size_t n, bool strip,
			 bool unparse, char *out)
{
	char buf[ENG_BPE_MAX_TOKEN_BYTES]; /* a piece is never longer than its token */
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		size_t l = eng_tok_piece(t, ids[i], unparse, buf, sizeof(buf));
		size_t skip = strip && l && buf[0] == ' ';
		strip = false;
		if (out)
			memcpy(out + total, buf + skip, l - skip);
		total += l - skip;
	}
	return total;
}

int eng_tok_detokenize(const struct eng_tok *t, const int32_t *ids, size_t n, bool remove_special,
		       bool unparse_special, char *out, size_t cap, size_t *out_len)
{
	bool strip;

	if (out_len)
		*out_len = 0;
	if (!t || !out_len || (n && !ids) || (cap && !out))
		return -ST_INVAL;
	strip = t->add_space_prefix;
	if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
		strip = false;
		ids++, n--;
	}
	size_t total = detok_pass(t, ids, n, strip, unparse_special, NULL);
	if (cap < total + 1) {
		*out_len = total + 1;
		return -ST_TOOBIG;
	}
	detok_pass(t, ids, n, strip, unparse_special, out);
	if (t->clean_spaces)
		total = clean_spaces(out, total);
	out[total] = 0;
	*out_len = total;
	return 0;
}
