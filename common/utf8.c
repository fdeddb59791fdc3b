/* utf8.c - UTF-8 decoding, encoding, checking and counting (utf8.h). */
#include "common/utf8.h"

size_t st_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t need;
	unsigned lo = 0x80, hi = 0xBF; /* allowed range of the next byte */

	if (n == 0)
		return 0;
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	/* Table 3-7: the second byte's range depends on the lead byte, which is
	 * what rules out overlongs, surrogates and values past U+10FFFF. */
	if (p[0] >= 0xC2 && p[0] <= 0xDF) {
		need = 1, *cp = p[0] & 0x1Fu;
	} else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
		need = 2, *cp = p[0] & 0x0Fu;
		lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
	} else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
		need = 3, *cp = p[0] & 0x07u;
		lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
	} else {
		return 0;
	}
	if (n < need + 1)
		return 0;
	for (size_t i = 1; i <= need; i++) {
		if (p[i] < lo || p[i] > hi)
			return 0;
		*cp = (*cp << 6) | (p[i] & 0x3Fu);
		lo = 0x80, hi = 0xBF;
	}
	return need + 1;
}

size_t st_utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

size_t st_utf8_lead_len(unsigned char b)
{
	return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

bool st_utf8_valid(const char *s, size_t n)
{
	uint32_t cp;

	for (size_t i = 0; i < n;) {
		size_t k = st_utf8_decode(s + i, n - i, &cp);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

size_t st_utf8_count(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

size_t st_utf8_complete_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = n, back = 0;

	while (i > 0 && back < 4 && (p[i - 1] & 0xC0) == 0x80) {
		i--;
		back++;
	}
	if (i == 0 || !(p[i - 1] & 0x80))
		return n;
	return back + 1 < st_utf8_lead_len(p[i - 1]) ? i - 1 : n;
}
