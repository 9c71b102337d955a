# Starts a process that leaves the grader's process group, then hangs. The
# judge must still leave nothing behind.
import os
import time

MARKER = "mkb-orphan-marker-7f3a"


def solve(hidden_states, residual, weight):
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "3600", MARKER])
    time.sleep(3600)
