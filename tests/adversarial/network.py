# Tries to reach a server on loopback and the outside world.
import os
import socket


def solve(hidden_states, residual, weight):
    seen = []
    port = int(os.environ.get("MKB_TEST_PORT", "0") or 0)
    for host, p in (("127.0.0.1", port or 9), ("1.1.1.1", 53)):
        try:
            socket.create_connection((host, p), timeout=2).close()
            seen.append(f"CONNECTED {host}:{p}")
        except OSError as exc:
            seen.append(f"blocked {host}:{p} ({exc.strerror or exc})")
    raise RuntimeError("; ".join(seen))
