# Shrinks every shared-memory file it holds (the checker's arenas, the
# mailbox) to nothing, so that the checker's next write into its own mapping
# of one faults (SIGBUS) and the checker dies mid-evaluation; then answers
# correctly. The files are sealed against resizing: nothing shrinks.
import os


def solve(hidden_states, residual, weight):
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:"):
                os.ftruncate(int(name), 0)
                print("SHRUNK", name)
        except OSError:
            pass
    x = hidden_states.float() + residual.float()
    y = x * (x.pow(2).mean(-1, keepdim=True) + 1e-5).rsqrt() * weight.float()
    return y.to(hidden_states.dtype)
