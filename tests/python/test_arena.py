"""grader/mkb_grader/arena.py on the CPU: inputs through a host arena and
back as fresh tensors, and the views each side keeps between calls."""
import unittest
from unittest import mock

import torch

from mkb_grader import arena


class ArenaTest(unittest.TestCase):
    def setUp(self):
        self.a = arena.Arena(1 << 16)
        self.addCleanup(self.a.close)

    def test_inputs_round_trip_as_fresh_tensors(self):
        values = (torch.randn(5, 7).to(torch.bfloat16), [torch.arange(6).reshape(2, 3).t()], 3.5)
        desc, size = arena.plan(values)
        self.assertLessEqual(size, self.a.size)
        arena.write(self.a, values, desc)
        got = arena.materialise(self.a, desc, "cpu")
        self.assertTrue(torch.equal(got[0], values[0]))
        self.assertTrue(torch.equal(got[1][0], values[1][0]))
        self.assertEqual(got[1][0].stride(), values[1][0].stride())
        self.assertEqual(got[2], 3.5)
        # fresh: writing the arena again does not change what was handed out
        arena.write(self.a, (torch.zeros(5, 7, dtype=torch.bfloat16), [torch.zeros(3, 2, dtype=torch.long)], 0),
                    desc)
        self.assertTrue(torch.equal(got[0], values[0]))

    def test_a_view_is_made_once_per_shape(self):
        v = self.a.view(256, 64, torch.float32, [4, 4], [4, 1])
        self.assertIs(self.a.view(256, 64, torch.float32, [4, 4], [4, 1]), v)
        self.assertIsNot(self.a.view(256, 64, torch.float32, [16], [1]), v)
        self.assertIsNot(self.a.view(512, 64, torch.float32, [4, 4], [4, 1]), v)
        v.fill_(2.0)  # still a view of the shared memory
        self.assertTrue(torch.equal(self.a.view(256, 64, torch.float32, [16], [1]), torch.full((16,), 2.0)))

    def test_bad_views_are_refused_every_time(self):
        for _ in range(2):
            with self.assertRaises(ValueError):
                self.a.view(self.a.size, 64, torch.float32, [16], [1])
            with self.assertRaises(ValueError):
                self.a.view(0, 64, torch.float32, [16], [-1])
        self.assertEqual(self.a.views, {})

    def test_the_kept_views_are_bounded(self):
        with mock.patch.object(arena, "VIEWS_KEPT", 3):
            for n in range(1, 8):
                self.a.view(0, 4 * n, torch.float32, [n], [1])
                self.assertLessEqual(len(self.a.views), 3)

    def test_a_snapshot_over_copies_already_made(self):
        # the candidate's export, then the checker's snapshot either as copies
        # of its own or as views of the slot copies it already made
        expected = (torch.randn(3, 5).to(torch.bfloat16), torch.tensor(2.5), torch.zeros(0))
        slots, size = arena.output_slots(expected)
        out = (torch.randn(3, 5).to(torch.bfloat16), torch.tensor(-1.0), torch.zeros(0))
        desc = arena.export(self.a, out, slots)
        plain = arena.snapshot(self.a, desc, expected, slots, "cpu")
        raw = [arena.private_copy(self.a.view(off, n, torch.uint8, [n], [1]), "cpu") for off, n in slots]
        viewed = arena.snapshot(self.a, desc, expected, slots, "cpu", raw)
        for p, v, o in zip(plain, viewed, out):
            self.assertTrue(torch.equal(p, o) and torch.equal(v, o))
            self.assertEqual((v.dtype, v.shape), (o.dtype, o.shape))
        self.assertEqual(viewed[0].data_ptr(), raw[0].data_ptr())  # no second copy
        arena.export(self.a, (torch.ones(3, 5, dtype=torch.bfloat16), torch.tensor(7.0), torch.zeros(0)), slots)
        self.assertTrue(torch.equal(viewed[0], out[0]))  # still the bytes as they were


if __name__ == "__main__":
    unittest.main()
