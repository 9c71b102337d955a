#include "template.h"

#include <string.h>

#include "buf.h"
#include "util.h"

char *template_render(const char *text, const struct template_var *vars, int nvars)
{
	struct buf b = BUF_INIT((size_t)1 << 24);
	const char *p = text;
	while (*p) {
		const char *open = strchr(p, '{');
		if (!open) {
			buf_adds(&b, p);
			break;
		}
		buf_add(&b, p, (size_t)(open - p));
		const char *close = strchr(open + 1, '}');
		const struct template_var *hit = NULL;
		if (close)
			for (int i = 0; i < nvars && !hit; i++)
				if (strlen(vars[i].name) == (size_t)(close - open - 1) &&
				    !strncmp(open + 1, vars[i].name, (size_t)(close - open - 1)))
					hit = &vars[i];
		if (hit) {
			buf_adds(&b, hit->value);
			p = close + 1;
		} else {
			buf_add(&b, open, 1);
			p = open + 1;
		}
	}
	return buf_detach(&b);
}
