"""The zygote: a parent that has imported torch (and the DSLs) once and forks
a candidate process, or with --role checker a checker, per evaluation
(docs/judge.md, "Start-up: the zygote").

    python -m mkb_grader.zygote [--role checker] --socket NAME --library build/libmkb_zygote.so

Started by `mkb zygote`: the candidates' zygote in the candidate's
environment (built from empty plus the allowlist, nothing of the judge's),
the checkers' one, a process of its own, in the judge's. Neither runs
candidate code nor initialises CUDA (a CUDA context does not survive fork):
torch counts devices through NVML (PYTORCH_NVML_BASED_CUDA_CHECK=1), without
which TIRx's import leaves torch unable to initialise CUDA in a forked
child. One thread, one select loop, on an abstract AF_UNIX SOCK_SEQPACKET
socket (abstract_address) and a peer check (check_peer).

Per connection the judge sends one request: JSON {"dir", "env"} and, to the
candidates' zygote, "sandbox" (its sandbox as text: src/sandbox_spec.h),
with the child's descriptors (a candidate: its end of the checker's socket
and its output pipe; a checker: stdin, stdout, stderr and its socket). The
zygote forks; the child calls mkb_zygote_enter (src/zygote/child.c): a new
session, the descriptors on 0-3, every other descriptor closed, and for a
candidate the sandbox applied exactly as a cold candidate's; then it takes
the request's environment and runs mkb_grader.candidate's (or
mkb_grader's) main. The zygote answers {"pid", "layers"} (or {"error"}),
then {"exit": status} when the child has ended. "kill" from the judge, or
the connection closing, kills the child's session.
"""
import argparse
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys
import time

MAX_REQUEST = 1 << 20
ENTER_TIMEOUT_S = 30


def home_from_env(modules, environ):
    """What the imports in the zygote computed from its own HOME and TMPDIR,
    pointed at this child's (environ: the request's environment, already in
    force). tempfile caches its folder at first use. Triton (imported by
    torch) fixes its cache's home at import, so a forked candidate's first
    Triton kernel would write under the zygote's scratch folder, which its
    sandbox does not let it write (found with the rule_triton exploit,
    session 30: PermissionError instead of the DSL rule's verdict); its knob
    reads TRITON_HOME at each use."""
    if "tempfile" in modules:
        modules["tempfile"].tempdir = None
    if "triton" in modules and "HOME" in environ and "TRITON_HOME" not in environ:
        environ["TRITON_HOME"] = environ["HOME"]


def preimport(role):
    """What every candidate (or checker) imports first, once here; a DSL that
    is missing is left out (the child then imports what it can, as a cold
    one does)."""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    done, t0 = [], time.monotonic()
    import torch  # noqa: F401
    done.append("torch")
    if role == "candidate":
        for name, statement in (("cutedsl", "import cutlass, cutlass.cute"),
                                ("tirx", "import tvm\nfrom tvm.script import tirx")):
            try:
                exec(statement, {})
                done.append(name)
            except Exception:  # noqa: BLE001  (not installed here: CPU test machines)
                pass
        from . import candidate  # noqa: F401  (the grader's side of the candidate)
        # what candidate.Runner imports first (TorchDynamo, which it turns
        # off: its cache folder, computed here from the zygote's TMPDIR, is
        # never used)
        import torch._dynamo  # noqa: F401
    else:
        from . import evaluate  # noqa: F401  (the checker)
    if torch.cuda.is_initialized():
        raise SystemExit("zygote: the imports initialised CUDA; a forked candidate could not use it")
    return done, time.monotonic() - t0


def abstract_address(name):
    """The socket's address: abstract (no file), so a confined process cannot
    reach it twice over: abstract sockets belong to a network namespace, and
    every candidate has its own; Landlock's scope layer refuses those made
    outside its domain. Filesystem permissions would not (Landlock does not
    govern connecting to a named socket). src/zygote.c makes the same."""
    return b"\0mkb-zygote:" + os.fsencode(name)


class Child:
    def __init__(self, conn, pid):
        self.conn, self.pid, self.status = conn, pid, None


class Zygote:
    def __init__(self, path, library, role="candidate"):
        self.role = role
        self.nfds = 2 if role == "candidate" else 4
        self.lib = ctypes.CDLL(library)
        self.lib.mkb_zygote_enter.argtypes = [ctypes.c_char_p, ctypes.c_char_p] + [ctypes.c_int] * 5
        self.lib.mkb_zygote_enter.restype = ctypes.c_int
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(abstract_address(path))
        self.listener.listen(64)
        self.running = []  # every child not yet waited for (conn: its judge, while connected)
        self.stop = False

    def sockets(self):
        return [self.listener] + [c.conn for c in self.running if c.conn is not None]

    def serve(self):
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stop", True))
        while not self.stop:
            try:
                ready, _, _ = select.select(self.sockets(), [], [], 0.05)
            except InterruptedError:
                continue
            for s in ready:
                if s is self.listener:
                    self.accept()
                else:
                    self.from_judge(next(c for c in self.running if c.conn is s))
            self.reap()
        for c in list(self.running):
            self.kill(c)
        self.reap(block=True)
        self.listener.close()

    def accept(self):
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        fds = []
        try:
            self.check_peer(conn)
            conn.settimeout(10)
            msg, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 4)
            req = json.loads(msg)
            if len(fds) != self.nfds or not isinstance(req, dict) or not isinstance(req.get("env"), list):
                raise ValueError(f"a request to the {self.role}s' zygote is JSON with dir and env"
                                 f"{' and sandbox' if self.role == 'candidate' else ''}, "
                                 f"and {self.nfds} descriptors")
            pid, layers = self.spawn(req, fds)
        except Exception as exc:  # noqa: BLE001  (any bad request: answered, never fatal)
            try:
                conn.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            except OSError:
                pass
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        conn.settimeout(None)
        child = Child(conn, pid)
        self.running.append(child)
        try:
            conn.send(json.dumps({"pid": pid, "layers": layers}).encode())
        except OSError:
            self.kill(child)

    def check_peer(self, conn):
        """Only a judge may ask, beside the abstract address that keeps
        confined processes away: a peer of our uid and user namespace (every
        candidate, forked or cold, has a user namespace of its own) and not
        of this zygote's own tree. A candidate that got through could ask
        for a sibling without a sandbox. The kernel vouches for the peer's
        pid and uid (SO_PEERCRED)."""
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
        if uid != os.getuid():
            raise PermissionError(f"a peer of uid {uid} is refused")
        try:
            theirs = os.stat(f"/proc/{pid}/ns/user").st_ino
        except OSError:
            raise PermissionError("the peer is gone before its request was read") from None
        if theirs != os.stat("/proc/self/ns/user").st_ino:
            raise PermissionError("a peer in another user namespace (a confined process) is refused")
        me, seen = os.getpid(), 0
        while pid > 1 and seen < 4096:
            if pid == me:
                raise PermissionError("a request from a process this zygote started is refused")
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                raise PermissionError("the peer is gone before its request was read") from None
            pid = int(stat.rsplit(b")", 1)[1].split()[1])  # the parent
            seen += 1

    def spawn(self, req, fds):
        # the checker's zygote applies no sandbox, the candidates' always one
        spec = str(req.get("sandbox", "")).encode() if self.role == "candidate" else None
        where = str(req.get("dir", "/")).encode()
        env = {k: v for k, _, v in (str(e).partition("=") for e in req["env"])}
        report_r, report_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the candidate: never returns into the loop
            code = 126
            try:
                from . import protocol
                protocol._T0 = time.monotonic()  # "seconds since start": since this fork
                for s in self.sockets():
                    s.detach()  # its descriptors are closed below, not by the collector
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
                    signal.signal(sig, signal.SIG_DFL)
                # candidate: [peer, out] (stdin /dev/null, stderr = out);
                # checker: [stdin, stdout, stderr, peer]
                ends = (-1, fds[1], fds[1], fds[0]) if self.role == "candidate" else tuple(fds)
                if self.lib.mkb_zygote_enter(spec, where, *ends, report_w) < 0:
                    os._exit(126)
                os.environ.clear()
                os.environ.update(env)
                home_from_env(sys.modules, os.environ)
                if self.role == "candidate":
                    sys.argv = ["-m mkb_grader.candidate"]
                    from . import candidate
                    code = candidate.main() or 0
                else:
                    sys.argv = ["-m mkb_grader"]
                    import runpy
                    runpy.run_module("mkb_grader", run_name="__main__", alter_sys=False)
                    code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        os.close(report_w)
        try:
            ready, _, _ = select.select([report_r], [], [], ENTER_TIMEOUT_S)
            data = os.read(report_r, 4) if ready else b""
        finally:
            os.close(report_r)
        layers = int.from_bytes(data, sys.byteorder, signed=True) if len(data) == 4 else -1
        if layers < 0:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            raise RuntimeError("the candidate's sandbox could not be applied in the forked child")
        return pid, layers

    def from_judge(self, child):
        """"kill", or the judge gone: the child's session is killed."""
        try:
            msg = child.conn.recv(4096)
        except OSError:
            msg = b""
        if msg and msg.strip() != b'"kill"':
            return
        self.kill(child)
        if not msg:
            self.forget(child)

    def kill(self, child):
        if child.status is None:
            for target in (lambda: os.killpg(child.pid, signal.SIGKILL),
                           lambda: os.kill(child.pid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass

    def forget(self, child):
        if child.conn is not None:
            child.conn.close()
            child.conn = None

    def reap(self, block=False):
        """Every child ended is waited for; its judge, if still there, hears
        how. Orphans are reaped too: `mkb` made this process a subreaper
        (the flag survives exec), so what a killed child's session leaves
        comes here."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block and self.running else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = next((c for c in self.running if c.pid == pid), None)
            if child is None:
                continue  # an orphan, or the checkers' zygote
            child.status = status
            self.running.remove(child)
            if child.conn is not None:
                try:
                    child.conn.send(json.dumps({"exit": status}).encode())
                except OSError:
                    pass
                self.forget(child)
            if block and not self.running:
                return


def main():
    ap = argparse.ArgumentParser(description="pre-imported parent of candidate processes")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--library", required=True, help="build/libmkb_zygote.so")
    ap.add_argument("--role", choices=("candidate", "checker"), default="candidate",
                    help="whom it forks: confined candidates, or the trusted checker (a zygote "
                         "of its own: what a checker's request carries must never be copied "
                         "into a candidate)")
    ap.add_argument("--scratch", help="the folder `mkb zygote` made for it (its HOME and TMPDIR), "
                                      "removed when it ends: mkb has become this process")
    a = ap.parse_args()
    # a SIGTERM during the imports ends us through the finally below (serve
    # sets its own handler once listening)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        done, secs = preimport(a.role)
        z = Zygote(a.socket, a.library, a.role)
        print(json.dumps({"zygote": a.socket, "role": a.role, "pid": os.getpid(), "imported": done,
                          "import_s": round(secs, 3)}), flush=True)
        z.serve()
    finally:
        if a.scratch:
            import shutil
            shutil.rmtree(a.scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
