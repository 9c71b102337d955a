#!/usr/bin/env bash
# mkb report on stores built by hand through the real schema (mkb status
# creates it; rows are then INSERTed), against numbers worked out by hand
# below; and the statistics against SciPy (tests/python/test_stats_scipy.py).
. "$(dirname "$0")/../lib.sh"
PYSTATS=${MKB_PYTHON_STATS:-$TOP/build/python-stats}

# mkstore DB < spec: one trial a line,
#   model problem replicate arm status passed speedup skill cost [archived [kernel_ms gpu [ci]]]
# passed 1/0/- (- : no final evaluation), speedup a number or -, skill y/n
# (the attempt left a SKILL.md), cost a number or - (unknown); kernel_ms
# (the final evaluation's median) a number or -, gpu its name with _ for a
# space or - (none); ci the grader's speedup_ci in the evaluation's result
# column: lo:hi, null (the key with null), bad (a truncated, malformed
# result) or - (no result). A skipped trial has no attempt. Every attempt used 1000
# input tokens (100 cached), 50 output tokens and 10 s; every evaluation is
# of the visible workload.
cat >"$TMP/mkstore.py" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
def result(ci, status, speed):
    if ci == "-":
        return None
    if ci == "bad":
        return '{"status":"passed","speedup_ci":[0.95,1.05'
    r = {"status": status, "speedup": None if speed == "-" else float(speed),
         "speedup_ci": None if ci == "null" else [float(x) for x in ci.split(":")]}
    return json.dumps(r, separators=(",", ":"))  # compact, as the store writes it
now = "2025-01-01T00:00:00Z"
for line in sys.stdin.read().splitlines():
    if not line.strip() or line.startswith("#"):
        continue
    f = line.split()
    model, prob, rep, arm, status, passed, speed, skill, cost = f[:9]
    archived = int(f[9]) if len(f) > 9 else 0
    kernel_ms = float(f[10]) if len(f) > 10 and f[10] != "-" else None
    gpu = f[11].replace("_", " ") if len(f) > 11 and f[11] != "-" else None
    ci = f[12] if len(f) > 12 else "-"
    dsl = "tirx" if arm in ("solo_tirx", "cutedsl2tirx_skill") else "cutedsl"
    attempt = None
    if status != "skipped":
        ev = None
        if passed != "-":
            cur = db.execute("INSERT INTO evaluations (started_at, problem, dsl, workload, device, kernel_path,"
                             " problem_sha256, grader_sha256, options, status, passed, speedup, kernel_ms, gpu,"
                             " result) VALUES (?, ?, ?, 'visible', 'cuda', 'k.py', 'x', 'x', '{}', ?, ?, ?, ?, ?, ?)",
                             (now, int(prob), dsl, "passed" if passed == "1" else "failed", int(passed),
                              None if speed == "-" else float(speed), kernel_ms, gpu,
                              result(ci, "passed" if passed == "1" else "failed", speed)))
            ev = cur.lastrowid
        cur = db.execute("INSERT INTO attempts (started_at, problem, dsl, model, arm, workdir, options, status,"
                         " final_evaluation, input_tokens, cached_tokens, output_tokens, cost_usd, agent_s, skill_out)"
                         " VALUES (?, ?, ?, ?, ?, 'w', '{}', ?, ?, 1000, 100, 50, ?, 10, ?)",
                         (now, int(prob), dsl, model, arm, status, ev, None if cost == "-" else float(cost),
                          "- a finding" if skill == "y" else None))
        attempt = cur.lastrowid
    db.execute("INSERT INTO trials (name, model, decoding, arm, problem, dsl, replicate, fingerprint, status,"
               " attempt, archived, note, created_at) VALUES (?, ?, '{}', ?, ?, ?, ?, 'f', ?, ?, ?, ?, ?)",
               ("p%02d_r%s_%s" % (int(prob), rep, arm), model, arm, int(prob), dsl, int(rep), status, attempt,
                archived, "skipped: its source left no SKILL.md" if status == "skipped" else None, now))
db.commit()
PY
mkstore() {
	"$MKB" status --store "$1" >/dev/null
	python3 "$TMP/mkstore.py" "$1"
}

# Read a value from the JSON report: jq-like path on stdin, e.g. models.0.paired.groups.all.T
jget() {
	python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v))' "$1"
}
# hhn FILE [GROUP]: helped/harmed/neutral of the first model's paired group (all)
hhn() {
	local g=models.0.paired.groups.${2:-all}
	echo "$(jget $g.helped <"$1")/$(jget $g.harmed <"$1")/$(jget $g.neutral <"$1")"
}
# rule_reports DB FLAG DEFAULT OURS BASE MINE: the JSON report of DB without
# --FLAG (BASE.json) equals the one with --FLAG DEFAULT and names no FLAG;
# with --FLAG OURS (MINE.json) its options record it
rule_reports() {
	"$MKB" report --store "$1" --format json >"$5.json"
	"$MKB" report --store "$1" --format json --"$2" "$3" >"$5-default.json"
	cmp "$5.json" "$5-default.json"
	"$MKB" report --store "$1" --format json --"$2" "$4" >"$6.json"
	[ "$(jget options."$2" <"$6.json")" = "\"$4\"" ]
	! grep -q "\"$2\"\|--$2" "$5.json"
}
# near A B [tol]: |A - B| <= tol (1e-9)
near() { python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); t = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-9; sys.exit(0 if abs(a - b) <= t else 1)' "$@" || { echo "not near: $*"; return 1; }; }

# The hand-worked store. Problem 28 (mlp_norm), replicate 1:
#   solo_cutedsl passed 2.0, solo_tirx passed 1.0, both left skills;
#   cutedsl2tirx passed 1.5 -> r = 1.5 / 1.0 = 1.5, helped; source 2.0 vs 1.0: above
#   tirx2cutedsl failed     -> r = 0.1 / 2.0 = 0.05, harmed; source 1.0 vs 2.0: below
# Problem 01 (attention), replicate 1:
#   solo_cutedsl failed, no skill; solo_tirx passed 0.6 with a skill
#   cutedsl2tirx skipped    -> r = 1, neutral; source 0.1 vs 0.6: below
#   tirx2cutedsl timed out, its final kernel passed 4.0 -> r = 4.0 / 0.1 = 40, helped;
#                             source 0.6 vs 0.1: above
# Problem 36: solo_tirx is an infra_error, so both its cells are unresolved
# and change no number; an archived record of 28's solo_tirx is ignored.
cat >"$TMP/hand.spec" <<'S'
m 28 1 solo_cutedsl passed 1 2.0 y 0.01
m 28 1 solo_tirx passed 1 1.0 y 0.01
m 28 1 solo_tirx failed 0 - y 0.01 1
m 28 1 cutedsl2tirx_skill passed 1 1.5 y 0.01
m 28 1 tirx2cutedsl_skill failed 0 - y 0.01
m 1 1 solo_cutedsl failed 0 - n 0.01
m 1 1 solo_tirx passed 1 0.6 y -
m 1 1 cutedsl2tirx_skill skipped - - n -
m 1 1 tirx2cutedsl_skill timed_out 1 4.0 y 0.01
m 36 1 solo_cutedsl passed 1 1.0 y 0.01
m 36 1 solo_tirx infra_error - - n 0.01
m 36 1 cutedsl2tirx_skill passed 1 1.2 y 0.01
m 36 1 tirx2cutedsl_skill failed 0 - y 0.01
S

expect 'scores on the hand-worked store: R@t, S, lift, coverage (published definitions)' '
	mkstore hand.db <"$TMP/hand.spec"
	"$MKB" report --store hand.db --format json >r.json
	o() { jget "models.0.overall.$1" <r.json; }
	[ "$(o n_cells)" = 6 ]
	[ "$(o n_cell_replicates)" = 6 ]
	[ "$(o n_resolved)" = 4 ]
	near "$(o source_coverage)" 0.75
	near "$(o skill_coverage)" 0.75
	# base: passes 1.0, 2.0, 0.6 of 4: R@0 .75 R@0.5 .75 R@1 .5 R@2 .25 R@4 0 -> S 45
	near "$(o base.S)" 45
	near "$(o base.R@1)" 0.5
	near "$(o base.R@4)" 0
	# skill (skipped counts as base): 1.5, fail, 0.6, 4.0 -> .75 .75 .5 .25 .25 -> S 50
	near "$(o skill.S)" 50
	near "$(o skill.R@4)" 0.25
	near "$(o lift.S)" 5
	near "$(o lift.R@4)" 0.25
	# with_skill drops 01 cutedsl2tirx: base 7/3 / 5, skill 8/3 / 5
	near "$(o with_skill.base.S)" 46.666666667 1e-6
	near "$(o with_skill.lift.S)" 6.666666667 1e-6
	# by source verdict: the one failed source is 01 cutedsl2tirx (skipped: lift 0)
	[ "$(o by_source_verdict.failed.n)" = 1 ]
	near "$(o by_source_verdict.failed.lift.S)" 0
	near "$(o by_source_verdict.passed.lift.S)" 6.666666667 1e-6
	# by direction: cutedsl2tirx base 1.0, 0.6 -> S 50; skill 1.5, 0.6 -> S 50
	near "$(o by_direction.cutedsl2tirx.lift.S)" 0
	near "$(o by_direction.tirx2cutedsl.skill.R@4)" 0.5
	near "$(o by_category.attention.source_coverage)" 0.5
	[ "$(o by_category.mlp_norm.n_resolved)" = 2 ]
	[ "$(o by_category.mlp_norm.n_cell_replicates)" = 4 ]
'

expect 'usage per arm: each trial once, a null sum where a cost is unknown, the skipped arm uncounted' '
	u() { jget "models.0.overall.usage.$1" <r.json; }
	[ "$(u solo_tirx.n_trials)" = 3 ]
	[ "$(u solo_tirx.cost_usd)" = null ]
	[ "$(u solo_tirx.n_input_tokens)" = 3000 ]
	[ "$(u solo_tirx.n_cache_tokens)" = 300 ]
	[ "$(u cutedsl2tirx_skill.n_trials)" = 2 ]
	near "$(u cutedsl2tirx_skill.cost_usd)" 0.02
	near "$(u solo_cutedsl.agent_sec)" 10
'

expect 'paired analysis by hand: T, H, dGM, standing, reverse direction, tests' '
	p() { jget "models.0.paired.$1" <r.json; }
	[ "$(p n_comparisons)" = 4 ]
	[ "$(p groups.all.helped)" = 2 ]
	[ "$(p groups.all.harmed)" = 1 ]
	[ "$(p groups.all.neutral)" = 1 ]
	near "$(p groups.all.T)" 0.5
	near "$(p groups.all.H)" 0.25
	# dGM = (1.5 x 0.05 x 1 x 40)^(1/4) - 1 = 3^(1/4) - 1
	near "$(p groups.all.dGM)" "$(python3 -c "print(3 ** 0.25 - 1)")"
	# above: 1.5 and 40, both helped; below: 0.05 (harmed) and 1 (neutral)
	near "$(p by_source_standing.above.T)" 1
	near "$(p by_source_standing.above.dGM)" "$(python3 -c "print(60 ** 0.5 - 1)")"
	near "$(p by_source_standing.below.H)" 0.5
	near "$(p by_source_standing.below.dGM)" "$(python3 -c "print(0.05 ** 0.5 - 1)")"
	[ "$(p by_source_standing.same.n)" = 0 ]
	# reverse of 28 cutedsl2tirx (helped) is harmed; of 01 tirx2cutedsl (helped) neutral
	[ "$(p reverse.helped)" = 2 ]
	[ "$(p reverse.reverse_harmed)" = 1 ]
	[ "$(p reverse.reverse_neutral)" = 1 ]
	# sign: 2 up, 1 down -> p = 2 x 4/8 = 1; McNemar: one each way -> 1
	near "$(p groups.all.sign_test.p)" 1
	[ "$(p groups.all.mcnemar.skill_only_passed)" = 1 ]
	# Wilcoxon: zero dropped; |log r| ranks 1 (1.5), 2 (0.05), 3 (40): W+ = 4, W- = 2; exact p = 2 x 3/8
	[ "$(p groups.all.wilcoxon.zeros)" = 1 ]
	near "$(p groups.all.wilcoxon.statistic)" 2
	near "$(p groups.all.wilcoxon.p)" 0.75
	[ "$(p groups.all.wilcoxon.method)" = "\"exact\"" ]
	# one replicate: Wilson intervals, no bootstrap; 2 of 4: 0.5 -+ 1.96/1.9604 sqrt(0.0625 + 0.0600)
	[ "$(p bootstrap)" = null ]
	[ "$(p groups.all.bootstrap_ci)" = null ]
	near "$(jget models.0.paired.groups.all.T_wilson.0 <r.json)" "$(python3 -c "
z = 1.959963984540054; n = 4; t = 1 + z * z / n
print(0.5 - z / t * ((0.25 / n + (z / (2 * n)) ** 2) ** 0.5))")"
	grep -q "\"timed_out\":true" r.json
'

expect '--delta and --e-fail move the ratio rule' '
	"$MKB" report --store hand.db --format json --delta 0.6 >d.json
	[ "$(jget models.0.paired.groups.all.helped <d.json)" = 1 ]   # 1.5 < 1.6 is neutral now
	"$MKB" report --store hand.db --format json --e-fail 0.01 >e.json
	# 0.01 / 2 and 4 / 0.01: the product, hence dGM, is unchanged
	near "$(jget models.0.paired.groups.all.dGM <e.json)" "$(python3 -c "print(3 ** 0.25 - 1)")"
	python3 -c "
import json; c = json.load(open(\"e.json\"))[\"comparisons\"]
r = {(x[\"number\"], x[\"direction\"]): x[\"ratio\"] for x in c}
assert abs(r[(1, \"tirx2cutedsl\")] - 400) < 1e-9 and abs(r[(28, \"tirx2cutedsl\")] - 0.005) < 1e-12, r"
'

expect 'the JSON carries the published results.json fields; cells with replicates and records' '
	python3 - <<PY
import json
r = json.load(open("r.json"))
for k in ("legend", "model", "harbor_version", "overall", "cells"):
    assert k in r, k
for k in ("arms", "records", "rates", "source_coverage", "skill_coverage", "usage"):
    assert k in r["legend"], k
assert r["overall"] == r["models"][0]["overall"] and r["model"] == "m"
for k in ("n_cells", "n_cell_replicates", "n_resolved", "source_coverage", "skill_coverage", "base", "skill",
          "lift", "with_skill", "by_source_verdict", "usage", "by_direction", "by_category"):
    assert k in r["overall"], k
cells = {(c["cell"]["problem"], c["cell"]["direction"]): c for c in r["cells"]}
c = cells[("28_fused_add_rmsnorm", "cutedsl2tirx")]
assert c["cell"]["category"] == "mlp_norm" and c["cell"]["target_task"] == "28_fused_add_rmsnorm_tirx"
rep = c["replicates"][0]
assert rep["resolved"] and rep["n_replicate"] == 1
assert rep["skill"]["rewards"] == {"passed": 1.0, "speedup_vs_eager": 1.5}
assert rep["base"]["trial"] == "p28_r1_solo_tirx" and rep["base"]["status"] == "passed"
assert rep["source"]["usage"]["n_input_tokens"] == 1000
skipped = cells[("01_gqa_paged_decode_h32_kv8_ps1", "cutedsl2tirx")]["replicates"][0]["skill"]
assert skipped["skipped"] and skipped["usage"] is None and skipped["rewards"] == {}
bad = cells[("36_rmsnorm", "tirx2cutedsl")]["replicates"][0]
assert not bad["resolved"] and bad["source"]["error"].startswith("infra_error")
assert cells[("36_rmsnorm", "tirx2cutedsl")]["n_resolved"] == 0
PY
'

# Replicates: 3 problems x 3 replicates of one model where every skill
# arm doubles its solo's speedup (r = 2 everywhere), and a second model.
{
	for p in 28 36 1; do for k in 1 2 3; do
		echo "m $p $k solo_cutedsl passed 1 $k y 0.01"
		echo "m $p $k solo_tirx passed 1 $k y 0.01"
		echo "m $p $k cutedsl2tirx_skill passed 1 $((2 * k)) y 0.01"
		echo "m $p $k tirx2cutedsl_skill passed 1 $((2 * k)) y 0.01"
	done; done
	for p in 28 36 1 2 3; do for k in 1 2; do
		echo "n $p $k solo_cutedsl passed 1 1.0 y 0.01"
		echo "n $p $k solo_tirx failed 0 - y 0.01"
		echo "n $p $k cutedsl2tirx_skill passed 1 0.$((p % 8 + k + 1)) y 0.01"
		echo "n $p $k tirx2cutedsl_skill failed 0 - y 0.01"
	done; done
} >"$TMP/reps.spec"

expect 'with replicates: bootstrap intervals, degenerate where every ratio is 2, reproducible by seed' '
	mkstore reps.db <"$TMP/reps.spec"
	"$MKB" report --store reps.db --model m --format json --seed 7 >a.json
	"$MKB" report --store reps.db --model m --format json --seed 7 >b.json
	cmp a.json b.json
	[ "$(jget models.0.paired.bootstrap.problems <a.json)" = 3 ]
	[ "$(jget models.0.paired.bootstrap.replicates <a.json)" = 9 ]
	near "$(jget models.0.paired.groups.all.dGM <a.json)" 1
	near "$(jget models.0.paired.groups.all.bootstrap_ci.dGM.0 <a.json)" 1
	near "$(jget models.0.paired.groups.all.bootstrap_ci.dGM.1 <a.json)" 1
	near "$(jget models.0.paired.groups.all.bootstrap_ci.T.0 <a.json)" 1
	[ "$(jget models.0.paired.groups.all.wilcoxon.method <a.json)" = "\"normal\"" ] # log r tied everywhere
	near "$(jget models.0.paired.groups.all.sign_test.p <a.json)" "$(python3 -c "print(2 / 2 ** 18)")"
	[ "$(jget models <a.json | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")" = 1 ]
'

expect 'bootstrap intervals hold their estimate, move with the seed, and --bootstrap 0 turns them off' '
	"$MKB" report --store reps.db --model n --format json --seed 1 >n1.json
	"$MKB" report --store reps.db --model n --format json --seed 2 >n2.json
	"$MKB" report --store reps.db --model n --format json --bootstrap 0 >n0.json
	python3 - <<PY
import json
a, b, z = (json.load(open(f))["models"][0]["paired"] for f in ("n1.json", "n2.json", "n0.json"))
g = a["groups"]["all"]
for s in ("T", "H", "dGM", "lift_S"):
    lo, hi = g["bootstrap_ci"][s]
    assert lo <= g[s] + 1e-12 and g[s] <= hi + 1e-12, (s, lo, g[s], hi)
assert a["groups"]["all"]["bootstrap_ci"] != b["groups"]["all"]["bootstrap_ci"]
assert z["bootstrap"] is None and z["groups"]["all"]["bootstrap_ci"] is None
# n: cutedsl2tirx r = e_skill / 0.1 (solo_tirx fails): all helped; tirx2cutedsl 0.1 / 1.0: harmed
assert a["groups"]["cutedsl2tirx"]["T"] == 1 and a["groups"]["tirx2cutedsl"]["H"] == 1
assert a["reverse"]["helped"] == 10 and a["reverse"]["reverse_harmed"] == 10
# McNemar per direction: cutedsl2tirx 10 skill-only passes, p = 2 / 2^10
assert abs(a["groups"]["cutedsl2tirx"]["mcnemar"]["p"] - 2 / 2 ** 10) < 1e-15
PY
	# two models and no --model: no published top level, both under models
	"$MKB" report --store reps.db --format json >both.json
	python3 -c "
import json; r = json.load(open(\"both.json\"))
assert [m[\"model\"] for m in r[\"models\"]] == [\"m\", \"n\"] and \"overall\" not in r"
'

expect 'text, md, csv and html render every model; -o writes the file' '
	"$MKB" report --store reps.db >t.txt
	grep -q "^== model m, decoding {}" t.txt
	grep -q "^== model n, decoding {}" t.txt
	grep -q "^overall " t.txt
	grep -q "^source above" t.txt
	grep -q "^solo_tirx " t.txt
	"$MKB" report --store reps.db --format md >t.md
	grep -q "^| comparisons | n | T | H |" t.md
	"$MKB" report --store reps.db --format csv >t.csv
	head -1 t.csv | grep -qx "model,decoding,section,group,metric,value,lo,hi"
	grep -q "^\"m\",\"{}\",\"paired\",\"all\",\"dGM\",1,1,1$" t.csv
	"$MKB" report --store reps.db --format html -o t.html
	python3 - <<PY
from html.parser import HTMLParser
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.stack = []; self.svgs = 0; self.marks = 0; self.bad = []
    def handle_starttag(self, tag, a):
        if tag in ("script", "link", "img"): self.bad.append(tag)
        if tag == "svg": self.svgs += 1
        if tag in ("rect", "circle"): self.marks += 1
p = P(); p.feed(open("t.html").read())
assert not p.bad, p.bad
assert p.svgs == 8, p.svgs            # 4 figures per model
assert p.marks > 40, p.marks          # bars and dots drawn
PY
'

expect 'the HTML report in headless Chromium: no console errors, the figures drawn' '
	[ -s t.html ] || "$MKB" report --store reps.db --format html -o t.html
	chromium-headless-shell --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,3000 \
		--enable-logging=stderr --v=0 --screenshot="$PWD/shot.png" "file://$PWD/t.html" 2>chrome.log >/dev/null
	[ -s shot.png ]
	! grep -i "CONSOLE\|Uncaught\|Failed to load" chrome.log
	python3 - <<PY
import struct, zlib
# a PNG reader just big enough for Chromium screenshots (8-bit RGB/RGBA)
data = open("shot.png", "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, colored, rows = bytearray(stride), 0, 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    hit = sum(1 for x in range(0, stride, bpp) if max(line[x:x + 3]) - min(line[x:x + 3]) > 60)
    colored += hit
    rows += hit > 0
    prev = line
# coloured marks (bars, dots) on many rows: the SVG figures rendered
assert colored > 2000 and rows > 100, (colored, rows)
PY
'

expect 'html --trials: a page per trial with its instruction, attached skill, transcript, submissions and verdict' '
	"$MKB" run --model oracle --problems 28 --device cpu --workload smoke --submissions 1 \
		--runs-dir "$PWD/runs" --store run.db >run.txt
	grep -q "^done: 4 of 4 trials final: 4 passed" run.txt
	"$MKB" report --store run.db --format html --trials -o trials.html
	python3 - <<PY
import re
h = open("trials.html").read()
links = re.findall(r"<a href=\"#t-(\d+)\">([^<]+)</a>", h)
pages = re.findall(r"<section class=\"trial\" id=\"t-(\d+)\"><h3>([^ <]+)", h)
assert len(links) == 4 and links == pages, (links, pages)
assert {n for _, n in pages} == {"p28_r1_solo_cutedsl", "p28_r1_solo_tirx", "p28_r1_cutedsl2tirx_skill", "p28_r1_tirx2cutedsl_skill"}
for part in ("Instruction (with the attached skill", "Final verdict", "the kernel submitted", "SKILL.md it left", "Transcript"):
    assert h.count(part) == 4, (part, h.count(part))
assert h.count("<summary>Skill attached</summary>") == 2  # the two skill arms
assert "def solve(" in h and "Submission 1 of 1" in h
PY
	set +e
	"$MKB" report --store run.db --trials >/dev/null 2>err.txt; rc=$?
	set -e
	[ $rc = 2 ] && grep -q "give --format html" err.txt
'

expect '--final-heldout: each final kernel graded on the held-out workload too, beside the verdict; the report'"'"'s held-out table' '
	"$MKB" run --model oracle --problems 72 --device cpu --workload smoke --submissions 0 --final-heldout \
		--runs-dir "$PWD/hruns" --store held.db >held.txt
	grep -q "^done: 4 of 4 trials final: 4 passed" held.txt
	python3 - <<PY
import sqlite3
db = sqlite3.connect("held.db")
rows = db.execute("select e.workload, h.workload, h.status from attempts a join evaluations e on e.id = a.final_evaluation join evaluations h on h.id = a.heldout_evaluation").fetchall()
assert rows == [("smoke", "heldout", "passed")] * 4, rows
PY
	"$MKB" report --store held.db --bootstrap 0 >held-report.txt
	grep -q "^Held-out (ours)" held-report.txt
	grep -q "^solo_cutedsl  *1  *1.000 " held-report.txt
	"$MKB" report --store held.db --bootstrap 0 --format json | python3 -c "import json,sys; o=json.load(sys.stdin); h=o[\"models\"][0][\"overall\"][\"heldout\"]; assert set(h) == {\"solo_cutedsl\", \"solo_tirx\", \"cutedsl2tirx_skill\", \"tirx2cutedsl_skill\"}, h; assert h[\"solo_tirx\"][\"R@0\"] == 1.0"
	# without the flag: no held-out grading, no table
	"$MKB" run --model oracle --problems 72 --device cpu --workload smoke --submissions 0 \
		--runs-dir "$PWD/hruns" --store plain.db >/dev/null
	[ "$(python3 -c "import sqlite3; print(sqlite3.connect(\"plain.db\").execute(\"select count(heldout_evaluation) from attempts\").fetchone()[0])")" = 0 ]
	! "$MKB" report --store plain.db --bootstrap 0 | grep -q "Held-out"
'

# Speed of light: problem 28 (fused_add_rmsnorm), visible workload tokens
# 14509, hidden 4096, bf16: bytes = 14509 x 4096 x 2 x 3 + 4096 x 2 =
# 356,581,376 and FLOPs = 14509 x 4096 x 5 = 297,144,320. On the H200
# (4.16e12 B/s, 785e12 FLOP/s) memory bounds it: floor F = 356581376 /
# 4.16e12 s = 0.08571667692307692 ms. A fraction is F / kernel_ms of a
# passing trial graded on an H200; the failed trial, the A100's, the one
# without a GPU and the one without a median have none.
cat >"$TMP/sol.spec" <<'S'
s 28 1 solo_cutedsl passed 1 2.0 y 0.01 0 0.1 NVIDIA_H200
s 28 1 solo_tirx passed 1 1.0 y 0.01 0 0.2 NVIDIA_H200
s 28 1 cutedsl2tirx_skill passed 1 1.5 y 0.01 0 0.4 NVIDIA_H200
s 28 1 tirx2cutedsl_skill failed 0 - y 0.01 0 0.05 NVIDIA_H200
s 28 2 solo_cutedsl passed 1 0.5 y 0.01 0 0.4 NVIDIA_H200
s 28 2 solo_tirx passed 1 1.0 y 0.01 0 0.2 NVIDIA_A100
s 28 2 cutedsl2tirx_skill passed 1 2.0 y 0.01 0 0.1 NVIDIA_H200
s 28 2 tirx2cutedsl_skill passed 1 1.0 y 0.01 0 - NVIDIA_H200
s 28 3 solo_cutedsl passed 1 2.0 y 0.01 0 0.1 NVIDIA_H200
s 28 3 solo_tirx passed 1 1.0 y 0.01 0 0.2 -
s 28 3 cutedsl2tirx_skill skipped - - n -
s 28 3 tirx2cutedsl_skill passed 1 1.0 y 0.01 0 0.2 NVIDIA_H200
S

expect 'speed of light per arm: floor / kernel median, geometric mean over passing trials with a floor, bootstrap interval' '
	mkstore sol.db <"$TMP/sol.spec"
	"$MKB" report --store sol.db --format json >s.json
	o() { jget "models.0.overall.sol.$1" <s.json; }
	# solo_cutedsl: F/0.1, F/0.4, F/0.1 -> F / (0.1 x 0.4 x 0.1)^(1/3) = F / 0.004^(1/3)
	[ "$(o solo_cutedsl.n_trials)" = 3 ]
	near "$(o solo_cutedsl.fraction)" 0.5399812279
	# solo_tirx: replicate 1 only (2 on an A100, 3 without a GPU): F/0.2
	[ "$(o solo_tirx.n_trials)" = 1 ]
	near "$(o solo_tirx.fraction)" 0.4285833846
	# cutedsl2tirx: F/0.4, F/0.1 -> F/0.2; tirx2cutedsl: replicate 3 only, F/0.2
	[ "$(o cutedsl2tirx_skill.n_trials)" = 2 ]
	near "$(o cutedsl2tirx_skill.fraction)" 0.4285833846
	[ "$(o tirx2cutedsl_skill.n_trials)" = 1 ]
	near "$(o tirx2cutedsl_skill.fraction)" 0.4285833846
	# The bootstrap draws the one problem, then its 3 replicates with
	# replacement. solo_cutedsl: all three draws replicate 2 has p = 1/27 >
	# 2.5%, none of it p = 8/27: the interval is [F/0.4, F/0.1]; so is
	# cutedsl2tirx'"'"'s (replicate 1 alone p = 7/27, replicate 2 alone 7/27).
	# An arm of one trial: [F/0.2, F/0.2] (it is missing from 8/27 < 1/2).
	near "$(o solo_cutedsl.ci.0)" 0.2142916923
	near "$(o solo_cutedsl.ci.1)" 0.8571667692
	near "$(o cutedsl2tirx_skill.ci.0)" 0.2142916923
	near "$(o cutedsl2tirx_skill.ci.1)" 0.8571667692
	near "$(o solo_tirx.ci.0)" 0.4285833846
	near "$(o solo_tirx.ci.1)" 0.4285833846
	# the same point figures in the cells and families, without intervals
	near "$(jget cells.0.sol.solo_cutedsl.fraction <s.json)" 0.5399812279
	[ "$(jget models.0.overall.by_category.mlp_norm.sol.solo_tirx.n_trials <s.json)" = 1 ]
	# --bootstrap 0: no interval
	"$MKB" report --store sol.db --format json --bootstrap 0 | jget models.0.overall.sol.solo_cutedsl.ci >ci0
	[ "$(cat ci0)" = null ]
	"$MKB" report --store sol.db >s.txt
	grep -q "^Speed of light (ours)" s.txt
	grep -q "^solo_cutedsl  *3  *0.54 \[0.21, 0.86\]$" s.txt
	"$MKB" report --store sol.db --format csv >s.csv
	grep -q "^\"s\",\"{}\",\"sol\",\"solo_tirx\",\"fraction\",0.4285833846,0.4285833846,0.4285833846$" s.csv
	"$MKB" report --store sol.db --format html -o s.html
	grep -q "Speed of light (ours)" s.html
	# a store without floors reports none (the hand-worked store)
	[ -s hand.db ] || mkstore hand.db <"$TMP/hand.spec"
	! "$MKB" report --store hand.db --format json | grep -q "\"sol\""
	! "$MKB" report --store hand.db | grep -q "Speed of light"
'

# --calls intervals, worked by hand. Each line: speedup, then the speedup
# interval of the final evaluation. A comparison is skill arm against the
# solo of the target DSL (cutedsl2tirx: base solo_tirx, source
# solo_cutedsl; tirx2cutedsl the reverse). delta 0.05: helped r >= 1.05,
# harmed r <= 1/1.05 = 0.952.
#                        paper    intervals
# 28 cutedsl2tirx  r 1.2 helped   neutral  [1.05,1.30] overlaps solo [0.90,1.10]
# 28 tirx2cutedsl  r 1.5 helped   helped   [1.40,1.60] above solo [0.95,1.05]
# 36 cutedsl2tirx  r 0.5 harmed   harmed   [0.45,0.55] below solo [0.95,1.05]
# 36 tirx2cutedsl  r .95 harmed   harmed   the skill arm has no interval: the paper's rule
# 01 cutedsl2tirx  r 0.9 harmed   neutral  [0.70,1.10] overlaps solo [0.80,1.20]
# 01 tirx2cutedsl  failed: harmed harmed   an arm failed: the paper's rule
# 02 cutedsl2tirx  r 1.5 helped   helped   the solo's speedup_ci is null: the paper's rule
# 02 tirx2cutedsl  r 1.5 helped   helped   the solo's result is malformed: the paper's rule
#                                          (had either been read as ~1, [1.0,1.6] overlaps it)
# paper: 4 helped, 4 harmed; intervals: 3 helped, 3 harmed, 2 neutral; the
# intervals decided 4 (28 x2, 36 cutedsl2tirx, 01 cutedsl2tirx) and turned
# 2 neutral (1 helped, 1 harmed). Source standing (source solo against base
# solo): 28 same/same; 36 above and below, the intervals separate; 01 1.1
# vs 1.0 above (cutedsl2tirx) and below (tirx2cutedsl) by the paper, but
# [0.9,1.3] and [0.8,1.2] overlap: same under intervals (2 turned same).
cat >"$TMP/ci.spec" <<'S'
c 28 1 solo_cutedsl passed 1 1.0 y 0.01 0 - - 0.95:1.05
c 28 1 solo_tirx passed 1 1.0 y 0.01 0 - - 0.90:1.10
c 28 1 cutedsl2tirx_skill passed 1 1.2 y 0.01 0 - - 1.05:1.30
c 28 1 tirx2cutedsl_skill passed 1 1.5 y 0.01 0 - - 1.40:1.60
c 36 1 solo_cutedsl passed 1 2.0 y 0.01 0 - - 1.9:2.1
c 36 1 solo_tirx passed 1 1.0 y 0.01 0 - - 0.95:1.05
c 36 1 cutedsl2tirx_skill passed 1 0.5 y 0.01 0 - - 0.45:0.55
c 36 1 tirx2cutedsl_skill passed 1 1.9 y 0.01 0 - - -
c 1 1 solo_cutedsl passed 1 1.1 y 0.01 0 - - 0.9:1.3
c 1 1 solo_tirx passed 1 1.0 y 0.01 0 - - 0.8:1.2
c 1 1 cutedsl2tirx_skill passed 1 0.9 y 0.01 0 - - 0.7:1.1
c 1 1 tirx2cutedsl_skill failed 0 - y 0.01 0 - - -
c 2 1 solo_cutedsl passed 1 1.0 y 0.01 0 - - bad
c 2 1 solo_tirx passed 1 1.0 y 0.01 0 - - null
c 2 1 cutedsl2tirx_skill passed 1 1.5 y 0.01 0 - - 1.0:1.6
c 2 1 tirx2cutedsl_skill passed 1 1.5 y 0.01 0 - - 1.0:1.6
S

expect '--calls intervals: helped or harmed only where the speedup intervals separate; paper (the default) unchanged' '
	mkstore ci.db <"$TMP/ci.spec"
	rule_reports ci.db calls paper intervals cp ci
	p() { jget "models.0.paired.$1" <"$2"; }
	[ "$(hhn cp.json)" = 4/4/0 ]
	[ "$(hhn ci.json)" = 3/3/2 ]
	[ "$(p groups.cutedsl2tirx.helped ci.json)/$(p groups.cutedsl2tirx.harmed ci.json)" = 1/1 ]
	[ "$(p groups.tirx2cutedsl.helped ci.json)/$(p groups.tirx2cutedsl.harmed ci.json)" = 2/2 ]
	[ "$(p by_source_standing.above.n cp.json)/$(p by_source_standing.same.n cp.json)/$(p by_source_standing.below.n cp.json)" = 2/4/2 ]
	[ "$(p by_source_standing.above.n ci.json)/$(p by_source_standing.same.n ci.json)/$(p by_source_standing.below.n ci.json)" = 1/6/1 ]
	[ "$(p calls ci.json)" = "{\"rule\": \"intervals\", \"n_by_intervals\": 4, \"n_by_paper_rule\": 4, \"turned_neutral\": 2, \"turned_neutral_helped\": 1, \"turned_neutral_harmed\": 1, \"standing_turned_same\": 2}" ]
	# the rule is recorded: options, legend, each comparison; the paper'"'"'s output has none of it
	jget legend.paired <ci.json | grep -q "calls by intervals (--calls intervals)"
	python3 - <<PY
import json
c = {(x["number"], x["direction"]): (x["class"], x["paper_class"], x["call"])
     for x in json.load(open("ci.json"))["comparisons"]}
want = {(28, "cutedsl2tirx"): ("neutral", "helped", "intervals"), (28, "tirx2cutedsl"): ("helped", "helped", "intervals"),
        (36, "cutedsl2tirx"): ("harmed", "harmed", "intervals"), (36, "tirx2cutedsl"): ("harmed", "harmed", "paper"),
        (1, "cutedsl2tirx"): ("neutral", "harmed", "intervals"), (1, "tirx2cutedsl"): ("harmed", "harmed", "paper"),
        (2, "cutedsl2tirx"): ("helped", "helped", "paper"), (2, "tirx2cutedsl"): ("helped", "helped", "paper")}
assert c == want, c
PY
	# the text, CSV (and so HTML) say it
	"$MKB" report --store ci.db --calls intervals >ci.txt
	grep -q "helped r >= 1.05, harmed r <= 1/1.05 and the speedup intervals separate where both arms passed with one;" ci.txt
	grep -q "^Calls by intervals: 4 comparisons had both arms passed with a speedup interval (the rest by the ratio alone); the intervals turned 2 calls neutral (1 helped, 1 harmed) and 2 source standings same$" ci.txt
	"$MKB" report --store ci.db --calls intervals --format csv | grep -q "^\"c\",\"{}\",\"paired\",\"calls\",\"turned_neutral\",2,,$"
	! "$MKB" report --store ci.db | grep -q "intervals separate\|Calls by intervals"
	# a store without intervals (the hand-worked one): the intervals change no call
	[ -s hand.db ] || mkstore hand.db <"$TMP/hand.spec"
	"$MKB" report --store hand.db --format json --calls intervals >hi.json
	[ "$(jget models.0.paired.calls.n_by_intervals <hi.json)/$(jget models.0.paired.calls.turned_neutral <hi.json)" = 0/0 ]
	[ "$(jget models.0.paired.groups.all.helped <hi.json)/$(jget models.0.paired.groups.all.harmed <hi.json)" = 2/1 ]
	set +e
	"$MKB" report --store ci.db --calls noise >/dev/null 2>err.txt; rc=$?
	set -e
	[ $rc = 2 ] && grep -q "calls must be paper or intervals" err.txt
'

# --time device: end-to-end speedups that disagree with the kernels' GPU time.
# Every final evaluation took 1.0 ms eager; device_ms below (- : none recorded).
#   28: solos 2.0x e2e, device 0.10 ms (e = 10); the tirx skill arm 2.6x e2e
#       but 0.10 ms on the device (e2e helped, device neutral); the cutedsl
#       skill arm 1.5x e2e but 0.05 ms (e2e harmed, device helped: r = 2)
#   36: solo_tirx has no device_ms, so both directions stay end to end
#       (it is the base of one and the source of the other)
cat >"$TMP/dev.spec" <<'S'
m 28 1 solo_cutedsl passed 1 2.0 y 0 0 0.5 H200 null
m 28 1 solo_tirx passed 1 2.0 y 0 0 0.5 H200 null
m 28 1 cutedsl2tirx_skill passed 1 2.6 n 0 0 0.38 H200 null
m 28 1 tirx2cutedsl_skill passed 1 1.5 n 0 0 0.67 H200 null
m 36 1 solo_cutedsl passed 1 3.0 y 0 0 0.33 H200 null
m 36 1 solo_tirx passed 1 3.0 y 0 0 0.33 H200 null
m 36 1 cutedsl2tirx_skill passed 1 3.0 n 0 0 0.33 H200 null
m 36 1 tirx2cutedsl_skill failed 0 - n 0 0 - - null
S
expect '--time device (ours): paired comparisons on the kernels GPU time where every passing arm has it; e2e (the default) unchanged' '
	mkstore dev.db <"$TMP/dev.spec"
	python3 - <<PY
import json, sqlite3
db = sqlite3.connect("dev.db")
device = {(28, "solo_cutedsl"): 0.10, (28, "solo_tirx"): 0.10, (28, "cutedsl2tirx_skill"): 0.10,
          (28, "tirx2cutedsl_skill"): 0.05, (36, "solo_cutedsl"): 0.2, (36, "cutedsl2tirx_skill"): 0.1}
rows = db.execute("select e.id, a.problem, a.arm, e.result from attempts a join evaluations e on e.id = a.final_evaluation").fetchall()
for eid, prob, arm, result in rows:
    r = json.loads(result)
    r["timing"] = {"device_ms": device.get((prob, arm))}
    db.execute("update evaluations set eager_ms = 1.0, result = ? where id = ?", (json.dumps(r, separators=(",", ":")), eid))
db.commit()
PY
	rule_reports dev.db time e2e device e2e dev
	[ "$(hhn e2e.json)" = 1/2/1 ]
	[ "$(hhn dev.json)" = 1/1/2 ]
	[ "$(jget models.0.paired.time <dev.json)" = "{\"on_device\": 2, \"end_to_end\": 2}" ]
	jget legend.paired <dev.json | grep -q "on the kernels.* GPU time (--time device)"
	python3 - <<PY
import json
c = {(x["number"], x["direction"]): (x["class"], round(x["ratio"], 9), x["on_device"], x["paper_class"])
     for x in json.load(open("dev.json"))["comparisons"]}
want = {(28, "cutedsl2tirx"): ("neutral", 1.0, True, "helped"), (28, "tirx2cutedsl"): ("helped", 2.0, True, "harmed"),
        (36, "cutedsl2tirx"): ("neutral", 1.0, False, "neutral"),
        (36, "tirx2cutedsl"): ("harmed", round(0.1 / 3.0, 9), False, "harmed")}
assert c == want, c
# the scores stay on the paper figure
e, d = json.load(open("e2e.json")), json.load(open("dev.json"))
assert e["models"][0]["overall"] == d["models"][0]["overall"]
PY
	"$MKB" report --store dev.db --time device >dev.txt
	grep -q "Paired transfer: e = eager ms / the kernels.* GPU time (device_ms) if passed else 0.1;" dev.txt
	grep -q "^On the kernels.* GPU time: 2 comparisons; 2 stayed on the end-to-end speedup" dev.txt
	! "$MKB" report --store dev.db | grep -q "device_ms\|On the kernels"
	set +e
	"$MKB" report --store dev.db --time device --calls intervals >/dev/null 2>err.txt; rc=$?
	"$MKB" report --store dev.db --time wall >/dev/null 2>err2.txt; rc2=$?
	set -e
	[ $rc = 2 ] && grep -q "not with --time device" err.txt
	[ $rc2 = 2 ] && grep -q "time must be e2e or device" err2.txt
'

expect 'the report only reads: a missing store is an error and is not created; bad flags are usage errors' '
	set +e
	"$MKB" report --store nothere.db; rc1=$?
	"$MKB" report --store hand.db --format pdf; rc2=$?
	"$MKB" report --store hand.db --e-fail 0; rc3=$?
	"$MKB" report --store hand.db --bootstrap -1; rc4=$?
	set -e
	[ $rc1 = 3 ]
	[ ! -e nothere.db ]
	[ $rc2 = 2 ]
	[ $rc3 = 2 ]
	[ $rc4 = 2 ]
	"$MKB" status --store empty.db >/dev/null
	"$MKB" report --store empty.db | grep -q "^no trials in empty.db"
'

expect 'statistics agree with SciPy: sign, McNemar, Wilson, Wilcoxon (exact, normal, ties, zeros), bootstrap' '
	MKB="$MKB" "$PYSTATS" "$TOP/tests/python/test_stats_scipy.py" -v >scipy.log 2>&1 || { cat scipy.log; false; }
	grep -q "^Ran 5 tests" scipy.log
'

finish
