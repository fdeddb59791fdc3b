/* eng_file.c - mapping a model file read-only and telling the two model
 * formats apart (eng_file.h). A leaf: only libc and common/. */
#include "engine/format/eng_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/st.h"

int eng__map_file(const char *path, struct eng__map *map, char *err, size_t errlen)
{
	struct stat st;
	int rc = 0;

	map->data = NULL;
	map->size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return st_errf(errno == ENOENT ? -ST_NOTFOUND : -ST_IO, err, errlen, "%s: %s", path,
			       strerror(errno));
	if (fstat(fd, &st) != 0) {
		rc = st_errf(-ST_IO, err, errlen, "%s: fstat: %s", path, strerror(errno));
		goto out_close_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = st_errf(-ST_IO, err, errlen, "%s: not a regular file", path);
		goto out_close_fd;
	}
	if (st.st_size == 0)
		goto out_close_fd; /* nothing to map; the reader reports it as truncated */
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = st_errf(-ST_IO, err, errlen, "%s: mmap: %s", path, strerror(errno));
		goto out_close_fd;
	}
	map->data = p;
	map->size = (size_t)st.st_size;
out_close_fd:
	close(fd); /* the mapping stays valid after close */
	return rc;
}

void eng__map_release(struct eng__map *map)
{
	if (map->data)
		munmap((void *)map->data, map->size);
	map->data = NULL;
	map->size = 0;
}

int eng__detect_format(const char *path, enum eng_format *fmt, char *err, size_t errlen)
{
	struct stat st;
	char magic[4];

	if (stat(path, &st) != 0)
		return st_errf(errno == ENOENT ? -ST_NOTFOUND : -ST_IO, err, errlen, "%s: %s", path,
			       strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		char bin[4096];
		snprintf(bin, sizeof(bin), "%s/model.bin", path);
		if (stat(bin, &st) != 0)
			return st_errf(-ST_NOTFOUND, err, errlen,
				       "%s: folder has no model.bin (not a CTranslate2 model)",
				       path);
		*fmt = ENG_FORMAT_CT2;
		return 0;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return st_errf(-ST_IO, err, errlen, "%s: %s", path, strerror(errno));
	ssize_t n = read(fd, magic, sizeof(magic));
	close(fd);
	if (n != (ssize_t)sizeof(magic) || memcmp(magic, "GGUF", 4) != 0)
		return st_errf(
			-ST_UNSUPPORTED, err, errlen,
			"%s: unknown model format (neither a GGUF file nor a CTranslate2 folder)",
			path);
	*fmt = ENG_FORMAT_GGUF;
	return 0;
}
