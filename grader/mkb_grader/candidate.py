"""python -m mkb_grader.candidate: the candidate process, the only process that
imports kernel.py. The judge starts it confined (src/sandbox.c) with one end
of a SOCK_SEQPACKET pair as fd $MKB_PEER_FD; the checker on the other end
decides everything. Nothing here is trusted: a kernel can rewrite any of it,
which is why it holds no seed, no reference output, no verdict channel and
no knowledge of which calls are checked (every call is).

Messages from the checker, one reply each:
  {"op": "arena", "where": "gpu"|"host",             map the shared arenas (device
   "in": bytes, "out": bytes} + 2 fds                 memory, else a memfd); where the
                                                      device memory cannot be mapped the
                                                      reply says {"mapped": false, "why"}
  {"op": "import", "kernel": path, "device": d,       import kernel.py, find solve;
   "cpu": core (optional),                             with cpu, on that core first;
   "layout": true (optional)}                          with layout, its process_layout()
  {"op": "go", "call": true, "inputs": description,  fresh tensors on the device from
   "slots": [[off, n], ...], "warm": bool,             the input arena (with warm, GPU
   "spin": seconds, "keep": bool}                      work their size after them), then
                                                      time solve on them and export its
                                                      output into the slots
   (diagnosis: "repeat": true, solve again on them right after, timed, dropped)
  {"op": "go", "call": false, "spin": s, "keep": b}   nothing (the checker's empty
                                                      round trip before a call)
   (with "prime": true, solve on the last call's inputs first, output dropped;
    a call with "prime" keeps its inputs for that)
  Any message with "spin": after answering, wait for the next one polling
  without sleeping for at most that long (with keep, the GPU kept busy).
  {"op": "gc", "freeze": true}                         no garbage collection until
                                                      the next import
  {"op": "mailbox"} + 1 or 2 fds                       the checker's messages come
                                                      through the first box from the
                                                      next one on, and with a second,
                                                      the replies go through it
                                                      (mailbox.py; "mapped": false and
                                                      "why" where they cannot be mapped);
                                                      answered through the socket
  {"op": "mailbox", "off": true} (through the box)     back to the socket
  {"op": "launch", "dry": bool} + 2 fds                (before import) the launch
                                                      recorder for cuInit: {"installed"}
  {"op": "loop", "inputs": description, "calls": n}   (diagnosis) n calls of solve back
                                                      to back, each on a fresh copy of
                                                      these inputs made just before it:
                                                      {"ms": their median}
  {"op": "probe"}                                      this core's speed now
                                                      (timing.host_probe: py_ms,
                                                      torch_ms, cpu)
Replies: {"ok": true, ...} or {"error": text, "cuda": bool, "where": stage}.
Before the first request it announces {"ok": true, "ready": true} once torch
is imported, so start-up is not charged to the kernel's time."""
import os
import sys
import time

CUDA_ERROR_MARKERS = ("CUDA error", "CUDA_ERROR", "cudaError", "illegal memory access",
                      "illegal address", "unspecified launch failure", "misaligned address",
                      "device-side assert", "AcceleratorError")


def failure(exc, where):
    from .protocol import describe_exception
    text = f"{type(exc).__name__}: {exc}"
    return {"error": describe_exception(exc), "cuda": any(m in text for m in CUDA_ERROR_MARKERS),
            "where": where}


class Runner:
    def __init__(self, peer):
        import torch
        import torch._dynamo  # slow to import: start-up, not the kernel's time
        # TorchDynamo is off (PROTOCOL.md): torch.compile in a kernel runs eagerly.
        torch._dynamo.config.disable = True
        self.torch = torch
        self.peer = peer
        self.arena_in = self.arena_out = None
        self.device = "cpu"
        self.solve = None
        self.scratch = None
        self.keep_event = None
        self.arrived_at = self.answered_at = None  # the "wait" phase of a call
        self.last_inputs = None  # (prime) the last call's inputs
        self.solved_at = None  # when solve last returned: the "since" phase of a call
        self.affinity = None  # this thread's cores before it was pinned
        self.switch = None  # (box in, box out) to use once a mailbox message is answered

    def op_arena(self, msg, fds):
        from . import arena, vmm
        if len(fds) != 2:
            return {"error": "arena message without its two descriptors", "cuda": False}
        where = "gpu" if msg.get("where") == "gpu" else "host"
        unmappable = (vmm.VmmError, RuntimeError) if where == "gpu" else vmm.VmmError
        try:
            new_in = arena.make(msg["in"], where, fds[0])
        except unmappable as exc:
            for fd in fds:
                os.close(fd)
            return {"ok": True, "mapped": False, "why": str(exc)}
        try:
            new_out = arena.make(msg["out"], where, fds[1])
        except unmappable as exc:
            new_in.close()
            os.close(fds[1])
            return {"ok": True, "mapped": False, "why": str(exc)}
        for a in (self.arena_in, self.arena_out):
            if a is not None:
                a.close()
        self.arena_in, self.arena_out = new_in, new_out
        if self.device == "cuda":
            self.arena_in.pin()
            self.arena_out.pin()
        return {"ok": True, "pinned": self.arena_in.pinned and self.arena_out.pinned}

    def pin(self, cpu):
        """(docs/judge.md "Noise") This thread, which calls solve, and every
        thread it starts from now on, on the one core the checker chose;
        without one, back on the cores it started with (a process reused
        across evaluations, grader/mkb_grader/local.py). Before kernel.py is
        loaded, so what it allocates at import is near that core."""
        if self.affinity is None:
            self.affinity = os.sched_getaffinity(0)
        try:
            os.sched_setaffinity(0, self.affinity if cpu is None else {int(cpu)})
        except (OSError, ValueError, TypeError) as exc:
            return {"cpu_error": str(exc)[:200]}
        return {} if cpu is None else {"cpu": sorted(os.sched_getaffinity(0))}

    def op_mailbox(self, msg, fds):
        """The checker's messages through shared memory from the next one
        on (MKB_JUDGE_GO=mailbox; with a second descriptor, this process's
        replies too: MKB_JUDGE_REPLY=mailbox), or, with "off", through the
        socket again. The reply to this message itself goes through the
        socket, and the switch happens after it (serve)."""
        from .mailbox import Mailbox, MailboxError
        if msg.get("off"):
            self.switch = (None, None)
            return {"ok": True, "mapped": False}
        if len(fds) not in (1, 2):
            for fd in fds:
                os.close(fd)
            return {"error": "mailbox message without its descriptors", "cuda": False}
        made = []
        try:
            for fd, writer in zip(fds, (False, True)):
                made.append(Mailbox(fd, writer=writer))
        except MailboxError as exc:
            for box in made:
                box.close()
            for fd in fds[len(made):]:
                os.close(fd)
            return {"ok": True, "mapped": False, "why": str(exc)[:200]}
        self.switch = (made[0], made[1] if len(made) > 1 else None)
        return {"ok": True, "mapped": True}

    def apply_switch(self):
        """After answering a mailbox message: its boxes in use, the old ones closed."""
        (box_in, box_out), self.switch = self.switch, None
        for old in (self.peer.box_in, self.peer.box_out):
            if old is not None and old not in (box_in, box_out):
                old.close()
        self.peer.box_in, self.peer.box_out = box_in, box_out

    def op_gc(self, msg, fds):
        import gc
        gc.collect()
        gc.freeze()
        gc.disable()
        return {"ok": True, "gc": "frozen"}

    def op_launch(self, msg, fds):
        """Install the launch recorder (docs/launch-attribution.md) for the
        cuInit in the import: fds are the far end of the checker's launch
        socket and a sealed copy of build/libmkb_launch.so. CUDA's driver
        loads the library named by CUDA_INJECTION64_PATH and it writes to
        MKB_LAUNCH_FD; nothing of it passes through this process's Python
        afterwards. With dry (tests on a machine without a GPU, where no
        cuInit comes) the library is started here instead, without CUPTI."""
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            return {"error": "launch message without its two descriptors", "cuda": False}
        channel, library = fds
        if self.torch.cuda.is_initialized():  # a process reused across evaluations (local.py)
            os.close(channel)
            os.close(library)
            return {"ok": True, "installed": False,
                    "why": "CUDA was initialised in this process before the recorder could be installed"}
        path = f"/proc/self/fd/{library}"
        os.environ["MKB_LAUNCH_FD"] = str(channel)
        os.environ["CUDA_INJECTION64_PATH"] = path
        import ctypes
        try:
            lib = ctypes.CDLL(path)  # the driver's dlopen at cuInit then finds this copy
            if msg.get("dry"):
                os.environ["MKB_LAUNCH_DRY"] = "1"
                lib.InitializeInjection()
        except (OSError, AttributeError) as exc:
            return {"ok": True, "installed": False, "why": f"cannot load the recorder: {exc}"[:300]}
        return {"ok": True, "installed": True}

    def op_loop(self, msg, fds):
        """(diagnosis: MKB_JUDGE_LOOP=N) The old judge's loop inside this
        process: a fresh copy of the inputs made just before each call (as
        it made inputs), then the call, timed as a timed call is; outputs
        dropped. The median says what a call costs with no hand-over."""
        import statistics
        from .correctness import clone_inputs
        try:
            base = self.take_inputs(msg)
            times = []
            for _ in range(max(1, min(int(msg.get("calls", 1)), 1000))):
                inputs = clone_inputs(base)
                _, ms, _, _ = self.timed_solve(inputs)
                times.append(ms)
                del inputs
        except Exception as exc:
            return failure(exc, "loop")
        return {"ok": True, "ms": statistics.median(times)}

    def op_probe(self, msg, fds):
        from .timing import host_probe
        return {"ok": True, **host_probe()}

    def op_import(self, msg, fds):
        from .problem import load_module
        import gc
        torch = self.torch
        gc.unfreeze()  # the collector as it was, whatever an earlier evaluation asked
        self.last_inputs = None
        gc.enable()
        pinned = self.pin(msg.get("cpu"))
        self.device = msg.get("device", "cpu")
        if self.device == "cuda":
            torch.cuda.init()
        kernel = msg["kernel"]
        sys.path.insert(0, os.path.dirname(os.path.abspath(kernel)))
        try:
            module = load_module("kernel", kernel)
        except BaseException as exc:  # SystemExit from a kernel is its failure too
            return failure(exc, "import")
        solve = getattr(module, "solve", None)
        if not callable(solve):
            return {"error": "kernel.py defines no solve()", "cuda": False, "where": "import"}
        self.solve = torch._dynamo.disable(solve, recursive=True)
        if msg.get("layout"):
            from .timing import process_layout
            pinned["layout"] = process_layout()
        return {"ok": True, **pinned}

    def take_inputs(self, msg):
        """The call's inputs: fresh tensors on the device from the input
        arena. Made inside the "go" that times the call, so the checker's
        clock is running from the moment this process is told of them: no
        work on them can be done before it starts (docs/judge.md, guarantee
        4)."""
        from .arena import materialise
        inputs = materialise(self.arena_in, msg["inputs"], self.device)
        if self.device == "cuda":
            # One small kernel of ours: the GPU's compute engine switches
            # to this process's context now (the copies above ran on the
            # copy engine), not inside the timed window (~0.1 ms on the H200).
            self.torch.ones(1, device="cuda").add_(1)
            if msg.get("warm") == "touch":
                self.touch(inputs)
            elif msg.get("warm"):
                self.warm_up(inputs)
        return tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)

    def touch(self, inputs):
        """Rewrite every input in place on the GPU, in order, as making them
        on the GPU just before each call did in the paper's harness: the
        inputs written last sit in the L2 cache and the GPU is busy when the
        call starts (results/h200-judge-trusted.md, session 11)."""
        torch = self.torch
        items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        for t in items:
            if isinstance(t, torch.Tensor) and t.is_cuda and t.numel():
                t.copy_(t.clone())

    def warm_up(self, inputs):
        """GPU work the size of the inputs, as the paper's harness did in
        making them on the GPU just before each call (an idle GPU runs the
        next kernel slower: results/h200-judge-trusted.md, session 10)."""
        torch = self.torch
        items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        n = sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor)) // 4
        n = max(1, min(n, 1 << 28))
        if self.scratch is None or self.scratch.numel() < n:
            self.scratch = torch.empty(n, dtype=torch.float32, device="cuda")
        self.scratch[:n].normal_()

    def keep_busy(self):
        """(diagnosis: MKB_JUDGE_KEEP=1) between the empty round trip and the call, a
        ~10 us GPU sleep whenever the last one has finished, so the GPU is
        not idle when the call starts, as after making the inputs on it in
        the paper's harness; the call's synchronise waits at most one."""
        torch = self.torch
        if self.keep_event is None or self.keep_event.query():
            torch.cuda._sleep(20_000)
            self.keep_event = torch.cuda.Event()
            self.keep_event.record()

    def op_go(self, msg, fds):
        from .arena import export
        torch = self.torch
        cuda = self.device == "cuda"
        t_in = time.perf_counter()
        # from this process's previous answer to this message's arrival: how
        # long solve's caller sat waiting (the candidate's word, diagnosis)
        wait = (self.arrived_at - self.answered_at) * 1e3 if self.answered_at else None
        inputs = None
        if msg.get("call", True):
            if "inputs" not in msg:
                return {"error": "go without inputs", "cuda": False}
            try:
                inputs = self.take_inputs(msg)
            except Exception as exc:
                return failure(exc, "inputs")
        t_ready = time.perf_counter()
        last = self.solved_at
        try:
            out, ms, t0, t1 = self.timed_solve(inputs if msg.get("call", True) else None)
        except Exception as exc:
            return failure(exc, "solve")
        # since: from the end of this process's last call of solve (a
        # warm-up's, the one before, a prime's) to the start of this one;
        # the longer, the colder the call (results/h200-judge-trusted.md,
        # session 28)
        since = (t0 - last) * 1e3 if last is not None else None
        t2 = time.perf_counter()
        repeat = self.repeat(inputs) if msg.get("repeat") and msg.get("call", True) else {}
        t_export = time.perf_counter()
        if not msg.get("call", True):
            # (MKB_JUDGE_PRIME=1) the solve on the last inputs after the empty
            # call's own synchronisations, just before the answer: the next
            # call then follows it by the answer, the inputs' write and the
            # "go" only
            primed = self.prime() if msg.get("prime") else {}
            return {"ok": True, "ms": ms, **primed}
        self.last_inputs = inputs if msg.get("prime") else None
        del inputs
        try:
            desc = export(self.arena_out, out, [tuple(s) for s in msg.get("slots", [])])
            if cuda:
                torch.cuda.synchronize()
        except Exception as exc:
            return failure(exc, "output transfer")
        t3 = time.perf_counter()
        # where the call's time went by this process's clock (diagnosis of
        # the outside clock's excess over the events; the candidate's word)
        phases = {"before": (t0 - t_in) * 1e3, "solve": (t1 - t0) * 1e3, "drain": (t2 - t1) * 1e3,
                  "export": (t3 - t_export) * 1e3, "wait": wait, "inputs": (t_ready - t_in) * 1e3,
                  "since": since, **repeat}
        return {"ok": True, "ms": ms, "cpu_ms": (t1 - t0) * 1e3, "out": desc, "phases": phases}

    def timed_solve(self, inputs):
        """One call of solve on inputs (None: no call, the checker's empty
        round trip), timed the paper's way: CUDA events around it after a
        synchronise on a GPU, this process's clock on the CPU. (output, ms,
        clock before the call, clock after it)."""
        torch = self.torch
        if self.device == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            t0 = time.perf_counter()
            out = self.solve(*inputs) if inputs is not None else None
            t1 = time.perf_counter()
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            out = self.solve(*inputs) if inputs is not None else None
            t1 = time.perf_counter()
            ms = (t1 - t0) * 1e3
        if inputs is not None:
            self.solved_at = t1
        return out, ms, t0, t1

    def repeat(self, inputs):
        """(diagnosis: MKB_JUDGE_REPEAT=1) solve again on the same inputs
        right after the timed call, timed the same way, its output dropped:
        what the call costs when the one before it ran just now, as in the
        paper's one-process loop. {"repeat": ms, "repeat_wall": ms of this
        process's clock, which the checker takes off the call's wall time}."""
        w0 = time.perf_counter()
        try:
            _, ms, _, _ = self.timed_solve(inputs)
        except Exception:  # the timed call succeeded: the diagnosis is simply missing
            return {}
        return {"repeat": ms, "repeat_wall": (time.perf_counter() - w0) * 1e3}

    def prime(self):
        """(diagnosis: MKB_JUDGE_PRIME=1) before the empty round trip's
        answer, solve on the last call's inputs, timed the same way, output
        dropped: the next call then follows a call of solve by well under a
        millisecond, as each call followed the one before it in the paper's
        one-process loop, where this process otherwise sat idle while the
        checker ran the eager baseline. {"prime": ms, "prime_wall": ms of
        this process's clock, which the checker takes off the round trip
        (the candidate's word, but the round trip is capped either way)}."""
        inputs, self.last_inputs = self.last_inputs, None
        if inputs is None:
            return {}
        w0 = time.perf_counter()
        try:
            _, ms, _, _ = self.timed_solve(inputs)
        except Exception:  # the call that follows shows any failure
            return {}
        return {"prime": ms, "prime_wall": (time.perf_counter() - w0) * 1e3}

    def serve(self):
        from .wire import PeerLost
        ops = {"arena": self.op_arena, "import": self.op_import, "go": self.op_go,
               "gc": self.op_gc, "launch": self.op_launch, "mailbox": self.op_mailbox,
               "probe": self.op_probe, "loop": self.op_loop}
        spin, keep = 0.0, False
        while True:
            try:
                msg, fds = self.peer.recv(spin=spin, idle=self.keep_busy if keep else None)
            except PeerLost:
                return 0
            self.arrived_at = time.perf_counter()
            # A message may ask this process to poll for the next one without
            # sleeping ("spin" seconds at most): the checker sends it before
            # a call, whose "go" then follows within microseconds, so solve's
            # Python dispatch does not start on a core that slept
            # (docs/judge.md "Timing"); with keep, the GPU is kept busy
            # meanwhile.
            spin = float(msg.get("spin") or 0)
            keep = bool(msg.get("keep")) and spin > 0 and self.device == "cuda"
            op = ops.get(msg.get("op"))
            if op is None:
                if msg.get("op") == "exit":
                    return 0
                reply = {"error": f"unknown op {msg.get('op')!r}", "cuda": False}
            else:
                reply = op(msg, fds)
            self.peer.send(reply, socket_only=msg.get("op") == "mailbox")
            if self.switch is not None:
                self.apply_switch()
            self.answered_at = time.perf_counter()


def main():
    import faulthandler
    faulthandler.enable()
    # Prints from the kernel go to stderr with everything else it writes.
    os.dup2(2, 1)
    from .wire import Peer
    fd = int(os.environ.get("MKB_PEER_FD", "3"))
    peer = Peer(fd, accept_fds=True)
    runner = Runner(peer)  # imports torch: start-up, not the kernel's time
    from .protocol import VERSION
    peer.send({"ok": True, "ready": True, "protocol": VERSION})
    return runner.serve()


if __name__ == "__main__":
    sys.exit(main())
