/* test_ib_live.c - the pure parts of inferd-bench's deepgram-live client
 * (bench/harness/ib_live_msg.c): the WebSocket handshake's key and accept
 * values against RFC 6455's own example, the server's messages as inferd
 * and Deepgram send them (a final with words, an interim, a final without
 * words, Metadata, other types) and malformed ones, and the two latencies
 * (which frame a word's end went out with, at a frame's edge, past the
 * audio sent; Deepgram's interim definition). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ib_live_msg.h"

/* A final as inferd's live route renders it (server/deepgram/srv_dg_live_out.c). */
static const char FINAL[] =
	"{\"type\":\"Results\",\"channel_index\":[0,1],\"duration\":2.56,\"start\":0.32,"
	"\"is_final\":true,\"speech_final\":true,\"from_finalize\":false,\"channel\":"
	"{\"alternatives\":[{\"transcript\":\"and so my fellow americans\",\"confidence\":0.9,"
	"\"words\":[{\"word\":\"and\",\"start\":0.32,\"end\":0.6,\"confidence\":0.9},"
	"{\"word\":\"so\",\"start\":0.6,\"end\":0.9,\"confidence\":0.9},"
	"{\"word\":\"my\",\"start\":1.0,\"end\":1.2,\"confidence\":0.9},"
	"{\"word\":\"fellow\",\"start\":1.2,\"end\":1.5,\"confidence\":0.9},"
	"{\"word\":\"americans\",\"start\":1.5,\"end\":2.25,\"confidence\":0.9}]}]},"
	"\"metadata\":{\"request_id\":\"x\",\"model_uuid\":\"y\"}}";

static void test_handshake_values(void **state)
{
	(void)state;
	/* RFC 6455 1.3 and 4.2.2: the nonce "the sample nonce" */
	char key[IB_WS_KEY_LEN + 1], acc[IB_WS_ACCEPT_LEN + 1];
	ib_ws_key((const uint8_t *)"the sample nonce", key);
	assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
	ib_ws_accept(key, acc);
	assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	const char *ok = " s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\t";
	assert_true(ib_ws_accept_is_valid(key, ok, strlen(ok)));
	assert_true(ib_ws_accept_is_valid(key, acc, strlen(acc)));
	/* base64 is case-sensitive; a cut or longer value is not it */
	const char *bad[] = {"S3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo",
			     "s3pPLMBiTxaQ9kYGzzhZRbK+xOo==", "", "  "};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(ib_ws_accept_is_valid(key, bad[i], strlen(bad[i])));
	/* another key, another accept */
	ib_ws_key((const uint8_t *)"0123456789abcdef", key);
	assert_int_equal(strlen(key), IB_WS_KEY_LEN);
	assert_false(ib_ws_accept_is_valid(key, acc, strlen(acc)));
}

static void test_results(void **state)
{
	(void)state;
	struct ib_live_msg m;
	assert_int_equal(ib_live_msg_parse(FINAL, strlen(FINAL), &m), 0);
	assert_int_equal(m.type, IB_LIVE_MSG_RESULTS);
	assert_true(m.is_final);
	assert_float_equal(m.start, 0.32, 1e-12);
	assert_float_equal(m.duration, 2.56, 1e-12);
	assert_int_equal(m.n_words, 5);
	assert_float_equal(m.last_end, 2.25, 1e-12);
	assert_string_equal(m.transcript, "and so my fellow americans");
	ib_live_msg_fini(&m);
	ib_live_msg_fini(&m); /* twice: a no-op */

	const char interim[] = "{\"type\":\"Results\",\"is_final\":false,\"start\":3.5,"
			       "\"duration\":1.25,\"channel\":{\"alternatives\":[{\"transcript\":"
			       "\"ask\",\"words\":[{\"word\":\"ask\",\"end\":3.9}]}]}}";
	assert_int_equal(ib_live_msg_parse(interim, strlen(interim), &m), 0);
	assert_false(m.is_final);
	assert_int_equal(m.n_words, 1);
	assert_float_equal(ib_live_interim_latency(6.0, &m), 6.0 - 4.75, 1e-12);
	ib_live_msg_fini(&m);

	/* silence: a final without words */
	const char empty[] = "{\"type\":\"Results\",\"is_final\":true,\"start\":0,\"duration\":0,"
			     "\"channel\":{\"alternatives\":[{\"transcript\":\"\",\"words\":[]}]}}";
	assert_int_equal(ib_live_msg_parse(empty, strlen(empty), &m), 0);
	assert_true(m.is_final);
	assert_int_equal(m.n_words, 0);
	assert_float_equal(m.last_end, -1.0, 0);
	assert_string_equal(m.transcript, "");
	ib_live_msg_fini(&m);
}

static void test_other_messages(void **state)
{
	(void)state;
	struct ib_live_msg m;
	const char meta[] = "{\"type\":\"Metadata\",\"request_id\":\"r\",\"duration\":11.0}";
	assert_int_equal(ib_live_msg_parse(meta, strlen(meta), &m), 0);
	assert_int_equal(m.type, IB_LIVE_MSG_METADATA);
	assert_string_equal(m.transcript, "");
	ib_live_msg_fini(&m);
	const char *others[] = {"{\"type\":\"SpeechStarted\",\"timestamp\":1.0}",
				"{\"type\":\"UtteranceEnd\",\"last_word_end\":2.0}",
				"{\"type\":\"SomethingNew\"}"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		assert_int_equal(ib_live_msg_parse(others[i], strlen(others[i]), &m), 0);
		assert_int_equal(m.type, IB_LIVE_MSG_OTHER);
		ib_live_msg_fini(&m);
	}
}

static void test_malformed(void **state)
{
	(void)state;
	const char *bad[] = {
		"", "not json", "[1,2]", "{}", "{\"type\":3}", "{\"type\":\"Results\"}",
		/* is_final not a boolean */
		"{\"type\":\"Results\",\"is_final\":1,\"start\":0,\"duration\":1,\"channel\":"
		"{\"alternatives\":[{\"transcript\":\"a\",\"words\":[]}]}}",
		/* no alternatives */
		"{\"type\":\"Results\",\"is_final\":true,\"start\":0,\"duration\":1,\"channel\":{}}",
		/* a word without a number end */
		"{\"type\":\"Results\",\"is_final\":true,\"start\":0,\"duration\":1,\"channel\":"
		"{\"alternatives\":[{\"transcript\":\"a\",\"words\":[{\"word\":\"a\",\"end\":\"1\"}]}]}}",
		/* a transcript that is not a string */
		"{\"type\":\"Results\",\"is_final\":true,\"start\":0,\"duration\":1,\"channel\":"
		"{\"alternatives\":[{\"transcript\":null,\"words\":[]}]}}",
		/* cut short */
		"{\"type\":\"Results\",\"is_final\":true,\"start\":0,\"dur",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ib_live_msg m;
		assert_int_equal(ib_live_msg_parse(bad[i], strlen(bad[i]), &m), -1);
		assert_null(m.transcript);
	}
}

static void test_final_latency(void **state)
{
	(void)state;
	/* frames of 0.1 s sent at 10.1, 10.2, ... (a microphone's pace) */
	double t[30];
	for (int k = 0; k < 30; k++)
		t[k] = 10.0 + 0.1 * (k + 1);
	/* end 2.25 s: in frame 22 ([2.2, 2.3)), sent at 12.3 */
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, 2.25), 13.0 - t[22], 1e-9);
	/* ends on frame edges: audio up to 0.3 s went with frame 2 */
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, 0.3), 13.0 - t[2], 1e-9);
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, 0.7), 13.0 - t[6], 1e-9);
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, 2.9), 13.0 - t[28], 1e-9);
	/* 0 and before: the first frame; past the audio sent: the last one sent */
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, 0.0), 13.0 - t[0], 1e-9);
	assert_float_equal(ib_live_final_latency(13.0, t, 30, 0.1, -1.0), 13.0 - t[0], 1e-9);
	assert_float_equal(ib_live_final_latency(13.0, t, 12, 0.1, 2.25), 13.0 - t[11], 1e-9);
	assert_float_equal(ib_live_final_latency(13.0, t, 1, 0.1, 5.0), 13.0 - t[0], 1e-9);
	/* a stream at 4x: frames 25 ms apart, the same frame rule */
	for (int k = 0; k < 30; k++)
		t[k] = 1.0 + 0.025 * (k + 1);
	assert_float_equal(ib_live_final_latency(2.0, t, 30, 0.1, 1.05), 2.0 - t[10], 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_values),
		cmocka_unit_test(test_results),
		cmocka_unit_test(test_other_messages),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_final_latency),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
