/* cfg_err.c - the configuration's error lines: "PATH: what was expected"
 * in the caller's buffer (st_verrf), and the JSON paths and quoted keys
 * they name. A leaf: every other file of config/ reports through it.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/st.h"
#include "config/cfg_int.h"

/* cfg__fail - write "PATH: message" (or just the message when path is empty)
 * into the caller's buffer and return rc. */
int cfg__fail(struct cfg_ctx *ctx, int rc, const char *path,
	      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	rc = st_verrf(rc, ctx->err, ctx->errlen, path, fmt, ap);
	va_end(ap);
	return rc;
}

int cfg__nomem(struct cfg_ctx *ctx)
{
	return cfg__fail(ctx, -ST_NOMEM, "", "out of memory");
}

/* cfg__quote - copy s into out (outlen >= 8) as printable ASCII, escaping
 * quotes, backslashes and other bytes, cut with "..." when too long; keeps
 * error messages one line whatever the input holds. */
const char *cfg__quote(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	for (; *s && o + 8 < outlen; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	if (*s)
		o += (size_t)snprintf(out + o, outlen - o, "...");
	out[o] = '\0';
	return out;
}

/* cfg__join - path of key below parent: "limits.max_body_bytes", "listen".
 * Paths are built from table keys and array indexes only, so they fit;
 * a longer one would be cut, never overflow. */
void cfg__join(char *out, size_t outlen, const char *parent,
	       const char *key)
{
	int n = parent[0] ? snprintf(out, outlen, "%s.%s", parent, key) :
			    snprintf(out, outlen, "%s", key);
	assert(n >= 0 && (size_t)n < outlen);
	(void)n;
}
