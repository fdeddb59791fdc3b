/* test_live.c - the pure parts of the live streaming API: the query
 * options of GET /v1/listen (server/deepgram/srv_dg_live_query.c) and the
 * WebSocket handshake's Sec-WebSocket-Accept (server/ws/srv_ws.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/st.h"
#include "server/deepgram/srv_dg_int.h"
#include "server/ws/srv_ws.h"

/* RFC 6455 section 1.3's example pair, and a second one computed by hand
 * with `printf %s KEY258EAFA5-E914-47DA-95CA-C5AB0DC85B11 | sha1sum`. */
static void test_accept_key(void **state)
{
	(void)state;
	char out[SRV_WS_ACCEPT_LEN + 1];
	srv__ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	srv__ws_accept_key("x3JJHMbDL1EzLkh9GBhXDw==", out);
	assert_string_equal(out, "HSmrc0sMlYUkAGmm5OPpG2HaGWk=");
}

static int parse(const char *q, struct srv_dg_live_opts *o, char *err)
{
	return srv__dg_live_query_parse(q, o, err, 256);
}

static void test_defaults(void **state)
{
	(void)state;
	struct srv_dg_live_opts o;
	char err[256] = "";
	assert_int_equal(parse("encoding=linear16&sample_rate=16000", &o, err), 0);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_LINEAR16);
	assert_int_equal(o.raw.sample_rate, 16000);
	assert_int_equal(o.raw.channels, 1);
	assert_string_equal(o.language, "en");
	assert_string_equal(o.model, "");
	assert_int_equal(o.endpointing_ms, 10);
	assert_int_equal(o.utterance_end_ms, 0);
	assert_false(o.interim_results || o.punctuate || o.vad_events);
}

static void test_values(void **state)
{
	(void)state;
	struct srv_dg_live_opts o;
	char err[256] = "";
	assert_int_equal(parse("encoding=mulaw&sample_rate=8000&sample_rate=48000&channels=2"
			       "&interim_results=True&punctuate=0&smart_format=TRUE&vad_events=1"
			       "&endpointing=false&utterance_end_ms=1500&language=de-DE"
			       "&model=whisper%2Dbase&keywords=a%3A2&keyterm=x&tier=nova&=&&x",
			       &o, err), 0);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_MULAW);
	assert_int_equal(o.raw.sample_rate, 48000); /* the last of a repeated key wins */
	assert_int_equal(o.raw.channels, 2);
	assert_true(o.interim_results && o.punctuate && o.vad_events);
	assert_int_equal(o.endpointing_ms, -1);
	assert_int_equal(o.utterance_end_ms, 1500);
	assert_string_equal(o.language, "de");
	assert_string_equal(o.model, "whisper-base");
	assert_int_equal(parse("encoding=alaw&sample_rate=16000&endpointing=300", &o, err), 0);
	assert_int_equal(o.endpointing_ms, 300);
	assert_int_equal(parse("encoding=linear32&sample_rate=16000&endpointing=true", &o, err), 0);
	assert_int_equal(o.endpointing_ms, 10);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_LINEAR32);
	assert_int_equal(parse("encoding=linear16&sample_rate=16000&channels=1&multichannel=true",
			       &o, err), 0);
}

static void expect(const char *q, int rc, const char *needle)
{
	struct srv_dg_live_opts o;
	char err[256] = "";
	assert_int_equal(parse(q, &o, err), rc);
	if (!strstr(err, needle))
		fail_msg("'%s': error '%s' does not name '%s'", q, err, needle);
}

static void test_refused(void **state)
{
	(void)state;
	expect("encoding=linear16", -ST_INVAL, "sample_rate");
	expect("encoding=mp3&sample_rate=16000", -ST_INVAL, "encoding");
	expect("encoding=linear16&sample_rate=999", -ST_INVAL, "sample_rate");
	expect("encoding=linear16&sample_rate=16k", -ST_INVAL, "sample_rate");
	expect("encoding=linear16&sample_rate=16000&channels=0", -ST_INVAL, "channels");
	expect("encoding=linear16&sample_rate=16000&interim_results=yes", -ST_INVAL,
	       "interim_results");
	expect("encoding=linear16&sample_rate=16000&endpointing=-5", -ST_INVAL, "endpointing");
	expect("encoding=linear16&sample_rate=16000&interim_results=true&utterance_end_ms=999",
	       -ST_INVAL, "utterance_end_ms");
	expect("encoding=linear16&sample_rate=16000&utterance_end_ms=1000", -ST_INVAL,
	       "interim_results");
	expect("encoding=linear16&sample_rate=16000&language=klingon", -ST_INVAL, "language");
	expect("encoding=linear16&sample_rate=16000&language=xx", -ST_INVAL, "language");
	expect("encoding=linear16&sample_rate=16000&punctuate=%zz", -ST_INVAL, "punctuate");
	expect("encoding=opus", -ST_INVAL, "sample_rate"); /* raw packets: headerless */
	expect("encoding=opus&sample_rate=48000&channels=3", -ST_INVAL, "channels 1 or 2");
	expect("encoding=linear16&sample_rate=16000&channels=9&multichannel=true", -ST_INVAL,
	       "at most 8 channels");
	expect("multichannel=true", -ST_UNSUPPORTED, "multichannel"); /* a container */
	expect("encoding=ogg-opus&multichannel=true", -ST_UNSUPPORTED, "multichannel");
}

/* Containers (no encoding; flac and ogg-opus describe themselves, their
 * sample_rate ignored) and raw Opus packets are accepted. */
static void test_containers(void **state)
{
	(void)state;
	struct srv_dg_live_opts o;
	char err[256] = "";
	assert_int_equal(parse("", &o, err), 0);
	assert_true(o.container);
	assert_int_equal(parse("sample_rate=16000&multichannel=false", &o, err), 0);
	assert_true(o.container);
	assert_int_equal(parse("encoding=ogg-opus", &o, err), 0);
	assert_false(o.container);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_OGG_OPUS);
	assert_int_equal(parse("encoding=flac&sample_rate=44100", &o, err), 0);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_FLAC);
	assert_int_equal(parse("encoding=opus&sample_rate=48000&channels=2", &o, err), 0);
	assert_false(o.container);
	assert_int_equal(o.raw.encoding, ENG_AUDIO_ENCODING_OPUS);
	assert_int_equal(o.raw.channels, 2);
	assert_int_equal(parse("encoding=linear16&sample_rate=16000", &o, err), 0);
	assert_false(o.container);
	assert_int_equal(o.n_channels, 1);
}

/* multichannel=true: one result stream per channel; without it (or with
 * one channel) the channels are mixed into one. */
static void test_multichannel(void **state)
{
	(void)state;
	struct srv_dg_live_opts o;
	char err[256] = "";
	assert_int_equal(parse("encoding=linear16&sample_rate=16000&channels=2&multichannel=true",
			       &o, err), 0);
	assert_int_equal(o.n_channels, 2);
	assert_int_equal(parse("encoding=mulaw&sample_rate=8000&channels=8&multichannel=True",
			       &o, err), 0);
	assert_int_equal(o.n_channels, 8);
	assert_int_equal(parse("encoding=linear16&sample_rate=16000&channels=2&multichannel=false",
			       &o, err), 0);
	assert_int_equal(o.n_channels, 1);
	assert_int_equal(parse("encoding=linear16&sample_rate=16000&channels=2", &o, err), 0);
	assert_int_equal(o.n_channels, 1);
	assert_int_equal(parse("encoding=linear16&sample_rate=16000&multichannel=true", &o, err), 0);
	assert_int_equal(o.n_channels, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_key),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_containers),
		cmocka_unit_test(test_multichannel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
