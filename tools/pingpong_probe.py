"""Is it the second process? The trusted judge times launch-bound kernels
slower than the old in-process judge (results/h200-judge-trusted.md); this is
the judge's timed loop without the judge: a parent standing for the checker
and a child for the candidate, joined by a SOCK_SEQPACKET pair as they are,
with no sandbox, no shared arenas and no checks. Conditions, one block of
CALLS calls each in turn, ROUNDS rounds, so drift touches them all alike:

  one          the child alone: inputs made just before each call, then the
               call, CALLS times in a row
  one+gap      as one, the child spinning --gap-ms between making the
               inputs and the call (time passing, nothing else: does a call
               get slower the longer since the one before?)
  old          the child alone as the old judge's loop: inputs made, the
               eager reference timed on them, then the call
  pp           each call handed over as the judge does: an empty round trip,
               then a "go"; the parent polls for each reply, the child polls
               for each message, copies a set of inputs made earlier into
               fresh tensors (device to device on a GPU, as out of the
               judge's arena), runs one small kernel (the judge's context
               switch), synchronises and times the call
  pp+block     as pp, the parent sleeping in recv (the judge's default)
  pp+eager     as pp, the parent running the reference on inputs of its own
               (on a GPU in its own CUDA context) before each call, timed as
               the checker times the eager baseline (the "eager ms" column)
  NAME+gap     as NAME, the parent spinning --gap-ms before each call
               instead (time passing, no work of its own)
  NAME+gpusleep  as NAME, the parent keeping the GPU busy for --gap-ms
               (one sleep kernel in its own CUDA context) and waiting for it
  NAME+cpueager  as NAME, the parent running the reference on CPU copies of
               inputs (torch's dispatch on the CPU, no GPU work)
  NAME+prime   as NAME, the child calling solve on the last call's inputs
               when the empty round trip arrives (MKB_JUDGE_PRIME=1)
  NAME+goprime as NAME, the child calling solve on the last call's inputs
               after taking the new ones and before the timed call (a
               diagnosis only: in the judge that call would sit inside the
               call's wall time, where the outside clock cannot tell it apart)
  NAME+arena   as NAME, each call's inputs written by the parent into the
               judge's own input arena (grader/mkb_grader/arena.py: device
               memory shared by descriptor on a GPU, a memfd on the CPU) just
               before the "go", and copied out of it by the child
  NAME+shm     as NAME, every message of the timed loop (round trip, "go",
               reply) through shared memory instead of the socket, each side
               spinning on a sequence number: no system call between two
               calls in the child (is it the waiting's system calls that
               leave the next call cold?); with +block the replies come
               back through the socket, the parent asleep in recv

--pin places the two processes (every condition alike): none (the
default: wherever the scheduler puts them), apart (two different physical
cores, as the judge's --pin-cpus auto), siblings (the two hardware threads
of one physical core: shared L1, L2 and branch predictors), same (one
core; the child then sleeps in recv instead of polling, else it would take
the parent's core: no +shm). Does the checker's torch work, run on the
candidate's core or its sibling, leave the next call warm as the old
judge's one process did?

    python tools/pingpong_probe.py [--kernel K] [--problem-dir D] [--workload smoke]
        [--device cuda|cpu] [--calls 50] [--rounds 3] [--conditions one,pp,...] [--gap-ms 0.15]
        [--pin none|apart|siblings|same] [--json]

Prints one row per condition: the median call of each round (CUDA events
around the call on a GPU, the CPU's clock with --device cpu), the CPU time
inside solve(), and the ratio to "one". Needs no mkb; on a GPU, no DSL
either with a torch kernel (tests/kernels/28_torch_ok.py, the default)."""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "grader"))

DEFAULT_CONDITIONS = ("one,pp,pp+prime,pp+block,pp+block+prime,pp+eager+block,pp+eager+block+prime,"
                      "pp+eager+block+arena,pp+eager+block+prime+arena")
MODIFIERS = ("block", "eager", "gap", "gpusleep", "cpueager", "prime", "goprime", "arena", "shm")
POOL = 4  # input sets the child makes up front and copies from, as from an arena


def place(pin):
    """--pin: (the parent's core, the child's core), or None for none;
    SystemExit where this machine cannot honour it."""
    if pin == "none":
        return None
    from mkb_grader import timing
    allowed = sorted(os.sched_getaffinity(0))
    zero = timing.siblings(0)
    order = [c for c in allowed if c not in zero] or allowed
    child = order[0]
    if pin == "same":
        return child, child
    mates = sorted(timing.siblings(child) - {child})
    if pin == "siblings":
        if not mates:
            raise SystemExit(f"pingpong_probe: core {child} has no hardware-thread sibling here")
        return mates[0], child
    other = [c for c in allowed if c not in timing.siblings(child)]
    if not other:
        raise SystemExit("pingpong_probe: fewer than two physical cores allowed here")
    return (other[1] if len(other) > 1 and other[0] in zero else other[0]), child


def poll(sock):
    """One message, polling without sleeping (the judge's candidate does so
    for its "go"; the parent does so unless the condition says block)."""
    while True:
        try:
            return received(sock.recv(1 << 16, socket.MSG_DONTWAIT))
        except BlockingIOError:
            pass


def received(data):
    """data, unless the other end has gone (an empty message)."""
    if not data:
        raise SystemExit("pingpong_probe: the other process ended (its error is above)")
    return data


def poll_fds(sock):
    """poll, for a message that may carry descriptors (the arena's, the mailboxes)."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2, socket.MSG_DONTWAIT)
            return received(data), fds
        except BlockingIOError:
            pass


def spin(ms):
    """ms of the CPU's time passing, without sleeping."""
    until = time.perf_counter() + ms / 1e3
    while time.perf_counter() < until:
        pass


def wait_fds(sock):
    """poll_fds, asleep in recv until the message comes (--pin same)."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
    return received(data), fds


def send(sock, obj):
    sock.send(json.dumps(obj).encode())


def timed_call(torch, device, fn, inputs):
    """fn(*inputs) timed as the judge times solve: (CUDA events around it
    after a synchronise on a GPU, else the CPU's clock; ms of the CPU's
    clock inside the call)."""
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter()
        fn(*inputs)
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end), (t1 - t0) * 1e3
    t0 = time.perf_counter()
    fn(*inputs)
    t1 = time.perf_counter()
    return (t1 - t0) * 1e3, (t1 - t0) * 1e3


class Child:
    """The candidate's part: the kernel, inputs made once, the calls."""

    def __init__(self, args):
        import torch
        from mkb_grader.problem import Problem, load_module
        self.torch, self.device = torch, args.device
        self.problem = Problem(args.problem_dir, args.workload)
        self.solve = load_module("kernel", args.kernel).solve
        self.pool = [self.problem.make_inputs(5000 + s, self.device)[1] for s in range(POOL)]
        self.last = None
        self.arena = None
        for s in range(10):  # compile and warm up
            self.timed(self.problem.make_inputs(1000 + s, self.device)[1])

    def timed(self, inputs):
        """(events or clock ms, CPU ms inside solve), the judge's way."""
        return timed_call(self.torch, self.device, self.solve, inputs)

    def fresh(self, i):
        """Set i of the pool copied into fresh tensors, then the judge's one
        small kernel and a synchronise (its take_inputs)."""
        torch = self.torch
        out = tuple(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=self.device).copy_(t)
                    if isinstance(t, torch.Tensor) else t for t in self.pool[i % POOL])
        if self.device == "cuda":
            torch.ones(1, device="cuda").add_(1)
        return out

    def serve(self, sock, sleeping=False):
        """Each message in turn until "exit"; sleeping: in recv (--pin
        same), else polling."""
        from mkb_grader import arena
        while True:
            data, fds = wait_fds(sock) if sleeping else poll_fds(sock)
            msg = json.loads(data)
            op = msg["op"]
            if op == "exit":
                return
            if op == "mailbox":  # the timed loop through shared memory until "done"
                send(sock, {})
                from mkb_grader.mailbox import Mailbox
                self.serve_shm(Mailbox(fds[0], writer=False),
                               Mailbox(fds[1], writer=True) if len(fds) > 1 else None, sock)
                continue
            if op == "arena":
                self.arena = arena.make(msg["size"], msg["where"], fds[0])
                if self.device == "cuda":
                    self.arena.pin()
                send(sock, {})
                continue
            if op == "one":
                rows = []
                for k in range(msg["calls"]):
                    inputs = self.problem.make_inputs(msg["seed"] + k, self.device)[1]
                    spin(msg.get("gap_ms", 0))
                    rows.append(self.timed(inputs))
                send(sock, {"rows": rows})
            elif op == "old":  # the old judge's loop: inputs, the eager reference, the call
                rows = []
                for k in range(msg["calls"]):
                    inputs = self.problem.make_inputs(msg["seed"] + k, self.device)[1]
                    eager, _ = timed_call(self.torch, self.device, self.problem.reference, inputs)
                    rows.append((*self.timed(inputs), eager))
                send(sock, {"rows": rows})
            else:
                send(sock, self.step(msg))

    def serve_shm(self, box, replies, sock):
        """+shm: the parent's messages from box, the replies into the
        replies box (None: through the socket)."""
        def alive():  # the parent gone: its end of the socket reads empty
            try:
                return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except BlockingIOError:
                return True

        while True:
            msg = box.get(alive=alive)
            if msg is None:
                raise SystemExit("pingpong_probe: the other process ended (its error is above)")
            if msg["op"] == "done":
                return
            reply = self.step(msg)
            if replies is None:
                send(sock, reply)
            else:
                replies.put(reply)

    def step(self, msg):
        """An "rt" (empty round trip) or a "go" (one timed call): the reply."""
        from mkb_grader import arena
        if msg["op"] == "rt":
            if msg.get("prime") and self.last is not None:
                self.timed(self.last)
            return {}
        if "desc" in msg:  # out of the arena, as the judge's take_inputs
            got = arena.materialise(self.arena, msg["desc"], self.device)
            inputs = tuple(got) if isinstance(got, (list, tuple)) else (got,)
            if self.device == "cuda":
                self.torch.ones(1, device="cuda").add_(1)
        else:
            inputs = self.fresh(msg["i"])
        if msg.get("goprime") and self.last is not None:
            self.timed(self.last)
        ms, cpu = self.timed(inputs)
        self.last = inputs
        return {"row": [ms, cpu]}


def parent(args):
    import torch
    from mkb_grader import arena
    from mkb_grader.problem import Problem
    problem = Problem(args.problem_dir, args.workload)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cores = place(args.pin)
    if cores is not None:
        os.sched_setaffinity(0, {cores[0]})
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(theirs.fileno()),
                              "--kernel", args.kernel, "--problem-dir", args.problem_dir,
                              "--workload", args.workload, "--device", args.device, "--pin", args.pin],
                             pass_fds=(theirs.fileno(),),
                             preexec_fn=None if cores is None else (lambda: os.sched_setaffinity(0, {cores[1]})))
    theirs.close()
    received(mine.recv(1 << 16))  # ready (blocking: the child's start-up is long)
    names = [n.strip() for n in args.conditions.split(",") if n.strip()]
    shared, pool = None, []
    if any("+arena" in n for n in names):
        pool = [problem.make_inputs(5000 + s, args.device)[1] for s in range(POOL)]
        plans = [arena.plan(x) for x in pool]
        where = "gpu" if args.device == "cuda" else "host"
        try:
            shared = arena.make(max(size for _, size in plans), where)
        except Exception as exc:  # noqa: BLE001 - the other conditions still run
            print(f"no {where} arena ({exc}): the +arena conditions are left out", file=sys.stderr)
            names = [n for n in names if "+arena" not in n]
    if shared is not None:
        socket.send_fds(mine, [json.dumps({"op": "arena", "size": shared.size, "where": where}).encode()],
                        [shared.fd])
        received(mine.recv(1 << 16))
    # cycles of torch.cuda._sleep for --gap-ms at the GPU's top clock
    sleep_cycles = int(args.gap_ms * 1e-3 * torch.cuda.get_device_properties(0).clock_rate * 1e3) \
        if args.device == "cuda" else 0
    cpu_inputs = [problem.make_inputs(7000 + s, "cpu")[1] for s in range(POOL)] \
        if any("+cpueager" in n for n in names) else []
    rows = {n: [] for n in names}  # condition -> per round: [(ms, cpu)]
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def block(name, r):
        if name.split("+")[0] in ("one", "old"):
            send(mine, {"op": name.split("+")[0], "seed": 100_000 * (r + 1), "calls": args.calls,
                        "gap_ms": args.gap_ms if "+gap" in name else 0})
            return [tuple(x) for x in json.loads(poll(mine))["rows"]]
        blocking, prime, eager = "+block" in name, "+prime" in name, "+eager" in name
        goprime = "+goprime" in name
        through = "+arena" in name
        gap, gpusleep, cpueager = "+gap" in name, "+gpusleep" in name, "+cpueager" in name
        recv = (lambda: received(mine.recv(1 << 16))) if blocking else (lambda: poll(mine))
        ask = lambda m: (send(mine, m), json.loads(recv()))[1]  # noqa: E731
        if "+shm" in name:
            # the judge's own boxes (grader/mkb_grader/mailbox.py); replies
            # through a second one unless the parent sleeps in recv
            from mkb_grader.mailbox import Mailbox
            box = Mailbox.make(checker_writes=True)
            back = None if blocking else Mailbox.make(checker_writes=False)
            socket.send_fds(mine, [json.dumps({"op": "mailbox"}).encode()],
                            [box.fd] + ([back.fd] if back else []))
            received(mine.recv(1 << 16))
            if blocking:
                ask = lambda m: (box.put(m), json.loads(recv()))[1]  # noqa: E731
            else:
                ask = lambda m: (box.put(m), back.get())[1]  # noqa: E731
        got = []
        for i in range(args.calls):
            eager_ms = None
            if eager:  # timed as the checker times the eager baseline
                _, inputs = problem.make_inputs(200_000 + i, args.device)
                eager_ms, _ = timed_call(torch, args.device, problem.reference, inputs)
            if gap:
                spin(args.gap_ms)
            if gpusleep:
                torch.cuda._sleep(sleep_cycles)
                sync()
            if cpueager:
                problem.reference(*cpu_inputs[i % POOL])
            ask({"op": "rt", "prime": prime})
            go = {"op": "go", "i": i, "goprime": goprime}
            if through:  # the judge's stage_inputs, then the inputs travel with the "go"
                desc = plans[i % POOL][0]
                arena.write(shared, pool[i % POOL], desc)
                sync()
                go["desc"] = desc
            got.append((*ask(go)["row"], eager_ms))
        if "+shm" in name:
            box.put({"op": "done"})
            for b in (box, back):
                if b is not None:
                    b.close()
        return got

    for r in range(args.rounds):
        for name in names:
            rows[name].append(block(name, r))
    send(mine, {"op": "exit"})
    child.wait()
    if shared is not None:
        shared.close()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default=os.path.join(ROOT, "tests/kernels/28_torch_ok.py"))
    ap.add_argument("--problem-dir", default=os.path.join(ROOT, "problems/mlp_norm/28_fused_add_rmsnorm"))
    ap.add_argument("--workload", default="smoke")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conditions", default=DEFAULT_CONDITIONS)
    ap.add_argument("--gap-ms", type=float, default=0.15, help="+gap and +gpusleep: how long")
    ap.add_argument("--pin", default="none", choices=("none", "apart", "siblings", "same"),
                    help="where the two processes run (see above)")
    ap.add_argument("--json", action="store_true", help="also one JSON line per condition")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for name in (n.strip() for n in args.conditions.split(",") if n.strip()):
        base, *mods = name.split("+")
        if base not in ("one", "old", "pp") or any(m not in MODIFIERS for m in mods) \
                or (base == "old" and mods) or (base == "one" and mods not in ([], ["gap"])):
            ap.error(f"unknown condition {name!r}: one, one+gap, old, or pp with "
                     + ", ".join("+" + m for m in MODIFIERS))
        if "gpusleep" in mods and args.device != "cuda":
            ap.error(f"condition {name!r}: +gpusleep needs --device cuda")
        if "shm" in mods and args.pin == "same":
            ap.error(f"condition {name!r}: +shm spins, and with --pin same would take the other's core")
    if args.child is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=args.child)
        child = Child(args)
        send(sock, {"ready": True})
        child.serve(sock, sleeping=args.pin == "same")
        return 0
    rows = parent(args)
    base = statistics.median(statistics.median(x[0] for x in blk) for blk in rows["one"]) \
        if "one" in rows else None
    import torch
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu ({os.cpu_count()} cores)"
    print(f"{where}  {os.path.relpath(args.kernel, ROOT)}  {args.workload}  "
          f"{args.calls} calls x {args.rounds} rounds  pin {args.pin}  ({time.strftime('%Y-%m-%d %H:%M:%S')} UTC)")
    print("| condition | median ms, each round | CPU in solve() ms | / one | eager ms |")
    print("|---|---|---|---|---|")
    for name, blocks in rows.items():
        meds = [statistics.median(x[0] for x in blk) for blk in blocks]
        cpu = statistics.median(x[1] for blk in blocks for x in blk)
        eager = [x[2] for blk in blocks for x in blk if len(x) > 2 and x[2] is not None]
        eager = statistics.median(eager) if eager else None
        ratio = f"{statistics.median(meds) / base:.2f}" if base else "-"
        print(f"| {name} | {' '.join(f'{m:.4f}' for m in meds)} | {cpu:.4f} | {ratio} | "
              f"{'-' if eager is None else f'{eager:.4f}'} |")
        if args.json:
            print(json.dumps({"condition": name, "kernel": os.path.relpath(args.kernel, ROOT),
                              "workload": args.workload, "device": where, "pin": args.pin, "round_medians_ms": meds,
                              "cpu_in_solve_ms": cpu, "eager_ms": eager}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
