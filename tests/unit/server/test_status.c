/* test_status.c - the one status table (server/srv_status.c): every
 * project status to its HTTP status, gRPC code and text generation error,
 * as the three mappings it replaced answered, plus the out-of-range row
 * and OpenAI's error type of an HTTP status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/st.h"
#include "server/srv_status.h"

static void test_http(void **state)
{
	(void)state;
	static const int want[ST_COUNT] = {
		[ST_OK] = 200,	      [ST_NOMEM] = 503,	   [ST_INVAL] = 400,   [ST_TOOBIG] = 413,
		[ST_AGAIN] = 429,     [ST_CANCELED] = 499, [ST_IO] = 500,      [ST_DEVICE] = 500,
		[ST_NOTFOUND] = 404,  [ST_CORRUPT] = 500,  [ST_UNSUPPORTED] = 415,
		[ST_BUSY] = 429,      [ST_TIMEDOUT] = 504, [ST_CLOSED] = 503,
	};
	for (int st = 0; st < ST_COUNT; st++) {
		assert_int_equal(srv__status_from_st(st), want[st]);
		assert_int_equal(srv__status_from_st(-st), want[st]);
	}
	assert_int_equal(srv__status_from_st(ST_COUNT), 500);
	assert_int_equal(srv__status_from_st(-1000), 500);
}

static void test_grpc(void **state)
{
	(void)state;
	assert_int_equal(srv__status_grpc(-ST_INVAL), SRV_GRPC_INVALID_ARGUMENT);
	assert_int_equal(srv__status_grpc(-ST_UNSUPPORTED), SRV_GRPC_INVALID_ARGUMENT);
	assert_int_equal(srv__status_grpc(-ST_NOTFOUND), SRV_GRPC_NOT_FOUND);
	assert_int_equal(srv__status_grpc(-ST_BUSY), SRV_GRPC_RESOURCE_EXHAUSTED);
	assert_int_equal(srv__status_grpc(-ST_TOOBIG), SRV_GRPC_RESOURCE_EXHAUSTED);
	assert_int_equal(srv__status_grpc(-ST_TIMEDOUT), SRV_GRPC_DEADLINE_EXCEEDED);
	assert_int_equal(srv__status_grpc(-ST_CANCELED), SRV_GRPC_CANCELLED);
	assert_int_equal(srv__status_grpc(-ST_NOMEM), SRV_GRPC_UNAVAILABLE);
	assert_int_equal(srv__status_grpc(-ST_CLOSED), SRV_GRPC_UNAVAILABLE);
	assert_int_equal(srv__status_grpc(-ST_IO), SRV_GRPC_INTERNAL);
	assert_int_equal(srv__status_grpc(-ST_AGAIN), SRV_GRPC_INTERNAL);
	assert_int_equal(srv__status_grpc(-ST_COUNT), SRV_GRPC_INTERNAL);
}

static void test_gen(void **state)
{
	(void)state;
	const struct srv_status_row *r = srv__status_row(-ST_TOOBIG);
	assert_int_equal(r->gen_http, 400);
	assert_string_equal(r->gen_code, "context_length_exceeded");
	assert_int_equal(r->gen_param, SRV_STATUS_PARAM_INPUT);
	r = srv__status_row(-ST_UNSUPPORTED);
	assert_int_equal(r->gen_http, 400);
	assert_string_equal(r->gen_code, "unsupported_chat_template");
	assert_int_equal(r->gen_param, SRV_STATUS_PARAM_MODEL);
	r = srv__status_row(-ST_NOMEM);
	assert_int_equal(r->gen_http, 503);
	assert_string_equal(r->gen_code, "server_overloaded");
	assert_string_equal(r->gen_msg, "out of memory for this request");
	assert_string_equal(srv__status_row(-ST_INVAL)->gen_code, "invalid_value");
	assert_int_equal(srv__status_row(-ST_BUSY)->gen_http, 429);
	assert_string_equal(srv__status_row(-ST_BUSY)->gen_code, "rate_limit_exceeded");
	assert_int_equal(srv__status_row(-ST_TIMEDOUT)->gen_http, 504);
	assert_string_equal(srv__status_row(-ST_TIMEDOUT)->gen_code, "timeout");
	assert_string_equal(srv__status_row(-ST_CLOSED)->gen_code, "server_shutting_down");
	/* statuses a generation request cannot cause: a server error */
	int internal[] = { ST_AGAIN, ST_CANCELED, ST_IO, ST_DEVICE, ST_NOTFOUND, ST_CORRUPT,
			   ST_COUNT, 99 };
	for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++) {
		r = srv__status_row(-internal[i]);
		assert_int_equal(r->gen_http, 500);
		assert_string_equal(r->gen_code, "server_error");
		assert_int_equal(r->gen_param, SRV_STATUS_PARAM_NONE);
		assert_null(r->gen_msg);
	}
}

static void test_texts(void **state)
{
	(void)state;
	assert_string_equal(srv__status_openai_type(400), "invalid_request_error");
	assert_string_equal(srv__status_openai_type(401), "authentication_error");
	assert_string_equal(srv__status_openai_type(404), "not_found_error");
	assert_string_equal(srv__status_openai_type(429), "rate_limit_error");
	assert_string_equal(srv__status_openai_type(503), "server_overloaded");
	assert_string_equal(srv__status_openai_type(504), "server_error");
	assert_string_equal(srv__status_reason(404), "Not Found");
	assert_string_equal(srv__status_reason(299), "Unknown");
	assert_string_equal(srv__status_detail(431),
			    "the request line and headers are larger than limits.max_header_bytes");
	assert_string_equal(srv__status_detail(404), "Not Found");
	assert_string_equal(srv__status_code(413), "body_too_large");
	assert_string_equal(srv__status_code(431), "headers_too_large");
	assert_null(srv__status_code(404));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http),
		cmocka_unit_test(test_grpc),
		cmocka_unit_test(test_gen),
		cmocka_unit_test(test_texts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
