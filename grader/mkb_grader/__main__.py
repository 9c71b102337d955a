"""python -m mkb_grader: the checker of one evaluation (trusted: it never
imports candidate code). Request on stdin, JSON lines out, the candidate
process on the other end of fd $MKB_PEER_FD.
python -m mkb_grader --syntax FILE: exit 0 iff FILE is valid UTF-8 Python.
python -m mkb_grader --probe: exit 0 iff torch imports (the judge's check
that the grader's Python works, so a broken one is an infra error)."""
import os
import sys


def syntax_check(path):
    try:
        with open(path, "rb") as f:
            source = f.read()
        if b"\0" in source:
            raise ValueError("source contains a NUL byte")
        compile(source.decode("utf-8"), path, "exec", dont_inherit=True)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        # The marker tells the judge this is the kernel's fault: any other
        # exit 1 (a broken interpreter, a missing module) is infrastructure.
        print(f"mkb-syntax: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--syntax":
        return syntax_check(sys.argv[2])
    import faulthandler
    faulthandler.enable()
    from .protocol import Channel, read_request
    channel = Channel()
    channel.stage("setup")
    try:
        request = read_request()
    except ValueError as exc:
        channel.send({"type": "result", "status": "infra_error", "reason": f"bad request: {exc}"})
        return 0
    from .evaluate import Evaluation
    from .wire import Peer
    try:
        peer = Peer(int(os.environ["MKB_PEER_FD"]))
    except (KeyError, ValueError, OSError) as exc:
        channel.send({"type": "result", "status": "infra_error",
                      "reason": f"no candidate channel: {exc}"})
        return 0
    evaluation = Evaluation(request, channel, peer)
    result = evaluation.run()
    channel.send({"type": "result", **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
