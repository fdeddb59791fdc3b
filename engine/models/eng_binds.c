/* eng_binds.c - a model's weight sets per device (eng_binds.h). */
#include <pthread.h>
#include <stdbool.h>

#include "common/mem.h"
#include "common/st.h"
#include "devices/dev.h"
#include "engine/models/eng_binds.h"

struct eng_bind {
	struct dev *dev; /* the host device for a cpu set, else the caller's */
	void *set;
	int refs;
	struct eng_bind *next;
};

struct eng_binds {
	pthread_mutex_t mu;
	struct eng_bind *list;
	struct dev *host;
	bool sealed; /* no set is made any more (eng_binds_seal) */
};

int eng_binds_init(struct eng_binds **out, char *err, size_t errlen)
{
	struct eng_binds *b = mem_calloc(1, sizeof(*b));
	*out = NULL;
	if (!b)
		return st_errf(-ST_NOMEM, err, errlen, "out of memory");
	int rc = dev_open("cpu", &b->host, err, errlen);
	if (rc) {
		mem_free(b);
		return rc;
	}
	pthread_mutex_init(&b->mu, NULL);
	*out = b;
	return 0;
}

struct dev *eng_binds_host(struct eng_binds *b)
{
	return b->host;
}

static bool eng_bind_is_cpu(const struct dev *d)
{
	return dev_caps(d)->kind == DEV_KIND_CPU;
}

int eng_binds_get(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model,
		  struct dev *d, void **out, char *err, size_t errlen)
{
	bool cpu = eng_bind_is_cpu(d);
	struct dev *at = cpu ? b->host : d;
	int rc = 0;
	pthread_mutex_lock(&b->mu);
	struct eng_bind *e = b->list;
	while (e && e->dev != at)
		e = e->next;
	if (!e && b->sealed) {
		rc = st_errf(-ST_UNSUPPORTED, err, errlen,
			     "the model's weights were made for its replicas' devices when it "
			     "loaded, not for %s",
			     dev_caps(d)->name);
	} else if (!e) {
		e = mem_calloc(1, sizeof(*e));
		rc = e ? ops->make(model, at, &e->set, err, errlen)
		       : st_errf(-ST_NOMEM, err, errlen, "out of memory");
		if (rc) {
			mem_free(e);
			e = NULL;
		} else {
			e->dev = at;
			e->next = b->list;
			b->list = e;
		}
	}
	if (e)
		e->refs++;
	pthread_mutex_unlock(&b->mu);
	*out = e ? e->set : NULL;
	return rc;
}

void eng_binds_put(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model,
		   void *set)
{
	if (!set)
		return;
	struct eng_bind *drop = NULL;
	pthread_mutex_lock(&b->mu);
	for (struct eng_bind **at = &b->list; *at; at = &(*at)->next) {
		struct eng_bind *e = *at;
		if (e->set != set)
			continue;
		if (--e->refs == 0 && e->dev != b->host) { /* the host's set stays */
			*at = e->next;
			drop = e;
		}
		break;
	}
	pthread_mutex_unlock(&b->mu);
	if (drop) {
		ops->free(model, drop->set);
		mem_free(drop);
	}
}

void eng_binds_seal(struct eng_binds *b)
{
	pthread_mutex_lock(&b->mu);
	b->sealed = true;
	pthread_mutex_unlock(&b->mu);
}

void eng_binds_vec(struct dev *d, const float *v, size_t n, const float **out, int *rc,
		   char *err, size_t errlen)
{
	*out = NULL;
	if (*rc || !v)
		return;
	float *p = dev_alloc(d, n * sizeof(float));
	if (!p) {
		*rc = st_errf(-ST_NOMEM, err, errlen, "out of device memory");
		return;
	}
	dev_copy(d, p, v, n * sizeof(float));
	*out = p;
}

void eng_binds_free(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model)
{
	if (!b)
		return;
	while (b->list) {
		struct eng_bind *e = b->list;
		b->list = e->next;
		ops->free(model, e->set);
		mem_free(e);
	}
	dev_close(b->host);
	pthread_mutex_destroy(&b->mu);
	mem_free(b);
}
