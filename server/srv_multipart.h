/* srv_multipart.h - a multipart/form-data parser (RFC 7578 over RFC 2046)
 * for request bodies that are already fully buffered and size-limited.
 *
 * Zero-copy: every string a part carries is a slice (pointer + length)
 * into the body, valid while the body is. Quoted parameter values are
 * returned as they appear between the quotes (a backslash escape is
 * skipped over when looking for the closing quote, not decoded; browsers
 * percent-encode quotes in names, RFC 7578 section 4.2).
 *
 * Grammar accepted (RFC 2046 section 5.1.1, strict about CRLF):
 *   [preamble CRLF] "--" boundary *(SP / HTAB) CRLF
 *   part-headers CRLF part-body
 *   { CRLF "--" boundary *(SP / HTAB) CRLF part-headers CRLF part-body }
 *   CRLF "--" boundary "--" [epilogue]
 * Each part needs a Content-Disposition: form-data; name="..." header;
 * filename= and a Content-Type header are optional; other header lines
 * are ignored. Folded header lines and bare LF line ends are refused.
 *
 * Thread: any; no state outside the caller's structs. No allocation.
 */
#ifndef SRV_MULTIPART_H
#define SRV_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define SRV_MP_BOUNDARY_MAX 70 /* RFC 2046: 1..70 characters */

/* A byte range inside the body (or the Content-Type value). */
struct srv_mp_str {
	const char *p; /* NULL when absent */
	size_t n;      /* bytes */
};

/* One part; every field borrowed from the body. */
struct srv_mp_part {
	struct srv_mp_str name;         /* Content-Disposition name (required) */
	struct srv_mp_str filename;     /* filename= (else filename*=, as sent), p == NULL
					 * when absent */
	struct srv_mp_str content_type; /* Content-Type value, p == NULL when absent */
	struct srv_mp_str data;         /* the part's body bytes */
};

/* Ceilings chosen by the caller. */
struct srv_mp_limits {
	size_t max_parts;        /* more parts -> -ST_TOOBIG */
	size_t max_header_bytes; /* header block of one part, CRLFs included */
	size_t max_field_bytes;  /* body of a part without filename= */
};

/* srv_mp_boundary - the boundary parameter of a Content-Type value
 * (borrowed, NUL-terminated): "multipart/form-data; boundary=XYZ" or
 * boundary="X Y Z". On success *out is a slice into content_type.
 * Errors: -ST_UNSUPPORTED the media type is not multipart/form-data;
 * -ST_INVAL no boundary, an empty or over-long one, or a bad quoted
 * string. err (errlen bytes, may be NULL) gets one line. */
int srv_mp_boundary(const char *content_type, struct srv_mp_str *out, char *err, size_t errlen);

/* srv_mp_parse - split body [len] (borrowed) at boundary into parts.
 *   parts:    caller array of lim->max_parts entries.
 *   n_parts:  set to the number filled (0 on error).
 * Errors: -ST_INVAL malformed input (no opening or closing delimiter, a
 * header line without ':' or CRLF, a missing or non-form-data
 * Content-Disposition, no name, no parts); -ST_TOOBIG a limit in lim was
 * passed. err names the fault and the part's index. */
int srv_mp_parse(const char *body, size_t len, struct srv_mp_str boundary,
		 const struct srv_mp_limits *lim, struct srv_mp_part *parts, size_t *n_parts,
		 char *err, size_t errlen);

/* srv_mp_str_eq - the slice equals the NUL-terminated s (case-sensitive). */
bool srv_mp_str_eq(struct srv_mp_str a, const char *s);

#endif /* SRV_MULTIPART_H */
