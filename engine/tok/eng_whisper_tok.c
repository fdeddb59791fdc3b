/* eng_whisper_tok.c - Whisper special tokens, suppression lists, decoding. */
#include "engine/tok/eng_whisper_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "common/utf8.h"
#include "engine/tok/eng_bpe.h"

#define EW_MAX_SUPPRESS 512

static int32_t ew_id(const struct eng_whisper_tok *t, const char *s)
{
	return eng_bpe_token_id(t->bpe, s);
}

/* Read an array of ints from config.json into a new array. */
static int ew_int_array(const json_t *config, const char *key, int32_t **out, size_t *n)
{
	const json_t *a = json_object_get(config, key);
	*out = NULL;
	*n = 0;
	if (!json_is_array(a))
		return 0;
	*out = mem_calloc(json_array_size(a) + 1, sizeof(**out));
	if (!*out)
		return -ST_NOMEM;
	for (size_t i = 0; i < json_array_size(a); i++)
		if (json_is_integer(json_array_get(a, i)))
			(*out)[(*n)++] = (int32_t)json_integer_value(json_array_get(a, i));
	return 0;
}

int eng_whisper_tok_encode(const struct eng_whisper_tok *t, const char *text, int32_t **ids,
			   size_t *n)
{
	size_t len = strlen(text), cap = len + 1;
	*ids = mem_alloc(cap * sizeof(**ids));
	if (!*ids)
		return -ST_NOMEM;
	int rc = eng_bpe_encode(t->bpe, text, len, *ids, cap, n);
	if (rc) {
		mem_free(*ids);
		*ids = NULL;
	}
	return rc;
}

static int ew_cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static void ew_add(struct eng_whisper_tok *t, int32_t id)
{
	if (id >= 0 && t->n_suppress < EW_MAX_SUPPRESS)
		t->suppress[t->n_suppress++] = id;
}

/* Add the first token of `text` (always, or only when it is one token). */
static int ew_add_first(struct eng_whisper_tok *t, const char *text, bool only_single)
{
	int32_t *ids;
	size_t n;
	int rc = eng_whisper_tok_encode(t, text, &ids, &n);
	if (rc)
		return rc;
	if (n > 0 && (n == 1 || !only_single))
		ew_add(t, ids[0]);
	mem_free(ids);
	return 0;
}

/* faster-whisper's non_speech_tokens plus the special tokens that
 * get_suppressed_tokens adds for suppress_tokens=[-1]. */
static int ew_suppress_init(struct eng_whisper_tok *t)
{
	static const char *const symbols[] = {
		"\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]",
		"^", "_", "`", "{", "|", "}", "~", "「", "」", "『", "』", "<<", ">>", "<<<",
		">>>", "--", "---", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]",
		"{{", "}}", "♪♪", "♪♪♪",
	};
	/* U+2640..U+267F music symbols: their first token is safe to suppress. */
	static const char *const misc[] = { "♩", "♪", "♫", "♬", "♭", "♮", "♯" };
	char sp[32];
	t->suppress = mem_calloc(EW_MAX_SUPPRESS, sizeof(*t->suppress));
	if (!t->suppress)
		return -ST_NOMEM;
	int rc = ew_add_first(t, " -", false);
	if (!rc)
		rc = ew_add_first(t, " '", false);
	for (size_t i = 0; !rc && i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		snprintf(sp, sizeof(sp), " %s", symbols[i]);
		rc = ew_add_first(t, symbols[i], true);
		if (!rc)
			rc = ew_add_first(t, sp, true);
	}
	for (size_t i = 0; !rc && i < sizeof(misc) / sizeof(misc[0]); i++) {
		snprintf(sp, sizeof(sp), " %s", misc[i]);
		rc = ew_add_first(t, misc[i], false);
		if (!rc)
			rc = ew_add_first(t, sp, false);
	}
	int32_t specials[] = { t->transcribe, t->translate, t->sot, t->sot_prev, t->sot_lm,
			       t->no_speech };
	for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		ew_add(t, specials[i]);
	qsort(t->suppress, t->n_suppress, sizeof(int32_t), ew_cmp_i32);
	size_t u = 0;
	for (size_t i = 0; i < t->n_suppress; i++)
		if (u == 0 || t->suppress[u - 1] != t->suppress[i])
			t->suppress[u++] = t->suppress[i];
	t->n_suppress = u;
	return rc;
}

static int ew_special_ids(struct eng_whisper_tok *t, char *err, size_t errlen)
{
	t->eot = ew_id(t, "<|endoftext|>");
	t->sot = ew_id(t, "<|startoftranscript|>");
	t->sot_prev = ew_id(t, "<|startofprev|>");
	t->sot_lm = ew_id(t, "<|startoflm|>");
	t->no_timestamps = ew_id(t, "<|notimestamps|>");
	t->no_speech = ew_id(t, "<|nospeech|>");
	if (t->no_speech < 0)
		t->no_speech = ew_id(t, "<|nocaptions|>");
	t->transcribe = ew_id(t, "<|transcribe|>");
	t->translate = ew_id(t, "<|translate|>");
	t->ts_begin = t->no_timestamps + 1;
	if (t->eot < 0 || t->sot < 0 || t->no_timestamps < 0 || t->sot_prev < 0)
		return st_errf(-ST_CORRUPT, err, errlen,
			       "tokenizer.json lacks Whisper's special tokens");
	return 0;
}

int eng_whisper_tok_init(struct eng_whisper_tok *t, const char *tokenizer_json,
			 const json_t *config, int n_vocab, char *err, size_t errlen)
{
	*t = (struct eng_whisper_tok){ .multilingual = n_vocab >= 51865 };
	int rc = eng_bpe_load_hf(tokenizer_json, &t->bpe, err, errlen);
	if (!rc)
		rc = ew_special_ids(t, err, errlen);
	if (!rc)
		rc = ew_int_array(config, "lang_ids", &t->lang_ids, &t->n_langs);
	if (!rc)
		rc = ew_int_array(config, "suppress_ids_begin", &t->suppress_begin,
				  &t->n_suppress_begin);
	if (!rc)
		rc = ew_suppress_init(t);
	if (rc == -ST_NOMEM)
		st_errf(rc, err, errlen, "out of memory");
	if (rc)
		eng_whisper_tok_fini(t);
	return rc;
}

void eng_whisper_tok_fini(struct eng_whisper_tok *t)
{
	eng_bpe_destroy(t->bpe);
	mem_free(t->lang_ids);
	mem_free(t->suppress);
	mem_free(t->suppress_begin);
	*t = (struct eng_whisper_tok){ 0 };
}

int32_t eng_whisper_tok_lang(const struct eng_whisper_tok *t, const char *code)
{
	char s[32];
	snprintf(s, sizeof(s), "<|%s|>", code);
	int32_t id = ew_id(t, s);
	for (size_t i = 0; id >= 0 && i < t->n_langs; i++)
		if (t->lang_ids[i] == id)
			return id;
	return -1;
}

bool eng_whisper_tok_lang_known(const struct eng_whisper_tok *t, const char *code)
{
	char s[32];
	size_t n = strlen(code);
	if (n < 2 || n > 3)
		return false;
	for (size_t i = 0; i < n; i++)
		if (code[i] < 'a' || code[i] > 'z')
			return false;
	snprintf(s, sizeof(s), "<|%s|>", code);
	int32_t id = ew_id(t, s);
	return id > t->sot && id < t->no_timestamps;
}

bool eng_whisper_tok_lang_code(const struct eng_whisper_tok *t, int32_t id, char *out,
			       size_t cap)
{
	const char *s = eng_bpe_token_str(t->bpe, id);
	size_t n = s ? strlen(s) : 0;
	if (n < 5 || strncmp(s, "<|", 2) || strcmp(s + n - 2, "|>") || n - 4 >= cap)
		return false;
	memcpy(out, s + 2, n - 4);
	out[n - 4] = '\0';
	return true;
}

char *eng_whisper_tok_text(const struct eng_whisper_tok *t, const int32_t *ids, size_t n)
{
	size_t n_text = 0, need = 0;
	int32_t *text_ids = mem_alloc((n + 1) * sizeof(*text_ids));
	if (!text_ids)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < t->eot)
			text_ids[n_text++] = ids[i];
	eng_bpe_decode(t->bpe, text_ids, n_text, false, NULL, 0, &need);
	char *raw = mem_alloc(need + 1);
	char *out = mem_alloc(3 * need + 1); /* each bad byte may become 3 */
	if (raw && out && eng_bpe_decode(t->bpe, text_ids, n_text, false, raw, need + 1, &need) == 0) {
		size_t o = 0;
		uint32_t cp;
		for (size_t i = 0; i < need;) {
			size_t l = st_utf8_decode(raw + i, need - i, &cp);
			if (l) {
				memcpy(out + o, raw + i, l);
				o += l;
				i += l;
			} else {
				memcpy(out + o, "\xEF\xBF\xBD", 3);
				o += 3;
				i++;
			}
		}
		out[o] = '\0';
	} else {
		mem_free(out);
		out = NULL;
	}
	mem_free(raw);
	mem_free(text_ids);
	return out;
}
