"""The correctness rule of PROTOCOL.md ("Correctness (paper)").

Float outputs pass iff
    max|actual - anchor| <= 3.0 * max(max|expected - anchor|, eps(dtype) * max|anchor|)
with expected = reference on the inputs, anchor = reference on float64 copies
of the fp32/fp16/bf16 inputs, eps = the output dtype's machine epsilon, maxima
over the whole tensor in float64. Integer and bool outputs must be equal;
empty tensors pass; NaN/Inf fail. Structure, shape, dtype and device must match.
"""
import torch

FACTOR = 3.0
ANCHOR_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class Mismatch(Exception):
    """A candidate output differs from the reference; str() says how."""


def to_anchor(value):
    """float64 copy of a fp32/fp16/bf16 tensor; other tensors copied as they
    are (an in-place reference must not write into the candidate's inputs);
    scalars unchanged."""
    if isinstance(value, torch.Tensor):
        if value.dtype in ANCHOR_DTYPES:
            return value.detach().to(torch.float64)
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(to_anchor(v) for v in value)
    return value


def clone_inputs(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(clone_inputs(v) for v in value)
    return value


def empty_like(value):
    """Uninitialised tensors shaped as value's, in its structure."""
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value)
    if isinstance(value, (tuple, list)):
        return type(value)(empty_like(v) for v in value)
    return value


def copy_into(dst, src):
    """src's values in dst's tensors where the structure, shapes and dtypes
    match (returns dst, now holding them); anything else is src itself."""
    if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) \
            and dst.shape == src.shape and dst.dtype == src.dtype and dst.device == src.device:
        return dst.copy_(src)
    if isinstance(dst, (tuple, list)) and isinstance(src, (tuple, list)) and len(dst) == len(src):
        return type(src)(copy_into(d, v) for d, v in zip(dst, src))
    return src


def _describe(value):
    text = getattr(value, "describe_as", None)
    if isinstance(text, str):  # a stand-in for what a candidate process returned
        return text
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)} {str(value.dtype).replace('torch.', '')} on {value.device.type}"
    return type(value).__name__


def check_structure(actual, expected, where="output"):
    """Raise Mismatch unless actual has exactly expected's structure, shapes,
    dtypes and device types."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{where}: expected {_describe(expected)}, got {_describe(actual)}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{where}: shape {list(actual.shape)} != expected {list(expected.shape)}")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{where}: dtype {actual.dtype} != expected {expected.dtype}")
        if actual.device.type != expected.device.type:
            raise Mismatch(f"{where}: device {actual.device.type} != expected {expected.device.type}")
        return
    if isinstance(expected, (tuple, list)):
        if type(actual) is not type(expected):
            raise Mismatch(f"{where}: expected {type(expected).__name__} of {len(expected)}, got {_describe(actual)}")
        if len(actual) != len(expected):
            raise Mismatch(f"{where}: expected {len(expected)} items, got {len(actual)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            check_structure(a, e, f"{where}[{i}]")
        return
    if type(actual) is not type(expected):
        raise Mismatch(f"{where}: expected {_describe(expected)}, got {_describe(actual)}")


def allowance(expected, anchor):
    """The largest max|actual - anchor| that passes, for one float output."""
    eps = torch.finfo(expected.dtype).eps
    e = expected.detach().to(torch.float64)
    a = anchor.detach().to(device=e.device, dtype=torch.float64)
    ref_err = (e - a).abs().max().item()
    scale = a.abs().max().item()
    return FACTOR * max(ref_err, eps * scale)


def _check_exact(actual, expected, where):
    """Integer and bool outputs: every element equal."""
    if not torch.equal(actual, expected):
        bad = (actual != expected).sum().item()
        raise Mismatch(f"{where}: {bad} of {actual.numel()} elements differ (exact output)")


def _finite_float64(actual, where):
    """actual in float64; a NaN or Inf anywhere fails."""
    act = actual.detach().to(torch.float64)
    finite = torch.isfinite(act)
    if not bool(finite.all()):
        bad = (~finite).sum().item()
        raise Mismatch(f"{where}: {bad} NaN/Inf of {actual.numel()} elements")
    return act


def check_tensor(actual, expected, anchor, where="output"):
    """Raise Mismatch unless one output tensor passes; return (max_err, allowed)."""
    if actual.numel() == 0:
        return 0.0, 0.0
    if not (expected.is_floating_point() or expected.is_complex()):
        _check_exact(actual, expected, where)
        return 0.0, 0.0
    act = _finite_float64(actual, where)
    allowed = allowance(expected, anchor)
    a = anchor.detach().to(device=act.device, dtype=torch.float64)
    diff = (act - a).abs()
    err = diff.max().item()
    if not err <= allowed:
        idx = int(diff.argmax().item())
        pos = list(torch.unravel_index(torch.tensor(idx), tuple(actual.shape)))
        pos = [int(p) for p in pos]
        raise Mismatch(f"{where}: max error {err:.6g} > allowance {allowed:.6g} "
                       f"(at {pos}: got {act.reshape(-1)[idx].item():.6g}, "
                       f"anchor {a.reshape(-1)[idx].item():.6g})")
    return err, allowed


def check(actual, expected, anchor, where="output"):
    """Structure first, then values. Returns the list of (where, max_err,
    allowance) for float outputs; raises Mismatch on the first failure."""
    check_structure(actual, expected, where)
    rows = []
    _check_values(actual, expected, anchor, where, rows)
    return rows


def _check_values(actual, expected, anchor, where, rows):
    if isinstance(expected, torch.Tensor):
        err, allowed = check_tensor(actual, expected, anchor, where)
        rows.append((where, err, allowed))
    elif isinstance(expected, (tuple, list)):
        for i, (a, e, n) in enumerate(zip(actual, expected, anchor)):
            _check_values(a, e, n, f"{where}[{i}]", rows)
    elif isinstance(expected, float):
        if not abs(actual - anchor) <= FACTOR * max(abs(expected - anchor), 2.220446049250313e-16 * abs(anchor)):
            raise Mismatch(f"{where}: {actual!r} != expected {expected!r}")
    elif actual != expected:
        raise Mismatch(f"{where}: {actual!r} != expected {expected!r}")


# ---- timed calls: against the reference alone -----------------------------
# The full rule needs the float64 anchor, which costs a second reference run
# in float64; the 3 re-checked calls pay it. Every other timed call is held to
# a bound that any output passing the full rule also meets: with d = max|expected
# - anchor| and A = 3 max(d, eps max|anchor|), the triangle inequality gives
# max|actual - expected| <= A + d. d is not known without the anchor, so the
# largest d seen on the correctness draws (D) stands in, with 50% headroom for
# draw-to-draw variation, and max|expected| for max|anchor| (docs/judge.md).
BOUND_HEADROOM = 1.5


def reference_error(expected, anchor):
    """max|expected - anchor| of one float output (0 when empty)."""
    if expected.numel() == 0:
        return 0.0
    e = expected.detach().to(torch.float64)
    a = anchor.detach().to(device=e.device, dtype=torch.float64)
    return (e - a).abs().max().item()


def check_against_reference(actual, expected, ref_err, where="output"):
    """Raise Mismatch unless every output is within the bound above (integer
    outputs exactly equal). ref_err: D per float output, in traversal order."""
    floats = iter(ref_err)

    def walk(a, e, w):
        if isinstance(e, torch.Tensor):
            if not e.is_floating_point():
                next(floats, None)
                if a.numel():
                    _check_exact(a, e, w)
                return
            d = next(floats, 0.0) * BOUND_HEADROOM
            if a.numel() == 0:
                return
            act = _finite_float64(a, w)
            ex = e.detach().to(device=act.device, dtype=torch.float64)
            bound = FACTOR * max(d, torch.finfo(e.dtype).eps * ex.abs().max().item()) + d
            err = (act - ex).abs().max().item()
            if not err <= bound:
                raise Mismatch(f"{w}: max error {err:.6g} against the reference > bound {bound:.6g}")
        elif isinstance(e, (tuple, list)):
            for i, (x, y) in enumerate(zip(a, e)):
                walk(x, y, f"{w}[{i}]")
        elif isinstance(e, float):
            if not abs(a - e) <= FACTOR * 2.220446049250313e-16 * abs(e) + 1e-300:
                raise Mismatch(f"{w}: {a!r} != expected {e!r}")
        elif a != e:
            raise Mismatch(f"{w}: {a!r} != expected {e!r}")

    walk(actual, expected, where)
