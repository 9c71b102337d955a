"""GPU check of grader/mkb_grader/vmm.py: device memory created in one
process, exported as a descriptor, mapped by a second process started in new
user and PID namespaces where the kernel allows it (as the judge's candidate
is), written by each side and read by the other.

    PYTHONPATH=grader python tests/gpu/vmm_share.py      (prints "vmm: ok ...", exit 0)
"""
import os
import socket
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "grader"))

from mkb_grader import arena  # noqa: E402

CHILD = r"""
import os, socket, sys, torch
sys.path.insert(0, sys.argv[1])
from mkb_grader import arena
s = socket.socket(fileno=int(sys.argv[2]))
msg, fds, _, _ = socket.recv_fds(s, 64, 1)
size = int(msg)
torch.cuda.init(); torch.ones(1, device="cuda").add_(1)
a = arena.make(size, "gpu", fds[0])
seen = int(a.bytes[: size // 2].to(torch.int64).sum())
a.bytes[size // 2:].fill_(7)
torch.cuda.synchronize()
s.sendall(str(seen).encode())
s.recv(1)
a.close()
"""


def main():
    size = 64 << 20
    torch.ones(1, device="cuda").add_(1)
    t0 = time.perf_counter()
    a = arena.make(size, "gpu")
    made_ms = (time.perf_counter() - t0) * 1e3
    size = a.size
    a.bytes.fill_(0)
    a.bytes[: size // 2].fill_(3)
    torch.cuda.synchronize()
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    cmd = [sys.executable, "-c", CHILD, os.path.join(ROOT, "grader"), str(child.fileno())]
    # its own /proc, as the judge's candidate has: CUDA names its threads
    # through /proc/<pid>/task (cuInit fails with error 304 otherwise)
    ns = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    try:
        subprocess.run(ns + ["true"], check=True, capture_output=True)
        cmd = ns + cmd
        where = "new user and PID namespaces"
    except (OSError, subprocess.CalledProcessError):
        where = "the same namespaces (unshare refused)"
    proc = subprocess.Popen(cmd, pass_fds=(child.fileno(),), stderr=subprocess.PIPE, text=True)
    child.close()
    socket.send_fds(parent, [str(a.size).encode()], [a.fd])
    seen = int(parent.recv(64) or b"-1")
    torch.cuda.synchronize()
    written = int(a.bytes[size // 2:].to(torch.int64).sum())
    try:
        parent.sendall(b"x")
    except BrokenPipeError:
        pass
    _, err = proc.communicate(timeout=60)
    rc = proc.returncode
    if rc:
        print("child stderr:\n" + "\n".join(err.splitlines()[-8:]))
    want_seen, want_written = 3 * (a.size // 2), 7 * (a.size - a.size // 2)
    ok = rc == 0 and seen == want_seen and written == want_written
    print(f"vmm: {'ok' if ok else 'FAILED'} (child in {where}, {a.size >> 20} MiB, created in "
          f"{made_ms:.1f} ms; child read {seen} of {want_seen}, parent read {written} of "
          f"{want_written}, child exit {rc})")
    a.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
