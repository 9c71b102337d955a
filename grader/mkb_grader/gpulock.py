"""One GPU, shared while evaluations import and check, exclusive while one
times (docs/judge.md, "Sharing the GPU"). A readers-writer lock over two
flock files that every evaluation of the GPU opens: <path> itself (shared
holders, or the one exclusive holder) and <path>.turnstile, which an
exclusive taker holds while it waits so that new shared takers queue behind
it instead of starving it. flock locks die with their process."""
import fcntl
import os
import time


class GpuLock:
    def __init__(self, path):
        self.path = path
        self.fd = self.turnstile = None
        self.mode = None
        self.waited_ms = 0.0
        self.held_ms = 0.0  # exclusive, i.e. the GPU ours alone (timing)
        self._since = None
        if path:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            self.turnstile = os.open(path + ".turnstile", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)

    def _take(self, fd, how):
        t0 = time.monotonic()
        fcntl.flock(fd, how)
        self.waited_ms += (time.monotonic() - t0) * 1e3

    def shared(self):
        self._become("shared", fcntl.LOCK_SH)

    def exclusive(self):
        self._become("exclusive", fcntl.LOCK_EX)

    def _become(self, mode, how):
        """Take the lock in mode through the turnstile (released once held)."""
        if self.fd is None or self.mode == mode:
            return
        self.release()
        self._take(self.turnstile, fcntl.LOCK_EX)
        try:
            self._take(self.fd, how)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        self.mode = mode
        if mode == "exclusive":
            self._since = time.monotonic()

    def others(self):
        """Is any other process holding or waiting for this GPU's lock now?
        (from /proc/locks: flock entries on the lock file's or the
        turnstile's inode, not ours). A waiter counts: it is an evaluation
        between its correctness draws and its timing, its GPU memory still
        allocated."""
        if self.fd is None:
            return False
        idents = set()
        for fd in (self.fd, self.turnstile):
            st = os.fstat(fd)
            idents.add(f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}")
        try:
            with open("/proc/locks", encoding="ascii", errors="replace") as f:
                rows = [[x for x in line.split() if x != "->"] for line in f]
        except OSError:
            return False
        mine = str(os.getpid())
        for row in rows:
            # "1: FLOCK  ADVISORY  READ  1234 fd:01:5678 0 EOF" (a waiter: "1: -> FLOCK ...")
            if len(row) >= 6 and row[1] == "FLOCK" and row[5] in idents and row[4] != mine:
                return True
        return False

    def release(self):
        if self.fd is not None and self.mode:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        if self._since is not None:
            self.held_ms += (time.monotonic() - self._since) * 1e3
            self._since = None
        self.mode = None
