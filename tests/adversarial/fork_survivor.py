# Leaves a child behind that would run on after the evaluation.
import os
import time


def solve(hidden_states, residual, weight):
    if os.fork() == 0:
        os.setsid()
        os.execvp("sleep", ["mkb-adversary-survivor-5c1e", "300"])
    time.sleep(0.2)
    return hidden_states
