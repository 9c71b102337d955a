"""The GPU's readers-writer lock: shared holders together, one exclusive
holder alone, a waiting exclusive taker not starved by new shared ones."""
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from mkb_grader.gpulock import GpuLock


class GpuLockTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "gpu0.lock")

    def tearDown(self):
        self.dir.cleanup()

    def later(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        return t

    def test_shared_holders_share_and_exclusive_waits_for_them(self):
        a, b, c = GpuLock(self.path), GpuLock(self.path), GpuLock(self.path)
        a.shared()
        b.shared()  # does not block
        got = []
        t = self.later(lambda: (c.exclusive(), got.append(time.monotonic())))
        time.sleep(0.2)
        self.assertEqual(got, [])
        a.release()
        time.sleep(0.1)
        self.assertEqual(got, [])
        released = time.monotonic()
        b.release()
        t.join(5)
        self.assertEqual(len(got), 1)
        self.assertGreaterEqual(got[0], released)
        self.assertGreaterEqual(c.waited_ms, 250)
        c.release()

    def test_a_waiting_exclusive_taker_goes_before_later_shared_ones(self):
        a, b, c = GpuLock(self.path), GpuLock(self.path), GpuLock(self.path)
        a.shared()
        order = []
        tb = self.later(lambda: (b.exclusive(), order.append("exclusive"), time.sleep(0.1), b.release()))
        time.sleep(0.1)  # b waits on the lock, holding the turnstile
        tc = self.later(lambda: (c.shared(), order.append("shared")))
        time.sleep(0.1)
        a.release()
        tb.join(5)
        tc.join(5)
        self.assertEqual(order, ["exclusive", "shared"])

    @contextlib.contextmanager
    def other_process(self, code, ready):
        """A Python process running code with sys.argv[1] the lock's path and
        the grader on its path; entered once it has printed ready, killed on
        leaving."""
        grader = os.path.join(os.path.dirname(__file__), "..", "..", "grader")
        proc = subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, sys.argv[2]); {code}",
                                 self.path, grader], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(proc.stdout.readline().strip(), ready)
            yield proc
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_others_sees_holders_of_other_processes(self):
        mine = GpuLock(self.path)
        mine.shared()
        self.assertFalse(mine.others())
        with self.other_process("import fcntl, time; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_SH); "
                                "print('held', flush=True); time.sleep(30)", "held"):
            self.assertTrue(mine.others())
        self.assertFalse(mine.others())
        mine.release()

    def test_others_sees_a_process_waiting_to_time(self):
        # an evaluation waiting for the exclusive lock still holds its GPU
        # memory: an out-of-memory beside it is not the kernel's (found on
        # an H100 in session 17: 03/tirx graded failed beside 03/cutedsl)
        mine = GpuLock(self.path)
        mine.shared()
        with self.other_process("from mkb_grader.gpulock import GpuLock; print('waiting', flush=True); "
                                "GpuLock(sys.argv[1]).exclusive()", "waiting"):
            deadline = time.monotonic() + 10
            while not mine.others() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(mine.others())
        self.assertFalse(mine.others())
        mine.release()

    def test_without_a_path_it_does_nothing(self):
        lock = GpuLock(None)
        lock.exclusive()
        lock.release()
        self.assertEqual(lock.waited_ms, 0.0)


if __name__ == "__main__":
    unittest.main()


class GpuLockHoldTest(unittest.TestCase):
    def test_held_ms_counts_the_exclusive_holds_only(self):
        with tempfile.TemporaryDirectory() as d:
            lock = GpuLock(os.path.join(d, "gpu0.lock"))
            lock.shared()
            time.sleep(0.15)  # shared: not the GPU alone
            lock.exclusive()
            time.sleep(0.1)
            lock.shared()
            time.sleep(0.15)
            lock.exclusive()
            time.sleep(0.1)
            lock.release()
            self.assertGreaterEqual(lock.held_ms, 200)
            self.assertLess(lock.held_ms, 450)  # the shared 300 ms are not in it
