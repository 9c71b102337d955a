"""Render gpu_check.sh's evals.jsonl as a Markdown table (developer tool)."""
import json
import sys


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main(rows_path, machine_path):
    with open(machine_path) as f:
        print("".join(f"    {line}" for line in f))
    print("| case | problem | dsl | workload | expected | status | kernel ms | eager ms | speedup | judge s | reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ok = 0
    rows = [json.loads(line) for line in open(rows_path)]
    for r in rows:
        good = r.get("status") == r["expect"]
        ok += good
        reason = (r.get("reason") or "").replace("|", "/").replace("\n", " ")[:120]
        print(f"| {r['label']} | {r.get('problem', '?')} | {r.get('dsl', '?')} | {r.get('workload', '?')} "
              f"| {r['expect']} | {r.get('status')}{'' if good else ' (UNEXPECTED)'} "
              f"| {fmt(r.get('kernel_ms'), '.4f')} | {fmt(r.get('eager_ms'), '.4f')} "
              f"| {fmt(r.get('speedup'), '.2f')} | {r.get('judge_s')} | {reason} |")
    print(f"\n{ok} of {len(rows)} evaluations classified as expected")


if __name__ == "__main__":
    main(*sys.argv[1:3])
