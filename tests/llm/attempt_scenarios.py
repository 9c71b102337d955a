#!/usr/bin/env python3
"""Scenarios of a model's side of an attempt, for tests/llm/server.py:
writes DIR/<name>.json for each scenario below.

    attempt_scenarios.py DIR REPO PORT_FILE

REPO is the repository (the sandbox probes aim at its files, at $MKB_STORE
and at a listener on 127.0.0.1:$MKB_PROBE_PORT); the scenarios
are plain data once written, each reply an agent answer the server wraps
as a chat completion ("say", server.py)."""
import json
import os
import sys

KERNEL = '''import torch


def solve(hidden_states, residual, weight):
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
'''
SKILL = "Fusing the residual add into the normalisation saves one pass over memory."


def say(analysis, plan, cmds, done=None, usage=(1000, 0, 100), **extra):
    o = {"analysis": analysis, "plan": plan,
         "commands": [{"keystrokes": k, "duration": d} for k, d in cmds]}
    if done is not None:
        o["task_complete"] = done
    r = {"say": o, "usage": list(usage)}
    r.update(extra)
    return r


def write_kernel(duration=0.5):
    return ("cat > kernel.py <<'EOF'\n" + KERNEL + "EOF\n", duration)


def write_skill():
    return ("printf '%s\\n' > SKILL.md\n" % SKILL, 0.3)


def finish(**kw):
    return [say("Done.", "Finish.", [], done=True, **kw),
            say("Confirmed.", "Finish.", [], done=True, **kw)]


def scenarios(repo):
    s = {}
    s["normal"] = [
        say("An empty workspace.", "Read the reference.", [("head -3 task/reference.py\n", 0.3)],
            usage=(2000, 0, 150)),
        say("I know the computation.", "Write kernel.py and submit it.",
            [write_kernel(), ("submit\n", 8)], usage=(3000, 1024, 400)),
        say("It passed.", "Write SKILL.md.", [write_skill(), ("ls\n", 0.2)], usage=(4000, 2048, 120)),
        say("Both files are there.", "Finish.", [], done=True, usage=(4500, 2048, 60)),
        say("Confirmed.", "Finish.", [], done=True, usage=(4800, 4096, 50)),
    ]
    # an external agent's model (mkb attempt --model cli:...): one reply, the kernel's text
    s["cli"] = [{"say": KERNEL, "usage": [1500, 512, 300]}]
    s["retry_429"] = [
        {"status": 429, "headers": {"Retry-After": "0"}, "body": {"error": {"message": "slow down"}}},
        say("Start.", "Write the kernel.", [write_kernel(), write_skill()], usage=(1500, 0, 300)),
    ] + finish(usage=(1700, 0, 20))
    s["server_500s"] = [{"status": 500, "body": {"error": {"message": "boom"}}}] * 3
    s["malformed"] = [{"status": 200, "text": "this is not JSON at all"}]
    # a reply that is not JSON, then a command that does not exist, then
    # the work: the agent reads both errors and goes on
    s["errors_then_work"] = [
        {"say": "I will start by {looking around", "usage": [1000, 0, 10]},
        say("Recovering.", "Try a tool.", [("nosuchtool --version\n", 0.3)]),
        say("No such tool.", "Write the kernel instead.", [write_kernel(), write_skill()]),
    ] + finish()
    # writes the kernel, then only waits: the wall clock ends it
    s["never_finishes"] = [
        say("Start.", "Write the kernel.", [write_kernel(), write_skill()]),
    ] + [say("Thinking.", "Wait.", [("", 2.0)]) for _ in range(60)]
    # the second turn overflows the context: hand-off, then on
    s["context"] = [
        say("Start.", "Look.", [("ls\n", 0.2)], usage=(3000, 0, 100)),
        {"status": 400, "body": {"error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages "
                       "resulted in 9000 tokens.", "type": "invalid_request_error",
            "code": "context_length_exceeded"}}},
        {"say": "1. Listed the workspace. 2. Files: task/, docs/. 3. None. 4. Kernel not written.",
         "usage": [900, 0, 40]},
        {"say": "1. Is kernel.py written? 2. What shapes? 3. Which dtype? 4. Any errors? 5. Time left?",
         "usage": [500, 0, 40]},
        {"say": "1. No. 2. tokens x 4096. 3. bfloat16. 4. None. 5. Most of it.", "usage": [1200, 0, 40]},
        say("Taking over.", "Write the kernel.", [write_kernel(), write_skill()], usage=(1500, 0, 300)),
    ] + finish(usage=(1800, 0, 20))
    s["anthropic"] = [dict(r, format="anthropic") for r in [
        say("Start.", "Write the kernel.", [write_kernel(), write_skill()], usage=(1500, 500, 300)),
    ] + finish(usage=(1700, 1000, 20))]
    # probes of the sandbox: every one must be refused
    store = os.environ.get("MKB_STORE", "/nonexistent")
    probes = [
        "cat %s/solutions/28_fused_add_rmsnorm/tirx/kernel.py; echo solutions=$?" % repo,
        "cat %s/problems/mlp_norm/28_fused_add_rmsnorm/problem.json; echo heldout=$?" % repo,
        "ls %s; echo repo=$?" % repo,
        "head -c 16 %s; echo store=$?" % store,
        "ls /root; echo home=$?",
        "env | grep -ci key; echo keys-listed",
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', %s), 2); print('connected')\" "
        "2>&1 | tail -1" % os.environ.get("MKB_PROBE_PORT", "9"),
        "(exec -a mkb-attempt-survivor-31337 sleep 600) & echo started-survivor",
    ]
    s["sandbox"] = [
        say("Probe.", "Look around.", [(p + "\n", 0.5) for p in probes]),
        say("Done probing.", "Write the kernel.", [write_kernel(), write_skill()]),
    ] + finish()
    # limits: the DSLs import without a GPU; a file stops at the size limit;
    # a flood of output reaches the model cut to 10 KB; a fork bomb stays in
    # its cgroup and dies with the attempt
    s["limits"] = [
        say("Start.", "Write the kernel, then test the limits.", [write_kernel(), write_skill(),
            ("python3 -c \"import cutlass, tvm; print('dsl', 'imports')\"\n", 15),
            ("head -c 2G /dev/zero > big.bin; echo fsize=$?; stat -c size=%s big.bin; rm big.bin\n", 8)]),
        say("Flood.", "Print a lot.", [("timeout 3 yes mkb-flood-line\n", 4)]),
        say("Bomb.", "Fork forever.", [("bomb() { bomb | bomb & }; bomb\n", 4)]),
    ] + finish()
    return s


def main():
    out, repo = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name, replies in scenarios(repo).items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"replies": replies}, f, indent=1)


if __name__ == "__main__":
    main()
