/* eng_bpe_hf.c - read a HF `tokenizers` tokenizer.json into the arrays
 * eng_bpe_create takes (contract in eng_bpe.h).
 *
 * Fields read (tokenizers' serialization, version "1.0"):
 *   model: {type "BPE", vocab {token: id}, merges ["a b"] or [["a","b"]],
 *           continuing_subword_prefix / end_of_word_suffix empty or null,
 *           byte_fallback / ignore_merges false or absent}
 *   added_tokens: [{id, content, special}] - appended, or matching the
 *           vocabulary entry with the same id
 *   pre_tokenizer: ByteLevel, use_regex true, add_prefix_space false
 *   normalizer: null
 * The decoder and post-processor are not read: decoding is byte-level and
 * special ids are placed by callers. Everything else is rejected with
 * -ST_UNSUPPORTED rather than tokenized differently from HF.
 */
#include "engine/tok/eng_bpe.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/format/eng_file.h"

/* What the JSON holds, as arrays for eng_bpe_create. Strings are borrowed
 * from the JSON tree, except pair merges joined into `joined`. */
struct hf {
	const char *path;    /* for messages */
	json_t *root;        /* the parsed file */
	const char **tokens; /* [n_tokens] by id */
	size_t n_tokens;     /* max id + 1 */
	const char **merges; /* [n_merges] "a b" */
	size_t n_merges;     /* merges */
	char **joined;       /* [n_merges] owned "a b" for pair merges, or NULL */
	int32_t *special;    /* [n_special] */
	size_t n_special;    /* special added tokens */
	char *err;           /* caller's buffer */
	size_t errlen;       /* its size */
};

__attribute__((format(printf, 3, 4)))
static int hf_err(struct hf *h, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = st_verrf(rc, h->err, h->errlen, h->path, fmt, ap);
	va_end(ap);
	return rc;
}

/* hf_parse - map the file, check its size and parse it. */
static int hf_parse(struct hf *h)
{
	struct eng__map map = { 0 };
	json_error_t je;
	int rc = eng__map_file(h->path, &map, h->err, h->errlen);

	if (rc)
		return rc;
	if (map.size > ENG_BPE_MAX_FILE_BYTES) {
		rc = hf_err(h, -ST_TOOBIG, "%zu bytes (limit %u)", map.size, ENG_BPE_MAX_FILE_BYTES);
		goto out_unmap;
	}
	h->root = json_loadb(map.data ? map.data : "", map.size, JSON_REJECT_DUPLICATES, &je);
	if (!h->root)
		rc = hf_err(h, -ST_CORRUPT, "not JSON: line %d column %d: %s", je.line, je.column,
			    je.text);
	else if (!json_is_object(h->root))
		rc = hf_err(h, -ST_CORRUPT, "top level is not an object");
out_unmap:
	eng__map_release(&map);
	return rc;
}

/* str_is - json string equal to s (false when not a string). */
static bool str_is(const json_t *j, const char *s)
{
	return json_is_string(j) && strcmp(json_string_value(j), s) == 0;
}

/* empty_or_null - absent, null, false or "". */
static bool empty_or_null(const json_t *j)
{
	return !j || json_is_null(j) || json_is_false(j) || str_is(j, "");
}

/* hf_check - refuse the features this tokenizer does not implement. */
static int hf_check(struct hf *h, const json_t *model)
{
	const json_t *pt = json_object_get(h->root, "pre_tokenizer");
	const json_t *norm = json_object_get(h->root, "normalizer");

	if (!str_is(json_object_get(model, "type"), "BPE"))
		return hf_err(h, -ST_UNSUPPORTED, "model.type is not \"BPE\"");
	if (!empty_or_null(json_object_get(model, "continuing_subword_prefix")) ||
	    !empty_or_null(json_object_get(model, "end_of_word_suffix")) ||
	    !empty_or_null(json_object_get(model, "byte_fallback")) ||
	    !empty_or_null(json_object_get(model, "ignore_merges")) ||
	    !empty_or_null(json_object_get(model, "dropout")))
		return hf_err(h, -ST_UNSUPPORTED, "BPE option (subword prefix/suffix, byte_fallback, "
				  "ignore_merges or dropout) not supported");
	if (!empty_or_null(norm))
		return hf_err(h, -ST_UNSUPPORTED, "a normalizer is not supported");
	if (!json_is_object(pt) || !str_is(json_object_get(pt, "type"), "ByteLevel") ||
	    json_is_false(json_object_get(pt, "use_regex")) ||
	    json_is_true(json_object_get(pt, "add_prefix_space")))
		return hf_err(h, -ST_UNSUPPORTED, "pre_tokenizer is not ByteLevel with the GPT-2 "
				  "regex and add_prefix_space false");
	return 0;
}

/* get_id - an integer id in [0, ENG_BPE_MAX_TOKENS). */
static int get_id(struct hf *h, const json_t *j, const char *what, size_t *id)
{
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return hf_err(h, -ST_CORRUPT, "%s: id is not a non-negative integer", what);
	if (json_integer_value(j) >= (json_int_t)ENG_BPE_MAX_TOKENS)
		return hf_err(h, -ST_TOOBIG, "%s: id %lld exceeds the %u-token limit", what,
			      (long long)json_integer_value(j), ENG_BPE_MAX_TOKENS);
	*id = (size_t)json_integer_value(j);
	return 0;
}

/* plain_string - a JSON string without embedded NUL. */
static const char *plain_string(const json_t *j)
{
	if (!json_is_string(j) || strlen(json_string_value(j)) != json_string_length(j))
		return NULL;
	return json_string_value(j);
}

/* size_ids - n_tokens = 1 + the largest id of vocab and added_tokens. */
static int size_ids(struct hf *h, const json_t *vocab, const json_t *added)
{
	const char *key;
	json_t *v;
	size_t i, id = 0;
	int rc;

	json_object_foreach((json_t *)vocab, key, v) {
		if ((rc = get_id(h, v, "model.vocab", &id)))
			return rc;
		if (id + 1 > h->n_tokens)
			h->n_tokens = id + 1;
	}
	json_array_foreach(added, i, v) {
		if ((rc = get_id(h, json_object_get(v, "id"), "added_tokens", &id)))
			return rc;
		if (id + 1 > h->n_tokens)
			h->n_tokens = id + 1;
	}
	if (h->n_tokens == 0)
		return hf_err(h, -ST_CORRUPT, "empty vocabulary");
	h->tokens = mem_calloc(h->n_tokens, sizeof(*h->tokens));
	h->special = mem_calloc(json_array_size(added) + 1, sizeof(*h->special));
	return h->tokens && h->special ? 0 : hf_err(h, -ST_NOMEM, "out of memory");
}

/* put_token - tokens[id] = s; an id given twice must name the same string. */
static int put_token(struct hf *h, size_t id, const char *s, const char *what)
{
	if (!s)
		return hf_err(h, -ST_CORRUPT, "%s: token %zu is not a string", what, id);
	if (h->tokens[id] && strcmp(h->tokens[id], s) != 0)
		return hf_err(h, -ST_CORRUPT, "%s: id %zu is both \"%.40s\" and \"%.40s\"", what, id,
			      h->tokens[id], s);
	h->tokens[id] = s;
	return 0;
}

/* fill_tokens - the id -> string array, special ids, and no gaps. */
static int fill_tokens(struct hf *h, const json_t *vocab, const json_t *added)
{
	const char *key;
	json_t *v;
	size_t i, id;
	int rc;

	json_object_foreach((json_t *)vocab, key, v) {
		id = (size_t)json_integer_value(v);
		if (strlen(key) != json_object_iter_key_len(json_object_key_to_iter(key)))
			return hf_err(h, -ST_CORRUPT, "model.vocab: a key holds a NUL byte");
		if ((rc = put_token(h, id, key, "model.vocab")))
			return rc;
	}
	json_array_foreach(added, i, v) {
		id = (size_t)json_integer_value(json_object_get(v, "id"));
		if ((rc = put_token(h, id, plain_string(json_object_get(v, "content")), "added_tokens")))
			return rc;
		if (json_is_true(json_object_get(v, "special")))
			h->special[h->n_special++] = (int32_t)id;
	}
	for (id = 0; id < h->n_tokens; id++)
		if (!h->tokens[id])
			return hf_err(h, -ST_CORRUPT, "no token has id %zu (ids must be 0..%zu)", id,
				      h->n_tokens - 1);
	return 0;
}

/* join_pair - "a b" for a ["a", "b"] merge (newer tokenizers write pairs). */
static int join_pair(struct hf *h, const json_t *pair, size_t i)
{
	const char *a = plain_string(json_array_get(pair, 0));
	const char *b = plain_string(json_array_get(pair, 1));

	if (json_array_size(pair) != 2 || !a || !b)
		return hf_err(h, -ST_CORRUPT, "model.merges[%zu] is not a string or a pair", i);
	size_t la = strlen(a), lb = strlen(b);
	h->joined[i] = mem_alloc(la + lb + 2);
	if (!h->joined[i])
		return hf_err(h, -ST_NOMEM, "out of memory");
	memcpy(h->joined[i], a, la);
	h->joined[i][la] = ' ';
	memcpy(h->joined[i] + la + 1, b, lb + 1);
	h->merges[i] = h->joined[i];
	return 0;
}

static int fill_merges(struct hf *h, const json_t *merges)
{
	json_t *m;
	size_t i;
	int rc;

	h->n_merges = json_array_size(merges);
	if (h->n_merges > ENG_BPE_MAX_MERGES)
		return hf_err(h, -ST_TOOBIG, "%zu merges (limit %u)", h->n_merges, ENG_BPE_MAX_MERGES);
	h->merges = mem_calloc(h->n_merges + 1, sizeof(*h->merges));
	h->joined = mem_calloc(h->n_merges + 1, sizeof(*h->joined));
	if (!h->merges || !h->joined)
		return hf_err(h, -ST_NOMEM, "out of memory");
	json_array_foreach(merges, i, m) {
		if (json_is_string(m)) {
			if (!(h->merges[i] = plain_string(m)))
				return hf_err(h, -ST_CORRUPT, "model.merges[%zu] holds a NUL byte", i);
		} else if ((rc = join_pair(h, m, i))) {
			return rc;
		}
	}
	return 0;
}

/* hf_read - everything but the final eng_bpe_create. */
static int hf_read(struct hf *h)
{
	int rc = hf_parse(h);
	if (rc)
		return rc;
	const json_t *model = json_object_get(h->root, "model");
	const json_t *added = json_object_get(h->root, "added_tokens");
	if (!json_is_object(model))
		return hf_err(h, -ST_CORRUPT, "no \"model\" object");
	if ((rc = hf_check(h, model)))
		return rc;
	const json_t *vocab = json_object_get(model, "vocab");
	const json_t *merges = json_object_get(model, "merges");
	if (!json_is_object(vocab) || !json_is_array(merges) || (added && !json_is_array(added)))
		return hf_err(h, -ST_CORRUPT, "model.vocab, model.merges or added_tokens missing or "
				  "of the wrong type");
	if (json_object_size(vocab) > ENG_BPE_MAX_TOKENS || json_array_size(added) > ENG_BPE_MAX_TOKENS)
		return hf_err(h, -ST_TOOBIG, "more than %u tokens", ENG_BPE_MAX_TOKENS);
	if ((rc = size_ids(h, vocab, added)) || (rc = fill_tokens(h, vocab, added)))
		return rc;
	return fill_merges(h, merges);
}

int eng_bpe_load_hf(const char *path, struct eng_bpe **out, char *err, size_t errlen)
{
	struct hf h = { .path = path, .err = err, .errlen = errlen };
	char msg[384];
	int rc;

	if (out)
		*out = NULL;
	if (!path || !out)
		return st_errf(-ST_INVAL, err, errlen, "eng_bpe_load_hf: invalid argument");
	rc = hf_read(&h);
	if (rc)
		goto out_free;
	rc = eng_bpe_create(h.tokens, h.n_tokens, h.merges, h.n_merges, h.special, h.n_special,
			    ENG_BPE_PRETOK_GPT2, out, msg, sizeof(msg));
	if (rc)
		st_errf(rc, err, errlen, "%s: %s", path, msg);
out_free:
	for (size_t i = 0; h.joined && i < h.n_merges; i++)
		mem_free(h.joined[i]);
	mem_free(h.joined);
	mem_free(h.merges);
	mem_free(h.tokens);
	mem_free(h.special);
	json_decref(h.root);
	return rc;
}
