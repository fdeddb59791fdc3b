/* fuzz_multipart.c - libFuzzer target for the multipart/form-data parser
 * (server/srv_multipart.c). Input: the Content-Type header value, a
 * newline, then the body. The boundary is read from the header as the
 * daemon does, the body is parsed with small limits so that every ceiling
 * is reached, and every part's slices are checked to lie inside the body.
 * The body is copied into an exact-size heap buffer so that ASan sees any
 * read past its end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/srv_multipart.h"

#define FUZZ_MAX_PARTS 8

static void fuzz_check_slice(struct srv_mp_str s, const char *lo, const char *hi)
{
	if (s.p && (s.p < lo || s.p + s.n > hi))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	if (!nl || nl - data > 512)
		return 0;
	size_t ct_len = (size_t)(nl - data), body_len = size - ct_len - 1;
	char *ct = malloc(ct_len + 1);
	char *body = malloc(body_len ? body_len : 1);
	if (!ct || !body)
		abort();
	memcpy(ct, data, ct_len);
	ct[ct_len] = '\0';
	memcpy(body, nl + 1, body_len);
	struct srv_mp_str b;
	struct srv_mp_part parts[FUZZ_MAX_PARTS];
	struct srv_mp_limits lim = { FUZZ_MAX_PARTS, 256, 1024 };
	char err[256];
	size_t n = 0;
	if (srv_mp_boundary(ct, &b, err, sizeof(err)) == 0) {
		fuzz_check_slice(b, ct, ct + ct_len);
		if (srv_mp_parse(body, body_len, b, &lim, parts, &n, err, sizeof(err)) != 0 && n)
			abort(); /* no parts are reported on failure */
	}
	for (size_t i = 0; i < n; i++) {
		const struct srv_mp_part *p = &parts[i];
		fuzz_check_slice(p->name, body, body + body_len);
		fuzz_check_slice(p->filename, body, body + body_len);
		fuzz_check_slice(p->content_type, body, body + body_len);
		fuzz_check_slice(p->data, body, body + body_len);
		if (!p->name.p || (!p->filename.p && p->data.n > lim.max_field_bytes))
			abort();
	}
	free(ct);
	free(body);
	return 0;
}
