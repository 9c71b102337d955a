# Tries to attach to the checker (its grandparent's side) and to read another
# process's memory.
import ctypes
import os


def solve(hidden_states, residual, weight):
    libc = ctypes.CDLL(None, use_errno=True)
    seen = []
    for pid in (os.getppid(), 1):
        rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
        seen.append(f"ptrace {pid}: {'ATTACHED' if rc == 0 else os.strerror(ctypes.get_errno())}")
    try:
        with open(f"/proc/{os.getppid()}/mem", "rb"):
            seen.append("OPENED parent mem")
    except OSError as exc:
        seen.append(f"parent mem: {exc.strerror}")
    raise RuntimeError("; ".join(seen))
