/* eng_tok_int.h - internals shared by the GGUF tokenizer's files
 * (eng_tok.c: loading, special tokens, encode/decode front end; eng_spm.c:
 * the SentencePiece-style merge). Not for use outside engine/tok/eng_tok*.c and
 * engine/tok/eng_spm.c.
 *
 * Invariants after eng_tok_from_gguf:
 *   - token id's string lives NUL-terminated in pool at off[id], len[id]
 *     bytes (a GGUF string is cut at an embedded NUL, as llama.cpp's
 *     std::string(const char *) does; an empty one becomes "[EMPTY_<id>]");
 *   - slots is an open-addressing table (linear probing, power-of-two size,
 *     at most half full) of ids keyed by their strings; strings are unique;
 *   - attr[id] holds ENG_TOK_ATTR_* bits, final (llama.cpp's fix-ups done);
 *   - the special-token trie holds every id with CONTROL, USER_DEFINED or
 *     UNKNOWN, and prio[id] orders them: longer string first, then lower id.
 */
#ifndef ENG_TOK_INT_H
#define ENG_TOK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tok/eng_tok.h"

struct eng_bpe;

/* Token attributes, numbered as llama.h's llama_token_attr (low 6 bits),
 * plus our own EOG mark. */
enum eng_tok_attr {
	ENG_TOK_ATTR_UNKNOWN = 1 << 0,
	ENG_TOK_ATTR_UNUSED = 1 << 1,
	ENG_TOK_ATTR_NORMAL = 1 << 2,
	ENG_TOK_ATTR_CONTROL = 1 << 3,
	ENG_TOK_ATTR_USER_DEFINED = 1 << 4,
	ENG_TOK_ATTR_BYTE = 1 << 5,
	ENG_TOK_ATTR_EOG = 1 << 6, /* in llama.cpp's special_eog_ids */
};

enum eng_tok_kind {
	ENG_TOK_KIND_SPM = 0, /* tokenizer.ggml.model "llama" */
	ENG_TOK_KIND_BPE = 1, /* tokenizer.ggml.model "gpt2" */
};

/* One node of the special-token trie (first-child / next-sibling). */
struct eng_tok_trie {
	int32_t child;   /* first child node, -1 if none */
	int32_t sibling; /* next sibling node, -1 if none */
	int32_t id;      /* token ending here, -1 if none */
	uint8_t byte;    /* the byte leading here from the parent */
};

struct eng_tok {
	enum eng_tok_kind kind;
	size_t n;              /* ids */
	char *pool;            /* token strings, each NUL-terminated */
	uint32_t *off;         /* [n] offset in pool */
	uint32_t *len;         /* [n] string bytes */
	uint32_t max_len;      /* the longest; a token covers at most this many text bytes */
	float *score;          /* [n] tokenizer.ggml.scores (0 when absent) */
	uint8_t *attr;         /* [n] enum eng_tok_attr bits */
	int32_t *slots;        /* [mask + 1] id or -1 */
	size_t mask;           /* string table size - 1 */
	int32_t byte_id[256];  /* SPM byte fallback: "<0xXX>" (else the 1-char token), -1 */
	struct eng_bpe *bpe;   /* BPE kind: the byte-level model (merges, pre-tokenizer) */
	struct eng_tok_trie *trie; /* special-token trie, node 0 = root */
	size_t n_trie;         /* nodes */
	int32_t root[256];     /* root's child per first byte, -1 if none */
	uint32_t *prio;        /* [n] rank among special tokens (longest first) */
	int32_t *by_prio;      /* [n_special] id of each rank */
	size_t n_special;      /* ids in the trie */
	int32_t bos, eos, eot, eom, unk, pad; /* special ids, -1 if none */
	bool add_bos;          /* prompts start with BOS */
	bool add_space_prefix; /* SPM: " " before text at the start / after a special */
	bool clean_spaces;     /* detokenize: llama.cpp's clean_spaces passes */
};

/* Where encoded ids go: ids[0, max) is filled, n counts every id. */
struct eng_tok_out {
	int32_t *ids;
	size_t max;
	size_t n;
};

static inline void eng__tok_emit(struct eng_tok_out *o, int32_t id)
{
	if (o->n < o->max)
		o->ids[o->n] = id;
	o->n++;
}

/* eng__tok_lookup - id of the string s[0, n), -1 if none. */
int32_t eng__tok_lookup(const struct eng_tok *t, const char *s, size_t n);

/* Scratch for eng__spm_encode, grown on demand; zero-initialise, then
 * eng__spm_work_fini. */
struct eng_spm_work {
	char *esc;        /* escaped text ("▁" for " ") */
	void *sym;        /* symbols */
	void *heap;       /* bigram queue */
	size_t cap_bytes; /* text bytes + 1 the arrays hold (esc: 3x that) */
};

void eng__spm_work_fini(struct eng_spm_work *w);

/* eng__spm_encode - llm_tokenizer_spm_session::tokenize of text[0, len)
 * (one fragment without special tokens), with " " prepended when
 * prefix_space. Returns 0 or -ST_NOMEM / -ST_TOOBIG (scratch). */
int eng__spm_encode(const struct eng_tok *t, struct eng_spm_work *w, const char *text, size_t len,
		    bool prefix_space, struct eng_tok_out *o);

/* Shared by eng_tok.c and eng_tok_text.c: the special-token trie's child
 * of node for byte c (-1: none), and whether id is in the vocabulary. */
int32_t eng__tok_trie_child(const struct eng_tok *t, int32_t node, uint8_t c);
bool eng__tok_valid_id(const struct eng_tok *t, int32_t id);

#endif /* ENG_TOK_INT_H */
