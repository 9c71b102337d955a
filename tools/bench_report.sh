#!/usr/bin/env bash
# Times `mkb report` on a synthetic store of about 100,000 trials: 10 models x
# 74 problems x 34 replicates x 4 arms = 100,640 trials (random outcomes from
# a fixed seed; 5% of skill arms skipped, 2% of trials infra errors), built
# through the real schema. Prints the machine and, per format, the wall and
# CPU (user + system) times of 5 runs (best and median); results/report-bench.md
# keeps a run.
#   tools/bench_report.sh [MKB [BASELINE]]   (default build/mkb, the optimised build)
# With BASELINE (another mkb, e.g. built from an earlier commit) both run
# side by side, interleaved, and their JSON reports (two seeds) must be
# byte-identical.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
MKB=${1:-$here/build/mkb}
BASE=${2:-}
export MKB_ROOT=$here   # the catalog, for a baseline built outside the checkout too
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mkb-bench.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
db=$tmp/bench.db
"$MKB" status --store "$db" >/dev/null
python3 - "$db" <<'PY'
import random, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rng = random.Random(14)
now = "2025-01-01T00:00:00Z"
arms = [("solo_cutedsl", "cutedsl"), ("solo_tirx", "tirx"), ("cutedsl2tirx_skill", "tirx"), ("tirx2cutedsl_skill", "cutedsl")]
evals, attempts, trials = [], [], []
eid = aid = 0
for m in range(10):
    model = "openai:model-%d" % m
    for p in range(1, 75):
        for r in range(1, 35):
            for arm, dsl in arms:
                name = "p%02d_r%d_%s" % (p, r, arm)
                if arm.endswith("_skill") and rng.random() < 0.05:
                    trials.append((name, model, arm, p, dsl, r, "skipped", None))
                    continue
                if rng.random() < 0.02:
                    status, ev = "infra_error", None
                else:
                    passed = rng.random() < 0.55
                    status = "passed" if passed else "failed"
                    eid += 1
                    ev = eid
                    evals.append((eid, now, p, dsl, status, int(passed), rng.lognormvariate(0, 1) if passed else None))
                aid += 1
                attempts.append((aid, now, p, dsl, model, name, status, ev, rng.randint(10**5, 10**6),
                                 rng.randint(0, 10**5), rng.randint(10**3, 10**4), rng.random(), rng.uniform(60, 2400),
                                 "- a finding" if rng.random() < 0.9 else None))
                trials.append((name, model, arm, p, dsl, r, status, aid))
db.executemany("INSERT INTO evaluations (id, started_at, problem, dsl, workload, device, kernel_path, problem_sha256,"
               " grader_sha256, options, status, passed, speedup) VALUES (?, ?, ?, ?, 'visible', 'cuda', 'k.py', 'x',"
               " 'x', '{}', ?, ?, ?)", evals)
db.executemany("INSERT INTO attempts (id, started_at, problem, dsl, model, arm, workdir, options, status,"
               " final_evaluation, input_tokens, cached_tokens, output_tokens, cost_usd, agent_s, skill_out)"
               " VALUES (?, ?, ?, ?, ?, ?, 'w', '{}', ?, ?, ?, ?, ?, ?, ?, ?)", attempts)
db.executemany("INSERT INTO trials (name, model, decoding, arm, problem, dsl, replicate, fingerprint, status,"
               " attempt, archived, created_at) VALUES (?, ?, '{}', ?, ?, ?, ?, 'f', ?, ?, 0, '" + now + "')", trials)
db.commit()
print("store: %d trials, %d attempts, %d evaluations, %.1f MB" % (len(trials), len(attempts), len(evals),
      db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0] / 1e6))
PY
echo "machine: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(uname -sr)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$BASE" ]; then
	for seed in 1 7; do
		"$BASE" report --store "$db" --format json --seed $seed >"$tmp/base.json"
		"$MKB" report --store "$db" --format json --seed $seed >"$tmp/new.json"
		cmp "$tmp/base.json" "$tmp/new.json" || { echo "the JSON reports differ (seed $seed)"; exit 1; }
	done
	echo "JSON identical to the baseline's (seeds 1 and 7, $(wc -c <"$tmp/new.json") bytes)"
fi
python3 - "$db" "$tmp/out" "$MKB" $BASE <<'PY'
import os, resource, statistics, subprocess, sys, time
db, out, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
names = ["mkb"] if len(binaries) == 1 else ["new", "baseline"]
for args in (["--format", "json"], ["--format", "json", "--bootstrap", "0"], ["--format", "text"],
             ["--format", "html"]):
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for _ in range(5):
        for name, exe in zip(names, binaries):  # interleaved: both see the same load
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            with open(out, "wb") as f:
                subprocess.run([exe, "report", "--store", db] + args, stdout=f, check=True)
            t1 = time.perf_counter()
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[name].append(t1 - t0)
            cpu[name].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    for name in names:
        print("%-9s mkb report %-28s wall best %.3f s, median %.3f s; cpu best %.3f s, median %.3f s; output %d bytes"
              % (name, " ".join(args), min(wall[name]), statistics.median(wall[name]), min(cpu[name]),
                 statistics.median(cpu[name]), os.path.getsize(out)))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
