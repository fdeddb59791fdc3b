/* bstore_test.h - the batch store tests' scratch directory (made by the
 * group setup, removed by its teardown) and a store opened in it. Not a
 * public header: each test_bstore*.c includes it once. */
#ifndef BSTORE_TEST_H
#define BSTORE_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "server/batch/srv_bstore.h"

static char dir[] = "/tmp/inferd-test-bstore-XXXXXX";
static char path[256]; /* dir/batch.db */

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/batch.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The store at path, or (name non-NULL) at a file of its own in dir;
 * the test fails with the store's message if it cannot be opened. */
static inline struct srv_bstore *open_store_at(const char *name)
{
	struct srv_bstore *s;
	char err[256], own[300];
	snprintf(own, sizeof(own), "%s/%s", dir, name ? name : "");
	if (srv__bstore_open(name ? own : path, &s, err, sizeof(err)))
		fail_msg("%s", err);
	return s;
}

static inline struct srv_bstore *open_store(void)
{
	return open_store_at(NULL);
}

#endif /* BSTORE_TEST_H */
