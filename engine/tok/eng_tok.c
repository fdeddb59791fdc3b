/* eng_tok.c - the GGUF tokenizer's front end: loading tokenizer.ggml.*,
 * llama.cpp's special-token fix-ups and EOG set, the special-token trie,
 * accessors. Encoding and decoding are in eng_tok_text.c. Contract in
 * eng_tok.h, invariants in eng_tok_int.h; source followed: llama.cpp
 * src/llama-vocab.cpp.
 */
#include "engine/tok/eng_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/tok/eng_bpe.h"
#include "engine/format/eng_gguf.h"
#include "engine/tok/eng_tok_int.h"

#define TOK_KEY(k) "tokenizer.ggml." k

/* ---- the string -> id table ---- */

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

/* find_slot - the slot holding s[0, n), or the empty one ending its probe. */
static size_t find_slot(const struct eng_tok *t, const char *s, size_t n)
{
	size_t i = (size_t)str_hash(s, n) & t->mask;
	for (;; i = (i + 1) & t->mask) {
		int32_t id = t->slots[i];
		if (id < 0 || (t->len[id] == n && memcmp(t->pool + t->off[id], s, n) == 0))
			return i;
	}
}

int32_t eng__tok_lookup(const struct eng_tok *t, const char *s, size_t n)
{
	return t->slots[find_slot(t, s, n)];
}

int32_t eng_tok_find(const struct eng_tok *t, const char *token_text)
{
	return t && token_text ? eng__tok_lookup(t, token_text, strlen(token_text)) : -1;
}

/* ---- destroy and accessors ---- */

void eng_tok_destroy(struct eng_tok *t)
{
	if (!t)
		return;
	mem_free(t->pool);
	mem_free(t->off);
	mem_free(t->len);
	mem_free(t->score);
	mem_free(t->attr);
	mem_free(t->slots);
	eng_bpe_destroy(t->bpe);
	mem_free(t->trie);
	mem_free(t->prio);
	mem_free(t->by_prio);
	mem_free(t);
}

bool eng__tok_valid_id(const struct eng_tok *t, int32_t id)
{
	return t && id >= 0 && (size_t)id < t->n;
}

size_t eng_tok_n_vocab(const struct eng_tok *t)
{
	return t ? t->n : 0;
}

int32_t eng_tok_bos(const struct eng_tok *t)
{
	return t ? t->bos : -1;
}

int32_t eng_tok_eos(const struct eng_tok *t)
{
	return t ? t->eos : -1;
}

int32_t eng_tok_eot(const struct eng_tok *t)
{
	return t ? t->eot : -1;
}

int32_t eng_tok_unk(const struct eng_tok *t)
{
	return t ? t->unk : -1;
}

int32_t eng_tok_pad(const struct eng_tok *t)
{
	return t ? t->pad : -1;
}

bool eng_tok_add_bos(const struct eng_tok *t)
{
	return t && t->add_bos;
}

bool eng_tok_is_eog(const struct eng_tok *t, int32_t id)
{
	return eng__tok_valid_id(t, id) && (t->attr[id] & ENG_TOK_ATTR_EOG);
}

bool eng_tok_is_control(const struct eng_tok *t, int32_t id)
{
	return eng__tok_valid_id(t, id) && (t->attr[id] & ENG_TOK_ATTR_CONTROL);
}

const char *eng_tok_text(const struct eng_tok *t, int32_t id)
{
	return eng__tok_valid_id(t, id) ? t->pool + t->off[id] : NULL;
}

/* ---- loading: arrays ---- */

/* get_array - the array at key with elements of type a or b and at least
 * min_n of them. Returns 0, -ST_NOTFOUND (absent) or -ST_CORRUPT. */
static int get_array(const struct eng_gguf *g, const char *key, enum eng_gguf_vtype a,
		     enum eng_gguf_vtype b, uint64_t min_n, struct eng_gguf_val *arr, uint64_t *n,
		     char *err, size_t errlen)
{
	enum eng_gguf_vtype et;
	int rc = eng_gguf_get_arr(g, key, arr);

	if (rc == -ST_NOTFOUND)
		return rc;
	if (rc || eng_gguf_arr_info(arr, &et, n) || (et != a && et != b))
		return st_errf(-ST_CORRUPT, err, errlen, "%s: not an array of %s", key,
			       eng_gguf_vtype_name(a));
	if (*n < min_n)
		return st_errf(-ST_CORRUPT, err, errlen, "%s: %llu entries for %llu tokens", key,
			       (unsigned long long)*n, (unsigned long long)min_n);
	return 0;
}

/* token_bytes - the stored length of one GGUF token string: cut at an
 * embedded NUL; 0 means "[EMPTY_<id>]" replaces it. */
static size_t token_bytes(const char *s, uint64_t len)
{
	const char *z = memchr(s, 0, (size_t)len);
	return z ? (size_t)(z - s) : (size_t)len;
}

/* alloc_vocab - per-token arrays and the string table for n tokens. */
static int alloc_vocab(struct eng_tok *t, size_t n, size_t pool_bytes, char *err, size_t errlen)
{
	t->n = n;
	t->mask = 15;
	while (t->mask + 1 < 2 * n)
		t->mask = 2 * t->mask + 1;
	t->pool = mem_alloc(pool_bytes);
	t->off = mem_alloc(n * sizeof(*t->off));
	t->len = mem_alloc(n * sizeof(*t->len));
	t->score = mem_calloc(n, sizeof(*t->score));
	t->attr = mem_alloc(n * sizeof(*t->attr));
	t->slots = mem_alloc((t->mask + 1) * sizeof(*t->slots));
	if (!t->pool || !t->off || !t->len || !t->score || !t->attr || !t->slots)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for %zu tokens", n);
	memset(t->slots, 0xFF, (t->mask + 1) * sizeof(*t->slots));
	memset(t->attr, ENG_TOK_ATTR_NORMAL, n);
	return 0;
}

/* pool_size - bytes the token strings need (pass 1 of load_tokens). */
static int pool_size(const struct eng_gguf_val *arr, uint64_t n, size_t *total, char *err,
		     size_t errlen)
{
	struct eng_gguf_val v;
	uint64_t cur = 0, i = 0, sum = 0;
	const char *s;
	uint64_t len;

	for (; i < n && eng_gguf_arr_next(arr, &cur, &v); i++) {
		if (eng_gguf_val_str(&v, &s, &len))
			return st_errf(-ST_CORRUPT, err, errlen, "token %llu unreadable",
				       (unsigned long long)i);
		size_t l = token_bytes(s, len);
		if (l > ENG_BPE_MAX_TOKEN_BYTES)
			return st_errf(-ST_TOOBIG, err, errlen,
				       "token %llu is %zu bytes (limit %u)", (unsigned long long)i,
				       l, ENG_BPE_MAX_TOKEN_BYTES);
		sum += (l ? l : 24) + 1;
	}
	if (i != n)
		return st_errf(-ST_CORRUPT, err, errlen, "tokens: %llu of %llu readable",
			       (unsigned long long)i, (unsigned long long)n);
	if (sum > UINT32_MAX)
		return st_errf(-ST_TOOBIG, err, errlen, "token strings total %llu bytes",
			       (unsigned long long)sum);
	*total = (size_t)sum;
	return 0;
}

/* add_token - copy token id's string to pool[at] and index it. */
static int add_token(struct eng_tok *t, size_t id, const char *s, size_t l, uint32_t at,
		     char *err, size_t errlen)
{
	char *dst = t->pool + at;

	if (l)
		memcpy(dst, s, l);
	else
		l = (size_t)snprintf(dst, 24, "[EMPTY_%zu]", id);
	dst[l] = 0;
	t->off[id] = at;
	t->len[id] = (uint32_t)l;
	if (t->len[id] > t->max_len)
		t->max_len = t->len[id];
	size_t slot = find_slot(t, dst, l);
	if (t->slots[slot] >= 0)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "duplicate token in vocabulary: '%.40s' has ids %ld and %zu", dst,
			       (long)t->slots[slot], id);
	t->slots[slot] = (int32_t)id;
	return 0;
}

/* load_tokens - tokenizer.ggml.tokens into pool/off/len/slots. */
static int load_tokens(struct eng_tok *t, const struct eng_gguf *g, char *err, size_t errlen)
{
	struct eng_gguf_val arr, v;
	uint64_t n, cur = 0, len;
	size_t total = 0;
	const char *s;
	uint32_t at = 0;

	int rc = get_array(g, TOK_KEY("tokens"), ENG_GGUF_VTYPE_STRING, ENG_GGUF_VTYPE_STRING, 0,
			   &arr, &n, err, errlen);
	if (rc == -ST_NOTFOUND)
		return st_errf(rc, err, errlen, "no tokenizer.ggml.tokens");
	if (rc)
		return rc;
	if (n == 0 || n > ENG_BPE_MAX_TOKENS)
		return st_errf(-ST_TOOBIG, err, errlen, "%llu tokens (limits 1..%u)",
			       (unsigned long long)n, ENG_BPE_MAX_TOKENS);
	rc = pool_size(&arr, n, &total, err, errlen);
	if (!rc)
		rc = alloc_vocab(t, (size_t)n, total, err, errlen);
	for (size_t i = 0; !rc && i < n && eng_gguf_arr_next(&arr, &cur, &v); i++) {
		eng_gguf_val_str(&v, &s, &len); /* readable: pool_size checked */
		size_t l = token_bytes(s, len);
		rc = add_token(t, i, s, l, at, err, errlen);
		at += (uint32_t)(l ? l : 24) + 1;
	}
	return rc;
}

/* load_scores - tokenizer.ggml.scores (f32 or i32), optional. */
static int load_scores(struct eng_tok *t, const struct eng_gguf *g, char *err, size_t errlen)
{
	struct eng_gguf_val arr, v;
	uint64_t n;
	double d;

	int rc = get_array(g, TOK_KEY("scores"), ENG_GGUF_VTYPE_FLOAT32, ENG_GGUF_VTYPE_INT32, t->n,
			   &arr, &n, err, errlen);
	if (rc)
		return rc == -ST_NOTFOUND ? 0 : rc;
	for (size_t i = 0; i < t->n; i++) {
		if (eng_gguf_arr_at(&arr, i, &v) || eng_gguf_val_f64(&v, &d))
			return st_errf(-ST_CORRUPT, err, errlen, "score %zu unreadable", i);
		t->score[i] = (float)d;
	}
	return 0;
}

/* type_attr - llama_token_type (GGUF token_type) to attribute bits. */
static uint8_t type_attr(int64_t type)
{
	switch (type) {
	case 1: return ENG_TOK_ATTR_NORMAL;
	case 2: return ENG_TOK_ATTR_UNKNOWN;
	case 3: return ENG_TOK_ATTR_CONTROL;
	case 4: return ENG_TOK_ATTR_USER_DEFINED;
	case 5: return ENG_TOK_ATTR_UNUSED;
	case 6: return ENG_TOK_ATTR_BYTE;
	default: return 0; /* UNDEFINED */
	}
}

/* load_types - tokenizer.ggml.token_type (i32), optional (all NORMAL). */
static int load_types(struct eng_tok *t, const struct eng_gguf *g, char *err, size_t errlen)
{
	struct eng_gguf_val arr, v;
	uint64_t n;
	int64_t x;

	int rc = get_array(g, TOK_KEY("token_type"), ENG_GGUF_VTYPE_INT32, ENG_GGUF_VTYPE_INT32,
			   t->n, &arr, &n, err, errlen);
	if (rc)
		return rc == -ST_NOTFOUND ? 0 : rc;
	for (size_t i = 0; i < t->n; i++) {
		if (eng_gguf_arr_at(&arr, i, &v) || eng_gguf_val_i64(&v, &x))
			return st_errf(-ST_CORRUPT, err, errlen, "token_type %zu unreadable", i);
		t->attr[i] = type_attr(x);
	}
	return 0;
}

/* ---- loading: model, pre-tokenizer, flags, special ids ---- */

/* A tokenizer.ggml.pre name we run, with llama.cpp's flags for it. */
struct pre_def {
	const char *name;
	enum eng_bpe_pretok pretok;
	bool clean_spaces;
	bool add_bos;
};

static const struct pre_def pre_defs[] = {
	{ "gpt-2", ENG_BPE_PRETOK_GPT2, true, false },
	{ "gpt2", ENG_BPE_PRETOK_GPT2, true, false },
	{ "llama3", ENG_BPE_PRETOK_LLAMA3, true, true },
	{ "llama-v3", ENG_BPE_PRETOK_LLAMA3, true, true },
	{ "llama-bpe", ENG_BPE_PRETOK_LLAMA3, true, true },
	{ "falcon3", ENG_BPE_PRETOK_LLAMA3, true, true },
	{ "pixtral", ENG_BPE_PRETOK_LLAMA3, true, true },
	{ "qwen2", ENG_BPE_PRETOK_QWEN2, false, false },
	{ "deepseek-r1-qwen", ENG_BPE_PRETOK_QWEN2, false, false },
	{ "megrez", ENG_BPE_PRETOK_QWEN2, true, false },
	{ "smollm", ENG_BPE_PRETOK_SMOLLM, false, false },
	/* names llama.cpp maps onto the same regexes (src/llama-vocab.cpp),
	 * with its flags for each */
	{ "dbrx", ENG_BPE_PRETOK_DBRX, true, false },
	{ "smaug-bpe", ENG_BPE_PRETOK_DBRX, true, false },
	{ "olmo", ENG_BPE_PRETOK_GPT2, true, false },
	{ "mpt", ENG_BPE_PRETOK_GPT2, true, false },
	{ "refact", ENG_BPE_PRETOK_SMOLLM, true, false },
	{ "codeshell", ENG_BPE_PRETOK_SMOLLM, true, false },
	{ "command-r", ENG_BPE_PRETOK_SMOLLM, false, false },
	{ "stablelm2", ENG_BPE_PRETOK_QWEN2, true, false },
};

/* opt_str - string key, NULL when absent; -ST_CORRUPT when not a string. */
static int opt_str(const struct eng_gguf *g, const char *key, const char **s, char *err,
		   size_t errlen)
{
	int rc = eng_gguf_get_str(g, key, s, NULL);

	if (rc == -ST_NOTFOUND) {
		*s = NULL;
		return 0;
	}
	return rc ? st_errf(-ST_CORRUPT, err, errlen, "%s: not a string", key) : 0;
}

/* opt_bool - *b = the key's value when present. */
static int opt_bool(const struct eng_gguf *g, const char *key, bool *b, char *err, size_t errlen)
{
	int rc = eng_gguf_get_bool(g, key, b);

	if (rc == -ST_NOTFOUND)
		return 0;
	return rc ? st_errf(-ST_CORRUPT, err, errlen, "%s: not a bool", key) : 0;
}

/* load_kind - tokenizer.ggml.model and .pre: kind, defaults, *pre. */
static int load_kind(struct eng_tok *t, const struct eng_gguf *g, const struct pre_def **pre,
		     char *err, size_t errlen)
{
	const char *model, *name;
	int rc = opt_str(g, TOK_KEY("model"), &model, err, errlen);

	if (!rc)
		rc = opt_str(g, TOK_KEY("pre"), &name, err, errlen);
	if (rc)
		return rc;
	*pre = NULL;
	if (!model)
		return st_errf(-ST_NOTFOUND, err, errlen, "no tokenizer.ggml.model");
	if (strcmp(model, "llama") == 0) {
		t->kind = ENG_TOK_KIND_SPM;
		t->add_bos = t->add_space_prefix = true;
		return 0;
	}
	if (strcmp(model, "gpt2") != 0)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "tokenizer model '%.40s'", model);
	t->kind = ENG_TOK_KIND_BPE;
	for (size_t i = 0; name && i < sizeof(pre_defs) / sizeof(pre_defs[0]); i++)
		if (strcmp(name, pre_defs[i].name) == 0)
			*pre = &pre_defs[i];
	if (!*pre)
		return st_errf(-ST_UNSUPPORTED, err, errlen, "BPE pre-tokenizer '%.40s'",
			       name ? name : "(none: llama.cpp's default chain)");
	t->clean_spaces = (*pre)->clean_spaces;
	t->add_bos = (*pre)->add_bos;
	return 0;
}

/* opt_id - a tokenizer.ggml.*_token_id key: kept when absent or >= n (as
 * llama.cpp does, which warns), -ST_CORRUPT when not an unsigned integer. */
static int opt_id(const struct eng_tok *t, const struct eng_gguf *g, const char *key, int32_t *id,
		  char *err, size_t errlen)
{
	uint32_t v;
	int rc = eng_gguf_get_u32(g, key, &v);

	if (*id >= 0 && (size_t)*id >= t->n)
		*id = -1; /* a default outside the vocabulary */
	if (rc == -ST_NOTFOUND)
		return 0;
	if (rc)
		return st_errf(-ST_CORRUPT, err, errlen, "%s: not an unsigned integer", key);
	if (v < t->n)
		*id = (int32_t)v;
	return 0;
}

/* The ids llama.cpp tracks while loading; fim ones only feed EOG. */
struct tok_ids {
	int32_t bos, eos, eot, eom, unk, pad;
	int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

static int load_ids(const struct eng_tok *t, const struct eng_gguf *g, struct tok_ids *d,
		    char *err, size_t errlen)
{
	const struct {
		const char *key;
		int32_t *id;
	} keys[] = {
		{ TOK_KEY("bos_token_id"), &d->bos },	  { TOK_KEY("eos_token_id"), &d->eos },
		{ TOK_KEY("eot_token_id"), &d->eot },	  { TOK_KEY("eom_token_id"), &d->eom },
		{ TOK_KEY("unknown_token_id"), &d->unk }, { TOK_KEY("padding_token_id"), &d->pad },
		{ TOK_KEY("fim_pre_token_id"), &d->fim_pre }, { TOK_KEY("fim_suf_token_id"), &d->fim_suf },
		{ TOK_KEY("fim_mid_token_id"), &d->fim_mid }, { TOK_KEY("fim_pad_token_id"), &d->fim_pad },
		{ TOK_KEY("fim_rep_token_id"), &d->fim_rep }, { TOK_KEY("fim_sep_token_id"), &d->fim_sep },
		{ TOK_KEY("prefix_token_id"), &d->fim_pre }, { TOK_KEY("suffix_token_id"), &d->fim_suf },
		{ TOK_KEY("middle_token_id"), &d->fim_mid },
	};
	bool spm = t->kind == ENG_TOK_KIND_SPM;

	*d = (struct tok_ids){ .bos = spm ? 1 : 11, .eos = spm ? 2 : 11, .eot = -1, .eom = -1,
			       .unk = spm ? 0 : -1, .pad = -1, .fim_pre = -1, .fim_suf = -1,
			       .fim_mid = -1, .fim_pad = -1, .fim_rep = -1, .fim_sep = -1 };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int rc = opt_id(t, g, keys[i].key, keys[i].id, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- llama.cpp's fix-ups by token text (llama_vocab::impl::load) ---- */

static const char *const eot_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
	"<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
	"<end_of_utterance>", NULL,
};
static const char *const eom_names[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_names[] = {
	"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
	"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>", "\xE2\x96\x81<PRE>",
	"<|code_prefix|>", "<|prefix|>", NULL,
};
static const char *const fim_suf_names[] = {
	"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
	"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>", "\xE2\x96\x81<SUF>",
	"<|code_suffix|>", "<|suffix|>", NULL,
};
static const char *const fim_mid_names[] = {
	"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
	"<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>", "\xE2\x96\x81<MID>",
	"<|code_middle|>", "<|middle|>", NULL,
};
static const char *const fim_pad_names[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
					     "[PAD]", NULL };
static const char *const fim_rep_names[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
					     "<REPO>", "<reponame>", NULL };
static const char *const fim_sep_names[] = { "<|file_sep|>", NULL };
static const char *const eog_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
	"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
	"_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
	"<turn|>", "<|tool_response>",
	"<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~[", NULL,
};

/* detect - when *id is unset, the first present name becomes it, marked
 * CONTROL (llama.cpp's "control-looking token" override). */
static void detect(struct eng_tok *t, const char *const *names, int32_t *id)
{
	for (; *id < 0 && *names; names++) {
		int32_t x = eng_tok_find(t, *names);
		if (x >= 0) {
			*id = x;
			t->attr[x] |= ENG_TOK_ATTR_CONTROL;
		}
	}
}

static void mark_eog(struct eng_tok *t, int32_t id)
{
	if (id >= 0)
		t->attr[id] |= ENG_TOK_ATTR_EOG;
}

/* mark_unused - CONTROL tokens whose text says "unused" are UNUSED too. */
static void mark_unused(struct eng_tok *t)
{
	for (size_t i = 0; i < t->n; i++)
		if ((t->attr[i] & ENG_TOK_ATTR_CONTROL) && strstr(t->pool + t->off[i], "unused"))
			t->attr[i] |= ENG_TOK_ATTR_UNUSED;
}

/* eog_id - id of name when it is EOG, else -1. */
static int32_t eog_id(const struct eng_tok *t, const char *name)
{
	int32_t id = eng_tok_find(t, name);
	return id >= 0 && (t->attr[id] & ENG_TOK_ATTR_EOG) ? id : -1;
}

/* eog_workarounds - llama.cpp's o200k_harmony / solar-open "<|end|>" and
 * gemma4 / paddleocr "</s>" exceptions, and the gpt-oss user-defined set. */
static void eog_workarounds(struct eng_tok *t)
{
	static const char *const user[] = { "<|channel|>", "<|message|>", "<|start|>",
					    "<|constrain|>" };
	for (size_t i = 0; i < sizeof(user) / sizeof(user[0]); i++) {
		int32_t id = eng_tok_find(t, user[i]);
		if (id >= 0)
			t->attr[id] = ENG_TOK_ATTR_USER_DEFINED | (t->attr[id] & ENG_TOK_ATTR_EOG);
	}
	bool ret = eog_id(t, "<|return|>") >= 0, flush = eog_id(t, "<|flush|>") >= 0;
	bool call = eog_id(t, "<|call|>") >= 0 || eog_id(t, "<|calls|>") >= 0;
	int32_t end = eog_id(t, "<|end|>");
	if (end >= 0 && call && (ret || flush))
		t->attr[end] = ENG_TOK_ATTR_USER_DEFINED;
	int32_t s = eog_id(t, "</s>");
	if (s >= 0 && eog_id(t, "<|tool_response>") >= 0)
		t->attr[s] = ENG_TOK_ATTR_NORMAL;
}

/* fixups - EOT/EOM/FIM detection, unused marking and the EOG set, in
 * llama.cpp's order. */
static void fixups(struct eng_tok *t, struct tok_ids *d)
{
	detect(t, eot_names, &d->eot);
	detect(t, eom_names, &d->eom);
	detect(t, fim_pre_names, &d->fim_pre);
	detect(t, fim_suf_names, &d->fim_suf);
	detect(t, fim_mid_names, &d->fim_mid);
	detect(t, fim_pad_names, &d->fim_pad);
	detect(t, fim_rep_names, &d->fim_rep);
	detect(t, fim_sep_names, &d->fim_sep);
	mark_unused(t);
	mark_eog(t, d->fim_pad);
	mark_eog(t, d->fim_rep);
	mark_eog(t, d->fim_sep);
	for (const char *const *nm = eog_names; *nm; nm++) {
		int32_t id = eng_tok_find(t, *nm);
		if (id >= 0)
			t->attr[id] |= ENG_TOK_ATTR_EOG | ENG_TOK_ATTR_CONTROL;
	}
	mark_eog(t, d->eos);
	mark_eog(t, d->eot);
	mark_eog(t, d->eom);
	eog_workarounds(t);
}

/* byte_ids - SPM byte fallback: "<0xXX>", else the one-byte token. */
static void byte_ids(struct eng_tok *t)
{
	char hex[8];

	for (unsigned b = 0; b < 256; b++) {
		snprintf(hex, sizeof(hex), "<0x%02X>", b);
		t->byte_id[b] = eng_tok_find(t, hex);
		if (t->byte_id[b] < 0) {
			char one = (char)b;
			t->byte_id[b] = eng__tok_lookup(t, &one, 1);
		}
	}
}

/* ---- the special-token trie ---- */

static bool is_special_attr(uint8_t a)
{
	return a & (ENG_TOK_ATTR_CONTROL | ENG_TOK_ATTR_USER_DEFINED | ENG_TOK_ATTR_UNKNOWN);
}

/* eng__tok_trie_child - the child of node for byte c, -1 if none. */
int32_t eng__tok_trie_child(const struct eng_tok *t, int32_t node, uint8_t c)
{
	if (node == 0)
		return t->root[c];
	int32_t k = t->trie[node].child;
	while (k >= 0 && t->trie[k].byte != c)
		k = t->trie[k].sibling;
	return k;
}

/* trie_add - the child of node for byte c, created when missing (room for
 * it was reserved by build_trie). */
static int32_t trie_add(struct eng_tok *t, int32_t node, uint8_t c)
{
	int32_t k = eng__tok_trie_child(t, node, c);

	if (k >= 0)
		return k;
	k = (int32_t)t->n_trie++;
	t->trie[k] = (struct eng_tok_trie){ .child = -1, .sibling = t->trie[node].child, .id = -1,
					    .byte = c };
	t->trie[node].child = k;
	if (node == 0)
		t->root[c] = k;
	return k;
}

/* sort_specials - by_prio = special ids, longer string first, then lower
 * id (llama.cpp std::sort()s by length only; equal lengths rarely
 * overlap); prio[id] = rank. A counting sort on length: stable, O(n). */
static int sort_specials(struct eng_tok *t, char *err, size_t errlen)
{
	size_t *start = mem_calloc(ENG_BPE_MAX_TOKEN_BYTES + 2, sizeof(*start));

	if (!start)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for the special tokens");
	for (size_t i = 0; i < t->n; i++) /* start[L] = specials longer than L-1 ... */
		if (is_special_attr(t->attr[i]))
			start[ENG_BPE_MAX_TOKEN_BYTES - t->len[i] + 1]++;
	for (size_t l = 1; l <= ENG_BPE_MAX_TOKEN_BYTES + 1; l++)
		start[l] += start[l - 1]; /* ... as a prefix sum over descending length */
	for (size_t i = 0; i < t->n; i++)
		if (is_special_attr(t->attr[i]))
			t->by_prio[start[ENG_BPE_MAX_TOKEN_BYTES - t->len[i]]++] = (int32_t)i;
	for (size_t r = 0; r < t->n_special; r++)
		t->prio[t->by_prio[r]] = (uint32_t)r;
	mem_free(start);
	return 0;
}

static int build_trie(struct eng_tok *t, char *err, size_t errlen)
{
	size_t nodes = 1;

	for (size_t i = 0; i < t->n; i++)
		if (is_special_attr(t->attr[i]))
			t->n_special++, nodes += t->len[i];
	t->trie = mem_alloc(nodes * sizeof(*t->trie));
	t->prio = mem_calloc(t->n, sizeof(*t->prio));
	t->by_prio = mem_alloc((t->n_special ? t->n_special : 1) * sizeof(*t->by_prio));
	if (!t->trie || !t->prio || !t->by_prio)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for the special tokens");
	t->trie[0] = (struct eng_tok_trie){ .child = -1, .sibling = -1, .id = -1 };
	t->n_trie = 1;
	memset(t->root, 0xFF, sizeof(t->root));
	int rc = sort_specials(t, err, errlen);
	if (rc)
		return rc;
	for (size_t r = 0; r < t->n_special; r++) {
		int32_t id = t->by_prio[r], node = 0;
		const uint8_t *s = (const uint8_t *)t->pool + t->off[id];
		for (uint32_t j = 0; j < t->len[id]; j++)
			node = trie_add(t, node, s[j]);
		t->trie[node].id = id;
	}
	return 0;
}

/* ---- loading: the byte-level BPE model ---- */

/* copy_merges - tokenizer.ggml.merges as NUL-terminated strings (*pool
 * and *list new). */
static int copy_merges(const struct eng_gguf *g, char **pool, const char ***list, size_t *n_out,
		       char *err, size_t errlen)
{
	struct eng_gguf_val arr, v;
	uint64_t n, cur = 0, len, total = 0;
	const char *s;

	int rc = get_array(g, TOK_KEY("merges"), ENG_GGUF_VTYPE_STRING, ENG_GGUF_VTYPE_STRING, 0,
			   &arr, &n, err, errlen);
	if (rc == -ST_NOTFOUND)
		return st_errf(rc, err, errlen, "no tokenizer.ggml.merges");
	if (rc)
		return rc;
	if (n > ENG_BPE_MAX_MERGES)
		return st_errf(-ST_TOOBIG, err, errlen, "%llu merges (limit %u)",
			       (unsigned long long)n, ENG_BPE_MAX_MERGES);
	while (eng_gguf_arr_next(&arr, &cur, &v) && !eng_gguf_val_str(&v, &s, &len))
		total += token_bytes(s, len) + 1;
	*pool = mem_alloc(total ? (size_t)total : 1);
	*list = mem_alloc((n ? (size_t)n : 1) * sizeof(**list));
	if (!*pool || !*list)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for %llu merges",
			       (unsigned long long)n);
	size_t at = 0, i = 0;
	for (cur = 0; i < n && eng_gguf_arr_next(&arr, &cur, &v); i++) {
		eng_gguf_val_str(&v, &s, &len);
		size_t l = token_bytes(s, len);
		memcpy(*pool + at, s, l);
		(*pool)[at + l] = 0;
		(*list)[i] = *pool + at;
		at += l + 1;
	}
	*n_out = i;
	return i == n ? 0
		      : st_errf(-ST_CORRUPT, err, errlen, "merges: %zu of %llu readable", i,
				(unsigned long long)n);
}

static int load_bpe(struct eng_tok *t, const struct eng_gguf *g, enum eng_bpe_pretok pretok,
		    char *err, size_t errlen)
{
	char *mpool = NULL;
	const char **merges = NULL;
	const char **tokens = mem_alloc(t->n * sizeof(*tokens));
	size_t n_merges = 0;
	int rc;

	if (!tokens)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory for %zu tokens", t->n);
	for (size_t i = 0; i < t->n; i++)
		tokens[i] = t->pool + t->off[i];
	rc = copy_merges(g, &mpool, &merges, &n_merges, err, errlen);
	if (!rc)
		rc = eng_bpe_create(tokens, t->n, merges, n_merges, NULL, 0, pretok, &t->bpe, err,
				    errlen);
	mem_free(tokens);
	mem_free(merges);
	mem_free(mpool);
	return rc;
}

/* ---- eng_tok_from_gguf ---- */

/* load_flags - add_bos / add_space_prefix keys and the special ids. */
static int load_flags(struct eng_tok *t, const struct eng_gguf *g, struct tok_ids *d, char *err,
		      size_t errlen)
{
	int rc = opt_bool(g, TOK_KEY("add_space_prefix"), &t->add_space_prefix, err, errlen);

	if (!rc)
		rc = opt_bool(g, TOK_KEY("add_bos_token"), &t->add_bos, err, errlen);
	if (!rc)
		rc = load_ids(t, g, d, err, errlen);
	if (rc)
		return rc;
	if (t->add_bos && d->bos < 0)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "add_bos_token is true, but bos_token_id is not set");
	return 0;
}

static int tok_load(struct eng_tok *t, const struct eng_gguf *g, char *err, size_t errlen)
{
	const struct pre_def *pre;
	struct tok_ids d;
	int rc = load_kind(t, g, &pre, err, errlen);

	if (!rc)
		rc = load_tokens(t, g, err, errlen);
	if (!rc)
		rc = load_scores(t, g, err, errlen);
	if (!rc)
		rc = load_types(t, g, err, errlen);
	if (!rc)
		rc = load_flags(t, g, &d, err, errlen);
	if (rc)
		return rc;
	fixups(t, &d);
	t->bos = d.bos, t->eos = d.eos, t->eot = d.eot, t->eom = d.eom;
	t->unk = d.unk, t->pad = d.pad;
	byte_ids(t);
	rc = build_trie(t, err, errlen);
	if (!rc && t->kind == ENG_TOK_KIND_BPE)
		rc = load_bpe(t, g, pre->pretok, err, errlen);
	return rc;
}

int eng_tok_from_gguf(const struct eng_gguf *g, struct eng_tok **out, char *err, size_t errlen)
{
	struct eng_tok *t;
	int rc;

	if (out)
		*out = NULL;
	if (!g || !out)
		return st_errf(-ST_INVAL, err, errlen, "eng_tok_from_gguf: invalid argument");
	t = mem_calloc(1, sizeof(*t));
	if (!t)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	rc = tok_load(t, g, err, errlen);
	if (rc)
		goto out_destroy;
	*out = t;
	return 0;
out_destroy:
	eng_tok_destroy(t);
	return rc;
}

