/* cfg_help.c - the configuration part of --help, generated from the
 * tables of cfg_knobs.c so that it cannot drift from the parser.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "config/cfg_int.h"

/* cfg_help_rows - one entry per row of tab, then the rows of its sub table
 * (an object's keys, "limits.KEY") and of its items table (the keys of each
 * array entry, "models[].KEY"). */
static void cfg_help_rows(FILE *out, const struct cfg_knob *tab, size_t n,
			  const char *parent)
{
	for (size_t i = 0; i < n; i++) {
		const struct cfg_knob *k = &tab[i];
		char path[CFG_PATH_LEN], def[96] = "";
		cfg__join(path, sizeof(path), parent, k->path);
		if (k->required)
			snprintf(def, sizeof(def), ", required");
		else if (k->type->show == CFG_SHOW_INT)
			snprintf(def, sizeof(def), ", default %lld",
				 (long long)k->def);
		else if (k->type->show == CFG_SHOW_BOOL)
			snprintf(def, sizeof(def), ", default %s",
				 k->def ? "true" : "false");
		else if (k->def_str)
			snprintf(def, sizeof(def), ", default %s", k->def_str);
		char range[64] = "";
		const char *unit = k->type->unit;
		if (unit && k->max == INT_MAX)
			snprintf(range, sizeof(range), ", >= %lld%s",
				 (long long)k->min, unit);
		else if (unit)
			snprintf(range, sizeof(range), ", %lld..%lld%s",
				 (long long)k->min, (long long)k->max, unit);
		fprintf(out, "  %s (%s%s%s)\n      %s\n", path, k->type->name,
			def, range, k->doc);
		if (k->sub)
			cfg_help_rows(out, k->sub, k->n_sub, path);
		if (k->items) {
			snprintf(path + strlen(path), sizeof(path) - strlen(path),
				 "[]");
			cfg_help_rows(out, k->items, k->n_items, path);
		}
	}
}

void cfg_help_print(FILE *out)
{
	cfg_help_rows(out, cfg__knobs, cfg__n_knobs, "");
}
