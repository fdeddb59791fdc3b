/* kn_test_file.h - the kernel tests' reference files: a whole file under
 * the repo root ($INFERD_SOURCE_ROOT, else the current directory). */
#ifndef KN_TEST_FILE_H
#define KN_TEST_FILE_H

#include <stdio.h>
#include <stdlib.h>

#include "common/mem.h"

/* The bytes of <root>/<rel> (mem_alloc'd, the caller mem_frees them) and
 * *len; NULL when it cannot be read. */
static inline void *kn_test_read_file(const char *rel, size_t *len)
{
	const char *root = getenv("INFERD_SOURCE_ROOT");
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", root ? root : ".", rel);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	void *buf = n >= 0 ? mem_alloc(n > 0 ? (size_t)n : 1) : NULL;
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		mem_free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = buf ? (size_t)n : 0;
	return buf;
}

#endif /* KN_TEST_FILE_H */
