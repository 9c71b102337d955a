"""The correctness rule of PROTOCOL.md on hand-built tensors."""
import unittest

import torch

from mkb_grader import correctness as C


def bf16_case():
    """anchor (float64), expected (bf16 rounding of it) and the allowance."""
    anchor = torch.linspace(-3.0, 5.0, 64, dtype=torch.float64).reshape(8, 8)
    expected = anchor.to(torch.bfloat16)
    ref_err = (expected.double() - anchor).abs().max().item()
    allowed = 3.0 * max(ref_err, torch.finfo(torch.bfloat16).eps * 5.0)
    return anchor, expected, allowed


def with_error_at(anchor, dtype, err):
    """anchor with one element moved by err, stored in dtype, then verified."""
    out = anchor.clone()
    out[2, 3] += err
    return out.to(dtype)


class AllowanceTest(unittest.TestCase):
    def test_allowance_formula(self):
        anchor, expected, allowed = bf16_case()
        self.assertAlmostEqual(C.allowance(expected, anchor), allowed, places=12)

    def test_float64_output_passes_just_under_and_fails_just_over(self):
        # Build float32 outputs so the perturbation is represented exactly enough.
        anchor = torch.linspace(-2.0, 2.0, 101, dtype=torch.float64)
        expected = anchor.to(torch.float32)
        allowed = C.allowance(expected, anchor)
        eps32 = torch.finfo(torch.float32).eps
        self.assertAlmostEqual(allowed, 3.0 * max((expected.double() - anchor).abs().max().item(), eps32 * 2.0))
        # A float32 value whose distance to the anchor is just below / above.
        base = anchor.clone()
        under = base.clone()
        under[10] = anchor[10] + allowed * 0.98
        over = base.clone()
        over[10] = anchor[10] + allowed * 1.05
        under32, over32 = under.to(torch.float32), over.to(torch.float32)
        err_under = (under32.double() - anchor).abs().max().item()
        err_over = (over32.double() - anchor).abs().max().item()
        self.assertLessEqual(err_under, allowed)
        self.assertGreater(err_over, allowed)
        C.check(under32, expected, anchor)
        with self.assertRaisesRegex(C.Mismatch, "max error .* > allowance"):
            C.check(over32, expected, anchor)

    def test_bf16_boundary(self):
        anchor, expected, allowed = bf16_case()
        # Scan perturbations of one element; every representable bf16 result
        # within the allowance passes, every one beyond it fails.
        seen_pass = seen_fail = False
        for k in range(1, 80):
            actual = with_error_at(anchor, torch.bfloat16, allowed * k / 40)
            err = (actual.double() - anchor).abs().max().item()
            if err <= allowed:
                C.check(actual, expected, anchor)
                seen_pass = True
            else:
                with self.assertRaises(C.Mismatch):
                    C.check(actual, expected, anchor)
                seen_fail = True
        self.assertTrue(seen_pass and seen_fail)

    def test_relative_1e2_passes_and_5e2_fails_on_bf16(self):
        anchor, expected, _ = bf16_case()
        C.check((anchor * 1.01).to(torch.bfloat16), expected, anchor)
        with self.assertRaises(C.Mismatch):
            C.check((anchor * 1.05).to(torch.bfloat16), expected, anchor)


class SpecialValuesTest(unittest.TestCase):
    def test_nan_and_inf_fail(self):
        anchor, expected, _ = bf16_case()
        for bad in (float("nan"), float("inf"), float("-inf")):
            actual = expected.clone()
            actual[0, 0] = bad
            with self.assertRaisesRegex(C.Mismatch, "NaN/Inf"):
                C.check(actual, expected, anchor)

    def test_integer_outputs_are_exact(self):
        expected = torch.arange(10, dtype=torch.int32)
        C.check(expected.clone(), expected, expected)
        actual = expected.clone()
        actual[7] += 1
        with self.assertRaisesRegex(C.Mismatch, "1 of 10 elements differ"):
            C.check(actual, expected, expected)

    def test_bool_outputs_are_exact(self):
        expected = torch.tensor([True, False, True])
        with self.assertRaises(C.Mismatch):
            C.check(torch.tensor([True, True, True]), expected, expected)

    def test_empty_tensors_pass(self):
        e = torch.empty(0, 4, dtype=torch.bfloat16)
        C.check(torch.empty(0, 4, dtype=torch.bfloat16), e, e.double())


class StructureTest(unittest.TestCase):
    def test_structure_shape_dtype(self):
        e = torch.zeros(2, 3)
        with self.assertRaisesRegex(C.Mismatch, "expected tensor.*got tuple"):
            C.check((e,), e, e.double())
        with self.assertRaisesRegex(C.Mismatch, "shape"):
            C.check(torch.zeros(3, 2), e, e.double())
        with self.assertRaisesRegex(C.Mismatch, "dtype"):
            C.check(torch.zeros(2, 3, dtype=torch.float64), e, e.double())
        with self.assertRaisesRegex(C.Mismatch, "expected 2 items"):
            C.check((e,), (e, e), (e.double(), e.double()))
        with self.assertRaisesRegex(C.Mismatch, "expected tuple"):
            C.check([e, e], (e, e), (e.double(), e.double()))

    def test_nested_outputs_name_the_failing_one(self):
        e = (torch.ones(4), torch.arange(3))
        a = (torch.ones(4), torch.tensor([0, 1, 5]))
        with self.assertRaisesRegex(C.Mismatch, r"output\[1\]"):
            C.check(a, e, (e[0].double(), e[1]))


class AnchorTest(unittest.TestCase):
    def test_to_anchor_promotes_only_low_precision_floats(self):
        x = (torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.float16),
             torch.ones(2), torch.arange(2), 3.5, torch.ones(2, dtype=torch.float8_e4m3fn))
        a = C.to_anchor(x)
        self.assertEqual([t.dtype for t in a[:3]], [torch.float64] * 3)
        self.assertEqual(a[3].dtype, torch.int64)
        self.assertEqual(a[4], 3.5)
        self.assertEqual(a[5].dtype, torch.float8_e4m3fn)

    def test_to_anchor_copies_every_tensor(self):
        # An in-place reference run on the anchor inputs must not write into
        # the originals, integer and fp8 tensors included.
        x = (torch.zeros(3, dtype=torch.uint8), torch.zeros(3, dtype=torch.int64),
             torch.zeros(3, dtype=torch.float8_e4m3fn), torch.zeros(3))
        for orig, anc in zip(x, C.to_anchor(x)):
            self.assertNotEqual(orig.data_ptr(), anc.data_ptr())


class KeepTest(unittest.TestCase):
    """empty_like and copy_into: the baseline's block keeps its outputs as
    copies in buffers made before the calls."""

    def test_values_land_in_the_buffers(self):
        tmpl = (torch.zeros(3, 4, dtype=torch.bfloat16), torch.zeros(2), 7)
        buf = C.empty_like(tmpl)
        self.assertEqual(buf[2], 7)
        out = (torch.randn(3, 4).to(torch.bfloat16), torch.randn(2), 7)
        got = C.copy_into(buf, out)
        self.assertIs(got[0], buf[0])
        self.assertIs(got[1], buf[1])
        self.assertTrue(torch.equal(got[0], out[0]) and torch.equal(got[1], out[1]))

    def test_a_different_output_is_kept_as_it_is(self):
        buf = C.empty_like((torch.zeros(3), torch.zeros(2)))
        other = torch.ones(4)  # the structure differs: the output itself
        self.assertIs(C.copy_into(buf, other), other)
        got = C.copy_into(buf, (torch.ones(3), torch.ones(5)))  # one shape differs
        self.assertIs(got[0], buf[0])
        self.assertEqual(got[1].shape, (5,))


if __name__ == "__main__":
    unittest.main()
