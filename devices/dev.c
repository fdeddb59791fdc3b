/* dev.c - dev.h's calls dispatched to the back end of each device: the
 * kind of a spec picks the back end, every later call goes through the
 * table the device carries (dev_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "devices/dev_int.h"

/* The back ends of this build, in dev_list's order. */
static const struct dev_backend *const dev_backends[] = {
	&dev__cpu_backend,
	&dev__ocl_backend,
};
#define DEV_N_BACKENDS (sizeof(dev_backends) / sizeof(dev_backends[0]))

/* "cpu, opencl": the kinds this build has, for error messages. */
static void dev_kinds(char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < DEV_N_BACKENDS && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", dev_backends[i]->kind);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

/* The back end of spec's kind (lowercase letters up to ':' or the end),
 * *rest set to what follows ':' or NULL; else why not. */
static int dev_spec_backend(const char *spec, const struct dev_backend **be, const char **rest,
			    char *err, size_t errlen)
{
	size_t k = strspn(spec, "abcdefghijklmnopqrstuvwxyz");
	char kinds[64];
	dev_kinds(kinds, sizeof(kinds));
	*rest = NULL;
	if (k == 0 || (spec[k] != '\0' && spec[k] != ':'))
		return st_errf(-ST_INVAL, err, errlen,
			       "bad device spec \"%s\": expected kind or kind:id (this build has: %s;"
			       " cpu:N, cpu:A-B, cpu:0,2-3)",
			       spec, kinds);
	for (size_t i = 0; i < DEV_N_BACKENDS; i++) {
		if (strlen(dev_backends[i]->kind) == k && !strncmp(spec, dev_backends[i]->kind, k)) {
			*be = dev_backends[i];
			*rest = spec[k] == ':' ? spec + k + 1 : NULL;
			return 0;
		}
	}
	if (k == 4 && !strncmp(spec, "cuda", 4))
		return st_errf(-ST_UNSUPPORTED, err, errlen,
			       "device \"%s\": no cuda back end in this build", spec);
	return st_errf(-ST_UNSUPPORTED, err, errlen,
		       "device \"%s\": unknown kind \"%.*s\" (this build has: %s)", spec, (int)k,
		       spec, kinds);
}

int dev_open(const char *spec, struct dev **out, char *err, size_t errlen)
{
	*out = NULL;
	st_errf(0, err, errlen, "%s", "");
	if (!spec)
		return st_errf(-ST_INVAL, err, errlen, "no device spec");
	const struct dev_backend *be = NULL; /* set when rc is 0 (gcc cannot tell) */
	const char *rest;
	int rc = dev_spec_backend(spec, &be, &rest, err, errlen);
	if (rc)
		return rc;
	struct dev *d = mem_calloc(1, sizeof(*d));
	if (!d)
		return st_errf(-ST_NOMEM, err, errlen, "device \"%s\": out of memory", spec);
	d->be = be;
	rc = be->open(d, spec, rest, err, errlen);
	if (rc) {
		mem_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void dev_close(struct dev *d)
{
	if (!d)
		return;
	d->be->close(d);
	mem_free(d);
}

const struct dev_caps *dev_caps(const struct dev *d)
{
	return &d->caps;
}

const int *dev_cpu_ids(const struct dev *d, int *n)
{
	*n = d->caps.kind == DEV_KIND_CPU ? d->n_cpus : 0;
	return *n ? d->cpus : NULL;
}

void *dev_alloc(struct dev *d, size_t n)
{
	return d->be->alloc(d, n);
}

void dev_free(struct dev *d, void *p)
{
	if (p)
		d->be->free(d, p);
}

void dev_copy(struct dev *d, void *dst, const void *src, size_t n)
{
	if (n)
		d->be->copy(d, dst, src, n);
}

int dev_upload(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	return n ? dev_queue_device(q)->be->upload(q, dst, src, n) : 0;
}

int dev_download(struct dev_queue *q, void *dst, const void *src, size_t n)
{
	return n ? dev_queue_device(q)->be->download(q, dst, src, n) : 0;
}

int dev_list(struct dev_caps *out, int max)
{
	int n = 0;
	for (size_t i = 0; i < DEV_N_BACKENDS && n < max; i++)
		n += dev_backends[i]->list(out + n, max - n);
	return n;
}
