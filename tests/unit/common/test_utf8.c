/* test_utf8.c - the UTF-8 helpers (common/utf8.h): decoding against an
 * independent oracle over every 1-, 2- and 3-byte sequence and a sample of
 * 4-byte ones, encode/decode round trips over all of Unicode, validation,
 * counting, and the cut that never splits a character. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/utf8.h"

/* oracle - decode by the lead byte's announced length, then reject
 * overlongs, surrogates and values past U+10FFFF by value (the rule the
 * Whisper tokenizer and jansson apply), not by Table 3-7's byte ranges. */
static size_t oracle(const unsigned char *p, size_t n, uint32_t *cp)
{
	if (n == 0)
		return 0;
	size_t len = p[0] < 0x80 ? 1 : (p[0] >> 5) == 6 ? 2 : (p[0] >> 4) == 14 ? 3
		   : (p[0] >> 3) == 30 ? 4 : 0;
	if (len == 0 || len > n)
		return 0;
	uint32_t v = len == 1 ? p[0] : len == 2 ? (p[0] & 0x1Fu) : len == 3 ? (p[0] & 0x0Fu)
		   : (p[0] & 0x07u);
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3Fu);
	}
	static const uint32_t min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (v < min_cp[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return len;
}

static void check_same(const unsigned char *b, size_t n)
{
	uint32_t a = 0, o = 0;
	size_t la = st_utf8_decode((const char *)b, n, &a);
	size_t lo = oracle(b, n, &o);
	assert_int_equal(la, lo);
	if (la)
		assert_int_equal(a, o);
}

static void test_decode_matches_oracle(void **state)
{
	(void)state;
	unsigned char b[4];
	for (unsigned x = 0; x < 0x100; x++) {
		b[0] = (unsigned char)x;
		check_same(b, 1);
		for (unsigned y = 0; y < 0x100; y++) {
			b[1] = (unsigned char)y;
			check_same(b, 2);
		}
	}
	for (unsigned x = 0xC0; x < 0x100; x++) /* 3 bytes: all that can matter */
		for (unsigned y = 0; y < 0x100; y++)
			for (unsigned z = 0; z < 0x100; z++) {
				b[0] = (unsigned char)x, b[1] = (unsigned char)y, b[2] = (unsigned char)z;
				check_same(b, 3);
			}
	uint64_t r = 88172645463325252ull; /* xorshift: 4-byte samples */
	for (int i = 0; i < 2000000; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		b[0] = (unsigned char)(0xE0 | (r & 0x1F));
		b[1] = (unsigned char)(0x80 | ((r >> 8) & 0x7F));
		b[2] = (unsigned char)(0x80 | ((r >> 16) & 0x7F));
		b[3] = (unsigned char)(r >> 24);
		check_same(b, 4);
		check_same(b, 3); /* the same bytes cut short */
	}
	assert_int_equal(st_utf8_decode("", 0, &(uint32_t){ 0 }), 0);
}

static void test_encode_round_trip(void **state)
{
	(void)state;
	char out[4];
	uint32_t back;
	for (uint32_t cp = 0; cp <= 0x10FFFF + 16; cp++) {
		size_t n = st_utf8_encode(cp, out);
		if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
			assert_int_equal(n, 0);
			continue;
		}
		assert_int_equal(n, cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);
		assert_int_equal(st_utf8_decode(out, n, &back), n);
		assert_int_equal(back, cp);
		assert_int_equal(st_utf8_decode(out, n - 1, &back), 0); /* cut short */
	}
	assert_int_equal(st_utf8_encode(0xE9, out), 2);
	assert_memory_equal(out, "\xC3\xA9", 2);
}

static void test_valid_and_count(void **state)
{
	(void)state;
	const char *ok = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80";
	assert_true(st_utf8_valid(ok, strlen(ok)));
	assert_int_equal(st_utf8_count(ok, strlen(ok)), 9);
	assert_true(st_utf8_valid("", 0));
	assert_true(st_utf8_valid("a\0b", 3)); /* NUL is a character */
	assert_false(st_utf8_valid("\xC0\x80", 2));         /* overlong NUL */
	assert_false(st_utf8_valid("\xED\xA0\x80", 3));     /* surrogate */
	assert_false(st_utf8_valid("\xF4\x90\x80\x80", 4)); /* past U+10FFFF */
	assert_false(st_utf8_valid("\xE2\x82", 2));         /* cut short */
	assert_false(st_utf8_valid("ab\x80", 3));           /* stray continuation */
	assert_int_equal(st_utf8_count("\xE2\x82", 2), 1);  /* lead bytes count */
	assert_int_equal(st_utf8_count("", 0), 0);
}

static void test_lead_len(void **state)
{
	(void)state;
	/* the table llama.cpp's unicode_len_utf8 indexes by the top nibble */
	static const size_t by_nibble[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
	for (unsigned b = 0; b < 256; b++)
		assert_int_equal(st_utf8_lead_len((unsigned char)b), by_nibble[b >> 4]);
}

static void test_complete_len(void **state)
{
	(void)state;
	const char *s = "a\xE2\x82\xAC"; /* a + euro sign */
	assert_int_equal(st_utf8_complete_len(s, 4), 4);
	assert_int_equal(st_utf8_complete_len(s, 3), 1); /* lead + 1 of 3 */
	assert_int_equal(st_utf8_complete_len(s, 2), 1); /* lead alone */
	assert_int_equal(st_utf8_complete_len(s, 1), 1);
	assert_int_equal(st_utf8_complete_len(s, 0), 0);
	const char *e = "\xF0\x9F\x98\x80";
	for (size_t n = 1; n < 4; n++)
		assert_int_equal(st_utf8_complete_len(e, n), 0);
	assert_int_equal(st_utf8_complete_len(e, 4), 4);
	/* judged by the lead byte only: stray continuations are left alone */
	assert_int_equal(st_utf8_complete_len("a\x80\x80", 3), 3);
	assert_int_equal(st_utf8_complete_len("\x80\x80\x80\x80\x80", 5), 5);
	assert_int_equal(st_utf8_complete_len("ab\xC3", 3), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode_matches_oracle),
		cmocka_unit_test(test_encode_round_trip),
		cmocka_unit_test(test_valid_and_count),
		cmocka_unit_test(test_lead_len),
		cmocka_unit_test(test_complete_len),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
