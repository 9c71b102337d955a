# Writes 256 MB to its output.
import sys


def solve(hidden_states, residual, weight):
    block = "x" * (1 << 20)
    for _ in range(256):
        sys.stderr.write(block)
    return hidden_states
