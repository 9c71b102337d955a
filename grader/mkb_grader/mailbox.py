"""Messages from the checker to the candidate through shared memory, for the
timed loop (MKB_JUDGE_GO=mailbox, docs/judge.md "Timing").

Waiting on the socket is a system call, and polling it is one system call
after another; each leaves the caller's branch predictors, TLB and caches
colder than the last call of solve left them (on the CPU test machine the
hand-over made a launch-bound call 1.5x slower, a mailbox 1.1x:
tools/pingpong_probe.py +shm). Here the candidate spins on a sequence number
in a page it can only read, and nothing between two calls enters the kernel.
Replies go through the socket (the checker asleep in recv), or with
MKB_JUDGE_REPLY=mailbox through a second box the candidate writes and the
checker spins on, reading a copy of it as it reads a socket message.

Layout of a box: [sequence u64][length u32][pad u32][JSON]. The writer
stores the JSON and its length, then the sequence; the reader spins until
the sequence is the next one, then reads the JSON. x86-64 keeps stores in
order and loads in order, which is all this needs; elsewhere the judge
keeps the socket (available()). The checker writes a message only after the
reply to the one before it arrived, so no message is overwritten while read.

Nothing the candidate does to a box can reach the checker beyond what a
socket message could: the checker makes both boxes and seals them against
resizing (a shrunk memfd would fault the next store into it); its own box
also against writes through any new mapping, so the candidate's mapping of
it is read-only; the candidate's box it maps read-only, takes a copy of
each message before parsing it, and gives up on it at the candidate's
time budget."""
import fcntl
import json
import mmap
import os
import platform
import time

SIZE = 16 + (1 << 20)  # header + the socket's own cap on a message (wire.MAX_MESSAGE)
SPIN_LIMIT_S = 0.5  # a wait spins this long at most (evaluate.SPIN_S, the socket's poll)...
NAP_S = 0.0002  # ...then looks every this often, asleep in between
HEADER = 16
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux 5.1


class MailboxError(Exception):
    """The box could not be made or mapped, or a message does not fit."""


def available():
    """Whether this machine's memory order is the one the box relies on."""
    return platform.machine() in ("x86_64", "AMD64")


class Mailbox:
    """One end of a box. Mailbox.make(...) is the checker's: it makes every
    box, so that it alone chooses the seals, and sends .fd. Mailbox(fd,
    writer) maps a received (or the checker's own) descriptor, for writing
    or read-only."""

    def __init__(self, fd, writer):
        self.writer = writer
        try:
            if os.fstat(fd).st_size < SIZE:
                raise MailboxError("mailbox descriptor is smaller than the box")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writer else 0)
            self.mem = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, prot)
        except (OSError, ValueError) as exc:
            raise MailboxError(f"mailbox: {exc}") from exc
        self.fd = fd
        self.seq = 0  # the last sequence written (writer) or read (reader)

    @classmethod
    def make(cls, checker_writes=True):
        """A new box, the checker's end. checker_writes: the checker's
        messages to the candidate, sealed against writes through any later
        mapping (the candidate's can only read); else the candidate's
        replies, which the checker maps read-only and reads only as a copy.
        Either way sealed against resizing: a shrunk box would fault its
        writer's next store."""
        try:
            fd = os.memfd_create("mkb-mailbox", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError as exc:
            raise MailboxError(f"mailbox: {exc}") from exc
        try:
            os.ftruncate(fd, SIZE)
            box = cls(fd, writer=checker_writes)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            if checker_writes:
                try:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | F_SEAL_FUTURE_WRITE)
                    return box
                except OSError:  # a kernel before 5.1: no future-write seal
                    pass
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            return box
        except (OSError, MailboxError) as exc:
            os.close(fd)
            raise MailboxError(f"mailbox: {exc}") from exc

    def put(self, obj):
        """Write one message (a JSON object); the reader sees it once the
        sequence moves."""
        data = json.dumps(obj, separators=(",", ":")).encode()
        if len(data) > SIZE - HEADER:
            raise MailboxError(f"message of {len(data)} bytes is over the box's {SIZE - HEADER}")
        self.mem[HEADER:HEADER + len(data)] = data
        self.mem[8:12] = len(data).to_bytes(4, "little")
        self.seq += 1
        self.mem[0:8] = self.seq.to_bytes(8, "little")

    def get(self, alive=None, every_s=0.5, deadline=None, spin_s=SPIN_LIMIT_S):
        """The next message, spinning without a system call until it comes,
        for spin_s seconds at most; after that it looks every NAP_S,
        asleep in between, so that a long wait (the other side's seconds of
        work: a long kernel, the float64 anchor) does not hold a core that
        work could use (on the 2-core CPU machine a spinning side made the
        other's work up to 2x slower). Every every_s seconds alive() is
        asked (a system call of the caller's: is the other side still
        there?) and a False ends the wait with None, as does passing
        deadline (time.perf_counter) with TimeoutError. What the box holds
        is read once, as a copy, and must be one JSON object within the
        cap; anything else is a MailboxError (the writer may be the
        candidate)."""
        mem, want = self.mem, self.seq + 1
        start = time.perf_counter()  # vDSO: no system call
        check, nap_from = start + every_s, start + spin_s
        n, napping = 0, False
        while int.from_bytes(mem[0:8], "little") != want:
            n += 1
            if napping or n & 0x3FFF == 0:
                now = time.perf_counter()
                if now > check:
                    if alive is not None and not alive():
                        return None
                    if deadline is not None and now > deadline:
                        raise TimeoutError("no message in the mailbox")
                    check = now + every_s
                if napping or now > nap_from:
                    napping = True
                    time.sleep(NAP_S)
        self.seq = want
        size = int.from_bytes(mem[8:12], "little")
        if size > SIZE - HEADER:
            raise MailboxError("mailbox message length out of range")
        from .wire import parse_object
        return parse_object(mem[HEADER:HEADER + size])  # a copy: later stores cannot change what is parsed

    def close(self):
        self.mem.close()
        os.close(self.fd)
