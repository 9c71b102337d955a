#!/usr/bin/env bash
# Times `mkb report` on a synthetic store of about 100,000 trials: 10 models x
# 74 problems x 34 replicates x 4 arms = 100,640 trials (random outcomes from
# a fixed seed; 5% of skill arms skipped, 2% of trials infra errors), built
# through the real schema. Prints the machine and the times (the best and the
# median of 5 runs of each format); results/report-bench.md keeps a run.
#   tools/bench_report.sh [MKB]   (default build/mkb, the optimised build)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
MKB=${1:-$here/build/mkb}
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
echo "mkb: $MKB"
for args in "--format json" "--format json --bootstrap 0" "--format text" "--format html"; do
	times=()
	for i in 1 2 3 4 5; do
		s=$(date +%s.%N)
		"$MKB" report --store "$db" $args >"$tmp/out"
		e=$(date +%s.%N)
		times+=("$(python3 -c "print('%.3f' % ($e - $s))")")
	done
	sorted=$(printf '%s\n' "${times[@]}" | sort -n)
	printf 'mkb report %-28s best %s s, median %s s, output %s bytes\n' "$args" "$(head -1 <<<"$sorted")" \
		"$(sed -n 3p <<<"$sorted")" "$(wc -c <"$tmp/out")"
done
