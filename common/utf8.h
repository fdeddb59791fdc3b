/* utf8.h - the project's one set of UTF-8 helpers: decode and encode one
 * code point, the length a lead byte announces, check a byte string, count
 * its characters, and find where a growing text may be cut without
 * splitting a character.
 *
 * "Well-formed" is Unicode's definition (Table 3-7): no overlong forms, no
 * surrogates (U+D800..U+DFFF), nothing above U+10FFFF. It is the rule
 * jansson applies to JSON strings, so text that passes st_utf8_valid can
 * always be put in a JSON response. Pure functions: any thread, no
 * allocation.
 */
#ifndef ST_UTF8_H
#define ST_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* st_utf8_decode - the well-formed sequence at s[0, n): its code point in
 * *cp and its length in bytes (1..4). Returns 0 when s[0] does not start a
 * well-formed sequence, or the sequence is cut short by n, or n is 0; *cp
 * is then unspecified. A NUL byte is a 1-byte character. s, cp: borrowed. */
size_t st_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* st_utf8_encode - cp as UTF-8 into out[0..3] (not NUL-terminated);
 * returns the bytes written, 1..4, or 0 (nothing written) for a surrogate
 * or a value above U+10FFFF. */
size_t st_utf8_encode(uint32_t cp, char *out);

/* st_utf8_lead_len - the length a sequence starting with byte b announces,
 * judged by its top bits alone (llama.cpp's unicode_len_utf8): 4 for
 * 11110xxx and above, 3 for 1110xxxx, 2 for 110xxxxx, else 1 (ASCII, and
 * a stray continuation byte stands alone). No check that the sequence is
 * well-formed: for tokenizers that cut text as llama.cpp does. */
size_t st_utf8_lead_len(unsigned char b);

/* st_utf8_valid - whether s[0, n) is a sequence of well-formed characters
 * (embedded NULs allowed; n 0 is valid). */
bool st_utf8_valid(const char *s, size_t n);

/* st_utf8_count - the characters in s[0, n), counted as the bytes that are
 * not continuation bytes (10xxxxxx): exact for well-formed text, and what
 * OpenAI-style character offsets count. */
size_t st_utf8_count(const char *s, size_t n);

/* st_utf8_complete_len - n, or less when s[0, n) ends inside a multi-byte
 * character whose lead byte announces more bytes than follow it: then the
 * offset of that lead byte. Looks back over at most 4 continuation bytes
 * and judges only by the lead byte (st_utf8_lead_len), so text may be
 * released as it grows without splitting a character. */
size_t st_utf8_complete_len(const char *s, size_t n);

#endif /* ST_UTF8_H */
