/* buf, sha256, template, utf8_sanitize, read_file, parse_*. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "sha256.h"
#include "template.h"
#include "unit.h"
#include "util.h"

static void test_sha256_vectors(void)
{
	char hex[65];
	sha256_hex("", 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha256_hex("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha256_hex(two, strlen(two), hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* A million 'a's fed in uneven pieces crosses many block boundaries. */
	struct sha256 c;
	sha256_init(&c);
	char a[997];
	memset(a, 'a', sizeof(a));
	size_t left = 1000000;
	while (left) {
		size_t n = left < sizeof(a) ? left : sizeof(a);
		sha256_update(&c, a, n);
		left -= n;
	}
	sha256_final_hex(&c, hex);
	CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_buf_cap(void)
{
	struct buf b = BUF_INIT(8);
	CHECK(buf_adds(&b, "12345") == 0);
	CHECK(buf_adds(&b, "6789") == -1); /* over the cap: unchanged */
	CHECK_STR(buf_str(&b), "12345");
	CHECK(buf_printf(&b, "%d", 678) == 0);
	CHECK_STR(buf_str(&b), "12345678");
	CHECK(buf_printf(&b, "x") == -1);
	buf_consume(&b, 3);
	CHECK_STR(buf_str(&b), "45678");
	char *s = buf_detach(&b);
	CHECK_STR(s, "45678");
	CHECK(b.len == 0 && b.data == NULL);
	free(s);
	buf_release(&b);
}

static void test_buf_tail(void)
{
	struct buf b = BUF_INIT(6);
	buf_add_tail(&b, "abc", 3);
	buf_add_tail(&b, "defgh", 5);
	CHECK_STR(buf_str(&b), "cdefgh");
	buf_add_tail(&b, "0123456789", 10);
	CHECK_STR(buf_str(&b), "456789");
	buf_release(&b);
}

static void test_template(void)
{
	const struct template_var vars[] = {{"dsl", "TIRx"}, {"n", "28"}};
	char *s = template_render("in {dsl}: {n}/{n} {unknown} {", vars, 2);
	CHECK_STR(s, "in TIRx: 28/28 {unknown} {");
	free(s);
	s = template_render("", vars, 2);
	CHECK_STR(s, "");
	free(s);
}

static void test_utf8_sanitize(void)
{
	char ok[] = "caf\xc3\xa9 \xe2\x82\xac";
	utf8_sanitize(ok);
	CHECK_STR(ok, "caf\xc3\xa9 \xe2\x82\xac");
	char cut[] = "ab\xe2\x82";         /* a character cut at the end */
	utf8_sanitize(cut);
	CHECK_STR(cut, "ab??");
	char bad[] = "\xff\xc0\xafx\xed\xa0\x80"; /* invalid, overlong, surrogate */
	utf8_sanitize(bad);
	CHECK_STR(bad, "???x???");
}

static void test_read_file_limit(void)
{
	char *dir = unit_tmpdir();
	unit_write(dir, "f.txt", "0123456789");
	char *path = xstrfmt("%s/f.txt", dir), *data = NULL;
	size_t len = 0;
	CHECK(read_file(path, 10, &data, &len) == 0 && len == 10 && !strcmp(data, "0123456789"));
	free(data);
	data = NULL;
	CHECK(read_file(path, 9, &data, &len) == -1 && errno == EFBIG && data == NULL);
	CHECK(read_file(dir, 100, &data, &len) == -1 && errno == EISDIR);
	free(path);
	path = xstrfmt("%s/none", dir);
	CHECK(read_file(path, 100, &data, &len) == -1 && errno == ENOENT);
	free(path);
	unit_rmtree(dir);
	free(dir);
}

static void test_parse_numbers(void)
{
	long v;
	double d;
	CHECK(parse_long("28", 1, 99, &v) == 0 && v == 28);
	CHECK(parse_long("0", 1, 99, &v) == -1);
	CHECK(parse_long("28x", 1, 99, &v) == -1);
	CHECK(parse_long("", 1, 99, &v) == -1);
	CHECK(parse_positive_double("2.5", &d) == 0 && d == 2.5);
	CHECK(parse_positive_double("-1", &d) == -1);
	CHECK(parse_positive_double("nan", &d) == -1);
	CHECK(parse_positive_double("inf", &d) == -1);
}

const struct unit_test util_tests[] = {
	{"sha256 matches the FIPS 180-4 vectors", test_sha256_vectors},
	{"buf refuses to grow past its cap", test_buf_cap},
	{"buf tail keeps the last bytes", test_buf_tail},
	{"template fills known slots only", test_template},
	{"utf8_sanitize replaces invalid bytes", test_utf8_sanitize},
	{"read_file enforces its size limit", test_read_file_limit},
	{"numbers are parsed strictly", test_parse_numbers},
};
const size_t util_ntests = sizeof(util_tests) / sizeof(util_tests[0]);

/* expr: the FLOP and byte formulas of problem.json. */
#include "expr.h"

static double eval_ok(const char *text, json_t *vars)
{
	char err[128];
	double v = -12345;
	int rc = expr_eval(text, vars, &v, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "  expr '%s': %s\n", text, err);
	CHECK(rc == 0);
	return v;
}

static void test_expr(void)
{
	json_t *vars = json_pack("{s:i, s:i, s:f}", "tokens", 14509, "hidden", 4096, "half", 0.5);
	CHECK(eval_ok("tokens * hidden * 5", vars) == 14509.0 * 4096 * 5);
	CHECK(eval_ok("2 + 3 * 4", vars) == 14);
	CHECK(eval_ok("(2 + 3) * 4", vars) == 20);
	CHECK(eval_ok("2 ** 3 ** 2", vars) == 512); /* right-associative */
	CHECK(eval_ok("hidden ** half", vars) == 64);
	CHECK(eval_ok("10 / 4 - -1", vars) == 3.5);
	CHECK(eval_ok(" 1.5e3 ", vars) == 1500);
	char err[128];
	double v;
	CHECK(expr_eval("tokens * width", vars, &v, err, sizeof(err)) == -1 && strstr(err, "width"));
	CHECK(expr_eval("1 / (hidden - 4096)", vars, &v, err, sizeof(err)) == -1);
	CHECK(expr_eval("(1 + 2", vars, &v, err, sizeof(err)) == -1);
	CHECK(expr_eval("1 +", vars, &v, err, sizeof(err)) == -1);
	CHECK(expr_eval("1 2", vars, &v, err, sizeof(err)) == -1);
	CHECK(expr_eval("", vars, &v, err, sizeof(err)) == -1);
	CHECK(expr_eval("10 ** 400", vars, &v, err, sizeof(err)) == -1); /* not finite */
	char deep[400];
	memset(deep, '(', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = '\0';
	CHECK(expr_eval(deep, vars, &v, err, sizeof(err)) == -1); /* bounded recursion */
	json_decref(vars);
}

const struct unit_test expr_tests[] = {
	{"expr evaluates formulas and refuses bad ones", test_expr},
};
const size_t expr_ntests = sizeof(expr_tests) / sizeof(expr_tests[0]);
