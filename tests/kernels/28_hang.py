import time


def solve(hidden_states, residual, weight):
    # Never returns (well past any test timeout).
    time.sleep(3600)
