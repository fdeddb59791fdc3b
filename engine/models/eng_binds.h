/* eng_binds.h - a model's weights on devices: one set per device, made on
 * the first request for it and shared by every replica there. cpu devices
 * all share the host's memory, so one set (on a cpu device opened with the
 * binds) serves them all for the model's life; another device's set is
 * freed with its last user, before that device can close. The model
 * family supplies how a set is made and freed (struct eng_bind_ops); the
 * list is mutable behind the model's const pointer, under its mutex.
 */
#ifndef ENG_BINDS_H
#define ENG_BINDS_H

#include <stddef.h>

struct dev;
struct eng_binds;

/* make: the model's weights on d (a cpu device stands for every cpu
 * device), into *out; err says why not. free: release one. */
struct eng_bind_ops {
	int (*make)(const void *model, struct dev *d, void **out, char *err, size_t errlen);
	void (*free)(const void *model, void *set);
};

/* eng_binds_init - an empty list with its host device ("cpu", opened
 * here). Start-up thread. -ST_NOMEM or dev_open's error. */
int eng_binds_init(struct eng_binds **out, char *err, size_t errlen);

/* eng_binds_host - the cpu device the host's set is made on (borrowed). */
struct dev *eng_binds_host(struct eng_binds *b);

/* eng_binds_get - the set usable by queues of d, made now through ops if
 * there is none, with one more reference; eng_binds_put drops one (a
 * non-cpu set is freed at 0). Any thread. */
int eng_binds_get(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model,
		  struct dev *d, void **out, char *err, size_t errlen);
void eng_binds_put(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model,
		   void *set);

/* eng_binds_seal - from now on eng_binds_get makes no set (the host rows
 * a set is made from may be gone): the sets made so far are the model's,
 * each freed with its last user as before (a replica holds its device's
 * for its life). Any thread. */
void eng_binds_seal(struct eng_binds *b);

/* eng_binds_vec - n floats of host memory v copied into new memory of d,
 * into *out (v NULL: *out NULL), unless *rc is set already; out of
 * memory sets *rc (-ST_NOMEM) and err. For the vectors of a set (norms,
 * biases, positions); dev_free releases one. */
void eng_binds_vec(struct dev *d, const float *v, size_t n, const float **out, int *rc,
		   char *err, size_t errlen);

/* eng_binds_free - every set left, the host device and b (NULL: no-op).
 * The model's destroy, when no replica runs. */
void eng_binds_free(struct eng_binds *b, const struct eng_bind_ops *ops, const void *model);

#endif /* ENG_BINDS_H */
