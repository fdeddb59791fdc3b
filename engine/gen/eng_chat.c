/* eng_chat.c - chat messages to a prompt, in the format the model's
 * tokenizer.chat_template describes. There is no Jinja engine: the
 * templates of the supported families are recognised by their marker
 * tokens and written out as llama.cpp's llm_chat_apply_template writes
 * them (src/llama-chat.cpp): gemma, chatml (qwen), llama 3, and
 * llama 2 / mistral [INST]. BOS is not written: the tokenizer adds it.
 * A file with no template at all (the default Gemma 3 270M GGUF has none)
 * gets its family's documented format from general.architecture: gemma3
 * -> gemma, qwen2/qwen3 -> chatml; an unrecognised template is refused.
 * Beside the text it marks which bytes came from the messages' content:
 * the tokenizer parses control tokens only outside them
 * (eng_tok_encode_marked), so a user cannot write "<end_of_turn>" and
 * forge the model's turn. A ChatML template's default system message
 * (SmolLM2's, Qwen 2.5's: written when the messages start with no system
 * one, as their Jinja does and llama.cpp's --jinja rendering with it) is
 * read from the template text (eng__chat_default_system). The template is
 * read once, when the model loads (eng__chat_load).
 */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "engine/eng.h"
#include "engine/format/eng_gguf.h"
#include "engine/eng_int.h"

static enum eng__chat ec_detect(const char *tmpl)
{
	if (strstr(tmpl, "<start_of_turn>"))
		return ENG__CHAT_GEMMA;
	if (strstr(tmpl, "<|im_start|>"))
		return ENG__CHAT_CHATML;
	if (strstr(tmpl, "<|start_header_id|>"))
		return ENG__CHAT_LLAMA3;
	if (strstr(tmpl, "[INST]"))
		return ENG__CHAT_INST;
	return ENG__CHAT_UNKNOWN;
}

struct ec_out {
	char *buf;
	uint8_t *plain; /* [cap]: 1 where buf holds message content */
	size_t len, cap;
	int rc;
};

/* Append s[0, n), content (its bytes marked plain) or template text. */
static void ec_put(struct ec_out *o, const char *s, size_t n, bool content)
{
	if (o->rc)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 1024;
		while (cap < o->len + n + 1)
			cap *= 2;
		char *b = mem_realloc(o->buf, cap);
		uint8_t *m = b ? mem_realloc(o->plain, cap) : NULL;
		if (b)
			o->buf = b;
		if (!m) {
			o->rc = -ST_NOMEM;
			return;
		}
		o->plain = m;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	memset(o->plain + o->len, content, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/* Template text. */
static void ec_puts(struct ec_out *o, const char *s)
{
	ec_put(o, s, strlen(s), false);
}

/* content without leading and trailing whitespace (llama.cpp trims for
 * gemma and llama 3) */
static void ec_put_trimmed(struct ec_out *o, const char *s)
{
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	ec_put(o, s, n, true);
}

static bool ec_role_ok(const char *r)
{
	return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant"));
}

/* gemma: no system role - it is prepended to the first user turn. */
static void ec_gemma(struct ec_out *o, const struct eng_chat_msg *msgs, size_t n)
{
	const char *sys = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(msgs[i].role, "system")) {
			sys = msgs[i].content;
			continue;
		}
		bool user = !strcmp(msgs[i].role, "user");
		ec_puts(o, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
		if (user && sys) {
			ec_put_trimmed(o, sys);
			ec_puts(o, "\n\n");
			sys = NULL;
		}
		ec_put_trimmed(o, msgs[i].content);
		ec_puts(o, "<end_of_turn>\n");
	}
	ec_puts(o, "<start_of_turn>model\n");
}

/* The text of a Jinja string literal's body [s, e) with its "\n" escapes
 * as newlines; NULL if it holds anything else a literal cannot (a quote,
 * a brace, "+", another escape: an expression, not a constant). */
static char *ec_literal(const char *s, const char *e, int *rc)
{
	char *t = mem_alloc((size_t)(e - s) + 1), *d = t;
	if (!t) {
		*rc = -ST_NOMEM;
		return NULL;
	}
	for (; s < e; s++) {
		if (*s == '\\' && s + 1 < e && s[1] == 'n') {
			*d++ = '\n';
			s++;
		} else if (strchr("'\"{}+\\", *s)) {
			mem_free(t);
			return NULL;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
	return t;
}

int eng__chat_default_system(const char *tmpl, char **out)
{
	static const char open[] = "<|im_start|>system", close[] = "<|im_end|>";
	int rc = 0;
	*out = NULL;
	if (!tmpl || !(strstr(tmpl, "!= 'system'") || strstr(tmpl, "== 'system'") ||
		       strstr(tmpl, "!= \"system\"") || strstr(tmpl, "== \"system\"")))
		return 0;
	for (const char *p = strstr(tmpl, open); p && !*out && !rc; p = strstr(p + 1, open)) {
		const char *s = p + sizeof(open) - 1, *e;
		if (*s == '\n')
			s++;
		else if (s[0] == '\\' && s[1] == 'n')
			s += 2;
		else
			continue;
		if ((e = strstr(s, close)) != NULL)
			*out = ec_literal(s, e, &rc);
	}
	return rc;
}

/* def: the template's default system message, or NULL */
static void ec_chatml(struct ec_out *o, const struct eng_chat_msg *msgs, size_t n,
		      const char *def)
{
	if (def && strcmp(msgs[0].role, "system")) {
		ec_puts(o, "<|im_start|>system\n");
		ec_puts(o, def);
		ec_puts(o, "<|im_end|>\n");
	}
	for (size_t i = 0; i < n; i++) {
		ec_puts(o, "<|im_start|>");
		ec_puts(o, msgs[i].role);
		ec_puts(o, "\n");
		ec_put(o, msgs[i].content, strlen(msgs[i].content), true);
		ec_puts(o, "<|im_end|>\n");
	}
	ec_puts(o, "<|im_start|>assistant\n");
}

static void ec_llama3(struct ec_out *o, const struct eng_chat_msg *msgs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ec_puts(o, "<|start_header_id|>");
		ec_puts(o, msgs[i].role);
		ec_puts(o, "<|end_header_id|>\n\n");
		ec_put_trimmed(o, msgs[i].content);
		ec_puts(o, "<|eot_id|>");
	}
	ec_puts(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* llama 2 / mistral: [INST] user [/INST] assistant</s>, the system text
 * prepended to the first user turn. */
static void ec_inst(struct ec_out *o, const struct eng_chat_msg *msgs, size_t n)
{
	const char *sys = NULL;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(msgs[i].role, "system")) {
			sys = msgs[i].content;
		} else if (!strcmp(msgs[i].role, "user")) {
			ec_puts(o, "[INST] ");
			if (sys) {
				ec_put_trimmed(o, sys);
				ec_puts(o, "\n\n");
				sys = NULL;
			}
			ec_put_trimmed(o, msgs[i].content);
			ec_puts(o, " [/INST]");
		} else {
			ec_puts(o, " ");
			ec_put_trimmed(o, msgs[i].content);
			ec_puts(o, "</s>");
		}
	}
}

int eng__chat_load(struct eng_model *m, char *err, size_t errlen)
{
	const char *tmpl = NULL;
	eng_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl, NULL);
	m->chat = tmpl ? ec_detect(tmpl) : ENG__CHAT_NONE;
	if (!tmpl && !strcmp(m->arch, "gemma3"))
		m->chat = ENG__CHAT_GEMMA;
	else if (!tmpl && (!strcmp(m->arch, "qwen2") || !strcmp(m->arch, "qwen3")))
		m->chat = ENG__CHAT_CHATML;
	int rc = m->chat == ENG__CHAT_CHATML ? eng__chat_default_system(tmpl, &m->chat_system) : 0;
	return rc ? st_errf(rc, err, errlen, "%s: out of memory", m->path) : 0;
}

void eng__chat_fini(struct eng_model *m)
{
	mem_free(m->chat_system);
	m->chat_system = NULL;
}

int eng_chat_format(const struct eng_model *m, const struct eng_chat_msg *msgs, size_t n,
		    char **out, uint8_t **plain, char *err, size_t errlen)
{
	*out = NULL;
	*plain = NULL;
	if (!m->gguf || !m->llm)
		return st_errf(-ST_INVAL, err, errlen, "model '%s' is not a generation model",
			       m->name);
	if (m->chat == ENG__CHAT_NONE || m->chat == ENG__CHAT_UNKNOWN)
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "model '%s' has %s chat template; send a formatted prompt to "
			       "/v1/completions instead",
			       m->name, m->chat == ENG__CHAT_UNKNOWN ? "an unrecognised" : "no");
	if (n == 0)
		return st_errf(-ST_INVAL, err, errlen, "messages: expected at least one message");
	for (size_t i = 0; i < n; i++)
		if (!ec_role_ok(msgs[i].role) || !msgs[i].content)
			return st_errf(-ST_INVAL, err, errlen,
				       "messages[%zu]: expected role system, user or assistant "
				       "and a content string",
				       i);
	struct ec_out o = { 0 };
	if (m->chat == ENG__CHAT_GEMMA)
		ec_gemma(&o, msgs, n);
	else if (m->chat == ENG__CHAT_CHATML)
		ec_chatml(&o, msgs, n, m->chat_system);
	else if (m->chat == ENG__CHAT_LLAMA3)
		ec_llama3(&o, msgs, n);
	else
		ec_inst(&o, msgs, n);
	if (o.rc) {
		mem_free(o.buf);
		mem_free(o.plain);
		return st_errf(o.rc, err, errlen, "out of memory");
	}
	*out = o.buf;
	*plain = o.plain;
	return 0;
}
