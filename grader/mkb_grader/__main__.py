"""python -m mkb_grader: the checker of one evaluation (trusted: it never
imports candidate code). Request on stdin, JSON lines out, the candidate
process on the other end of fd $MKB_PEER_FD.
python -m mkb_grader --syntax FILE [DSL enforce|paper]: exit 0 iff FILE is
valid UTF-8 Python (and breaks no static DSL rule, with enforce).
python -m mkb_grader --probe: exit 0 iff torch imports (the judge's check
that the grader's Python works, so a broken one is an infra error)."""
import os
import sys


def syntax_check(path, dsl=None, rules="paper"):
    """Exit 0 iff FILE is valid UTF-8 Python (and, with rules "enforce",
    breaks no statically visible DSL rule). Each finding is one line on
    stderr behind a marker the judge tells apart: "mkb-syntax: " (the file
    is not Python) or "mkb-rule: " (a DSL rule); any other exit 1 is
    infrastructure (a broken interpreter, a missing module)."""
    try:
        with open(path, "rb") as f:
            source = f.read()
        if b"\0" in source:
            raise ValueError("source contains a NUL byte")
        text = source.decode("utf-8")
        compile(text, path, "exec", dont_inherit=True)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        print(f"mkb-syntax: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if rules == "enforce":
        from .rules import violations
        found = violations(text, dsl)
        if found:
            rule, detail, line = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            print(f"mkb-rule: {rule}: {detail} at line {line}{more}", file=sys.stderr)
            return 1
    return 0


def main():
    if len(sys.argv) in (3, 5) and sys.argv[1] == "--syntax":
        return syntax_check(*sys.argv[2:])
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
    from .protocol import VERSION
    if request.get("protocol") != VERSION:
        channel.send({"type": "result", "status": "infra_error",
                      "reason": f"the judge speaks protocol {request.get('protocol')}, "
                                f"this grader {VERSION}: rebuild mkb or update grader/"})
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
