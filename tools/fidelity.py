"""Side-by-side check of our full-source problems against a local copy of the
published sources (developer tool, issue 16).

    build/python tools/fidelity.py --public DIR [--problems 1,2,...] [--seeds 0,1] [--full]

DIR holds the published files at their repository paths (problems/<family>/
NN_<name>.py); nothing of them lives in this repository. For each of the 32
problems whose source is published:

  inputs     the names and order of the public reference's parameters against
             ours (problem.json "inputs" and reference()'s signature), and the
             dtype / shape / scalar type of every input of the public
             make_inputs() against ours on the same sizes;
  workload   our visible workload against the sizes read off the public module
             (its constants and captured tables);
  outputs    both references run on the SAME inputs (the public make_inputs()
             under torch.manual_seed(seed), on the CPU, each reference on its own
             clone); every output must be bit-identical, or within one unit in
             the last place where noted (the row prints the largest ulp gap).

Where the visible size is too heavy for a CPU run here, the public module's
own size constants are lowered first (the row says so, and --full runs the
visible size). Exits 1 if any row differs.
"""
import argparse
import glob
import importlib.util
import inspect
import json
import os
import sys
import time
import types

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "grader"))

from mkb_grader.problem import load_module  # noqa: E402

FULL_SOURCE = (1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 36,
               44, 68, 69, 70, 71, 72, 73, 74)


def _indptr_total(t):
    return int(t[-1])


def _prefix(table, n):
    return tuple(table[:n + 1])


# Per problem: "visible" maps the public module (its constants) to the workload
# parameters ours must have for the same inputs; "reduce" lowers the public's
# own size constants for a CPU run (values are functions of the module, or
# plain values); "captured" names the workload flag that selects the public's
# captured tables in our make_inputs.
SPECS = {}

# Workload keys that are totals of a layout (attended pairs, tokens of a paged
# layout, selected entries): our make_inputs checks them when given, so a
# reduced run drops them.
DERIVED = ("pairs", "kv_tokens", "selected")


def spec(number, visible, reduce=None, vary=()):
    SPECS[number] = {"visible": visible, "reduce": reduce or {}, "vary": vary}


def _decode(m):
    return {"batch": len(m.KV_INDPTR) - 1, "kv_tokens": m.KV_INDPTR[-1], "pool_pages": m.NUM_PAGES,
            "q_heads": m.NUM_QO_HEADS, "kv_heads": m.NUM_KV_HEADS, "head_dim": m.HEAD_DIM, "captured": 1}


def _decode_paged(m):
    return {"batch": len(m.KV_INDPTR) - 1, "kv_pages": m.KV_INDPTR[-1], "pool_pages": m.NUM_PAGES,
            "q_heads": m.NUM_QO_HEADS, "kv_heads": m.NUM_KV_HEADS, "head_dim": m.HEAD_DIM, "captured": 1}


def _prefill(m):
    return {"batch": len(m.QO_INDPTR) - 1, "q_tokens": m.QO_INDPTR[-1], "kv_tokens": m.KV_INDPTR[-1],
            "pool_pages": m.NUM_PAGES, "q_heads": m.NUM_QO_HEADS, "kv_heads": m.NUM_KV_HEADS,
            "head_dim": m.HEAD_DIM, "captured": 1}


def _prefill_paged(m):
    return {"batch": len(m.QO_INDPTR) - 1, "q_tokens": m.QO_INDPTR[-1], "kv_pages": m.KV_INDPTR[-1],
            "pool_pages": m.NUM_PAGES, "q_heads": m.NUM_QO_HEADS, "kv_heads": m.NUM_KV_HEADS,
            "head_dim": m.HEAD_DIM, "captured": 1}


def _ragged(m):
    return {"batch": len(m.Q_LENS), "q_tokens": sum(m.Q_LENS), "kv_tokens": sum(m.Q_LENS) + sum(m.PREFIX_LENS),
            "q_heads": m.NUM_QO_HEADS, "kv_heads": m.NUM_KV_HEADS, "head_dim": m.HEAD_DIM, "captured": 1}


def _cut_indptr(n, pages):
    """Reduce a paged problem to its first n sequences over a pool of `pages`."""
    return {"KV_INDPTR": lambda m: _prefix(m.KV_INDPTR, n),
            "KV_LAST_PAGE_LEN": lambda m: tuple(m.KV_LAST_PAGE_LEN[:n]), "NUM_PAGES": pages}


spec(1, _decode)
spec(2, _decode)
spec(3, _decode_paged, {"KV_INDPTR": lambda m: _prefix(m.KV_INDPTR, 9),
                        "KV_LAST_PAGE_LEN": lambda m: tuple(m.KV_LAST_PAGE_LEN[:9]), "NUM_PAGES": 1000})
spec(4, _prefill, {"QO_INDPTR": lambda m: _prefix(m.QO_INDPTR, 12), "KV_INDPTR": lambda m: _prefix(m.KV_INDPTR, 12)})
spec(5, _prefill)
spec(6, _prefill_paged, {"QO_INDPTR": lambda m: _prefix(m.QO_INDPTR, 4), "KV_INDPTR": lambda m: _prefix(m.KV_INDPTR, 4),
                         "KV_LAST_PAGE_LEN": lambda m: tuple(m.KV_LAST_PAGE_LEN[:4]), "NUM_PAGES": 1200})
spec(7, _prefill_paged)
spec(8, _ragged)
spec(9, _ragged)
spec(14, lambda m: {"batch": len(m.KV_INDPTR) - 1, "kv_tokens": m.KV_INDPTR[-1], "pool_pages": m.NUM_PAGES,
                    "q_heads": m.NUM_QO_HEADS, "ckv_dim": m.HEAD_DIM_CKV, "kpe_dim": m.HEAD_DIM_KPE, "captured": 1},
     {"NUM_PAGES": 100000})
spec(15, lambda m: {"batch": len(m.QO_INDPTR) - 1, "q_tokens": m.QO_INDPTR[-1], "kv_tokens": m.KV_INDPTR[-1],
                    "pool_pages": m.NUM_PAGES, "q_heads": m.NUM_QO_HEADS, "ckv_dim": m.HEAD_DIM_CKV,
                    "kpe_dim": m.HEAD_DIM_KPE, "captured": 1},
     {"NUM_PAGES": 100000})
spec(16, lambda m: {"batch": len(m.Q_LENS), "q_tokens": sum(m.Q_LENS), "kv_tokens": sum(m.Q_LENS) + sum(m.PREFIX_LENS),
                    "heads": m.NUM_QO_HEADS, "qk_dim": m.QK_DIM, "vo_dim": m.VO_DIM, "captured": 1})
spec(17, lambda m: {"tokens": m.NUM_TOKENS, "pool_pages": m.NUM_PAGES, "q_heads": m.NUM_QO_HEADS,
                    "ckv_dim": m.HEAD_DIM_CKV, "kpe_dim": m.HEAD_DIM_KPE, "topk": m.TOPK, "captured": 1})
spec(18, lambda m: {"batch": len(m.SEQ_LENS), "tokens": sum(m.SEQ_LENS), "pool_pages": m.NUM_PAGES,
                    "max_pages": m.MAX_NUM_PAGES, "heads": m.NUM_INDEX_HEADS, "head_dim": m.INDEX_HEAD_DIM,
                    "topk": 2048, "captured": 1})
spec(19, lambda m: {"tokens": m.NUM_TOKENS, "max_pad": m.MAX_PAD_TOKENS, "q_heads": m.NUM_Q_HEADS,
                    "kv_heads": m.NUM_KV_HEADS, "head_dim": m.HEAD_DIM, "rotary_dim": m.ROTARY_DIM,
                    "blocks": m.NUM_BLOCKS, "max_position": m.MAX_POSITION_EMBEDDINGS})
spec(20, lambda m: {"tokens": m.NUM_TOKENS, "max_pad": m.MAX_PAD_TOKENS, "heads": m.NUM_HEADS,
                    "q_lora_rank": m.Q_LORA_RANK, "kv_lora_rank": m.KV_LORA_RANK, "nope_dim": m.QK_NOPE_DIM,
                    "rope_dim": m.ROPE_DIM, "blocks": m.NUM_BLOCKS, "max_position": m.MAX_POSITION})
spec(21, lambda m: {"tokens": m.NUM_TOKENS, "max_pad": m.MAX_PAD_TOKENS, "heads": m.NUM_HEADS,
                    "head_dim": m.HEAD_DIM, "blocks": m.NUM_BLOCKS})
spec(22, lambda m: {"tokens": m.NUM_TOKENS, "q_heads": m.NUM_Q_HEADS, "kv_heads": m.NUM_KV_HEADS,
                    "index_q_heads": m.NUM_INDEX_Q_HEADS, "head_dim": m.HEAD_DIM, "rotary_dim": m.ROTARY_DIM,
                    "blocks": m.NUM_BLOCKS, "max_position": m.MAX_POSITION})
spec(23, lambda m: {"requests": m.NUM_REQUESTS, "tokens": m.TOTAL_TOKENS, "blocks": m.NUM_BLOCKS,
                    "entry": m.ENTRY_SIZE})
spec(24, lambda m: {"requests": m.NUM_REQUESTS, "tokens": m.TOTAL_TOKENS, "blocks": m.NUM_BLOCKS},
     vary=(1,))   # the block-table width is drawn per draw
spec(25, lambda m: {"num_blocks": m.NUM_BLOCKS, "mappings": m.NUM_MAPPINGS, "block_size": m.BLOCK_SIZE,
                    "kv_heads": m.NUM_HEADS, "head_dim": m.HEAD_DIM})
spec(26, lambda m: {"reqs": m.MAX_NUM_REQS, "tokens": m.MAX_NUM_BATCHED_TOKENS, "writes": m.NUM_STAGED_WRITES})
spec(28, lambda m: {"tokens": m.BATCH_SIZE, "hidden": m.HIDDEN_SIZE})
spec(36, lambda m: {"tokens": m.BATCH_SIZE, "hidden": m.HIDDEN_SIZE})
spec(44, lambda m: {"tokens": m.SEQ_LEN, "hidden": m.HIDDEN_SIZE, "intermediate": m.INTERMEDIATE_SIZE,
                    "experts": m.NUM_GLOBAL_EXPERTS, "local_experts": m.NUM_LOCAL_EXPERTS},
     {"SEQ_LEN": 512, "HIDDEN_SIZE": 1024, "INTERMEDIATE_SIZE": 256})
spec(68, lambda m: {"batch": m.BATCH_SIZE, "seq": m.SEQ_LEN, "heads": m.NUM_K_HEADS, "v_heads": m.NUM_V_HEADS,
                    "head_dim": m.HEAD_DIM},
     {"BATCH_SIZE": 2, "SEQ_LEN": 128})
spec(69, lambda m: {"batch": m.BATCH_SIZE, "seq": m.SEQ_LEN, "heads": m.NUM_HEADS, "key_dim": m.KEY_DIM,
                    "value_dim": m.VALUE_DIM},
     {"BATCH_SIZE": 2, "SEQ_LEN": 128})
spec(70, lambda m: {"batch": m.BATCH_SIZE, "heads": m.NUM_HEADS, "seq": m.SEQ_LEN, "key_dim": m.KEY_DIM,
                    "value_dim": m.VALUE_DIM},
     )
spec(71, lambda m: {"tokens": m.TOTAL_SEQ_LEN, "seqs": m.NUM_SEQS, "q_heads": m.NUM_Q_HEADS,
                    "v_heads": m.NUM_V_HEADS, "head_dim": m.HEAD_SIZE, "captured": 1})
spec(72, lambda m: {"batch": m.BATCH_SIZE, "q_heads": m.NUM_Q_HEADS, "v_heads": m.NUM_V_HEADS,
                    "head_dim": m.HEAD_SIZE})
spec(73, lambda m: {"batch": m.BATCH_SIZE, "seq": m.SEQ_LEN, "pool": m.POOL_SIZE, "q_heads": m.NUM_Q_HEADS,
                    "v_heads": m.NUM_V_HEADS, "head_dim": m.HEAD_SIZE})
spec(74, lambda m: {"batch": m.BATCH_SIZE, "heads": m.NUM_HEADS, "seq": m.SEQ_LEN, "key_dim": m.KEY_DIM,
                    "value_dim": m.VALUE_DIM},
     {"BATCH_SIZE": 2, "SEQ_LEN": 128})


def load_public(path):
    """The public module, run on the CPU: its make_inputs() names the CUDA
    device; that one string is changed, nothing else."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    source = source.replace('torch.device("cuda")', 'torch.device("cpu")')
    module = types.ModuleType("public_" + os.path.basename(path)[:-3])
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def public_file(public_dir, number):
    hits = [p for p in glob.glob(os.path.join(public_dir, "problems", "*", f"{number:02d}_*.py"))
            if "/_" not in p.replace(public_dir, "")]
    return hits[0] if len(hits) == 1 else None


def our_dir(number):
    hits = glob.glob(os.path.join(ROOT, "problems", "*", f"{number:02d}_*"))
    return hits[0] if len(hits) == 1 else None


def clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone(v) for v in x)
    return x


def leaves(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in leaves(v)]
    return [x]


def describe(x):
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    return f"{type(x).__name__}={x!r}"


def _ordered(t):
    """Float bits mapped to integers that are monotonic in the value, so the
    difference of two is the number of representable values between them."""
    width = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
             torch.float64: torch.int64}[t.dtype]
    bits = t.contiguous().view(width).to(torch.int64)
    top = {torch.int16: 1 << 15, torch.int32: 1 << 31, torch.int64: 1 << 63}[width]
    return torch.where(bits < 0, -(bits + top), bits) if width != torch.int64 else bits


def compare(ours, theirs):
    """(verdict, detail): 'identical', 'ulp' (max gap 1) or 'differs'."""
    a, b = leaves(ours), leaves(theirs)
    if len(a) != len(b) or type(ours) is not type(theirs) and not (
            isinstance(ours, (list, tuple)) and isinstance(theirs, (list, tuple))):
        return "differs", f"structure {type(ours).__name__}[{len(a)}] vs {type(theirs).__name__}[{len(b)}]"
    worst, notes = 0, []
    for i, (x, y) in enumerate(zip(a, b)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            if x != y:
                return "differs", f"output {i}: {x!r} vs {y!r}"
            continue
        if x.dtype != y.dtype or x.shape != y.shape:
            return "differs", f"output {i}: ours {describe(x)} vs public {describe(y)}"
        if torch.equal(x, y) or (x.is_floating_point() and torch.equal(x.isnan(), y.isnan())
                                 and torch.equal(x.nan_to_num(), y.nan_to_num())):
            continue
        if not x.is_floating_point():
            bad = int((x != y).sum())
            return "differs", f"output {i}: {bad} of {x.numel()} elements differ"
        both_inf = torch.isinf(x) & torch.isinf(y) & (x == y)
        gap = (_ordered(x) - _ordered(y)).abs().masked_fill(both_inf, 0)
        ulps = int(gap.max())
        worst = max(worst, ulps)
        notes.append(f"output {i}: {int((gap > 0).sum())} elements, max {ulps} ulp")
    if worst == 0:
        return "identical", "bit-identical"
    return ("ulp" if worst <= 1 else "differs"), "; ".join(notes)


def public_names(module):
    return list(inspect.signature(module.reference).parameters)


def our_names(problem_dir, module):
    with open(os.path.join(problem_dir, "problem.json"), encoding="utf-8") as f:
        meta = json.load(f)
    listed = [s.split()[0] for s in meta["inputs"]]
    signature = list(inspect.signature(module.reference).parameters)
    return meta, listed, signature


def check_problem(number, public_dir, seeds, full):
    row = {"problem": number, "checks": [], "verdict": "identical", "size": "visible"}

    def fail(what):
        row["checks"].append(what)
        row["verdict"] = "differs"

    path, mine = public_file(public_dir, number), our_dir(number)
    if path is None or mine is None:
        fail(f"missing: public {path}, ours {mine}")
        return row
    row["public"] = os.path.relpath(path, public_dir)
    row["ours"] = os.path.relpath(mine, ROOT)
    pub = load_public(path)
    ours = load_module(f"ours_{number:02d}", os.path.join(mine, "reference.py"))
    meta, listed, signature = our_names(mine, ours)
    theirs = public_names(pub)
    if listed != theirs or signature != theirs:
        fail(f"input names: public {theirs}, problem.json {listed}, reference() {signature}")

    sp = SPECS[number]
    expected_visible = sp["visible"](pub)
    visible = meta["workloads"]["visible"]
    if any(visible.get(k) != v for k, v in expected_visible.items()):
        fail(f"visible workload {visible} != public {expected_visible}")

    if sp["reduce"] and not full:
        for name, value in sp["reduce"].items():
            setattr(pub, name, value(pub) if callable(value) else value)
        row["size"] = "reduced: " + ", ".join(f"{k}={getattr(pub, k) if not isinstance(getattr(pub, k), tuple) else f'{len(getattr(pub, k))} entries'}"
                                              for k in sp["reduce"])
    reduced_visible = sp["visible"](pub)
    params = dict(visible, **reduced_visible)
    if sp["reduce"] and not full and "captured" in params:
        # a reduced table is not the captured one: ours draws a layout of the same sizes
        params["captured"] = 0
        for key in DERIVED:   # totals of the captured layout; ours then checks none of them
            if key not in reduced_visible:
                params.pop(key, None)

    verdicts, details = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        public_inputs = pub.make_inputs()
        our_inputs = ours.make_inputs(**params, seed=seed, device="cpu")
        if len(public_inputs) != len(our_inputs):
            fail(f"make_inputs: {len(our_inputs)} inputs vs public {len(public_inputs)}")
        else:
            for i, (x, y) in enumerate(zip(our_inputs, public_inputs)):
                same = (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dtype == y.dtype
                        and (x.shape == y.shape or i in sp["vary"] and x.dim() == y.dim())) or \
                       (not isinstance(x, torch.Tensor) and type(x) is type(y) and x == y)
                if not same:
                    fail(f"input {i} ({theirs[i] if i < len(theirs) else '?'}): ours {describe(x)} "
                         f"vs public {describe(y)}")
        with torch.no_grad():
            expected = pub.reference(*clone(public_inputs))
            try:
                actual = ours.reference(*clone(public_inputs))
            except Exception as exc:  # noqa: BLE001 - reported in the row
                fail(f"our reference on the public inputs: {type(exc).__name__}: {exc}"[:300])
                continue
        verdict, detail = compare(actual, expected)
        verdicts.append(verdict)
        details.append(f"seed {seed}: {detail}")
    if "differs" in verdicts:
        fail("outputs: " + " | ".join(details))
    elif "ulp" in verdicts and row["verdict"] == "identical":
        row["verdict"] = "within 1 ulp"
        row["checks"].append("outputs: " + " | ".join(details))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--public", required=True, help="local copy of the published repository (its problems/ folder)")
    ap.add_argument("--problems", default=",".join(str(n) for n in FULL_SOURCE))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--full", action="store_true", help="run every problem at its visible size")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    numbers = [int(n) for n in args.problems.split(",") if n]
    unknown = [n for n in numbers if n not in SPECS]
    if unknown:
        ap.error(f"not a full-source problem: {unknown}")
    seeds = [int(s) for s in args.seeds.split(",")]
    bad = 0
    print(f"{'#':>2}  {'verdict':<13} {'secs':>6}  size / differences")
    for n in numbers:
        t0 = time.time()
        try:
            row = check_problem(n, os.path.abspath(args.public), seeds, args.full)
        except Exception as exc:  # noqa: BLE001 - one broken problem must not hide the others
            row = {"verdict": "differs", "size": "?", "checks": [f"{type(exc).__name__}: {exc}"[:400]]}
        bad += row["verdict"] == "differs"
        print(f"{n:02d}  {row['verdict']:<13} {time.time() - t0:6.1f}  {row['size']}", flush=True)
        for c in row["checks"]:
            print(f"      {c}", flush=True)
    print(f"{len(numbers) - bad} of {len(numbers)} match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
