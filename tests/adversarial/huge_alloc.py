# Asks for 40 GB of host memory.
def solve(hidden_states, residual, weight):
    buf = bytearray(40 << 30)
    return buf
