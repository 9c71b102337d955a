"""Problem 27: vision patch merger MLP, Qwen3-Omni vision encoder, bf16
(SOL-ExecBench recipe).

The vision encoder's output patches (one row-major raster per grid, grids
listed in grid_thw as (t, h, w)) are LayerNorm-ed (in fp32, back to bf16),
every 2x2 block of neighbouring patches of a grid is concatenated into one
token of width 4 * hidden (order (0,0), (0,1), (1,0), (1,1)), and a GELU MLP
projects it to the language model's width:
    32,768 x 1536 -> 8,192 x 6144 -> fc1 -> GELU (erf) -> fc2 -> 8,192 x 3584
eps is an input (a Python float), as in the public problem.
"""
import math

import torch
import torch.nn.functional as F

MERGE_SIZE = 2


def reference(hidden, grid_thw, ln_weight, ln_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias, eps):
    compute_dtype = torch.promote_types(hidden.dtype, torch.float32)
    hidden_wide = hidden.to(compute_dtype)
    mean = hidden_wide.mean(dim=-1, keepdim=True)
    var = hidden_wide.var(dim=-1, keepdim=True, unbiased=False)
    normed = (hidden_wide - mean) / torch.sqrt(var + eps)
    normed = normed * ln_weight.to(compute_dtype) + ln_bias.to(compute_dtype)
    normed = normed.to(hidden.dtype)

    dim = hidden.shape[-1]
    merged, offset = [], 0
    for t, h, w in grid_thw.tolist():
        n = t * h * w
        x = normed[offset:offset + n]
        x = x.reshape(t, h // MERGE_SIZE, MERGE_SIZE, w // MERGE_SIZE, MERGE_SIZE, dim)
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(-1, MERGE_SIZE * MERGE_SIZE * dim)
        merged.append(x)
        offset += n
    merged_hidden = torch.cat(merged, dim=0)

    hidden_fc1 = F.linear(merged_hidden, fc1_weight, fc1_bias)
    hidden_gelu = F.gelu(hidden_fc1)
    return F.linear(hidden_gelu, fc2_weight, fc2_bias)


def grid_layout(patches, grids):
    """(t, h, w) per grid: patches // grids patches each, the last grid taking
    the remainder, h and w multiples of MERGE_SIZE on a near-square raster."""
    per_grid = patches // grids
    remaining = patches
    out = []
    for i in range(grids):
        count = remaining if i == grids - 1 else per_grid
        side = int(math.sqrt(count))
        h = (side // MERGE_SIZE) * MERGE_SIZE
        w = (count // h // MERGE_SIZE) * MERGE_SIZE
        t = count // (h * w)
        out.append((t, h, w))
        remaining -= t * h * w
    assert remaining == 0, "patches do not tile the grids exactly"
    return out


def make_inputs(patches, grids, hidden_size, out_hidden_size, eps, *, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    def draw(*shape):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
    expanded = MERGE_SIZE * MERGE_SIZE * hidden_size
    grid_thw = torch.tensor(grid_layout(patches, grids), device=device, dtype=torch.int64)
    hidden = (draw(patches, hidden_size) + draw(patches, 1) * 0.5).to(bf16)
    ln_weight = (draw(hidden_size) * 0.1 + 1.0).to(bf16)
    ln_bias = (draw(hidden_size) * 0.1).to(bf16)
    fc1_weight = (draw(expanded, expanded) / math.sqrt(expanded)).to(bf16)
    fc1_bias = draw(expanded).to(bf16)
    fc2_weight = (draw(out_hidden_size, expanded) / math.sqrt(expanded)).to(bf16)
    fc2_bias = draw(out_hidden_size).to(bf16)
    return [hidden, grid_thw, ln_weight, ln_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias, float(eps)]
