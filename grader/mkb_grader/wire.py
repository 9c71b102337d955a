"""The channel between the checker and the candidate process: one JSON object
per SOCK_SEQPACKET message, file descriptors only from checker to candidate.
While mailboxes are in use (mailbox.py: the timed loop with
MKB_JUDGE_GO=mailbox) a side's messages go through its outgoing box
instead (a message with descriptors still through the socket, announced in
the box by {"op": "socket"}), and it reads the other side's from its
incoming box; the candidate's replies use a box only with
MKB_JUDGE_REPLY=mailbox.

Both ends run this file, but only the checker's copy is trusted: whatever the
candidate sends is parsed with a size cap, never unpickled, and never carries
descriptors (any that arrive are closed unread)."""
import array
import json
import socket

MAX_MESSAGE = 1 << 20  # a message is a description, never tensor data
MAX_FDS = 4


class PeerLost(Exception):
    """The other process closed the channel (it exited or crashed)."""


class PeerTimeout(Exception):
    """No message within the allowed time."""


class ProtocolError(Exception):
    """A message that is not one JSON object within the size cap."""


def parse_object(data):
    """One message as sent: a JSON object, else ProtocolError (the socket's
    and the mailboxes' messages alike)."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError("message is not a JSON object")
    return obj


class Peer:
    def __init__(self, fd, accept_fds=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd)
        self.accept_fds = accept_fds
        # mailbox.Mailbox ends while messages go through boxes: this side's
        # messages out, the other side's in
        self.box_out = self.box_in = None

    def send(self, obj, fds=(), socket_only=False):
        """One message; through box_out where there is one (socket_only: not)."""
        if self.box_out is not None and not socket_only:
            from .mailbox import MailboxError
            try:
                if not fds:
                    self.box_out.put(obj)
                    return
                self.box_out.put({"op": "socket"})  # descriptors travel only through the socket
            except MailboxError as exc:
                raise ProtocolError(str(exc)) from exc
        data = json.dumps(obj, separators=(",", ":")).encode()
        if len(data) > MAX_MESSAGE:
            raise ProtocolError(f"message of {len(data)} bytes is over the {MAX_MESSAGE}-byte cap")
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.sock.settimeout(None)
        try:
            self.sock.sendmsg([data], anc)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerLost(str(exc)) from exc

    def recv(self, timeout=None, spin=0.0, idle=None):
        """(object, fds). fds is empty unless this end accepts descriptors.
        spin: seconds to poll without sleeping before blocking (the core
        stays awake, its caches warm, for a message due at once); idle: a
        function called between polls (neither applies while a mailbox is
        in use: the wait there is a spin without system calls)."""
        if self.box_in is not None:
            import time
            from .mailbox import MailboxError
            try:
                obj = self.box_in.get(alive=self._alive,
                                      deadline=None if timeout is None else time.perf_counter() + timeout)
            except MailboxError as exc:
                raise ProtocolError(str(exc)) from exc
            except TimeoutError as exc:
                raise PeerTimeout(f"no message within {timeout:.1f} s") from exc
            if obj is None:
                raise PeerLost("the other side closed the channel")
            if obj.get("op") != "socket":
                return obj, []
            spin = 0.0  # the message itself follows on the socket
        got = self._poll(spin, idle) if spin > 0 else None
        try:
            if got is None:
                self.sock.settimeout(timeout)
                got = self.sock.recvmsg(MAX_MESSAGE + 1, socket.CMSG_SPACE(MAX_FDS * 4))
            data, anc, flags, _ = got
        except socket.timeout as exc:
            raise PeerTimeout(f"no message within {timeout:.1f} s") from exc
        except ConnectionResetError as exc:
            raise PeerLost(str(exc)) from exc
        fds = []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % 4])
                fds.extend(got)
        if not self.accept_fds or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in fds:
                _close(fd)
            fds = []
        if not data:
            raise PeerLost("the other side closed the channel")
        if flags & socket.MSG_TRUNC or len(data) > MAX_MESSAGE:
            raise ProtocolError(f"message over the {MAX_MESSAGE}-byte cap")
        return parse_object(data), fds

    def _poll(self, seconds, idle=None):
        """A message if one arrives within seconds of busy polling, else None."""
        import time
        self.sock.settimeout(None)
        end = time.perf_counter() + seconds
        while True:
            try:
                return self.sock.recvmsg(MAX_MESSAGE + 1, socket.CMSG_SPACE(MAX_FDS * 4),
                                         socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.perf_counter() > end:
                    return None
                if idle is not None:
                    idle()
            except ConnectionResetError as exc:
                raise PeerLost(str(exc)) from exc

    def _alive(self):
        """While waiting on the mailbox: False once the other side closed
        the socket (nothing else arrives there meanwhile). A look that
        never waits: with a timeout set on the socket (an earlier recv's),
        Python would first wait up to that long for it to be readable,
        whatever the flags, and a reply arriving in the box meanwhile would
        go unseen until then (session 29: a mailbox wait over 0.5 s hung
        the checker for its whole budget)."""
        self.sock.settimeout(None)  # blocking mode: MSG_DONTWAIT alone decides
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False

    def close(self):
        self.sock.close()


def _close(fd):
    import os
    try:
        os.close(fd)
    except OSError:
        pass
