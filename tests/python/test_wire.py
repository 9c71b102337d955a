"""The checker/candidate channel (mkb_grader.wire): caps, descriptors, and
the busy poll the candidate uses between a prepare and its call."""
import os
import socket
import threading
import time
import unittest

from mkb_grader import wire


def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


class WireTest(unittest.TestCase):
    def pair(self, accept_fds=False):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        a, b = wire.Peer(a.detach(), accept_fds=accept_fds), wire.Peer(b.detach())
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        return a, b

    def test_round_trip(self):
        a, b = self.pair()
        b.send({"op": "go", "n": 1})
        self.assertEqual(a.recv(timeout=1), ({"op": "go", "n": 1}, []))

    def test_spin_gets_a_message_sent_while_polling(self):
        a, b = self.pair()
        t = later(0.02, lambda: b.send({"op": "go"}))
        t0 = time.perf_counter()
        msg, _ = a.recv(spin=1.0)
        t.join()
        self.assertEqual(msg, {"op": "go"})
        self.assertLess(time.perf_counter() - t0, 0.9)

    def test_spin_then_blocks_for_a_late_message(self):
        a, b = self.pair()
        t = later(0.1, lambda: b.send({"op": "late"}))
        t0 = time.perf_counter()
        msg, _ = a.recv(spin=0.01)
        t.join()
        self.assertEqual(msg, {"op": "late"})
        self.assertGreaterEqual(time.perf_counter() - t0, 0.09)

    def test_spin_sees_the_peer_leave(self):
        a, b = self.pair()
        b.close()
        with self.assertRaises(wire.PeerLost):
            a.recv(spin=0.05)

    def test_descriptors_only_where_accepted(self):
        r, w = os.pipe()
        try:
            a, b = self.pair(accept_fds=False)
            b.send({"op": "arena"}, fds=(r,))
            msg, fds = a.recv(timeout=1, spin=0.05)
            self.assertEqual((msg, fds), ({"op": "arena"}, []))
            c, d = self.pair(accept_fds=True)
            d.send({"op": "arena"}, fds=(r,))
            msg, fds = c.recv(timeout=1)
            self.assertEqual(len(fds), 1)
            os.close(fds[0])
        finally:
            os.close(r)
            os.close(w)

    def test_not_json_and_not_an_object(self):
        a, b = self.pair()
        b.sock.send(b"\xff{")
        with self.assertRaises(wire.ProtocolError):
            a.recv(timeout=1)
        b.sock.send(b"[1, 2]")
        with self.assertRaises(wire.ProtocolError):
            a.recv(timeout=1, spin=0.05)

    def test_over_the_cap(self):
        a, b = self.pair()
        with self.assertRaises(wire.ProtocolError):
            b.send({"x": "y" * wire.MAX_MESSAGE})


class MailboxTest(unittest.TestCase):
    """The timed loop's channel from checker to candidate through shared
    memory (MKB_JUDGE_GO=mailbox): messages without descriptors through the
    box, with descriptors through the socket, announced in the box; the
    candidate's end can neither write nor resize it. With
    MKB_JUDGE_REPLY=mailbox the replies through a second box, which the
    checker reads as it reads the socket: capped, a copy, with a timeout."""

    def setUp(self):
        from mkb_grader import mailbox
        self.mailbox = mailbox
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.checker, self.candidate = wire.Peer(a.detach()), wire.Peer(b.detach(), accept_fds=True)
        self.addCleanup(self.checker.close)
        self.addCleanup(self.candidate.close)
        self.box = self.checker.box_out = mailbox.Mailbox.make(checker_writes=True)
        self.addCleanup(self.checker.box_out.close)
        self.candidate.box_in = mailbox.Mailbox(os.dup(self.box.fd), writer=False)
        self.addCleanup(self.candidate.box_in.close)

    def reply_box(self):
        """MKB_JUDGE_REPLY=mailbox: the candidate's replies through a second box."""
        self.checker.box_in = self.mailbox.Mailbox.make(checker_writes=False)
        self.addCleanup(self.checker.box_in.close)
        self.candidate.box_out = self.mailbox.Mailbox(os.dup(self.checker.box_in.fd), writer=True)
        self.addCleanup(self.candidate.box_out.close)

    def test_messages_through_the_box_in_order(self):
        for n in range(3):
            self.checker.send({"op": "go", "n": n})
            self.assertEqual(self.candidate.recv(), ({"op": "go", "n": n}, []))
        # nothing went through the socket
        with self.assertRaises(BlockingIOError):
            self.candidate.sock.recv(1, socket.MSG_DONTWAIT)
        # replies do
        self.candidate.send({"ok": True})
        self.assertEqual(self.checker.recv(timeout=1), ({"ok": True}, []))

    def test_a_message_sent_while_the_candidate_spins(self):
        t = later(0.05, lambda: self.checker.send({"op": "go"}))
        msg, _ = self.candidate.recv()
        t.join()
        self.assertEqual(msg, {"op": "go"})

    def test_a_long_wait_naps_after_the_spin(self):
        # a message that comes after the spin's limit is still read, and the
        # waiting side slept most of the time (its CPU time well under the wait)
        from unittest import mock
        with mock.patch.object(self.mailbox, "SPIN_LIMIT_S", 0.02):
            box = self.mailbox.Mailbox(self.box.fd, writer=False)
            t = later(0.3, lambda: self.box.put({"op": "late"}))
            cpu0 = time.process_time()
            got = box.get(spin_s=self.mailbox.SPIN_LIMIT_S)
            cpu = time.process_time() - cpu0
            t.join()
        self.assertEqual(got, {"op": "late"})
        self.assertLess(cpu, 0.15)

    def test_descriptors_still_through_the_socket(self):
        r, w = os.pipe()
        try:
            self.checker.send({"op": "arena"}, fds=(r,))
            msg, fds = self.candidate.recv()
            self.assertEqual(msg, {"op": "arena"})
            self.assertEqual(len(fds), 1)
            os.close(fds[0])
            self.checker.send({"op": "go"})  # and the box again after it
            self.assertEqual(self.candidate.recv(), ({"op": "go"}, []))
        finally:
            os.close(r)
            os.close(w)

    def test_the_checker_leaving_ends_the_wait(self):
        later(0.05, self.checker.sock.close).join()
        t0 = time.perf_counter()
        with self.assertRaises(wire.PeerLost):
            self.candidate.recv()
        self.assertLess(time.perf_counter() - t0, 5)

    def test_the_candidate_cannot_write_or_resize_the_box(self):
        with self.assertRaises(TypeError):
            self.candidate.box_in.mem[0:8] = bytes(8)
        with self.assertRaises(PermissionError):
            os.ftruncate(self.candidate.box_in.fd, 0)
        import mmap
        try:
            mmap.mmap(self.candidate.box_in.fd, self.mailbox.SIZE, mmap.MAP_SHARED, mmap.PROT_WRITE)
        except PermissionError:
            pass  # the future-write seal (Linux 5.1 and later)
        else:
            self.skipTest("this kernel has no future-write seal")

    def test_replies_through_the_second_box(self):
        self.reply_box()
        self.checker.send({"op": "go"})
        self.assertEqual(self.candidate.recv(), ({"op": "go"}, []))
        self.candidate.send({"ok": True, "ms": 0.1})
        self.assertEqual(self.checker.recv(timeout=1), ({"ok": True, "ms": 0.1}, []))
        # a message of the mailbox protocol's own answered through the socket
        self.candidate.send({"ok": True, "mapped": False}, socket_only=True)
        self.checker.box_in, box = None, self.checker.box_in
        self.assertEqual(self.checker.recv(timeout=1), ({"ok": True, "mapped": False}, []))
        self.checker.box_in = box

    def test_a_reply_after_the_alive_check_is_seen(self):
        # a reply that comes after the wait's first look at the socket (every
        # 0.5 s), with a timeout left on the socket by an earlier recv: seen
        # at once, not after that timeout
        self.candidate.send({"ok": True}, socket_only=True)
        self.assertEqual(self.checker.recv(timeout=30), ({"ok": True}, []))  # leaves a 30 s timeout set
        self.reply_box()
        t = later(0.8, lambda: self.candidate.send({"ok": True, "late": 1}))
        t0 = time.perf_counter()
        got = self.checker.recv(timeout=30)
        t.join()
        self.assertEqual(got, ({"ok": True, "late": 1}, []))
        self.assertLess(time.perf_counter() - t0, 5)

    def test_a_candidate_that_never_replies_times_out(self):
        self.reply_box()
        t0 = time.perf_counter()
        with self.assertRaises(wire.PeerTimeout):
            self.checker.recv(timeout=0.6)
        self.assertGreaterEqual(time.perf_counter() - t0, 0.6)

    def test_a_reply_box_of_garbage_or_out_of_bounds(self):
        self.reply_box()
        box = self.candidate.box_out
        box.mem[8:12] = (self.mailbox.SIZE).to_bytes(4, "little")  # longer than the box
        box.mem[0:8] = (1).to_bytes(8, "little")
        with self.assertRaises(wire.ProtocolError):
            self.checker.recv(timeout=1)
        box.mem[16:20] = b"\xff\xfe{}"
        box.mem[8:12] = (4).to_bytes(4, "little")
        box.mem[0:8] = (2).to_bytes(8, "little")
        with self.assertRaises(wire.ProtocolError):
            self.checker.recv(timeout=1)

    def test_over_the_box(self):
        with self.assertRaises(wire.ProtocolError):
            self.checker.send({"x": "y" * self.mailbox.SIZE})

    def test_garbage_in_the_box_is_a_protocol_error(self):
        box = self.checker.box_out
        box.mem[16:18] = b"[1"
        box.mem[8:12] = (2).to_bytes(4, "little")
        box.mem[0:8] = (1).to_bytes(8, "little")
        with self.assertRaises(wire.ProtocolError):
            self.candidate.recv()


if __name__ == "__main__":
    unittest.main()
