/* cli_devices.c - `inferd devices`: every device this build can open
 * (devices/dev.h's dev_list: the cpu device of every available core, then
 * each OpenCL device), one line each, with what dev_caps says of it:
 *
 *   DEVICE       KIND    UNITS  MEMORY     SIMD    MODEL
 *   cpu:0-1      cpu         2  7.8 GiB    avx512  AMD EPYC 7B13
 *   opencl:0.0   opencl      2  21.5 GiB   opencl  pthread-skylake-avx512-AMD EPYC
 *
 * DEVICE is the spec a config's replica "device" takes. The one command
 * in cli/ that calls devices/ itself (scripts/check-src.allow says why).
 */
#include <stdio.h>
#include <string.h>

#include "devices/dev.h"
#include "cli/cli_cmd.h"

#define CLI_MAX_DEVICES 64 /* listed at most */

static const char *cli_kind_name(enum dev_kind k)
{
	switch (k) {
	case DEV_KIND_CPU:
		return "cpu";
	case DEV_KIND_CUDA:
		return "cuda";
	case DEV_KIND_OPENCL:
		return "opencl";
	}
	return "?";
}

int cli_devices(int argc, char **argv)
{
	if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
		printf("usage: inferd devices\n"
		       "Lists every device this build can open (cpu, opencl) with its spec,\n"
		       "kind, compute units, memory, kernel ISA and model name.\n");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: inferd devices\n");
		return 2;
	}
	struct dev_caps caps[CLI_MAX_DEVICES]; /* ~20 KiB */
	int n = dev_list(caps, CLI_MAX_DEVICES);
	if (n <= 0) {
		fprintf(stderr, "inferd: no device found\n");
		return 1;
	}
	printf("%-12s %-7s %5s  %-10s %-7s %s\n", "DEVICE", "KIND", "UNITS", "MEMORY", "SIMD",
	       "MODEL");
	for (int i = 0; i < n; i++) {
		char mem[32];
		snprintf(mem, sizeof(mem), "%.1f GiB", (double)caps[i].mem_bytes / (1u << 30));
		printf("%-12s %-7s %5d  %-10s %-7s %s\n", caps[i].name, cli_kind_name(caps[i].kind),
		       caps[i].compute_units, mem, caps[i].simd ? caps[i].simd : "",
		       caps[i].model[0] ? caps[i].model : "(unknown)");
	}
	return 0;
}
