/* dev_pair.h - the fixture test_dev_ops.c and test_dev_linear.c share: a
 * cpu device and the first OpenCL device, a one-thread queue on each,
 * opened once per test group (cmocka group setup / teardown). Included by
 * those test files only (static functions).
 */
#ifndef DEV_PAIR_H
#define DEV_PAIR_H

#include <stdio.h>
#include <stdlib.h>

#include "devices/dev.h"

struct pair {
	struct dev *cpu, *ocl;
	struct dev_queue *qc, *qo;
};

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));
	char err[256];
	if (!p || dev_open("cpu", &p->cpu, err, sizeof(err)) ||
	    dev_queue_create(p->cpu, 1, &p->qc, err, sizeof(err))) {
		fprintf(stderr, "cpu: %s\n", err);
		return -1;
	}
	if (dev_open("opencl", &p->ocl, err, sizeof(err)) ||
	    dev_queue_create(p->ocl, 1, &p->qo, err, sizeof(err))) {
		fprintf(stderr, "opencl (pocl-opencl-icd provides one on any CPU): %s\n", err);
		return -1;
	}
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;
	dev_queue_destroy(p->qo);
	dev_queue_destroy(p->qc);
	dev_close(p->ocl);
	dev_close(p->cpu);
	free(p);
	return 0;
}

#endif /* DEV_PAIR_H */
