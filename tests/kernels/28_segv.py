import os
import signal


def solve(hidden_states, residual, weight):
    os.kill(os.getpid(), signal.SIGSEGV)
