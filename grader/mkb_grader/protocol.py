"""JSON-lines protocol with the C judge.

The judge writes one request object on stdin. We answer on the file
descriptor that was stdout when the process started, one JSON object per line:
  {"type": "stage", "stage": NAME, "t": seconds since start}
  {"type": "result", ...fields of the verdict...}          (exactly one, last)
Everything the candidate prints goes to stderr, so it can never forge a line.
"""
import json
import os
import sys
import time
import traceback

_T0 = time.monotonic()

# The version of the request/result fields (src/judge.h JUDGE_PROTOCOL_VERSION;
# docs/judge.md, "Protocol").
VERSION = 2


class Channel:
    def __init__(self):
        # Keep a private copy of the real stdout, then point fd 1 at stderr so
        # prints from the candidate (or from compilers) stay off the protocol.
        self._fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._out = os.fdopen(self._fd, "w", buffering=1, encoding="utf-8")

    def send(self, obj):
        self._out.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
        self._out.flush()

    def stage(self, name, **extra):
        self.send({"type": "stage", "stage": name,
                   "t": round(time.monotonic() - _T0, 3), **extra})


def read_request(stream=None):
    stream = stream or sys.stdin
    line = stream.readline()
    if not line:
        raise ValueError("no request on stdin")
    req = json.loads(line)
    if not isinstance(req, dict):
        raise ValueError("request is not a JSON object")
    return req


def describe_exception(exc):
    """One line for a verdict's reason; the whole traceback goes to stderr,
    which the judge keeps as the output tail. (Checker and candidate both.)"""
    traceback.print_exception(exc, file=sys.stderr)
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
    return text if len(text) <= 500 else text[:500] + " ..."
