"""Launch attribution, checker side (docs/launch-attribution.md): the run-time
DSL rules of PROTOCOL.md ("What the kernel may do").

The recorder (build/libmkb_launch.so) runs inside the candidate process,
loaded by CUDA's driver at cuInit, and writes one sealed JSON line per
datagram on a SOCK_SEQPACKET socket whose other end only the checker holds.
Nothing here goes through the candidate's Python objects:

  Channel  the socket: made here, its far end and a sealed copy of the
           library handed to the candidate before kernel.py is imported; a
           thread drains it (the recorder must never block on a full
           socket); the checker marks each call's start and end by commands
           on it ("begin <n>", "end <n>"), which the recorder's own thread
           reads: the kernel's code cannot send one.
  Log      parses lines (pure: the unit tests feed it synthetic lines): the
           seal (every line carries this evaluation's tag and the next
           sequence number), the markers, the kernels of each call, the loss
           counters.
  broken   the rules, for one call's kernels: a kernel of the variant's DSL
           (by its origin, not by its name), no vendor library, no other JIT
           (the other DSL counts as one); torch's own kernels are glue,
           allowed, their share of device time reported.

What a finding means for the verdict:
  Tampered    lines without this evaluation's tag, out of sequence, or
              markers the checker did not send: only the kernel can write
              on that socket or call the recorder's functions -> rejected.
  Incomplete  the recorder lost records (its loss counters grew) or went
              silent: not attributable -> infra_error when enforcing.
  RuleBroken  a rule, named, with the offending kernel -> rejected.

Evidence, not proof: code that reads or writes its own process's memory can
silence or steer the recorder (docs/launch-attribution.md, "Trust")."""
import collections
import json
import os
import secrets
import socket
import threading
import time

MODES = ("enforce", "record", "off")
CLASSES = ("dsl_cutedsl", "dsl_tirx", "torch_native", "vendor_library", "other_jit")
LOSS_KEYS = ("dropped", "refused_buffers", "unmatched", "table_full", "cut_lines", "lost_lines",
             "cupti_errors")
HELLO_VERSION = 2
LINE_MAX = 4096          # the recorder's own bound (src/launchlog/jsonl.h)
# Raw bytes the drain thread keeps between two reads by the checker: far
# above any honest call (a kernel line is under 4 KB), a cap on a flood.
PENDING_CAP = 256 << 20
# How long the checker waits for the recorder's answer to a marker (its
# end flushes CUPTI's buffers: milliseconds).
MARK_TIMEOUT_S = 20.0
HELLO_TIMEOUT_S = 10.0
NAMES_PER_CLASS = 6      # distinct kernel names kept per class in the verdict

RULES = {
    "dsl": "a kernel of the variant's DSL in every solve call",
    "vendor": "no vendor-library kernels (cuBLAS, cuDNN, flash attention, torch's CUTLASS)",
    "other_jit": "no other JIT (Triton, NVRTC, inline extensions, the other DSL)",
    "dsl_share": "the work done in the variant's DSL (its kernels' share of each call's kernel time)",
}
DSL_CLASS = {"cutedsl": "dsl_cutedsl", "tirx": "dsl_tirx"}
DSL_NAME = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}


class Tampered(Exception):
    """The records show the kernel's hand: forged, reordered or marked by it."""


class Incomplete(Exception):
    """The records of a call are not complete (losses, silence)."""


class RuleBroken(Exception):
    def __init__(self, rule, detail):
        super().__init__(f"{RULES[rule]}: {detail}")
        self.rule = rule
        self.detail = detail


def library_path():
    """The recorder the checker hands over: $MKB_LAUNCH_LIBRARY, else the
    repository's build/libmkb_launch.so (beside grader/); None if absent."""
    path = os.environ.get("MKB_LAUNCH_LIBRARY")
    if not path:
        grader = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.join(os.path.dirname(grader), "build", "libmkb_launch.so")
    return path if os.path.isfile(path) else None


def short_name(kernel):
    """A kernel's name for people: demangled when known, without 'void ',
    template arguments and parameters; at most 90 characters."""
    name = kernel.get("demangled") or kernel.get("name") or "?"
    if name.startswith("void "):
        name = name[5:]
    for stop in ("<", "("):
        i = name.find(stop)
        if i > 0:
            name = name[:i]
    return name if len(name) <= 90 else name[:87] + "..."


def name_only(kernel):
    """A class the classifier gave from the name alone (origin unknown):
    the author chose the name, so it is no DSL evidence."""
    return str(kernel.get("rule") or "").startswith("name only")


class Call:
    """One solve call's records."""

    def __init__(self, call):
        self.call = call
        self.kernels = []
        self.end = None
        self.late = []   # kernel lines that came after its end line
        self.grown = {}  # loss counters that grew since the last end line
        self.count_mismatch = False

    def ns(self):
        out = dict.fromkeys(CLASSES, 0)
        for k in self.kernels:
            out[k["class"]] += k["ns"]
        return out

    def device_ms(self):
        """GPU time of the call's kernels (every class), summed from their
        activity records; None when none was recorded. Not end to end: no
        gaps between kernels, no host dispatch."""
        return sum(k["ns"] for k in self.kernels) / 1e6 if self.kernels else None


class Log:
    """The sealed line stream of one recorder. feed() takes one datagram;
    the first problem with the stream is kept in .tampered (it stays so)."""

    def __init__(self, tag, dry_ok=False):
        self.tag = tag
        self.dry_ok = dry_ok
        self.seq = 0
        self.hello = None
        self.tampered = None
        self.errors = []        # the recorder's own error lines (first 20)
        self.modules = {}       # origin -> module line (first 4096)
        self.calls = {}         # call id -> Call
        self.open_call = None   # the call between its begin and end lines
        self.expected = collections.deque()  # markers the checker sent, in order
        self.outside = collections.Counter()  # class -> kernels at call 0 after the first call
        self.outside_names = {}
        self.started = False    # a begin has been seen
        self.losses = dict.fromkeys(LOSS_KEYS, 0)
        self.late_new = []      # kernels of calls already ended, not yet judged

    def _tamper(self, why):
        if self.tampered is None:
            self.tampered = why

    def expect(self, kind, call):
        """The checker is about to send marker (kind, call)."""
        self.expected.append((kind, call))
        if kind == "begin":
            self.calls.setdefault(call, Call(call))

    def feed(self, raw):
        if self.tampered is not None:
            return
        if len(raw) > LINE_MAX:
            return self._tamper(f"a {len(raw)}-byte line on the launch channel (the recorder's are under {LINE_MAX})")
        try:
            line = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return self._tamper(f"a line on the launch channel that is not JSON: {raw[:80]!r}")
        if not isinstance(line, dict):
            return self._tamper("a line on the launch channel that is not an object")
        if line.get("tag") != self.tag:
            return self._tamper(f"a {str(line.get('t'))[:20]!r} line without this evaluation's seal "
                                "(not written by the recorder)")
        if line.get("seq") != self.seq:
            return self._tamper(f"line {line.get('seq')!r} where line {self.seq} was due "
                                "(a line lost or written twice)")
        self.seq += 1
        kind = line.get("t")
        handler = getattr(self, "_on_" + str(kind), None) if kind in (
            "hello", "module", "kernel", "begin", "end", "error", "bye") else None
        if handler:
            handler(line)

    def _on_hello(self, line):
        if line.get("seq") != 0 or self.hello is not None:
            return self._tamper("a second hello")
        if line.get("v") != HELLO_VERSION:
            return self._tamper(f"hello of version {line.get('v')!r}, expected {HELLO_VERSION}")
        if line.get("dry") and not self.dry_ok:
            return self._tamper("a dry-run recorder (MKB_LAUNCH_DRY) where a recording one was loaded")
        self.hello = line

    def _on_module(self, line):
        if len(self.modules) < 4096:
            self.modules[line.get("origin")] = line

    def _on_error(self, line):
        if len(self.errors) < 20:
            self.errors.append({k: line.get(k) for k in ("what", "code", "text")})

    def _on_bye(self, line):
        pass

    def _marker(self, line):
        kind, call = line.get("t"), line.get("call")
        if line.get("via") != "checker":
            return self._tamper(f"{kind} of call {call} through the recorder's exported function "
                                "(called by the kernel, not by the checker)")
        if not self.expected or self.expected[0] != (kind, call):
            return self._tamper(f"{kind} of call {call} that the checker did not send")
        self.expected.popleft()
        return True

    def _on_begin(self, line):
        if self._marker(line):
            self.open_call = line["call"]
            self.started = True

    def _on_end(self, line):
        if not self._marker(line):
            return
        call = self.calls.setdefault(line["call"], Call(line["call"]))
        call.end = line
        self.open_call = None
        if not line.get("matched"):
            return self._tamper(f"end of call {line['call']} without its begin (the current call was changed)")
        grown = {k: int(line.get(k) or 0) - self.losses[k] for k in LOSS_KEYS
                 if isinstance(line.get(k), int) and line.get(k) > self.losses[k]}
        for k in LOSS_KEYS:
            if isinstance(line.get(k), int):
                self.losses[k] = max(self.losses[k], line[k])
        call.grown = grown
        kernels = line.get("kernels")
        call.count_mismatch = isinstance(kernels, int) and kernels != len(call.kernels)

    def _on_kernel(self, line):
        cls = line.get("class")
        if cls not in CLASSES:
            cls = "other_jit"  # fail closed
        try:
            ns = max(0, int(line.get("ns") or 0))
            call_id = int(line.get("call") or 0)
        except (TypeError, ValueError):
            return self._tamper("a kernel line with a malformed call or time")
        k = {"class": cls, "rule": str(line.get("rule") or "")[:160], "ns": ns,
             "name": str(line.get("name") or "")[:400], "demangled": str(line.get("demangled") or "")[:400],
             "image": line.get("image"), "loader": line.get("loader"), "grid": line.get("grid")}
        if call_id == 0:
            # the harness's own kernels (copies, fills) and work between calls
            if self.started and cls != "torch_native":
                self.outside[cls] += 1
                self.outside_names.setdefault(cls, short_name(k))
            return
        call = self.calls.get(call_id)
        if call is None:
            return self._tamper(f"a kernel of call {call_id}, which the checker never began")
        if call.end is not None:
            # launched inside the call (a background thread), finished after
            # its end: judged at the next end
            call.late.append(k)
            self.late_new.append(k)
        else:
            call.kernels.append(k)

    # ---- questions the checker asks ----------------------------------------

    def has_marker(self, kind, call):
        if kind == "hello":
            return self.hello is not None
        if kind == "begin":
            return self.open_call == call or (call in self.calls and self.calls[call].end is not None)
        return call in self.calls and self.calls[call].end is not None

    def checked_call(self, call_id):
        """The call's Call once complete; raises Tampered or Incomplete."""
        if self.tampered:
            raise Tampered(self.tampered)
        call = self.calls.get(call_id)
        if call is None or call.end is None:
            raise Incomplete(f"no end record for call {call_id}")
        if call.grown:
            raise Incomplete("the recorder lost records (" + ", ".join(
                f"{k} +{v}" for k, v in sorted(call.grown.items())) + ")")
        if call.count_mismatch:
            raise Incomplete(f"the recorder counted {call.end.get('kernels')} kernels in call "
                             f"{call_id} but delivered {len(call.kernels)}")
        return call


def broken(call, dsl, late=(), min_share=0.0):
    """The first rule one call's kernels break, as RuleBroken, or None.
    late: kernels of earlier calls that finished after those calls ended
    (held to the vendor and other-JIT rules here). min_share: the floor of
    the DSL kernels' share of the call's kernel time (0: none): a token DSL
    kernel beside torch doing the work breaks it."""
    own = DSL_CLASS.get(dsl)
    for k in call.kernels + call.late + list(late):
        cls = k["class"]
        if cls == "vendor_library":
            return RuleBroken("vendor", f"{short_name(k)} ({k['rule']})")
        if cls == "other_jit":
            return RuleBroken("other_jit", f"{short_name(k)} ({k['rule']})")
        if cls.startswith("dsl_") and cls != own and not name_only(k):
            other = next((d for d, c in DSL_CLASS.items() if c == cls), cls)
            return RuleBroken("other_jit", f"a {DSL_NAME.get(other, other)} kernel in a "
                                           f"{dsl} variant: {short_name(k)} ({k['rule']})")
    if not any(k["class"] == own and not name_only(k) for k in call.kernels):
        counts = collections.Counter(k["class"] for k in call.kernels)
        seen = ", ".join(f"{c} {n}" for c, n in sorted(counts.items())) or "none"
        named = sum(1 for k in call.kernels if k["class"] == own and name_only(k))
        extra = f"; {named} named like one, of unknown origin" if named else ""
        return RuleBroken("dsl", f"no {DSL_NAME.get(dsl, dsl)} kernel ran during solve "
                                 f"(kernels: {seen}{extra})")
    if min_share > 0:
        mine, others = 0, collections.Counter()  # ns of the DSL's kernels (by origin), the rest by name
        for k in call.kernels:
            if k["class"] == own and not name_only(k):
                mine += k["ns"]
            else:
                others[short_name(k)] += k["ns"]
        total = mine + sum(others.values())
        if total and mine / total < min_share:
            top = ", ".join(f"{n} {t / 1e3:.1f} us" for n, t in others.most_common(3))
            return RuleBroken("dsl_share", f"{DSL_NAME.get(dsl, dsl)} kernels took {mine / total:.0%} of "
                                           f"the call's {total / 1e3:.1f} us of kernel time, under the "
                                           f"{min_share:.0%} floor (most of the rest: {top})")
    return None


class Summary:
    """Kernels of the attributed calls, by class, for the verdict."""

    def __init__(self, dsl):
        self.dsl = dsl
        self.calls = 0
        self.ns = dict.fromkeys(CLASSES, 0)
        self.count = dict.fromkeys(CLASSES, 0)
        self.names = {c: collections.OrderedDict() for c in CLASSES}

    def add(self, call):
        self.calls += 1
        for k in call.kernels + call.late:
            c = k["class"]
            self.ns[c] += k["ns"]
            self.count[c] += 1
            name = short_name(k) + (" (name only)" if name_only(k) else "")
            entry = self.names[c].get(name)
            if entry is None and len(self.names[c]) < NAMES_PER_CLASS:
                entry = self.names[c][name] = [0, 0]
            if entry is not None:
                entry[0] += 1
                entry[1] += k["ns"]

    def dsl_share(self):
        total = sum(self.ns.values())
        own = DSL_CLASS.get(self.dsl)
        return round(self.ns[own] / total, 4) if total and own else None

    def as_dict(self):
        """Per class: kernels per call, device ms per call, the names."""
        n = max(self.calls, 1)
        total = sum(self.ns.values())
        out = {}
        for c in CLASSES:
            if not self.count[c]:
                continue
            out[c] = {"per_call": round(self.count[c] / n, 2),
                      "ms_per_call": round(self.ns[c] / n / 1e6, 5),
                      "share": round(self.ns[c] / total, 4) if total else None,
                      "names": [{"name": k, "count": v[0], "ms": round(v[1] / 1e6, 5)}
                                for k, v in self.names[c].items()]}
        return out


# ---- the channel -------------------------------------------------------------


def sealed_memfd(path):
    """A copy of the library in sealed memory: the candidate loads it by
    /proc/self/fd/N and can neither change nor replace it (the repository's
    build/ is not readable in its sandbox)."""
    with open(path, "rb") as f:
        data = f.read()
    flags = os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING
    try:
        fd = os.memfd_create("mkb-launch", flags | 0x10)  # MFD_EXEC (Linux 6.3): mappable executable
    except OSError:
        fd = os.memfd_create("mkb-launch", flags)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK
                    | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Channel:
    """The checker's end of one recorder's socket."""

    def __init__(self, library, dry=False):
        self.sock, self.far = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.tag = secrets.token_hex(16)
        # queued for the recorder, which reads it at cuInit, before any of
        # the kernel's code runs
        self.sock.send(self.tag.encode())
        self.log = Log(self.tag, dry_ok=dry)
        self.library_fd = sealed_memfd(library)
        self.pending = collections.deque()
        self.pending_bytes = 0
        self.flooded = False
        self.closed = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._drain, name="mkb-launch-drain", daemon=True)
        self.thread.start()

    def handed_over(self):
        """The candidate holds its copies now: ours go (so its death ends
        the stream)."""
        for fd in (self.library_fd,):
            os.close(fd)
        self.library_fd = None
        self.far.close()

    def _drain(self):
        """Raw datagrams into pending, nothing more (the GIL is held only
        between two recv calls): the recorder never blocks on a full socket."""
        while True:
            try:
                data = self.sock.recv(LINE_MAX + 64)
            except OSError:
                data = b""
            with self.cond:
                if not data:
                    self.closed = True
                    self.cond.notify_all()
                    return
                if self.pending_bytes + len(data) > PENDING_CAP:
                    self.flooded = True
                else:
                    self.pending.append(data)
                    self.pending_bytes += len(data)
                self.cond.notify_all()

    def pump(self, until=None, timeout=0.0):
        """Feed what has arrived to the log; with until, wait up to timeout
        for until() to hold. Returns until() (or True)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                batch = list(self.pending)
                self.pending.clear()
                self.pending_bytes = 0
                flooded, closed = self.flooded, self.closed
            for raw in batch:
                self.log.feed(raw)
            if flooded:
                self.log._tamper(f"more than {PENDING_CAP >> 20} MB of lines between two calls")
            done = until() if until else True
            left = deadline - time.monotonic()
            if done or left <= 0 or closed or self.log.tampered:
                return done
            with self.cond:
                if not self.pending and not self.closed:
                    self.cond.wait(left)

    def wait_hello(self, timeout=HELLO_TIMEOUT_S):
        return self.pump(lambda: self.log.hello is not None, timeout)

    def mark(self, kind, call, timeout=MARK_TIMEOUT_S):
        """Send a marker and wait for the recorder's line; False when it
        did not come (a silenced recorder: the caller decides)."""
        self.log.expect(kind, call)
        try:
            self.sock.send(f"{kind} {call}".encode())
        except OSError:
            return False
        return self.pump(lambda: self.log.has_marker(kind, call), timeout)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=2)
        self.sock.close()
        if self.library_fd is not None:
            os.close(self.library_fd)
            self.library_fd = None
        try:
            self.far.close()
        except OSError:
            pass


# ---- one evaluation's use of the recorder -------------------------------------


class Attribution:
    """What the checker does with the recorder in one evaluation. Methods
    raise Tampered, Incomplete or RuleBroken only when enforcing; when
    recording, the first finding is kept for the verdict instead."""

    def __init__(self, mode, device, dsl, dry=False, min_share=0.0):
        self.mode = mode if mode in MODES else "enforce"
        self.dsl = dsl
        self.min_share = min_share  # the dsl_share rule's floor (0: none)
        self.dry = dry and device == "cpu"
        self.channel = None
        self.summary = Summary(dsl)
        self.calls = 0
        self.finding = None     # record mode: the first rule broken or records problem
        self.complete = True    # every attributed call's records were whole
        self.why = None         # why nothing is checked, when nothing is
        self.library = None
        self.unbuilt = False    # on a GPU (or dry) with no recorder to hand over
        if self.mode == "off":
            self.why = "off (--launches off)"
        elif device != "cuda" and not self.dry:
            self.why = "CPU test mode"
        else:
            self.library = library_path()
            if self.library is None:
                self.unbuilt = True
                self.why = "the recorder build/libmkb_launch.so is not built (make build/libmkb_launch.so)"

    @property
    def active(self):
        return self.channel is not None and self.why is None

    def _finding(self, exc):
        if isinstance(exc, (Tampered, Incomplete)):
            self.complete = False
        if self.mode == "enforce":
            raise exc
        if self.finding is None:
            self.finding = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, RuleBroken):
            # records no longer to be trusted (and a silenced recorder
            # would cost MARK_TIMEOUT_S a call): stop asking
            self.why = f"attribution stopped after call {self.calls}: {exc}"

    def install(self, ask):
        """Before the import: the socket's far end and the sealed library to
        the candidate, which sets MKB_LAUNCH_FD and CUDA_INJECTION64_PATH for
        its cuInit. ask(msg, fds) -> reply."""
        if self.unbuilt and self.mode == "enforce" and not self.dry:
            # on a GPU the rules are the default: grading without them is not
            # a pass with the rules "unchecked", it is a judge not set up
            raise Incomplete(self.why + "; the DSL rules cannot be enforced (--launches record "
                             "or off grades without them)")
        if self.library is None or self.why:
            return
        self.channel = Channel(self.library, dry=self.dry)
        reply = ask({"op": "launch", "dry": self.dry},
                    (self.channel.far.fileno(), self.channel.library_fd))
        self.channel.handed_over()
        if not reply.get("installed"):
            self.why = f"not installed in the candidate process: {str(reply.get('why'))[:200]}"

    def started(self):
        """After the import (cuInit ran before kernel.py was loaded): the
        recorder's hello. Its absence is ours, never the kernel's."""
        if not self.active:
            return
        if not self.channel.wait_hello():
            why = self.channel.log.tampered or f"no hello within {HELLO_TIMEOUT_S:.0f} s"
            self.why = f"the recorder did not start: {why}"
            if self.mode == "enforce":
                raise Incomplete(self.why + " (--launches record or off grades without it)")

    def begin(self):
        """Before a call's inputs are handed over: its launches from now on."""
        if not self.active:
            return
        self.calls += 1
        if not self.channel.mark("begin", self.calls):
            self._silent("begin")

    def _silent(self, kind):
        log = self.channel.log
        if log.tampered:
            return self._finding(Tampered(log.tampered))
        # Only the kernel's code can stop the recorder from answering (its
        # socket read or redirected): the rules need positive evidence.
        self._finding(Tampered(f"no {kind} record for call {self.calls} within {MARK_TIMEOUT_S:.0f} s "
                               "(the recorder was silenced)"))

    def end(self):
        """After the call's output was taken: its records, checked. Returns
        the GPU time of the call's kernels (Call.device_ms), or None."""
        if not self.active:
            return None
        n = self.calls
        if not self.channel.mark("end", n):
            return self._silent("end")
        try:
            call = self.channel.log.checked_call(n)
        except (Tampered, Incomplete) as exc:
            return self._finding(exc)
        self.summary.add(call)
        if self.dry:
            return None  # nothing is recorded without CUPTI: no rule to apply
        late, self.channel.log.late_new = self.channel.log.late_new, []
        rule = broken(call, self.dsl, late, self.min_share)
        if rule is not None:
            self._finding(rule)
        return call.device_ms()

    def dsl_checked(self):
        return bool(self.active and not self.dry and self.calls and self.complete)

    def report(self):
        """The verdict's fields: dsl_checked, dsl_share, launches."""
        out = {"mode": self.mode}
        if self.min_share:
            out["dsl_min_share"] = self.min_share
        if self.why:
            out["why"] = self.why
        if self.channel is not None:
            log = self.channel.log
            out["calls"] = self.calls
            out["kernels"] = self.summary.as_dict()
            if self.dry:
                out["dry"] = True
                out.setdefault("why", "dry run (MKB_LAUNCH_DRY=1): the channel only, nothing recorded")
            if self.finding:
                out["finding"] = self.finding[:400]
            if log.outside:
                out["outside_calls"] = {c: {"count": n, "example": log.outside_names.get(c)}
                                        for c, n in log.outside.items()}
            if log.errors:
                out["recorder_errors"] = log.errors[:5]
            if log.hello:
                out["recorder"] = {k: log.hello.get(k) for k in ("cupti", "cupti_header", "demangler",
                                                                 "func_get_module")}
        checked = self.dsl_checked()
        return {"dsl_checked": checked, "dsl_share": self.summary.dsl_share() if checked else None,
                "launches": out}

    def close(self):
        if self.channel is not None:
            self.channel.close()
