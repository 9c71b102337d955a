#!/usr/bin/env python3
"""Runs a command (an `mkb run`) and measures what its process tree costs,
for tools/bench_run_scale.sh:

    bench_sampler.py --mkb PATH [--interval S] [--json OUT] [--server PID] -- CMD ARGS...

The "orchestrator" is every process under the command whose /proc/PID/exe
is the mkb binary at PATH (the same file: device and inode): the run's
parent, its workers (its mkb children: the attempts in flight) and the
sandbox's helper forks of mkb. Everything else under the run (tmux servers
and clients, the agents' shells, each attempt's Python probe) is the
"terminal".

Memory is sampled: every --interval seconds (0.5) it lists the tree and
counts the workers; every --mkb-every'th sample (2) it sums the PSS and
private dirty memory (/proc/PID/smaps_rollup) of the orchestrator's
processes, every --other-every'th (4) those of the others.

CPU is exact, not sampled: a watcher process (its own, at a high priority)
holds a pidfd on every mkb process seen and reads its /proc/PID/schedstat
(CPU in ns) the moment it exits, a zombie before its parent reaps it; the
run's parent is read the same way (waitid WNOWAIT). A process reaped
before the watcher reads it keeps its last sample; a helper that exec'd a
program (its comm changed) keeps its last sample as mkb. The terminal's
CPU is the run's whole CPU (wait4: everything under it, all reaped) less
the orchestrator's. --server PID: a process outside the run (the model
server) whose CPU over the run is reported too.

Writes a JSON summary to --json; the command's own output goes where the
sampler's does; exit status: the command's.

    bench_sampler.py --table OUT.json [--final LINE] [--leftover TEXT]

prints the table of a summary.
"""
import argparse
import json
import os
import resource
import select
import subprocess
import sys
import time

TCK = os.sysconf("SC_CLK_TCK")


def boottime():
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def read_stat(pid):
    """(ppid, self ticks, children ticks, start ticks, state, comm) or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read().decode("latin-1")
    except OSError:
        return None
    head, _, tail = s.rpartition(")")
    r = tail.split()
    # r[0] is field 3 (state); field N is r[N - 3]
    return (int(r[1]), int(r[11]) + int(r[12]), int(r[13]) + int(r[14]), int(r[19]), r[0],
            head.partition("(")[2])


def read_ns(pid):
    """CPU time of pid's task in ns (/proc/PID/schedstat: exact, where
    utime and stime are rounded to ticks), or None."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_mem(pid):
    """{Pss, Private_Dirty, Rss} in kB, or None."""
    out = {}
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Rss", "Pss", "Private_Dirty", "Private_Clean", "Anonymous"):
                    out[k] = int(v.split()[0])
    except OSError:
        return None
    return out


def exe(pid):
    """The (device, inode) of the program pid runs (a binary replaced on
    disk since, by a rebuild, still matches)."""
    try:
        st = os.stat("/proc/%d/exe" % pid)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def proc_stat_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


def watcher(cmd_r, out_path):
    """A process of its own (no GIL to wait for, at a high priority): the
    moment an mkb process exits (its pidfd readable), read its CPU, a
    zombie until its parent reaps it (the run's parent polls for its
    workers every 100 ms; a helper's parent is waiting for it). Gets
    "pid start comm" lines on cmd_r, "end" to stop; writes a JSON line per
    exit to out_path."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -15)
    except OSError:
        pass
    ep = select.epoll()
    ep.register(cmd_r, select.EPOLLIN)
    fds, buf, end = {}, b"", None
    out = open(out_path, "w")
    while end is None or (fds and time.monotonic() < end):
        for fd, _ in ep.poll(0.2):
            if fd == cmd_r:
                data = os.read(cmd_r, 1 << 16)
                buf += data
                if not data:
                    ep.unregister(cmd_r)
                    end = time.monotonic() + 0.5
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    pid, start, comm_ = line.decode().split(" ", 2)
                    pid, start = int(pid), int(start)
                    try:
                        pfd = os.pidfd_open(pid)
                    except OSError:
                        continue
                    st = read_stat(pid)
                    if not st or st[3] != start:
                        os.close(pfd)
                        continue
                    fds[pfd] = (pid, start, comm_)
                    ep.register(pfd, select.EPOLLIN)
                continue
            t = boottime()
            pid, start, comm_ = fds.pop(fd)
            st, ns = read_stat(pid), read_ns(pid)
            ep.unregister(fd)
            os.close(fd)
            # a helper that exec'd a program since (comm changes at exec)
            ok = bool(st and st[3] == start and ns is not None and st[5] == comm_)
            out.write(json.dumps({"pid": pid, "start": start, "t": t, "final": ok,
                                  "ns": ns if ok else None, "children": st[2] if ok else None,
                                  "ticks": st[1] if ok else None}) + "\n")
    out.close()
    os._exit(0)


class Sampler:
    def __init__(self, root, mkb, interval, mkb_every, other_every, exits_path):
        self.mkb_every, self.other_every = mkb_every, other_every
        st = os.stat(mkb)
        self.root, self.mkb, self.interval = root, (st.st_dev, st.st_ino), interval
        self.procs = {}        # (pid, start) -> an mkb process under the run (track())
        self.samples = []
        self.seen = {}         # (pid, start) -> comm, every process ever under the run
        self.peak_by_comm = {}
        self.not_mkb = set()   # (pid, start) seen running another program (never mkb again)
        self.exits_path = exits_path
        r, self.cmd_w = os.pipe()
        self.watcher = os.fork()
        if self.watcher == 0:
            os.close(self.cmd_w)
            try:
                watcher(r, exits_path)
            finally:
                os._exit(1)
        os.close(r)

    def tree(self):
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = read_stat(int(name))
                if st:
                    stats[int(name)] = st
        kids = {}
        for pid, st in stats.items():
            kids.setdefault(st[0], []).append(pid)
        out, todo = [], [self.root]
        while todo:
            p = todo.pop()
            if p in stats:
                out.append(p)
            todo.extend(kids.get(p, []))
        return out, stats

    def sample(self):
        t = boottime()
        pids, stats = self.tree()
        s = {"t": t, "in_flight": 0, "mkb_n": 0, "mkb_pss": 0, "mkb_dirty": 0, "mkb_rss": 0,
             "other_n": 0, "other_pss": 0, "other_dirty": 0, "tmux_servers": 0,
             "pss_parent": 0, "pss_worker": 0, "pss_helper": 0,
             "dirty_parent": 0, "dirty_worker": 0, "dirty_helper": 0}
        by_comm = {}
        mem = len(self.samples) % self.mkb_every == 0
        full = len(self.samples) % self.other_every == 0
        for pid in pids:
            ppid, own, _, start, state, c = stats[pid]
            if state == "Z":
                continue
            key = (pid, start)
            if key in self.not_mkb:
                is_mkb = False
            else:
                e = exe(pid)
                if e is None:
                    continue  # gone since the listing
                is_mkb = e == self.mkb
                if not is_mkb:
                    self.not_mkb.add(key)
            self.seen[key] = c
            m = (read_mem(pid) if (is_mkb and mem) or full else None) or {}
            if is_mkb:
                s["mkb_n"] += 1
                s["mkb_pss"] += m.get("Pss", 0)
                s["mkb_dirty"] += m.get("Private_Dirty", 0)
                s["mkb_rss"] += m.get("Rss", 0)
                worker = ppid == self.root
                role = "parent" if pid == self.root else "worker" if worker else "helper"
                s["pss_" + role] += m.get("Pss", 0)
                s["dirty_" + role] += m.get("Private_Dirty", 0)
                s["in_flight"] += worker
                if pid != self.root:
                    self.track(pid, start, stats[pid], worker)
            else:
                s["other_n"] += 1
                s["other_pss"] += m.get("Pss", 0)
                s["other_dirty"] += m.get("Private_Dirty", 0)
                b = by_comm.setdefault(c, [0, 0])
                b[0] += 1
                b[1] += m.get("Pss", 0)
                if c.startswith("tmux") and ppid in stats and (ppid, stats[ppid][3]) in self.procs:
                    s["tmux_servers"] += 1
        if not mem:
            s["mkb_pss"] = s["mkb_dirty"] = s["mkb_rss"] = None
        if not full:
            s["other_pss"] = s["other_dirty"] = None
        for c, (n, pss) in by_comm.items():
            if not full:
                break
            p = self.peak_by_comm.setdefault(c, {"n": 0, "pss_kb": 0})
            p["n"], p["pss_kb"] = max(p["n"], n), max(p["pss_kb"], pss)
        s["cost_s"] = boottime() - t
        self.samples.append(s)

    def track(self, pid, start, st, worker):
        """An mkb process under the run (a worker, or a helper fork): its
        CPU so far (the fallback), and the watcher told to read it again
        the moment it exits."""
        key = (pid, start)
        w = self.procs.get(key)
        if w is None:
            w = self.procs[key] = {"pid": pid, "start": start, "worker": worker, "final": False,
                                   "exited_bt": None, "ns": 0, "children": 0, "ticks": 0,
                                   "comm": st[5]}
            os.write(self.cmd_w, ("%d %d %s\n" % (pid, start, st[5])).encode())
        ns = read_ns(pid)
        if ns is not None and st[5] == w["comm"]:
            w["ns"], w["children"], w["ticks"] = ns, st[2], st[1]

    def finish(self):
        """Stop the watcher; merge what it read at each exit."""
        os.close(self.cmd_w)
        os.waitpid(self.watcher, 0)
        with open(self.exits_path) as f:
            for line in f:
                e = json.loads(line)
                w = self.procs.get((e["pid"], e["start"]))
                if w is None:
                    continue
                w["exited_bt"] = e["t"]
                if e["final"]:
                    w["ns"], w["children"], w["ticks"], w["final"] = e["ns"], e["children"], e["ticks"], True

    def wait_until(self, deadline):
        left = deadline - time.monotonic()
        if left > 0:
            time.sleep(left)


def table(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True)
    ap.add_argument("--final", default="")
    ap.add_argument("--leftover", default="")
    a = ap.parse_args(argv)
    d = json.load(open(a.table))
    m, o = d["mkb"], d["other"]
    n = d["peak_in_flight"]
    rows = [
        ("attempts in flight (peak / mean)", "%d / %.1f" % (n, d["mean_in_flight"])),
        ("wall time", "%.1f s" % d["wall_s"]),
        ("one attempt's worker, start to exit (mean, min-max)", "%.1f s, %.1f-%.1f" % (
            d["worker_life_s"]["mean"], d["worker_life_s"]["min"], d["worker_life_s"]["max"])),
        ("attempt-seconds in flight", "%.0f" % d["in_flight_integral_s"]),
        ("orchestrator (mkb) processes at peak", "%d" % m["processes_at_peak_pss"]),
        ("orchestrator peak PSS (total)", "%.1f MB" % (m["peak_pss_kb"] / 1024)),
        ("orchestrator PSS per attempt in flight", "%.2f MB" % (m["pss_kb_per_attempt"] / 1024)),
        ("orchestrator PSS at peak: parent / workers / helpers", "%.1f / %.1f / %.1f MB" % tuple(
            m["at_peak_pss_kb_by_role"][r] / 1024 for r in ("parent", "worker", "helper"))),
        ("orchestrator private dirty at peak (total)", "%.1f MB" % (m["private_dirty_kb_at_peak_pss"] / 1024)),
        ("orchestrator CPU (parent + workers + helpers)", "%.2f s (%.2f + %.2f + %.2f)" % (
            m["cpu_s"], m["cpu_s_parent"], m["cpu_s_workers"], m["cpu_s_helpers"])),
        ("orchestrator CPU per attempt in flight", "%.2f%% of a core" % (100 * m["cpu_share_per_attempt"])),
        ("terminal peak PSS (total)", "%.1f MB in %d processes" % (o["peak_pss_kb"] / 1024, o["peak_processes"])),
        ("terminal PSS per attempt", "%.2f MB" % (o["peak_pss_kb"] / 1024 / n if n else 0)),
        ("terminal CPU (the run's, less the orchestrator's)", "%.1f s" % o["cpu_s"]),
        ("terminal CPU per attempt in flight", "%.2f%% of a core" % (100 * o["cpu_share_per_attempt"])),
        ("whole run's CPU (wait4)", "%.1f s" % d["tree_cpu_s_wait4"]),
        ("workers / helper forks read at exit", "%d of %d / %d of %d" % (
            d["workers_read_at_exit"], d["workers"], d["helpers_read_at_exit"], d["helpers_seen"])),
        ("machine busy (all processes, mean)", "%.2f of %d cores" % (d["machine_busy_cores_mean"], os.cpu_count())),
        ("sampler CPU", "%.1f s (%d samples, %.0f ms each)" % (d["sampler_cpu_s"], d["samples"], 1e3 * d["sample_cost_s_mean"])),
        ("scripted model server CPU", "%.1f s" % d["server_cpu_s"] if d.get("server_cpu_s") is not None else "-"),
        ("left running after the run", "%d" % (len(d["left_running"]) + len(a.leftover.split()))),
    ]
    w = max(len(r[0]) for r in rows)
    for k, v in rows:
        print("%-*s  %s" % (w, k, v))
    if a.final:
        print(a.final)
    target = m["pss_kb_per_attempt"] < 2048 and m["cpu_share_per_attempt"] < 0.02
    print("target (< 2 MB and < 2%% of a core per attempt in flight): %s" % ("met" if target else "MISSED"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--table":
        return table(sys.argv[1:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--mkb", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--mkb-every", type=int, default=2,
                    help="read the mkb processes' memory every Nth sample only (cost)")
    ap.add_argument("--other-every", type=int, default=4,
                    help="read the other processes' memory every Nth sample only (cost)")
    ap.add_argument("--server", type=int, help="a process outside the run whose CPU to report")
    ap.add_argument("--json")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    busy0, all0 = proc_stat_busy()
    server0 = read_stat(a.server) if a.server else None
    t0 = boottime()
    proc = subprocess.Popen(cmd)
    exits = (a.json or "/tmp/bench-sampler") + ".exits"
    sp = Sampler(proc.pid, a.mkb, a.interval, a.mkb_every, a.other_every, exits)
    nxt = time.monotonic()
    root_final = None
    while True:
        sp.wait_until(nxt)
        nxt = max(nxt + a.interval, time.monotonic())  # no catching up after a slow sample
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None:
            root_final = read_ns(proc.pid)
            break
        sp.sample()
    # the parent is a zombie: what it left running is still visible
    _, status, ru = os.wait4(proc.pid, 0)
    t1 = boottime()
    busy1, all1 = proc_stat_busy()
    server1 = read_stat(a.server) if a.server else None
    sp.finish()
    os.unlink(exits)
    rc = os.waitstatus_to_exitcode(status)

    # left behind: any process seen under the run that is still alive
    left = []
    for (pid, start), c in sp.seen.items():
        st = read_stat(pid)
        if st and st[3] == start and pid != proc.pid and st[4] != "Z":
            left.append("%d %s" % (pid, c))

    smp = sp.samples
    total = ru.ru_utime + ru.ru_stime
    root_self = (root_final or 0) / 1e9
    procs = list(sp.procs.values())
    workers = [w for w in procs if w["worker"]]
    helpers = [w for w in procs if not w["worker"]]
    w_self = sum(w["ns"] for w in workers) / 1e9
    h_self = sum(w["ns"] for w in helpers) / 1e9
    # attempts in flight, integrated: each worker's life, start (its
    # /proc start time) to exit (its pidfd)
    inflight_s = sum((w["exited_bt"] if w["exited_bt"] else t1) - w["start"] / TCK for w in workers)
    peak_inflight = max((s["in_flight"] for s in smp), default=0)
    msmp = [s for s in smp if s["mkb_pss"] is not None]
    peak_mkb = max(msmp, key=lambda s: s["mkb_pss"]) if msmp else {}
    at_peak = [s for s in msmp if s["in_flight"] == peak_inflight]
    mkb_cpu = root_self + w_self + h_self
    other_cpu = total - mkb_cpu
    wall = t1 - t0
    sampler_ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "wall_s": wall,
        "exit_status": rc,
        "samples": len(smp),
        "interval_s": a.interval,
        "sample_cost_s_mean": sum(s["cost_s"] for s in smp) / len(smp) if smp else 0,
        "sampler_cpu_s": sampler_ru.ru_utime + sampler_ru.ru_stime,
        "workers": len(workers),
        "workers_read_at_exit": sum(1 for w in workers if w["final"]),
        "helpers_seen": len(helpers),
        "helpers_read_at_exit": sum(1 for w in helpers if w["final"]),
        "peak_in_flight": peak_inflight,
        "in_flight_integral_s": inflight_s,
        "mean_in_flight": inflight_s / wall if wall else 0,
        "worker_life_s": {"mean": inflight_s / len(workers) if workers else 0,
                          "min": min((w["exited_bt"] or t1) - w["start"] / TCK for w in workers) if workers else 0,
                          "max": max((w["exited_bt"] or t1) - w["start"] / TCK for w in workers) if workers else 0},
        "mkb": {
            "peak_pss_kb": peak_mkb.get("mkb_pss", 0),
            "in_flight_at_peak_pss": peak_mkb.get("in_flight", 0),
            "processes_at_peak_pss": peak_mkb.get("mkb_n", 0),
            "private_dirty_kb_at_peak_pss": peak_mkb.get("mkb_dirty", 0),
            "rss_kb_at_peak_pss": peak_mkb.get("mkb_rss", 0),
            "at_peak_pss_kb_by_role": {r: peak_mkb.get("pss_" + r, 0) for r in ("parent", "worker", "helper")},
            "at_peak_private_dirty_kb_by_role": {r: peak_mkb.get("dirty_" + r, 0)
                                                 for r in ("parent", "worker", "helper")},
            "peak_pss_kb_at_peak_in_flight": max((s["mkb_pss"] for s in at_peak), default=0),
            "pss_kb_per_attempt": (max((s["mkb_pss"] for s in at_peak), default=0) / peak_inflight
                                   if peak_inflight else 0),
            "pss_kb_per_attempt_worst_sample": max((s["mkb_pss"] / s["in_flight"] for s in msmp
                                                    if s["in_flight"] >= 0.9 * peak_inflight),
                                                   default=0),
            "pss_read_every_nth_sample": a.mkb_every,
            "cpu_s": mkb_cpu,
            "cpu_s_parent": root_self,
            "cpu_s_workers": w_self,
            "cpu_s_helpers": h_self,
            "cpu_s_workers_from_ticks": sum(w["ticks"] for w in workers) / TCK,  # all threads
            "cpu_share_per_attempt": mkb_cpu / inflight_s if inflight_s else 0,
        },
        "other": {
            "peak_pss_kb": max((s["other_pss"] for s in smp if s["other_pss"] is not None), default=0),
            "peak_processes": max((s["other_n"] for s in smp), default=0),
            "peak_tmux_servers": max((s["tmux_servers"] for s in smp), default=0),
            "pss_read_every_nth_sample": a.other_every,
            "cpu_s": other_cpu,
            "cpu_s_reaped_by_workers_ticks": sum(w["children"] for w in workers) / TCK,
            "cpu_share_per_attempt": other_cpu / inflight_s if inflight_s else 0,
            "peak_by_comm": sp.peak_by_comm,
        },
        "tree_cpu_s_wait4": total,
        "server_cpu_s": (server1[1] - server0[1]) / TCK if server0 and server1 else None,
        "machine_busy_cores_mean": (busy1 - busy0) / (all1 - all0) * os.cpu_count() if all1 > all0 else 0,
        "left_running": left,
        "series": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items()
                    if k in ("t", "in_flight", "mkb_n", "mkb_pss", "mkb_dirty", "other_n", "other_pss")}
                   for s in smp],
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(rc)


if __name__ == "__main__":
    main()
