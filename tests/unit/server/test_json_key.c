/* test_json_key.c - srv__json_error_path (server/openai/srv_openai_gen.c):
 * the path of a value jansson refused (a number too large, a string
 * holding \u0000), found from the byte offset jansson's error reports,
 * which names no key. Each case is parsed by the jansson linked here, so
 * the offset its error gives is checked along with the scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/openai/srv_openai_gen.h"

/* Parse text, expect jansson's numeric overflow or its NUL refusal, and
 * return whether a path was found (into out). */
static bool key_of(const char *text, char *out, size_t out_size)
{
	json_error_t je;
	json_t *j = json_loadb(text, strlen(text), 0, &je);
	assert_null(j);
	assert_true(json_error_code(&je) == json_error_numeric_overflow ||
		    strstr(je.text, "JSON_ALLOW_NUL"));
	assert_true(je.position >= 0);
	return srv__json_error_path(text, strlen(text), (size_t)je.position, out, out_size);
}

static void test_named(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
		{ "{\"max_tokens\": 9223372036854775808}", "max_tokens" },
		{ "{\"a\": 1, \"seed\":18446744073709551616, \"b\": 2}", "seed" },
		{ "{\"seed\" :\n\t-9223372036854775809 }", "seed" },
		{ "{\"temperature\": 1e400}", "temperature" },
		{ "{\"t\": -1.5E+400}", "t" },
		{ "{\"messages\": [{\"role\": \"user\", \"n\": 99999999999999999999}]}",
		  "messages[0].n" },
		{ "{\"messages\": [{\"role\": \"user\"}, {\"content\": [{\"type\": \"text\", "
		  "\"text\": \"a,]}\\\"\", \"n\": 1e400}]}]}",
		  "messages[1].content[0].n" }, /* brackets, commas, quotes in a string */
		{ "{\"logit_bias\": {\"50256\": -1e400}}", "logit_bias.50256" },
		{ "{\"stop\": [1, 99999999999999999999]}", "stop[1]" },
		{ "{\"a\": {\"b\": 1}, \"c\": [[], [2, {\"d\": 1e999}]]}", "c[1][1].d" },
		{ "{\"stop\": \"ab\\u0000\"}", "stop" },
		{ "{\"messages\": [{\"role\": \"user\", \"content\": \"x\\u0000\"}]}",
		  "messages[0].content" },
		{ "{\"k\\\"ey\\\\\": 99999999999999999999}", "k\"ey\\" }, /* escapes */
		{ "{\"caf\\u00e9\": 99999999999999999999}", "caf\xc3\xa9" },
		{ "{\"x\": 99999999999999999999", "x" }, /* the text ends there */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char key[64];
		assert_true(key_of(cases[i][0], key, sizeof(key)));
		assert_string_equal(key, cases[i][1]);
	}
}

static void test_unnamed(void **state)
{
	(void)state;
	char key[8] = "junk";
	/* the whole text has no path */
	assert_false(key_of("99999999999999999999", key, sizeof(key)));
	assert_string_equal(key, "");
	/* a key longer than out */
	assert_false(key_of("{\"max_tokens\": 99999999999999999999}", key, sizeof(key)));
	assert_string_equal(key, "");
	/* offsets past the text and at 0 are safe */
	assert_true(srv__json_error_path("{\"a\": 1", 7, 1000, key, sizeof(key)));
	assert_string_equal(key, "a");
	assert_false(srv__json_error_path("1", 1, 0, key, sizeof(key)));
	assert_false(srv__json_error_path("", 0, 0, key, sizeof(key)));
	/* an object between members (a key being read) has no value's path */
	assert_false(srv__json_error_path("{\"a\": 1, \"b", 12, 12, key, sizeof(key)));
	/* past 32 levels: not named */
	char deep[80];
	memset(deep, '[', 40);
	strcpy(deep + 40, "1e400");
	assert_false(srv__json_error_path(deep, strlen(deep), strlen(deep), key, sizeof(key)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_named),
		cmocka_unit_test(test_unnamed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
