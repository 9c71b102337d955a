import glob, json, os, sys, time
sys.path.insert(0, "grader")
import torch
from mkb_grader.problem import Problem
from mkb_grader import correctness, numerics

def leaves(x):
    return list(x) if isinstance(x, tuple) else [x]

def timed(fn, args, n=5):
    for _ in range(2):
        fn(*args)
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(*args); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]

def err(out, anchor):
    return [float((o.double() - a.double()).abs().max()) for o, a in zip(leaves(out), leaves(anchor))]

def variants(num, mod, inp):
    v = {}
    if num == 56:
        x, xs, w, ws = inp[:4]
        T, K = x.shape
        fl = lambda t, b: t.view(t.shape[0], -1, b).flip(1).reshape(t.shape)
        v["k-order flipped"] = (fl(x, 128), xs.flip(1).contiguous(), fl(w, 128), ws.flip(1).contiguous(), *inp[4:])
    if num == 61:
        x, xs, xg, wg, wgs, wgg = inp[:6]
        fl = lambda t, b: t.view(t.shape[0], -1, b).flip(1).reshape(t.shape)
        v["k-order flipped"] = (fl(x, 8), xs.flip(1).contiguous(), xg, fl(wg, 8), wgs.flip(1).contiguous(), wgg, *inp[6:])
    return v

def no_requant(num, mod, inp):
    acc = torch.float32
    if num == 56:
        x_fp8, x_scale, w_fp8, w_scale, nw, cs, pos = inp
        out = mod.reference(*inp)
        x = mod.fp8_dequantize_groups(x_fp8, x_scale, acc); w = mod.fp8_dequantize_tiles(w_fp8, w_scale, acc)
        c = (x @ w.T)[:, :nw.shape[0]]
        c = c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + mod.EPS) * nw.float()
        return (c.to(torch.bfloat16), out[1], out[2])
    if num == 61:
        x = mod.nvfp4_dequantize(*inp[0:3], acc); wgu = mod.nvfp4_dequantize(*inp[3:6], acc)
        wd = mod.nvfp4_dequantize(*inp[6:9], acc)
        g, u = (x @ wgu.T).chunk(2, -1)
        return ((torch.nn.functional.silu(g) * u) @ wd.T).to(torch.bfloat16)

only = [int(a) for a in sys.argv[1:]]
for d in sorted(glob.glob("problems/quantization/[0-9]*/")):
    num = int(os.path.basename(d.rstrip("/"))[:2])
    if only and num not in only:
        continue
    for wl in ("visible", "heldout"):
        try:
            torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
            p = Problem(d, wl)
            t0 = time.time()
            _, inp = p.make_inputs(1, "cuda")
            torch.cuda.synchronize(); mk = time.time() - t0
            in_gb = sum(t.numel() * t.element_size() for t in inp if isinstance(t, torch.Tensor)) / 1e9
            with numerics.strict():
                ms = timed(p.reference, correctness.clone_inputs(inp))
                exp = p.reference(*correctness.clone_inputs(inp))
                anc = p.reference(*correctness.to_anchor(inp))
                row = {"p": num, "wl": wl, "eager_ms": round(ms, 3), "make_s": round(mk, 2), "in_gb": round(in_gb, 3)}
                outs = []
                for o, a in zip(leaves(exp), leaves(anc)):
                    al = correctness.allowance(o, a)
                    outs.append(dict(shape=list(o.shape), ref_err=float((o.double() - a).abs().max()), allow=al,
                                     amax=float(a.abs().max()), std=float(a.std())))
                row["outs"] = outs
                for name, vin in variants(num, p.module, inp).items():
                    e = err(p.reference(*vin), anc)
                    row[name] = [f"{x:.3g} ({'pass' if x <= o['allow'] else 'FAIL'})" for x, o in zip(e, outs)]
                if num in (56, 61):
                    e = err(no_requant(num, p.module, inp), anc)
                    row["no-requant"] = [f"{x:.3g} ({'pass' if x <= o['allow'] else 'FAIL'})" for x, o in zip(e, outs)]
            row["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 1)
            print(json.dumps(row), flush=True)
            del inp, exp, anc
        except Exception as exc:
            print(num, wl, "ERROR", type(exc).__name__, str(exc)[:300], flush=True)
