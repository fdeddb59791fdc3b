/* test_bstore_jobs.c - the batch store's life of a job
 * (server/batch/srv_bstore.h) on a real SQLite file: lists in the order
 * of creation with their cursors, each status's time, what the done
 * items used, a batch ended in one transaction (its pending items failed
 * when it expired, its output and error files stored), and expiry
 * removing files and, with their last file, ended batches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_bstore.h"
#include "tests/unit/server/bstore_test.h"

#define URL "/v1/chat/completions"
#define LINE(cid) \
	"{\"custom_id\": \"" cid "\", \"method\": \"POST\", \"url\": \"" URL "\", " \
	"\"body\": {\"model\": \"m\"}}\n"

/* A batch of text's lines, created at t, its file expiring at expires. */
static void make_batch(struct srv_bstore *s, const char *text, int64_t t, int64_t expires,
		       struct srv_batch *b)
{
	struct srv_bfile f = { .purpose = "batch", .filename = "in.jsonl", .created_at = t,
			       .expires_at = expires };
	char err[256];
	assert_int_equal(srv__bstore_file_put(s, &f, text, strlen(text), err, sizeof(err)), 0);
	memset(b, 0, sizeof(*b));
	snprintf(b->endpoint, sizeof(b->endpoint), URL);
	snprintf(b->input_file_id, sizeof(b->input_file_id), "%s", f.id);
	snprintf(b->completion_window, sizeof(b->completion_window), "24h");
	snprintf(b->metadata, sizeof(b->metadata), "{\"k\":\"v\"}");
	b->created_at = t;
	b->expires_at = t + 86400;
	if (srv__bstore_batch_create(s, b, 100, err, sizeof(err)))
		fail_msg("%s", err);
}

static void test_lists(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b[3], got[4];
	for (int i = 0; i < 3; i++)
		make_batch(s, LINE("a"), 5000, 0, &b[i]); /* one second: the rowid orders */
	size_t n;
	bool more;
	assert_int_equal(srv__bstore_batch_list(s, NULL, false, got, 2, &n, &more), 0);
	assert_int_equal(n, 2);
	assert_true(more);
	assert_string_equal(got[0].id, b[2].id); /* newest first */
	assert_string_equal(got[1].id, b[1].id);
	assert_string_equal(got[0].metadata, "{\"k\":\"v\"}");
	assert_int_equal(srv__bstore_batch_list(s, got[1].id, false, got, 4, &n, &more), 0);
	assert_int_equal(n, 1);
	assert_false(more);
	assert_string_equal(got[0].id, b[0].id);
	assert_int_equal(srv__bstore_batch_list(s, "batch_none", false, got, 4, &n, &more),
			 -ST_NOTFOUND);
	/* open ones, oldest first: not the cancelled one */
	assert_int_equal(srv__bstore_batch_set_status(s, b[1].id, "cancelled", 6000), 0);
	assert_int_equal(srv__bstore_batch_list(s, NULL, true, got, 4, &n, &more), 0);
	assert_int_equal(n, 2);
	assert_string_equal(got[0].id, b[0].id);
	assert_string_equal(got[1].id, b[2].id);
	struct srv_bfile f[8];
	assert_int_equal(srv__bstore_file_list(s, "batch", NULL, f, 8, &n, &more), 0);
	assert_int_equal(n, 3);
	assert_string_equal(f[0].id, b[2].input_file_id);
	assert_int_equal(srv__bstore_file_list(s, "batch_output", NULL, f, 8, &n, &more), 0);
	assert_int_equal(n, 0);
	srv__bstore_close(s);
}

static void test_status_times(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b;
	make_batch(s, LINE("a"), 7000, 0, &b);
	assert_int_equal(b.in_progress_at, 7000);
	assert_int_equal(srv__bstore_batch_set_status(s, b.id, "cancelling", 7001), 0);
	assert_int_equal(srv__bstore_batch_set_status(s, b.id, "cancelled", 7002), 0);
	assert_int_equal(srv__bstore_batch_set_status(s, b.id, "nonsense", 7003), -ST_INVAL);
	assert_int_equal(srv__bstore_batch_set_status(s, "batch_none", "failed", 1), -ST_NOTFOUND);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), 0);
	assert_string_equal(b.status, "cancelled");
	assert_int_equal(b.cancelling_at, 7001);
	assert_int_equal(b.cancelled_at, 7002);
	assert_int_equal(b.completed_at, 0);
	srv__bstore_close(s);
}

static void test_usage(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b;
	make_batch(s, LINE("a") LINE("b") LINE("c") LINE("d"), 8000, 0, &b);
	const char chat[] = "{\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5}}";
	const char asr[] = "{\"text\":\"x\",\"usage\":{\"type\":\"duration\",\"seconds\":11}}";
	const char verbose[] = "{\"text\":\"x\",\"duration\":10.44}";
	assert_int_equal(srv__bstore_item_end(s, b.id, 1, true, 200, chat, strlen(chat), -1, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_item_end(s, b.id, 2, true, 200, asr, strlen(asr), -1, NULL,
					      NULL), 0);
	/* the exact seconds given win over usage's whole ones */
	assert_int_equal(srv__bstore_item_end(s, b.id, 3, true, 200, asr, strlen(asr), 10.5, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_item_end(s, b.id, 4, true, 200, verbose, strlen(verbose), -1,
					      NULL, NULL), 0);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), 0);
	assert_int_equal(b.prompt_tokens, 7);
	assert_int_equal(b.completion_tokens, 5);
	assert_true(b.audio_s > 11 + 10.5 + 10.44 - 1e-6 && b.audio_s < 11 + 10.5 + 10.44 + 1e-6);
	srv__bstore_close(s);
}

static void test_finish_expired(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b;
	make_batch(s, LINE("a") LINE("b") LINE("c") "not json\n", 9000, 0, &b);
	const char ok[] = "{\"choices\":[]}", bad[] = "{\"error\":{\"message\":\"no\"}}";
	assert_int_equal(srv__bstore_item_end(s, b.id, 1, true, 200, ok, strlen(ok), -1, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_item_end(s, b.id, 2, false, 404, bad, strlen(bad), -1, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_batch_finish(s, b.id, "expired", 9100, 50, "batch_expired",
						  "too late"),
			 0);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), 0);
	assert_string_equal(b.status, "expired");
	assert_int_equal(b.expired_at, 9100);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.failed, 3); /* the 404, the expired line 3, the bad line 4 */
	struct srv_bfile f;
	char *data = NULL;
	assert_int_equal(srv__bstore_file_get(s, b.error_file_id, &f, &data), 0);
	assert_string_equal(f.purpose, "batch_output");
	assert_int_equal(f.expires_at, 9150);
	assert_non_null(strstr(data, "\"status_code\":404"));
	assert_non_null(strstr(data, "\"code\":\"batch_expired\""));
	assert_non_null(strstr(data, "line 4 is not JSON"));
	mem_free(data);
	assert_int_equal(srv__bstore_file_get(s, b.output_file_id, &f, &data), 0);
	assert_non_null(strstr(data, "\"custom_id\":\"a\""));
	assert_null(strstr(data, "\"custom_id\":\"b\""));
	mem_free(data);
	/* a batch whose items all ended has no error file when none failed */
	struct srv_batch c;
	make_batch(s, LINE("x"), 9200, 0, &c);
	assert_int_equal(srv__bstore_item_end(s, c.id, 1, true, 200, ok, strlen(ok), -1, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_batch_finish(s, c.id, "completed", 9300, 50, NULL, NULL), 0);
	assert_int_equal(srv__bstore_batch_get(s, c.id, &c), 0);
	assert_string_equal(c.status, "completed");
	assert_int_equal(c.finalizing_at, 9300);
	assert_string_equal(c.error_file_id, "");
	assert_int_equal(srv__bstore_batch_finish(s, "batch_none", "completed", 1, 1, NULL, NULL),
			 -ST_NOTFOUND);
	srv__bstore_close(s);
}

static void test_expire(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store_at("expire.db"); /* no other test's files */
	struct srv_batch b, open;
	make_batch(s, LINE("a"), 10000, 10100, &b);
	make_batch(s, LINE("a"), 10000, 10100, &open); /* never ended */
	const char ok[] = "{\"choices\":[]}";
	assert_int_equal(srv__bstore_item_end(s, b.id, 1, true, 200, ok, strlen(ok), -1, NULL,
					      NULL), 0);
	assert_int_equal(srv__bstore_batch_finish(s, b.id, "completed", 10050, 200, NULL, NULL), 0);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), 0);
	int64_t before = srv__bstore_bytes(s);
	assert_true(before > 0);
	assert_int_equal(srv__bstore_expire(s, 10099), 0); /* nothing due yet */
	assert_int_equal(srv__bstore_expire(s, 10100), 2); /* both inputs */
	struct srv_bfile f;
	assert_int_equal(srv__bstore_file_get(s, b.input_file_id, &f, NULL), -ST_NOTFOUND);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), 0); /* its output file is left */
	assert_int_equal(srv__bstore_expire(s, 10250), 1);   /* the output, at 10050 + 200 */
	assert_int_equal(srv__bstore_batch_get(s, b.id, &b), -ST_NOTFOUND);
	/* an open batch stays, its files gone or not */
	assert_int_equal(srv__bstore_batch_get(s, open.id, &open), 0);
	assert_true(srv__bstore_bytes(s) <= before);
	srv__bstore_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists),	     cmocka_unit_test(test_status_times),
		cmocka_unit_test(test_usage),	     cmocka_unit_test(test_finish_expired),
		cmocka_unit_test(test_expire),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
