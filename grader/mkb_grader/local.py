"""Checker and candidate without the C judge, for tests and the selfcheck:
the checker runs in this process, the candidate in a child process that is
reused across evaluations (started again if it died). No confinement: that
is the judge's (src/sandbox.c); use `mkb eval` for anything untrusted."""
import atexit
import os
import socket
import subprocess
import sys

from .evaluate import Evaluation
from .wire import Peer

GRADER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LocalCandidate:
    def __init__(self):
        self.child = self.peer = None
        atexit.register(self.close)  # no candidate process outlives its user

    def _start(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, MKB_PEER_FD=str(b.fileno()), PYTHONPATH=GRADER)
        self.child = subprocess.Popen([sys.executable, "-m", "mkb_grader.candidate"],
                                      pass_fds=[b.fileno()], env=env)
        b.close()
        self.peer = Peer(a.detach())
        reply, _ = self.peer.recv(timeout=300)  # torch imported: {"ready": true}
        if not reply.get("ready"):
            raise RuntimeError("the candidate process did not announce itself")

    def evaluate(self, request, channel):
        if self.child is None or self.child.poll() is not None:
            self.close()
            self._start()
        result = Evaluation(request, channel, self.peer, ready=True).run()
        if result["status"] in ("crashed", "hung"):
            self.close()  # whatever state it is in, the next one starts clean
        return result

    def close(self):
        if self.child is not None:
            self.child.kill()
            self.child.wait()
            self.peer.close()
        self.child = self.peer = None
