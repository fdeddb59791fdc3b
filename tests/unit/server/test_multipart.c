/* test_multipart.c - the multipart/form-data parser (server/srv_multipart.c)
 * and the SHA-256 used for Deepgram's metadata, on hand-made inputs:
 * boundaries quoted and not, preamble and epilogue, empty parts, every
 * refusal with its status and message, and the limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/st.h"
#include "server/job/srv_audio_job.h"
#include "server/srv_multipart.h"

static const struct srv_mp_limits lim = { 4, 128, 16 };

/* Parse body with the boundary of ct; returns the status, fills parts. */
static int parse(const char *ct, const char *body, struct srv_mp_part *parts, size_t *n,
		 char *err)
{
	struct srv_mp_str b;
	int rc = srv_mp_boundary(ct, &b, err, 256);
	if (rc)
		return rc;
	return srv_mp_parse(body, strlen(body), b, &lim, parts, n, err, 256);
}

static void test_boundary_forms(void **state)
{
	(void)state;
	struct srv_mp_str b;
	char err[256];
	assert_int_equal(srv_mp_boundary("multipart/form-data; boundary=abc", &b, err, 256), 0);
	assert_true(srv_mp_str_eq(b, "abc"));
	assert_int_equal(srv_mp_boundary("Multipart/Form-Data;charset=x; BOUNDARY=\"a b:c\"", &b,
					 err, 256), 0);
	assert_true(srv_mp_str_eq(b, "a b:c"));
	assert_int_equal(srv_mp_boundary("text/plain; boundary=a", &b, err, 256), -ST_UNSUPPORTED);
	assert_int_equal(srv_mp_boundary("multipart/form-data", &b, err, 256), -ST_INVAL);
	assert_non_null(strstr(err, "boundary"));
	assert_int_equal(srv_mp_boundary("multipart/form-data; boundary=\"unterminated", &b, err,
					 256), -ST_INVAL);
	char long_ct[128];
	snprintf(long_ct, sizeof(long_ct), "multipart/form-data; boundary=%071d", 0);
	assert_int_equal(srv_mp_boundary(long_ct, &b, err, 256), -ST_INVAL);
}

static void test_parts(void **state)
{
	(void)state;
	struct srv_mp_part p[4];
	size_t n;
	char err[256];
	const char *body = "preamble\r\n--XY\r\n"
			   "Content-Disposition: form-data; name=\"model\"\r\n\r\n"
			   "tiny\r\n--XY \t\r\n"
			   "content-disposition: form-data; name=file; filename=\"a.wav\"\r\n"
			   "Content-Type: audio/wav\r\nX-Ignored: yes\r\n\r\n"
			   "RIFF\r\n--X not a delimiter\r\n--XY\r\n"
			   "Content-Disposition: form-data; name=\"empty\"\r\n\r\n"
			   "\r\n--XY--\r\nepilogue --XY";
	assert_int_equal(parse("multipart/form-data; boundary=XY", body, p, &n, err), 0);
	assert_int_equal(n, 3);
	assert_true(srv_mp_str_eq(p[0].name, "model"));
	assert_true(srv_mp_str_eq(p[0].data, "tiny"));
	assert_null(p[0].filename.p);
	assert_true(srv_mp_str_eq(p[1].name, "file"));
	assert_true(srv_mp_str_eq(p[1].filename, "a.wav"));
	assert_true(srv_mp_str_eq(p[1].content_type, "audio/wav"));
	assert_true(srv_mp_str_eq(p[1].data, "RIFF\r\n--X not a delimiter"));
	assert_true(srv_mp_str_eq(p[2].name, "empty"));
	assert_int_equal(p[2].data.n, 0);
}

/* RFC 5987's filename* alone (RFC 7578 4.2 forbids it, some clients send
 * it) still makes the part a file: it was a field, refused over the field
 * limit as one; with filename= too, filename= is the name. */
static void test_filename_star(void **state)
{
	(void)state;
	struct srv_mp_part p[4];
	size_t n;
	char err[256];
	const char *body = "--B\r\nContent-Disposition: form-data; name=file; "
			   "filename*=UTF-8''j%C3%A9fk.wav\r\n\r\nRIFF\r\n"
			   "--B\r\nContent-Disposition: form-data; name=f2; filename*=UTF-8''x; "
			   "filename=\"b.wav\"\r\n\r\nRIFF\r\n"
			   "--B\r\nContent-Disposition: form-data; name=model\r\n\r\ntiny\r\n--B--";
	assert_int_equal(parse("multipart/form-data; boundary=B", body, p, &n, err), 0);
	assert_int_equal(n, 3);
	assert_true(srv_mp_str_eq(p[0].filename, "UTF-8''j%C3%A9fk.wav"));
	assert_true(srv_mp_str_eq(p[1].filename, "b.wav"));
	assert_null(p[2].filename.p);
}

static void test_refusals(void **state)
{
	(void)state;
	static const struct {
		const char *body;
		int rc;
		const char *needle;
	} cases[] = {
		{ "no delimiter", -ST_INVAL, "delimiter" },
		{ "--B--\r\n", -ST_INVAL, "no parts" },
		{ "--B\r\nContent-Disposition: form-data; name=a\r\n\r\nv", -ST_INVAL, "closing" },
		{ "--B\r\nContent-Disposition: form-data; name=a\r\nv", -ST_INVAL, "empty line" },
		{ "--B\nContent-Disposition: form-data; name=a\n\nv\n--B--", -ST_INVAL, "CRLF" },
		{ "--B\r\nX: 1\r\n\r\nv\r\n--B--", -ST_INVAL, "Content-Disposition" },
		{ "--B\r\nContent-Disposition: inline; name=a\r\n\r\nv\r\n--B--", -ST_INVAL, "form-data" },
		{ "--B\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--B--", -ST_INVAL, "malformed" },
		{ "--B\r\n Folded: x\r\n\r\nv\r\n--B--", -ST_INVAL, "folded" },
		{ "--B\r\nNo colon\r\n\r\nv\r\n--B--", -ST_INVAL, "header line" },
		{ "--B\r\nContent-Disposition: form-data; name=a\r\n\r\n01234567890123456\r\n--B--",
		  -ST_TOOBIG, "part 0 ('a'): a field value over" },
		{ "--Bx\r\n", -ST_INVAL, "CRLF" },
	};
	struct srv_mp_part p[4];
	size_t n;
	char err[256];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		int rc = parse("multipart/form-data; boundary=B", cases[i].body, p, &n, err);
		if (rc != cases[i].rc || !strstr(err, cases[i].needle))
			fail_msg("case %zu: rc %d, err '%s'", i, rc, err);
		assert_int_equal(n, 0);
	}
}

static void test_limits(void **state)
{
	(void)state;
	struct srv_mp_part p[4];
	size_t n;
	char err[256], body[1024] = "";
	for (int i = 0; i < 5; i++)
		strcat(body, "--B\r\nContent-Disposition: form-data; name=a\r\n\r\nv\r\n");
	strcat(body, "--B--");
	assert_int_equal(parse("multipart/form-data; boundary=B", body, p, &n, err), -ST_TOOBIG);
	assert_non_null(strstr(err, "more than 4"));
	snprintf(body, sizeof(body), "--B\r\nContent-Disposition: form-data; name=a\r\nX: %0200d\r\n\r\nv\r\n--B--", 0);
	assert_int_equal(parse("multipart/form-data; boundary=B", body, p, &n, err), -ST_TOOBIG);
	assert_non_null(strstr(err, "headers longer"));
	/* a file part may be larger than the field limit */
	snprintf(body, sizeof(body), "--B\r\nContent-Disposition: form-data; name=f; filename=x\r\n\r\n%0100d\r\n--B--", 0);
	assert_int_equal(parse("multipart/form-data; boundary=B", body, p, &n, err), 0);
	assert_int_equal(p[0].data.n, 100);
}

static void test_sha256(void **state)
{
	(void)state;
	static const struct {
		const char *in, *hex;
	} v[] = { /* FIPS 180-4 examples and a two-block tail */
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unsigned char h[32];
		char hex[65];
		srv__sha256(v[i].in, strlen(v[i].in), h);
		for (int k = 0; k < 32; k++)
			snprintf(hex + 2 * k, 3, "%02x", h[k]);
		assert_string_equal(hex, v[i].hex);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundary_forms),
		cmocka_unit_test(test_parts),
		cmocka_unit_test(test_filename_star),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_sha256),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
