#include "instruction.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "judge.h"
#include "mkb_limits.h"
#include "template.h"
#include "util.h"

/* "tokens=14509, hidden=4096" from a workload object; caller frees. */
static char *workload_text(json_t *wl)
{
	struct buf b = BUF_INIT(1u << 16);
	const char *key;
	json_t *val;
	json_object_foreach(wl, key, val) {
		char *v = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
		buf_printf(&b, "%s%s=%s", b.len ? ", " : "", key, v ? v : "?");
		free(v);
	}
	return buf_detach(&b);
}

char *instruction_render(const char *root, const char *name, const struct problem *p,
			 const struct dsl *d)
{
	char *path = xstrfmt("%s/templates/%s", root, name);
	char *text = NULL;
	if (read_file(path, INSTRUCTION_TEMPLATE_MAX, &text, NULL) < 0) {
		error("cannot read '%s': %s", path, strerror(errno));
		free(path);
		return NULL;
	}
	free(path);
	char *wl = workload_text(problem_workload(p, "visible"));
	char *docs = xstrfmt("docs/%s/", d->id);
	char *number = xstrfmt("%02d", p->number);
	char *maxbytes = xstrfmt("%d", JUDGE_MAX_KERNEL_BYTES);
	char *minutes = xstrfmt("%d", (int)(ATTEMPT_WALL_S / 60));
	char *subs = xstrfmt("%d", ATTEMPT_SUBMISSIONS);
	const struct template_var vars[] = {
		{"number", number}, {"name", p->name}, {"family", p->family},
		{"description", p->description}, {"dsl_name", d->name}, {"dsl", d->id},
		{"workload", wl}, {"docs", docs}, {"gpu", JUDGE_GPU},
		{"wall_minutes", minutes}, {"submissions", subs}, {"max_kernel_bytes", maxbytes},
	};
	char *out = template_render(text, vars, (int)ARRAY_SIZE(vars));
	free(text);
	free(wl);
	free(docs);
	free(number);
	free(maxbytes);
	free(minutes);
	free(subs);
	return out;
}
