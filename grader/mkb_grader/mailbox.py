"""Messages from the checker to the candidate through shared memory, for the
timed loop (MKB_JUDGE_GO=mailbox, docs/judge.md "Timing").

Waiting on the socket is a system call, and polling it is one system call
after another; each leaves the caller's branch predictors, TLB and caches
colder than the last call of solve left them (on the CPU test machine the
hand-over made a launch-bound call 1.5x slower, a mailbox 1.1x:
tools/pingpong_probe.py +shm). Here the candidate spins on a sequence number
in a page it can only read, and nothing between two calls enters the kernel.
Replies still go through the socket: the checker sleeps in recv as before.

Layout of the one box: [sequence u64][length u32][pad u32][JSON]. The writer
stores the JSON and its length, then the sequence; the reader spins until
the sequence is the next one, then reads the JSON. x86-64 keeps stores in
order and loads in order, which is all this needs; elsewhere the judge
keeps the socket (available()). The checker writes a message only after the
reply to the one before it arrived, so no message is overwritten while read.

Nothing the candidate does to its mapping can reach the checker: the box is
sealed against writes through any new mapping and against resizing (a
shrunk memfd would fault the checker's next write), and the checker never
reads it."""
import fcntl
import json
import mmap
import os
import platform
import time

SIZE = 16 + (1 << 20)  # header + the socket's own cap on a message (wire.MAX_MESSAGE)
HEADER = 16
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux 5.1


class MailboxError(Exception):
    """The box could not be made or mapped, or a message does not fit."""


def available():
    """Whether this machine's memory order is the one the box relies on."""
    return platform.machine() in ("x86_64", "AMD64")


class Mailbox:
    """The checker's end (fd None: it makes the box; .fd is the descriptor to
    send) or the candidate's (fd: the descriptor it received, mapped
    read-only)."""

    def __init__(self, fd=None):
        self.writer = fd is None
        try:
            if self.writer:
                fd = os.memfd_create("mkb-mailbox", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
                os.ftruncate(fd, SIZE)
                self.mem = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
                try:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | F_SEAL_FUTURE_WRITE)
                except OSError:  # a kernel before 5.1: no future-write seal
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            else:
                if os.fstat(fd).st_size < SIZE:
                    raise MailboxError("mailbox descriptor is smaller than the box")
                self.mem = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        except (OSError, ValueError) as exc:
            raise MailboxError(f"mailbox: {exc}") from exc
        self.fd = fd
        self.seq = 0  # the last sequence written (writer) or read (reader)

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

    def get(self, alive=None, every_s=0.5):
        """The next message, spinning without a system call until it comes;
        every every_s seconds alive() is asked (a system call of the
        caller's: is the checker still there?) and a False ends the wait with
        None. Reads what the writer sent as JSON; anything else is a
        MailboxError."""
        mem, want = self.mem, self.seq + 1
        check = time.perf_counter() + every_s  # vDSO: no system call
        n = 0
        while int.from_bytes(mem[0:8], "little") != want:
            n += 1
            if n & 0x3FFF == 0 and alive is not None and time.perf_counter() > check:
                if not alive():
                    return None
                check = time.perf_counter() + every_s
        self.seq = want
        size = int.from_bytes(mem[8:12], "little")
        if size > SIZE - HEADER:
            raise MailboxError("mailbox message length out of range")
        try:
            obj = json.loads(mem[HEADER:HEADER + size])
        except (ValueError, UnicodeDecodeError) as exc:
            raise MailboxError(f"mailbox message is not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise MailboxError("mailbox message is not a JSON object")
        return obj

    def close(self):
        self.mem.close()
        os.close(self.fd)
