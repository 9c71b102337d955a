"""Markdown table of tools/gpu_judge.sh rows (JSON lines): one row per
evaluation, or, where the same kernel was graded by the old and the new
judge, one row per kernel with both medians and their ratio.

    python tools/judge_table.py ROWS.jsonl [MACHINE.txt]
"""
import json
import statistics
import sys


def fmt(x, digits=4):
    return "-" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return b / a if a and b else None


def rules(r):
    """The run-time DSL rules' column: checked and the DSL's share of device
    time, or not checked (docs/launch-attribution.md)."""
    if "dsl_checked" not in r:
        return "-"
    if not r["dsl_checked"]:
        return "not checked"
    return f"checked ({fmt(r.get('dsl_share'), 2)})"


def loop_text(loop):
    """(MKB_JUDGE_LOOP) the candidate's back-to-back median and the events' over it."""
    if not isinstance(loop, dict):
        return "-"
    return f"{fmt(loop.get('ms'))} ({fmt(loop.get('over'), 2)}x)"


def phases(rows):
    """Where the checker's clock of a timed call goes (timing.phases, medians
    over the calls): what the outside clock sees beyond the candidate's events."""
    have = [r for r in rows if ((r.get("timing") or {}).get("phases") or {})]
    if not have:
        return
    print("\n| problem | dsl | workload | events ms | checker wall ms | wall - events | round trip "
          "| before (inputs) | solve | drain | export | wait | since | repeat | prime | loop (events/loop) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in have:
        t = r["timing"]
        ph = t["phases"]
        ev, wall = t.get("events_ms"), t.get("wall_ms")
        gap = wall - ev if isinstance(ev, (int, float)) and isinstance(wall, (int, float)) else None
        print(f"| {r.get('label')} | {r.get('dsl')} | {r.get('workload')} | {fmt(ev)} | {fmt(wall)} | {fmt(gap)} | "
              + f"{fmt(ph.get('round_trip_ms'))} | {fmt(ph.get('before_ms'))} ({fmt(ph.get('inputs_ms'))}) | "
              + " | ".join(fmt(ph.get(k)) for k in ("solve_ms", "drain_ms", "export_ms", "wait_ms", "since_ms", "repeat_ms",
                                                   "prime_ms"))
              + f" | {loop_text(t.get('loop'))} |")


def probe_text(probe):
    """A host probe (timing.host_probe) as "torch ms / Python ms @cpu"."""
    if not isinstance(probe, dict):
        return "-"
    return f"{fmt(probe.get('torch_ms'), 3)} / {fmt(probe.get('py_ms'), 3)} @{probe.get('cpu', '-')}"


def host(rows):
    """How fast each process's core ran the host probe before the warm-up
    and after the timed calls (timing.host): whether the machine moved
    between two rows, rather than the kernel."""
    have = [r for r in rows if (r.get("timing") or {}).get("host")]
    if not have:
        return
    print("\nHost probe, torch ms / Python ms @core (timing.host; the candidate's by its word):\n")
    print("| problem | dsl | workload | checker before | checker after | candidate before | candidate after |")
    print("|---|---|---|---|---|---|---|")
    for r in have:
        h = r["timing"]["host"]
        cells = [probe_text((h.get(side) or {}).get(when)) for side in ("checker", "candidate")
                 for when in ("before", "after")]
        print(f"| {r.get('label')} | {r.get('dsl')} | {r.get('workload')} | " + " | ".join(cells) + " |")


def main(argv):
    rows = [json.loads(line) for line in open(argv[1], encoding="utf-8") if line.strip()]
    if len(argv) > 2:
        for line in open(argv[2], encoding="utf-8"):
            print(f"    {line.rstrip()}")
        print()
    old = {(r.get("label"), r.get("dsl"), r.get("workload")): r for r in rows if r.get("judge") == "old"}

    def old_of(r):  # "NN_name sandbox off" / "NN_name #2 reply=spin" beside the old "NN_name" / "NN_name #2"
        words = str(r.get("label")).split(" ")
        for n in range(len(words), 0, -1):  # the longest label the old judge has
            got = old.get((" ".join(words[:n]), r.get("dsl"), r.get("workload")))
            if got:
                return got
        return {}
    if old:
        print("| problem | dsl | workload | old | new | kernel ms old | new | new/old "
              "| eager ms old | new | new/old | new timing | new events ms | new CPU in solve() ms "
              "| eval s old | new |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        kr, er = [], []
        for r in rows:
            if r.get("judge") != "new":
                continue
            o = old_of(r)
            k, e = ratio(o.get("kernel_ms"), r.get("kernel_ms")), ratio(o.get("eager_ms"), r.get("eager_ms"))
            if o.get("label") == r.get("label"):  # the summary: plain old/new pairs only
                kr += [k] if k else []
                er += [e] if e else []
            t = r.get("timing") or {}
            print(f"| {r.get('label')} | {r.get('dsl')} | {r.get('workload')} | {o.get('status', '-')} "
                  f"| {r.get('status')} | {fmt(o.get('kernel_ms'))} | {fmt(r.get('kernel_ms'))} | {fmt(k, 3)} "
                  f"| {fmt(o.get('eager_ms'))} | {fmt(r.get('eager_ms'))} | {fmt(e, 3)} | {t.get('source', '-')} "
                  f"| {fmt(t.get('events_ms'))} | {fmt(t.get('solve_cpu_ms'))} "
                  f"| {fmt(o.get('wall_s'), 1)} | {fmt(r.get('wall_s'), 1)} |")
        if kr:
            print(f"\nkernel median new/old: median {statistics.median(kr):.3f} "
                  f"(range {min(kr):.3f}-{max(kr):.3f}, {len(kr)} kernels); "
                  f"eager new/old: median {statistics.median(er):.3f} (range {min(er):.3f}-{max(er):.3f})")
    else:
        print("| label | dsl | workload | judge | expected | got | kernel ms | eager ms | speedup | timing "
              "| DSL rules (share) | eval s | reason |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r.get("label") == "throughput":
                alone = f" ({r['alone']} alone first)" if r.get("alone") else ""
                print(f"| throughput | | | {r['parallel']} at a time{alone} | | | | | | | | {fmt(r['wall_s'], 1)} "
                      f"| {r['evaluations']} evaluations: {3600 * r['evaluations'] / r['wall_s']:.0f} per GPU-hour |")
                continue
            reason = str(r.get("reason", ""))[:100].replace("|", "/")
            src = (r.get("timing") or {}).get("source", "-")
            print(f"| {r.get('label')} | {r.get('dsl', '-')} | {r.get('workload', '-')} | {r.get('judge')} "
                  f"| {r.get('expect')} | {r.get('status')} "
                  f"| {fmt(r.get('kernel_ms'))} | {fmt(r.get('eager_ms'))} | {fmt(r.get('speedup'), 2)} "
                  f"| {src} | {rules(r)} | {fmt(r.get('wall_s'), 1)} | {reason} |")
    phases(rows)
    host(rows)
    graded = [r for r in rows if r.get("expect")]
    ok = sum(r.get("status") == r.get("expect") for r in graded)
    print(f"\n{ok} of {len(graded)} evaluations got the expected status")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
