/* mkb list: the catalog, one problem a line. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "util.h"

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		{"family", required_argument, NULL, 'f'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *family = NULL;
	int as_json = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "f:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': family = optarg; break;
		case 'j': as_json = 1; break;
		case 'h': printf("usage: mkb list [--family F] [--json]\n"); return EXIT_OK;
		default: return usage_error("list", "bad option");
		}
	}
	if (optind < argc)
		return usage_error("list", "unexpected argument '%s'", argv[optind]);
	if (family && !family_is_known(family)) {
		fprintf(stderr, "error: unknown family '%s'; one of:", family);
		for (size_t i = 0; i < catalog_nfamilies; i++)
			fprintf(stderr, " %s", catalog_families[i]);
		fputc('\n', stderr);
		return EXIT_USAGE;
	}
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	json_t *arr = as_json ? json_array() : NULL;
	size_t shown = 0;
	for (size_t i = 0; i < env.catalog.n; i++) {
		const struct problem *p = &env.catalog.items[i];
		if (family && strcmp(p->family, family))
			continue;
		shown++;
		if (arr) {
			json_t *o = json_object();
			json_object_set_new(o, "number", json_integer(p->number));
			json_object_set_new(o, "name", json_string(p->name));
			json_object_set_new(o, "family", json_string(p->family));
			json_object_set_new(o, "description", json_string(p->description));
			json_array_append_new(arr, o);
		} else {
			printf("%02d  %-16s  %-28s  %s\n", p->number, p->family, p->name, p->description);
		}
	}
	if (arr) {
		if (json_dumpf(arr, stdout, JSON_INDENT(2)) < 0)
			error("cannot write JSON");
		putchar('\n');
		json_decref(arr);
	} else {
		printf("%zu problem%s\n", shown, shown == 1 ? "" : "s");
	}
	mkb_env_release(&env);
	return EXIT_OK;
}
