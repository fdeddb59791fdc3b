/* test_bstore.c - the batch store (server/batch/srv_bstore.h) on a real
 * SQLite file: files round-trip through zstd; an input file's lines
 * become items, bad lines failing at once with their reason; an item ends
 * once; the output and error files are OpenAI's result lines; and what
 * ended survives a process killed with SIGKILL right after, while what
 * had not is pending again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/mem.h"
#include "common/st.h"
#include "server/batch/srv_bstore.h"
#include "tests/unit/server/bstore_test.h"

static void put_file(struct srv_bstore *s, const char *text, char id[SRV_BSTORE_ID_MAX])
{
	struct srv_bfile f = { .purpose = "batch", .filename = "in.jsonl", .created_at = 1000,
			       .expires_at = 0 };
	char err[256];
	assert_int_equal(srv__bstore_file_put(s, &f, text, strlen(text), err, sizeof(err)), 0);
	memcpy(id, f.id, SRV_BSTORE_ID_MAX);
}

static void test_file_round_trip(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	size_t n = 200000;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)('a' + (i * 7 + i / 13) % 26);
	big[n] = '\0';
	char id[SRV_BSTORE_ID_MAX];
	put_file(s, big, id);
	assert_int_equal(strncmp(id, "file-", 5), 0);
	assert_int_equal(strlen(id), 5 + 24);
	struct srv_bfile f;
	char *data = NULL;
	assert_int_equal(srv__bstore_file_get(s, id, &f, &data), 0);
	assert_int_equal(f.bytes, (int64_t)n);
	assert_string_equal(f.purpose, "batch");
	assert_string_equal(f.filename, "in.jsonl");
	assert_int_equal(f.created_at, 1000);
	assert_memory_equal(data, big, n);
	assert_int_equal(data[n], '\0');
	mem_free(data);
	assert_int_equal(srv__bstore_file_delete(s, id), 0);
	assert_int_equal(srv__bstore_file_get(s, id, &f, NULL), -ST_NOTFOUND);
	assert_int_equal(srv__bstore_file_delete(s, id), -ST_NOTFOUND);
	free(big);
	srv__bstore_close(s);
}

#define URL "/v1/chat/completions"
#define REQ(cid) "{\"custom_id\": \"" cid "\", \"method\": \"POST\", \"url\": \"" URL "\", " \
		 "\"body\": {\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}}"

/* Five requests, a blank line, and four bad lines (not JSON, wrong url,
 * no body, a custom_id used before). */
static const char input[] = REQ("a") "\n"
			    REQ("b") "\r\n"
			    "\n"
			    "{not json\n"
			    "{\"custom_id\": \"w\", \"method\": \"POST\", \"url\": \"/v1/embeddings\", "
			    "\"body\": {}}\n"
			    REQ("c") "\n"
			    "{\"custom_id\": \"nb\", \"method\": \"POST\", \"url\": \"" URL "\"}\n"
			    REQ("a") "\n"
			    REQ("d") "\n"
			    REQ("e");

static void make_batch(struct srv_bstore *s, struct srv_batch *b)
{
	char fid[SRV_BSTORE_ID_MAX], err[256];
	put_file(s, input, fid);
	memset(b, 0, sizeof(*b));
	snprintf(b->endpoint, sizeof(b->endpoint), URL);
	snprintf(b->input_file_id, sizeof(b->input_file_id), "%s", fid);
	snprintf(b->completion_window, sizeof(b->completion_window), "24h");
	b->created_at = 2000;
	b->expires_at = 2000 + 86400;
	int rc = srv__bstore_batch_create(s, b, 100, err, sizeof(err));
	if (rc)
		fail_msg("%s", err);
}

static void test_batch_items(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b;
	make_batch(s, &b);
	assert_int_equal(strncmp(b.id, "batch_", 6), 0);
	assert_string_equal(b.status, "in_progress");
	assert_int_equal(b.total, 9);  /* the blank line is not an item */
	assert_int_equal(b.failed, 4); /* failed at creation */
	assert_int_equal(b.done, 0);
	struct srv_bitem it[16];
	size_t n;
	assert_int_equal(srv__bstore_items_pending(s, b.id, 0, it, 16, &n), 0);
	assert_int_equal(n, 5);
	const char *cids[] = { "a", "b", "c", "d", "e" };
	const int64_t lines[] = { 1, 2, 6, 9, 10 }; /* 1-based input lines */
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(it[i].custom_id, cids[i]);
		assert_int_equal(it[i].line, lines[i]);
		json_t *body = json_loads(it[i].body, 0, NULL);
		assert_non_null(body);
		assert_string_equal(json_string_value(json_object_get(body, "model")), "m");
		json_decref(body);
	}
	srv__bstore_items_free(it, n);
	/* paging: after line 6 */
	assert_int_equal(srv__bstore_items_pending(s, b.id, 6, it, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(it[0].line, 9);
	srv__bstore_items_free(it, n);

	const char resp[] = "{\"choices\": [{\"message\": {\"content\": \"hello\"}}]}";
	assert_int_equal(srv__bstore_item_end(s, b.id, 2, true, 200, resp, strlen(resp), -1.0, NULL,
					      NULL), 0);
	/* ended once: a second end changes nothing */
	assert_int_equal(srv__bstore_item_end(s, b.id, 2, false, 0, NULL, 0, -1.0, "x", "y"), 1);
	assert_int_equal(srv__bstore_item_end(s, b.id, 6, false, 0, NULL, 0, -1.0, "model_error",
					      "the model failed"), 0);
	assert_int_equal(srv__bstore_item_end(s, b.id, 77, true, 200, "{}", 2, -1.0, NULL, NULL),
			 -ST_NOTFOUND);
	assert_int_equal(
		srv__bstore_item_end(s, "batch_none", 1, true, 200, "{}", 2, -1.0, NULL, NULL),
		-ST_NOTFOUND);
	struct srv_batch g;
	assert_int_equal(srv__bstore_batch_get(s, b.id, &g), 0);
	assert_int_equal(g.done, 1);
	assert_int_equal(g.failed, 5);
	assert_int_equal(srv__bstore_items_pending(s, b.id, 0, it, 16, &n), 0);
	assert_int_equal(n, 3);
	srv__bstore_items_free(it, n);

	/* the output file: item 2's line */
	char *out;
	size_t len;
	assert_int_equal(srv__bstore_results(s, b.id, false, &out, &len), 0);
	assert_int_equal(len, strlen(out));
	assert_int_equal(out[len - 1], '\n');
	json_t *l = json_loadb(out, len - 1, 0, NULL);
	assert_non_null(l);
	assert_string_equal(json_string_value(json_object_get(l, "custom_id")), "b");
	assert_true(json_is_null(json_object_get(l, "error")));
	json_t *r = json_object_get(l, "response");
	assert_int_equal(json_integer_value(json_object_get(r, "status_code")), 200);
	json_t *want = json_loads(resp, 0, NULL);
	assert_true(json_equal(json_object_get(r, "body"), want));
	json_decref(want);
	json_decref(l);
	mem_free(out);

	/* the error file: the four bad lines and item 6, in line order */
	assert_int_equal(srv__bstore_results(s, b.id, true, &out, &len), 0);
	const char *expect[][2] = {
		{ "", "line 4 is not JSON" },
		{ "w", "line 5: url must be the batch's endpoint, " URL },
		{ "c", "the model failed" },
		{ "nb", "line 7: body must be a JSON object" },
		{ "a", "line 8: custom_id \"a\" is used by an earlier line" },
	};
	char *line = out;
	for (size_t i = 0; i < 5; i++) {
		char *nl = strchr(line, '\n');
		assert_non_null(nl);
		l = json_loadb(line, (size_t)(nl - line), 0, NULL);
		assert_non_null(l);
		assert_true(json_is_null(json_object_get(l, "response")));
		assert_string_equal(json_string_value(json_object_get(l, "custom_id")),
				    expect[i][0]);
		const char *msg = json_string_value(
			json_object_get(json_object_get(l, "error"), "message"));
		if (!msg || strncmp(msg, expect[i][1], strlen(expect[i][1])))
			fail_msg("error line %zu: %s", i, msg ? msg : "(none)");
		json_decref(l);
		line = nl + 1;
	}
	assert_int_equal(*line, '\0');
	mem_free(out);

	assert_int_equal(srv__bstore_batch_set_status(s, b.id, "cancelled", 3000), 0);
	assert_int_equal(srv__bstore_batch_get(s, b.id, &g), 0);
	assert_string_equal(g.status, "cancelled");
	assert_int_equal(g.cancelled_at, 3000);
	assert_int_equal(srv__bstore_batch_set_status(s, "batch_none", "cancelled", 1),
			 -ST_NOTFOUND);
	srv__bstore_close(s);
}

static void test_batch_refused(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	char fid[SRV_BSTORE_ID_MAX], err[256];
	struct srv_batch b = { .endpoint = URL, .completion_window = "24h" };
	snprintf(b.input_file_id, sizeof(b.input_file_id), "file-none");
	assert_int_equal(srv__bstore_batch_create(s, &b, 100, err, sizeof(err)), -ST_NOTFOUND);
	assert_string_equal(err, "no file file-none");
	put_file(s, "\n \n", fid);
	snprintf(b.input_file_id, sizeof(b.input_file_id), "%s", fid);
	assert_int_equal(srv__bstore_batch_create(s, &b, 100, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "the input file has no request line");
	put_file(s, input, fid);
	snprintf(b.input_file_id, sizeof(b.input_file_id), "%s", fid);
	assert_int_equal(srv__bstore_batch_create(s, &b, 3, err, sizeof(err)), -ST_INVAL);
	assert_string_equal(err, "the input file has more than 3 requests");
	/* refused batches leave nothing behind */
	struct srv_batch g;
	assert_int_equal(srv__bstore_batch_get(s, b.id, &g), -ST_NOTFOUND);
	srv__bstore_close(s);
}

/* A child ends items one by one and is killed (SIGKILL) right after the
 * k-th end returns: after it, those k are ended with their results and
 * every other is pending, in a store opened anew. */
static void test_sigkill_keeps_ended(void **state)
{
	(void)state;
	struct srv_bstore *s = open_store();
	struct srv_batch b;
	make_batch(s, &b);
	srv__bstore_close(s);
	const int64_t lines[] = { 1, 2, 6, 9, 10 };
	for (int k = 0; k <= 5; k += 2) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct srv_bstore *c = open_store();
			for (int i = 0; i < k; i++) {
				char body[64];
				snprintf(body, sizeof(body), "{\"n\": %lld}", (long long)lines[i]);
				if (srv__bstore_item_end(c, b.id, lines[i], true, 200, body,
							 strlen(body), -1.0, NULL, NULL) < 0)
					_exit(3);
			}
			raise(SIGKILL);
			_exit(4);
		}
		int ws;
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
		s = open_store();
		struct srv_batch g;
		assert_int_equal(srv__bstore_batch_get(s, b.id, &g), 0);
		assert_int_equal(g.done, k < 5 ? k : 5);
		struct srv_bitem it[8];
		size_t n;
		assert_int_equal(srv__bstore_items_pending(s, b.id, 0, it, 8, &n), 0);
		assert_int_equal(n, (size_t)(5 - (k < 5 ? k : 5)));
		srv__bstore_items_free(it, n);
		char *out;
		size_t len;
		assert_int_equal(srv__bstore_results(s, b.id, false, &out, &len), 0);
		size_t lines_out = 0;
		for (size_t i = 0; i < len; i++)
			lines_out += out[i] == '\n';
		assert_int_equal(lines_out, (size_t)(k < 5 ? k : 5));
		mem_free(out);
		srv__bstore_close(s);
	}
}

static void test_open_refuses_a_non_database(void **state)
{
	(void)state;
	char p[300];
	snprintf(p, sizeof(p), "%s/not.db", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs("this is not an SQLite database, but a text file long enough to have a header\n", f);
	fclose(f);
	struct srv_bstore *s;
	char err[256];
	assert_int_equal(srv__bstore_open(p, &s, err, sizeof(err)), -ST_IO);
	assert_non_null(strstr(err, "not a database"));
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_round_trip),
		cmocka_unit_test(test_batch_items),
		cmocka_unit_test(test_batch_refused),
		cmocka_unit_test(test_sigkill_keeps_ended),
		cmocka_unit_test(test_open_refuses_a_non_database),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
