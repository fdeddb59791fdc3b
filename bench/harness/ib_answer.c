/* ib_answer.c - how inferd-bench reads the answers of the HTTP endpoints:
 * a complete 2xx body checked against the shape each protocol promises
 * (OpenAI's transcription and completion objects, Deepgram's pre-recorded
 * results, KServe v2's outputs) with its output tokens counted, and one
 * event-stream payload of a streamed completion (OpenAI's choices[0].text
 * or delta.content, a usage object, "[DONE]"; KServe's text_output).
 */
#include <stdlib.h>
#include <string.h>

#include "ib_int.h"

static bool ib_is_string_at(json_t *root, const char *path[], size_t n)
{
	json_t *v = root;
	for (size_t i = 0; i < n && v; i++)
		v = path[i][0] == '#' ? json_array_get(v, (size_t)strtol(path[i] + 1, NULL, 10))
				      : json_object_get(v, path[i]);
	return json_is_string(v);
}

bool ib_work_check_body(enum ib_endpoint ep, const char *body, size_t len, long *tokens)
{
	*tokens = -1;
	if (ep == IB_EP_HTTP_GET)
		return true;
	json_t *j = json_loadb(body, len, 0, NULL);
	bool ok = false;
	if (!json_is_object(j))
		goto out;
	switch (ep) {
	case IB_EP_OPENAI_TRANSCRIPTIONS:
		ok = json_is_string(json_object_get(j, "text"));
		break;
	case IB_EP_DEEPGRAM_LISTEN: {
		const char *p[] = {"results", "channels", "#0", "alternatives", "#0", "transcript"};
		ok = ib_is_string_at(j, p, 6);
		break;
	}
	case IB_EP_OPENAI_COMPLETIONS:
	case IB_EP_OPENAI_CHAT: {
		json_t *c = json_object_get(j, "choices");
		ok = json_is_array(c) && json_array_size(c) > 0;
		json_t *u = json_object_get(json_object_get(j, "usage"), "completion_tokens");
		if (json_is_integer(u))
			*tokens = (long)json_integer_value(u);
		break;
	}
	case IB_EP_KSERVE_INFER:
		ok = json_is_array(json_object_get(j, "outputs"));
		break;
	default:
		ok = true;
	}
out:
	json_decref(j);
	return ok;
}

bool ib_work_event(enum ib_endpoint ep, const char *data, size_t len, bool *text, bool *done,
		   long *usage)
{
	*text = *done = false;
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		*done = true;
		return true;
	}
	json_t *j = json_loadb(data, len, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return false;
	}
	json_t *c0 = json_array_get(json_object_get(j, "choices"), 0);
	json_t *t = ep == IB_EP_OPENAI_CHAT
			    ? json_object_get(json_object_get(c0, "delta"), "content")
			    : json_object_get(c0, "text");
	if (!t) /* KServe generate_stream and others: a text_output field */
		t = json_object_get(j, "text_output");
	*text = json_is_string(t) && json_string_length(t) > 0;
	json_t *u = json_object_get(json_object_get(j, "usage"), "completion_tokens");
	if (json_is_integer(u))
		*usage = (long)json_integer_value(u);
	json_decref(j);
	return true;
}
