"""The noise study's tables (tools/noise_study.sh).

    python tools/noise_table.py noise.jsonl [machine.txt]

Per kernel and configuration: the judge's median in each of several
evaluations and their spread, beside the spread of block medians within one
process (the timing probe), with the GPU's clocks and temperature over the
evaluations. Where the rows hold a "reduced" configuration (the study's AB
mode: the noise measures of docs/judge.md on), a first table sets it beside
the default one, kernel by kernel; where they hold a "before" configuration
(BEFORE=: the judge's settings before a change), beside the default instead.

spread = (max - min) / median. "95% CI" is the median over the evaluations
of the half-width of each evaluation's own interval of its median, relative
to that median (what one evaluation claims about itself: noise within its
process). "calls IQR" is the median over the evaluations of the
interquartile range of its timed calls over their median. "host probe" is
the candidate's core speed before its warm-up (timing.host: a fixed run of
small torch operations on the CPU); "per host probe" is the spread of the
medians each divided by it: what is left once the machine's own speed is
taken out."""
import json
import statistics
import sys

DEFAULT, REDUCED = "default", "reduced"
BEFORE = "before"  # noise_study.sh BEFORE=: the judge's settings before a change


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


def median_or_none(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


class Group:
    """The evaluations of one kernel in one configuration."""

    def __init__(self, rows):
        self.rows = rows
        self.passed = [o for o in rows if o.get("status") == "passed"]
        self.meds = [o.get("kernel_ms") for o in self.passed if o.get("kernel_ms")]
        self.between = spread(self.meds)
        self.eager = spread([o.get("eager_ms") for o in self.passed])
        cis, iqrs = [], []
        for o in self.passed:
            ci, k = o.get("kernel_ci_ms"), o.get("kernel_ms")
            if isinstance(ci, list) and len(ci) == 2 and k:
                cis.append((ci[1] - ci[0]) / 2 / k)
            q = (o.get("timing") or {}).get("spread_ms")
            if isinstance(q, list) and len(q) == 3 and q[1]:
                iqrs.append((q[2] - q[0]) / q[1])
        self.ci = median_or_none(cis)
        self.iqr = median_or_none(iqrs)
        self.cpu = median_or_none([(o.get("timing") or {}).get("solve_cpu_ms") for o in self.passed])
        # the launch recorder's GPU time of the calls' kernels (no dispatch)
        self.device = spread([(o.get("timing") or {}).get("device_ms") for o in self.passed])
        noise = [(o.get("timing") or {}).get("noise") or {} for o in self.passed]
        self.warmups = [(n.get("warmup") or {}).get("calls") for n in noise]
        self.unstable = sum(1 for n in noise if n.get("warmup") and not n["warmup"].get("stable"))
        self.cores = sorted({(p.get("checker"), p.get("candidate"))
                             for p in (n.get("pin") for n in noise) if p})
        # (timing.host) the candidate's core speed before its warm-up, and
        # the medians over it: what is left of the spread where the host's
        # speed is taken out (launch-bound calls scale with it)
        self.probe, scaled = [], []
        for o in self.passed:
            p = (((o.get("timing") or {}).get("host") or {}).get("candidate") or {}).get("before") or {}
            t = p.get("torch_ms")
            if isinstance(t, (int, float)) and t > 0:
                self.probe.append(t)
                if o.get("kernel_ms"):
                    scaled.append(o["kernel_ms"] / t)
        self.per_probe = spread(scaled) if len(scaled) == len(self.meds) else None
        self.clocks, self.temps = [], []
        for o in self.passed:
            state = (o.get("timing") or {}).get("gpu_state") or {}
            for end in ("start", "end"):
                s = state.get(end) or {}
                self.clocks.append(s.get("sm_mhz"))
                self.temps.append(s.get("temp_c"))

    def medians(self):
        return " ".join(f"{m:.4f}" for m in self.meds) or "-"


def arrow(a, b, fmt=pct):
    return f"{fmt(a)} → {fmt(b)}"


def read(path):
    """{(label, config): [eval rows]}, {label: [probe rows]}, labels in order."""
    evals, probes, order = {}, {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            o = json.loads(line)
            label = o.get("label", "?")
            if label not in order:
                order.append(label)
            if o.get("kind") == "eval":
                evals.setdefault((label, o.get("config") or DEFAULT), []).append(o)
            else:
                probes.setdefault(label, []).append(o)
    return evals, probes, order


def side_by_side(evals, order, first=DEFAULT, second=REDUCED):
    if first == BEFORE:
        print("The judge before a change (before) beside its default now, evaluations interleaved "
              "in one device call:\n")
    else:
        print("Default judge beside the noise measures on (reduced), evaluations interleaved "
              "in one device call:\n")
    print(f"| kernel | passed ({first}, {second}) | kernel medians, {first} (ms) | kernel medians, {second} (ms) "
          "| between evaluations | 95% CI (one evaluation) | calls IQR | eager between evaluations "
          f"| CPU in solve() (ms) | warm-up calls ({second}) | cores (checker, candidate) "
          "| kernels' GPU time between evaluations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label in order:
        if (label, second) not in evals:
            continue
        a, b = Group(evals.get((label, first), [])), Group(evals[(label, second)])
        warm = span(b.warmups) + (f" ({b.unstable} not stable)" if b.unstable else "")
        cores = " ".join(f"{c},{d}" for c, d in b.cores) or "-"
        print(f"| {label} | {len(a.passed)} of {len(a.rows)}, {len(b.passed)} of {len(b.rows)} "
              f"| {a.medians()} | {b.medians()} | {arrow(a.between, b.between)} "
              f"| ±{pct(a.ci)} → ±{pct(b.ci)} | {arrow(a.iqr, b.iqr)} | {arrow(a.eager, b.eager)} "
              f"| {arrow(a.cpu, b.cpu, lambda x: '-' if x is None else f'{x:.4f}')} | {warm} | {cores} "
              f"| {arrow(a.device, b.device)} |")
    print()


def detail(evals, probes, order, configs):
    print("| kernel | evaluations passed | kernel medians (ms) | between evaluations | 95% CI (one evaluation) "
          "| eager between evaluations | block medians in one process (ms) | within a process "
          "| SM MHz (timed calls) | GPU °C | kernels' GPU time between evaluations "
          "| candidate's host probe (torch ms) | between evaluations, per host probe |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for label in order:
        probe = next((p for p in probes.get(label, []) if p.get("condition") == "made"), None)
        blocks = probe.get("block_medians_ms", []) if probe else []
        for config in configs:
            if (label, config) not in evals and (config != DEFAULT or not blocks):
                continue
            g = Group(evals.get((label, config), []))
            name = label if config == DEFAULT else f"{label} ({config})"
            # the probe runs the kernel in one process of its own, without the judge
            shown = blocks if config == DEFAULT else []
            summary.setdefault(config, []).append((label, median_or_none(g.meds), g.between))
            device = [(o.get("timing") or {}).get("device_ms") for o in g.passed]
            device = [d for d in device if isinstance(d, (int, float))]
            summary.setdefault((config, "device"), []).append((label, median_or_none(device), g.device))
            print(f"| {name} | {len(g.passed)} of {len(g.rows)} | {g.medians() if g.meds else ''} | "
                  f"{pct(g.between)} | ±{pct(g.ci)} | {pct(g.eager)} | "
                  f"{' '.join(f'{b:.4f}' for b in shown) or '-'} | {pct(spread(shown))} | "
                  f"{span(g.clocks)} | {span(g.temps)} | {pct(g.device)} | "
                  f"{span(g.probe, '{:.3f}')} | {pct(g.per_probe)} |")
    for config in configs:
        what = "" if configs == [DEFAULT] else f" ({config})"
        for key, figure in ((config, "kernels with a median"),
                            ((config, "device"), "kernels whose GPU time (timing.device_ms) is")):
            big = [s for s in summary.get(key, []) if s[1] is not None and s[1] >= 0.05 and s[2] is not None]
            if big:
                ok = sum(1 for s in big if s[2] <= 0.02)
                worst = max(big, key=lambda s: s[2])
                print(f"\n{figure} >= 50 us{what}: {ok} of {len(big)} within 2% between evaluations "
                      f"(issue 11's bar); worst {worst[2] * 100:.1f}% ({worst[0]})")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    evals, probes, order = read(sys.argv[1])
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            print("machine: " + f.read().strip() + "\n")
    configs = [DEFAULT] + sorted({c for _, c in evals if c != DEFAULT})
    if REDUCED in configs:
        side_by_side(evals, order)
    elif BEFORE in configs:
        side_by_side(evals, order, BEFORE, DEFAULT)
    detail(evals, probes, order, configs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
