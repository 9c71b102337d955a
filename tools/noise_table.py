"""The noise study's table (tools/noise_study.sh): per kernel, the judge's
median in each of several back-to-back evaluations and their spread, beside
the spread of block medians within one process, with the GPU's clocks and
temperature over the evaluations.

    python tools/noise_table.py noise.jsonl [machine.txt]

spread = (max - min) / median. "95% CI" is the median over the evaluations
of the half-width of each evaluation's own interval of its median, relative
to that median (what one evaluation claims about itself)."""
import json
import statistics
import sys


def spread(values):
    values = [v for v in values if isinstance(v, (int, float))]
    if len(values) < 2:
        return None
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med else None


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def span(values, fmt="{:.0f}"):
    values = [v for v in values if isinstance(v, (int, float))]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    evals, probes, order = {}, {}, []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            label = o.get("label", "?")
            if label not in order:
                order.append(label)
            (evals if o.get("kind") == "eval" else probes).setdefault(label, []).append(o)
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            print("machine: " + f.read().strip() + "\n")
    print("| kernel | evaluations passed | kernel medians (ms) | between evaluations | 95% CI (one evaluation) "
          "| eager between evaluations | block medians in one process (ms) | within a process "
          "| SM MHz (timed calls) | GPU °C |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary = []
    for label in order:
        rows = evals.get(label, [])
        passed = [o for o in rows if o.get("status") == "passed"]
        meds = [o.get("kernel_ms") for o in passed]
        eager = [o.get("eager_ms") for o in passed]
        cis = []
        for o in passed:
            ci, k = o.get("kernel_ci_ms"), o.get("kernel_ms")
            if isinstance(ci, list) and len(ci) == 2 and k:
                cis.append((ci[1] - ci[0]) / 2 / k)
        clocks, temps = [], []
        for o in passed:
            state = (o.get("timing") or {}).get("gpu_state") or {}
            for end in ("start", "end"):
                s = state.get(end) or {}
                clocks.append(s.get("sm_mhz"))
                temps.append(s.get("temp_c"))
        probe = next((p for p in probes.get(label, []) if p.get("condition") == "made"), None)
        blocks = probe.get("block_medians_ms", []) if probe else []
        between, within = spread(meds), spread(blocks)
        summary.append((label, statistics.median(m for m in meds if m) if meds else None, between))
        print(f"| {label} | {len(passed)} of {len(rows)} | {' '.join(f'{m:.4f}' for m in meds if m)} | "
              f"{pct(between)} | ±{pct(statistics.median(cis)) if cis else '-'} | {pct(spread(eager))} | "
              f"{' '.join(f'{b:.4f}' for b in blocks)} | {pct(within)} | {span(clocks)} | {span(temps)} |")
    big = [s for s in summary if s[1] is not None and s[1] >= 0.05 and s[2] is not None]
    if big:
        ok = sum(1 for s in big if s[2] <= 0.02)
        print(f"\nkernels with a median >= 50 us: {ok} of {len(big)} within 2% between evaluations "
              f"(issue 11's bar); worst {max(s[2] for s in big) * 100:.1f}% ({max(big, key=lambda s: s[2])[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
