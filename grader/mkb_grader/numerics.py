"""Strict numerics for the reference, anchor and eager baseline; torch
defaults for the candidate (PROTOCOL.md)."""
import contextlib

import torch


@contextlib.contextmanager
def strict():
    cuda_matmul = torch.backends.cuda.matmul
    saved = (cuda_matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             cuda_matmul.allow_fp16_reduced_precision_reduction,
             cuda_matmul.allow_bf16_reduced_precision_reduction,
             torch.get_float32_matmul_precision())
    cuda_matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cuda_matmul.allow_fp16_reduced_precision_reduction = False
    cuda_matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        (cuda_matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
         cuda_matmul.allow_fp16_reduced_precision_reduction,
         cuda_matmul.allow_bf16_reduced_precision_reduction) = saved[:4]
        torch.set_float32_matmul_precision(saved[4])
