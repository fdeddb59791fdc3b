/* test_common.c - the status enum names and the allocation wrapper's
 * fault injection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/mem.h"
#include "common/st.h"

static void test_st_str(void **state)
{
	(void)state;
	assert_string_equal(st_str(ST_OK), "ST_OK");
	assert_string_equal(st_str(-ST_NOMEM), "ST_NOMEM");
	assert_string_equal(st_str(ST_CORRUPT), "ST_CORRUPT");
	assert_string_equal(st_str(ST_COUNT), "ST_UNKNOWN");
	assert_string_equal(st_str(-1000), "ST_UNKNOWN");
	for (int i = 0; i < ST_COUNT; i++)
		assert_true(strncmp(st_str(i), "ST_", 3) == 0);
}

static void test_mem_fail_after(void **state)
{
	(void)state;
	mem_fail_after(2);
	void *a = mem_alloc(8), *b = mem_calloc(2, 8), *c = mem_alloc(8);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(c);
	assert_null(mem_strdup("x"));
	mem_fail_after(-1);
	char *d = mem_strdup("hello");
	assert_string_equal(d, "hello");
	char *e = mem_strndup("hello", 3);
	assert_string_equal(e, "hel");
	mem_free(a);
	mem_free(b);
	mem_free(d);
	mem_free(e);
	mem_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_st_str),
		cmocka_unit_test(test_mem_fail_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
