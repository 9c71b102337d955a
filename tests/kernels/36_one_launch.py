# Problem 36's arguments, one GPU kernel a call, the wrong answer: a stand-in
# for a fused DSL kernel (one launch, microseconds of GPU work) in
# tools/pingpong_probe.py, which times calls and checks nothing. Not a
# solution: the judge fails it.
import torch


def solve(hidden_states, weight):
    return torch.mul(hidden_states, weight)
