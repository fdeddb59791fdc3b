/* srv_multipart.c - multipart/form-data parsing (RFC 7578, RFC 2046
 * section 5.1), zero-copy over a fully buffered body.
 *
 * The body is walked once: find the first delimiter (after an optional
 * preamble), then for each part read its header block (bounded by
 * max_header_bytes), dispatch each header line through a small table, and
 * find the next delimiter with memmem; stop at the close delimiter and
 * ignore the epilogue. Every refusal names the part (0-based) and the
 * fault, for a 400 message a client can act on.
 *
 * Boundary characters: RFC 2046 allows a set of 75 (bchars); we accept any
 * printable ASCII not ending in a space, since the delimiter is matched as
 * bytes and senders outside the set exist.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/st.h"
#include "server/srv_multipart.h"

/* Parser position and the caller's output, for the helpers below. */
struct srv_mp {
	const char *p, *end;            /* unparsed rest of the body */
	struct srv_mp_str boundary;
	const struct srv_mp_limits *lim;
	char *err;
	size_t errlen;
};

bool srv_mp_str_eq(struct srv_mp_str a, const char *s)
{
	size_t n = strlen(s);
	return a.p && a.n == n && !memcmp(a.p, s, n);
}

static bool srv_mp_str_ieq(struct srv_mp_str a, const char *s)
{
	size_t n = strlen(s);
	return a.p && a.n == n && !strncasecmp(a.p, s, n);
}

static bool srv_mp_is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* RFC 7230 tchar, for parameter names and unquoted values. */
static bool srv_mp_is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *srv_mp_skip_ows(const char *p, const char *end)
{
	while (p < end && srv_mp_is_ows(*p))
		p++;
	return p;
}

/* --- parameters: *( OWS ";" OWS token "=" ( token / quoted-string ) ) --- */

/* Read a quoted string starting at the '"' at *pp; the value excludes the
 * quotes. Returns 0 or -1 when it is not closed. */
static int srv_mp_quoted(const char **pp, const char *end, struct srv_mp_str *val)
{
	const char *p = *pp + 1;
	val->p = p;
	while (p < end && *p != '"') {
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return -1;
		p += (*p == '\\' && p + 1 < end) ? 2 : 1;
	}
	if (p >= end)
		return -1;
	val->n = (size_t)(p - val->p);
	*pp = p + 1;
	return 0;
}

/* The next parameter of a header value: 1 with key/val set, 0 at the end,
 * -1 when malformed. */
static int srv_mp_param_next(const char **pp, const char *end, struct srv_mp_str *key,
			     struct srv_mp_str *val)
{
	const char *p = srv_mp_skip_ows(*pp, end);
	if (p == end)
		return 0;
	if (*p++ != ';')
		return -1;
	p = srv_mp_skip_ows(p, end);
	key->p = p;
	while (p < end && srv_mp_is_tchar(*p))
		p++;
	key->n = (size_t)(p - key->p);
	p = srv_mp_skip_ows(p, end);
	if (key->n == 0 || p == end || *p++ != '=')
		return -1;
	p = srv_mp_skip_ows(p, end);
	if (p < end && *p == '"') {
		if (srv_mp_quoted(&p, end, val))
			return -1;
	} else {
		val->p = p;
		while (p < end && srv_mp_is_tchar(*p))
			p++;
		val->n = (size_t)(p - val->p);
	}
	*pp = p;
	return 1;
}

/* Split "type/subtype *(; param)" : *type is the media type, *rest points
 * at the first ';' (or end). */
static void srv_mp_media_type(const char *v, const char *end, struct srv_mp_str *type,
			      const char **rest)
{
	const char *p = srv_mp_skip_ows(v, end);
	const char *semi = memchr(p, ';', (size_t)(end - p));
	const char *e = semi ? semi : end;
	while (e > p && srv_mp_is_ows(e[-1]))
		e--;
	*type = (struct srv_mp_str){ p, (size_t)(e - p) };
	*rest = semi ? semi : end;
}

int srv_mp_boundary(const char *content_type, struct srv_mp_str *out, char *err, size_t errlen)
{
	*out = (struct srv_mp_str){ 0 };
	const char *end = content_type + strlen(content_type), *p;
	struct srv_mp_str type, key, val;
	srv_mp_media_type(content_type, end, &type, &p);
	if (!srv_mp_str_ieq(type, "multipart/form-data"))
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "Content-Type must be multipart/form-data");
	int r;
	while ((r = srv_mp_param_next(&p, end, &key, &val)) == 1) {
		if (srv_mp_str_ieq(key, "boundary"))
			*out = val;
	}
	if (r < 0)
		return st_errf(-ST_INVAL, err, errlen,
			       "malformed parameters in the Content-Type header");
	if (!out->p || out->n == 0)
		return st_errf(-ST_INVAL, err, errlen,
			       "multipart/form-data without a boundary parameter");
	bool ok = out->n <= SRV_MP_BOUNDARY_MAX && out->p[out->n - 1] != ' ';
	for (size_t i = 0; ok && i < out->n; i++)
		ok = out->p[i] >= 0x20 && out->p[i] < 0x7f;
	if (!ok) {
		*out = (struct srv_mp_str){ 0 };
		return st_errf(-ST_INVAL, err, errlen,
			       "the multipart boundary must be 1 to 70 printable characters");
	}
	return 0;
}

/* --- part headers ------------------------------------------------------ */

static int srv_mp_hdr_disposition(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
				  struct srv_mp_str v);
static int srv_mp_hdr_content_type(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
				   struct srv_mp_str v);

/* Header lines we read; any other is ignored (RFC 7578 section 4.8). */
static const struct {
	const char *name;
	int (*fn)(struct srv_mp *, size_t, struct srv_mp_part *, struct srv_mp_str);
} srv_mp_headers[] = {
	{ "Content-Disposition", srv_mp_hdr_disposition },
	{ "Content-Type", srv_mp_hdr_content_type },
};

/* Content-Disposition parameters we keep, by their slot in the part. */
static const struct {
	const char *name;
	size_t offset;
} srv_mp_disp_params[] = {
	{ "name", offsetof(struct srv_mp_part, name) },
	{ "filename", offsetof(struct srv_mp_part, filename) },
};

static int srv_mp_hdr_disposition(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
				  struct srv_mp_str v)
{
	const char *end = v.p + v.n, *p;
	struct srv_mp_str type, key, val;
	srv_mp_media_type(v.p, end, &type, &p);
	if (!srv_mp_str_ieq(type, "form-data"))
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: Content-Disposition must be form-data", idx);
	int r;
	struct srv_mp_str ext = { 0 };
	while ((r = srv_mp_param_next(&p, end, &key, &val)) == 1) {
		for (size_t i = 0; i < sizeof(srv_mp_disp_params) / sizeof(srv_mp_disp_params[0]); i++)
			if (srv_mp_str_ieq(key, srv_mp_disp_params[i].name))
				*(struct srv_mp_str *)((char *)part + srv_mp_disp_params[i].offset) = val;
		if (srv_mp_str_ieq(key, "filename*"))
			ext = val;
	}
	/* RFC 7578 4.2 forbids RFC 5987's filename* in forms, but some clients
	 * send only it: the part is a file all the same (its value, still
	 * encoded, as the name) */
	if (!part->filename.p && ext.p)
		part->filename = ext;
	if (r < 0)
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: malformed Content-Disposition parameters", idx);
	return 0;
}

static int srv_mp_hdr_content_type(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
				   struct srv_mp_str v)
{
	(void)mp;
	(void)idx;
	part->content_type = v;
	return 0;
}

/* One "Name: value" line [line, line + n) without its CRLF. */
static int srv_mp_header_line(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
			      const char *line, size_t n)
{
	if (srv_mp_is_ows(line[0]))
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: folded header lines are not supported", idx);
	const char *colon = memchr(line, ':', n);
	struct srv_mp_str name = { line, colon ? (size_t)(colon - line) : 0 };
	for (size_t i = 0; i < name.n; i++)
		if (!srv_mp_is_tchar(line[i]))
			name.n = 0;
	if (name.n == 0 || memchr(line, '\r', n) || memchr(line, '\n', n))
		return st_errf(
			-ST_INVAL, mp->err, mp->errlen,
			"part %zu: malformed header line (want 'Name: value' ending in CRLF)", idx);
	const char *v = srv_mp_skip_ows(colon + 1, line + n), *e = line + n;
	while (e > v && srv_mp_is_ows(e[-1]))
		e--;
	for (size_t i = 0; i < sizeof(srv_mp_headers) / sizeof(srv_mp_headers[0]); i++)
		if (srv_mp_str_ieq(name, srv_mp_headers[i].name))
			return srv_mp_headers[i].fn(mp, idx, part,
						    (struct srv_mp_str){ v, (size_t)(e - v) });
	return 0;
}

/* Read the header block at mp->p up to and including its empty line. */
static int srv_mp_headers_read(struct srv_mp *mp, size_t idx, struct srv_mp_part *part)
{
	size_t avail = (size_t)(mp->end - mp->p);
	size_t lim = avail < mp->lim->max_header_bytes ? avail : mp->lim->max_header_bytes;
	const char *stop = memmem(mp->p, lim, "\r\n\r\n", 4);
	if (avail >= 2 && mp->p[0] == '\r' && mp->p[1] == '\n')
		stop = mp->p - 2; /* no header lines at all */
	else if (!stop && lim < avail)
		return st_errf(-ST_TOOBIG, mp->err, mp->errlen,
			       "part %zu: headers longer than %zu bytes", idx,
			       mp->lim->max_header_bytes);
	else if (!stop)
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: headers not ended by an empty line", idx);
	for (const char *line = mp->p; line < stop;) {
		const char *eol = memmem(line, (size_t)(stop + 2 - line), "\r\n", 2);
		int rc = srv_mp_header_line(mp, idx, part, line, (size_t)(eol - line));
		if (rc)
			return rc;
		line = eol + 2;
	}
	mp->p = stop + 4;
	if (!part->name.p)
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: no Content-Disposition: form-data; name=\"...\" header",
			       idx);
	return 0;
}

/* --- delimiters -------------------------------------------------------- */

/* At p sits "--" boundary: step over it; set *closed for the close
 * delimiter, else require transport padding and CRLF. */
static int srv_mp_delimiter_end(struct srv_mp *mp, const char *p, size_t idx, bool *closed)
{
	p += 2 + mp->boundary.n;
	*closed = mp->end - p >= 2 && p[0] == '-' && p[1] == '-';
	if (*closed) {
		mp->p = mp->end; /* the epilogue is ignored */
		return 0;
	}
	p = srv_mp_skip_ows(p, mp->end);
	if (mp->end - p < 2 || p[0] != '\r' || p[1] != '\n')
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: the boundary line must end with CRLF", idx);
	mp->p = p + 2;
	return 0;
}

/* The next CRLF "--" boundary at or after from, or NULL. */
static const char *srv_mp_find_delim(const struct srv_mp *mp, const char *from)
{
	char pat[SRV_MP_BOUNDARY_MAX + 4] = "\r\n--";
	memcpy(pat + 4, mp->boundary.p, mp->boundary.n);
	return memmem(from, (size_t)(mp->end - from), pat, mp->boundary.n + 4);
}

/* Skip the preamble and the first delimiter line. */
static int srv_mp_open(struct srv_mp *mp, bool *closed)
{
	const char *d = mp->p;
	bool at_start = (size_t)(mp->end - d) >= mp->boundary.n + 2 && d[0] == '-' &&
			d[1] == '-' && !memcmp(d + 2, mp->boundary.p, mp->boundary.n);
	if (!at_start) {
		d = srv_mp_find_delim(mp, d);
		if (!d)
			return st_errf(-ST_INVAL, mp->err, mp->errlen,
				       "no '--%.*s' boundary delimiter in the body",
				       (int)mp->boundary.n, mp->boundary.p);
		d += 2;
	}
	return srv_mp_delimiter_end(mp, d, 0, closed);
}

/* One part at mp->p: headers, body up to the next delimiter. */
static int srv_mp_part_read(struct srv_mp *mp, size_t idx, struct srv_mp_part *part,
			    bool *closed)
{
	*part = (struct srv_mp_part){ 0 };
	int rc = srv_mp_headers_read(mp, idx, part);
	if (rc)
		return rc;
	/* Search from the empty line's CRLF: a part may end right after its
	 * headers (RFC 2046: body-part := headers [CRLF *OCTET]), and then
	 * that CRLF begins the delimiter. */
	const char *d = srv_mp_find_delim(mp, mp->p - 2);
	if (!d)
		return st_errf(-ST_INVAL, mp->err, mp->errlen,
			       "part %zu: no closing '--%.*s' delimiter (truncated body?)", idx,
			       (int)mp->boundary.n, mp->boundary.p);
	part->data = (struct srv_mp_str){ mp->p, d > mp->p ? (size_t)(d - mp->p) : 0 };
	if (!part->filename.p && part->data.n > mp->lim->max_field_bytes)
		return st_errf(-ST_TOOBIG, mp->err, mp->errlen,
			       "part %zu ('%.*s'): a field value over %zu bytes (send files with "
			       "a filename)",
			       idx, (int)(part->name.n < 64 ? part->name.n : 64), part->name.p,
			       mp->lim->max_field_bytes);
	return srv_mp_delimiter_end(mp, d + 2, idx + 1, closed);
}

int srv_mp_parse(const char *body, size_t len, struct srv_mp_str boundary,
		 const struct srv_mp_limits *lim, struct srv_mp_part *parts, size_t *n_parts,
		 char *err, size_t errlen)
{
	*n_parts = 0;
	if (!boundary.p || boundary.n == 0 || boundary.n > SRV_MP_BOUNDARY_MAX)
		return st_errf(-ST_INVAL, err, errlen, "bad multipart boundary");
	struct srv_mp mp = { .p = body, .end = body + len, .boundary = boundary, .lim = lim,
			     .err = err, .errlen = errlen };
	bool closed = false;
	size_t n = 0;
	int rc = srv_mp_open(&mp, &closed);
	while (!rc && !closed) {
		if (n == lim->max_parts) {
			rc = st_errf(-ST_TOOBIG, err, errlen, "more than %zu multipart parts",
				     lim->max_parts);
			break;
		}
		rc = srv_mp_part_read(&mp, n, &parts[n], &closed);
		n += rc == 0;
	}
	if (!rc && n == 0)
		rc = st_errf(-ST_INVAL, err, errlen, "the multipart body holds no parts");
	*n_parts = rc ? 0 : n;
	return rc;
}
