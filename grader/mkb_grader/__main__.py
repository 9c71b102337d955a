"""python -m mkb_grader: one evaluation, request on stdin, JSON lines out.
python -m mkb_grader --syntax FILE: exit 0 iff FILE is valid UTF-8 Python."""
import sys


def syntax_check(path):
    try:
        with open(path, "rb") as f:
            source = f.read().decode("utf-8")
        compile(source, path, "exec", dont_inherit=True)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--syntax":
        return syntax_check(sys.argv[2])
    # A crash in native code (a kernel's launcher, a bad pointer) prints the
    # Python stack to stderr, which the judge keeps as the output tail; the
    # process still dies by the same signal.
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
    evaluation = Evaluation(request, channel)
    result = evaluation.run()
    channel.send({"type": "result", **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
