#!/usr/bin/env python3
"""Field-by-field fidelity check of the 42 recipe problems against the public
recipes of YIGE24/MetaKernelBench (problems/_sol_execbench/*.json @ d90ba28).

    build/python tools/fidelity_recipes.py --public /work/public-mkb [--problems 13,31,...]

A public recipe is a layout with its hidden tokens blanked (U+E000); what is
readable is checked here:
  consts   every `NAME = value` the recipe shows, against our visible workload
           (or a module constant of our reference.py);
  inputs   the input list make_inputs returns: count, and each name, dtype and
           shape the recipe shows (shapes as expressions of its constants);
  outputs  the number of outputs where the recipe shows it.
Every fact in SPECS below must be *grounded*: its name / shape text is found
in the recipe's layout, so a wrong spec fails as loudly as a wrong problem.
Our side is read from problem.json (input/output strings, visible workload)
and, where cheap, from make_inputs run under FakeTensorMode (no memory, no
compute) to confirm that problem.json describes what make_inputs returns.

Prints one row per problem; exits 1 on any difference not listed as accepted.
"""
import argparse
import ast
import importlib.util
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOLE = "\ue000"
RECIPES = "problems/_sol_execbench"

DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp32": "float32", "float32": "float32",
          "f32": "float32", "fp16": "float16", "float16": "float16", "fp64": "float64",
          "int64": "int64", "int32": "int32", "uint8": "uint8", "bool": "bool",
          "fp8": "float8_e4m3fn", "float4_e2m1fn_x2": "float4_e2m1fn_x2", "fp4x2": "float4_e2m1fn_x2", "float8_e4m3fn": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
          "int": "int", "float": "float", "scalar": "scalar"}


def I(name=None, dtype=None, shape=None):
    """One public input: name / dtype / shape (tuple of expressions over the
    recipe's constants), None where the recipe hides it."""
    return {"name": name, "dtype": dtype, "shape": shape}


H = I()  # an input whose name, dtype and shape are all hidden

# Per problem: recipe file; consts: public constant -> our workload parameter
# (or "ref:NAME" for a module constant of our reference.py); inputs: the
# public input list in order; outputs: number of outputs (None: hidden);
# accepted: differences accepted, each with its reason (substring -> reason).
SPECS = {}

# The 42 problems the public benchmark ships only as recipes.
RECIPE_PROBLEMS = (10, 11, 12, 13, 27, 29, 30, 31, 32, 33, 34, 35, 37, 38, 39, 40, 41, 42, 43, 45, 46, 47,
                   48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67)


def spec(number, recipe, consts, inputs, outputs=None, accepted=None, dtype_source=None):
    SPECS[number] = {"recipe": recipe, "consts": consts, "inputs": inputs, "outputs": outputs,
                     "accepted": accepted or {}, "dtype_source": dtype_source}


# ---------------------------------------------------------------- attention
spec(13, "13_dual_stream_joint_attention_fibo_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "expr:grid0 * grid1 * grid2", "TEXT_SEQ_LEN": "text_seq", "HEAD_DIM": "ref:HEAD_DIM",
      "HIDDEN_SIZE": "hidden", "JOINT_ATTENTION_DIM": "joint_dim", "ROPE_AXIS0_DIM": "ref:ROPE_AXIS0_DIM",
      "ROPE_AXIS1_DIM": "ref:ROPE_AXIS1_DIM", "ROPE_AXIS2_DIM": "ref:ROPE_AXIS2_DIM",
      "GRID_AXIS0": "grid0", "GRID_AXIS1": "grid1", "GRID_AXIS2": "grid2", "IS_JOINT_BLOCK": "ref:IS_JOINT_BLOCK"},
     [I("hidden_states", "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("timestep_embedding", "float32", ("BATCH_SIZE", "HIDDEN_SIZE")),
      I("encoder_hidden_states", "float32", ("BATCH_SIZE", "TEXT_SEQ_LEN", "JOINT_ATTENTION_DIM")),
      I(None, "float32", ("MODULATION_DIM", "HIDDEN_SIZE")),
      I("adaln_linear_bias", "float32", ("MODULATION_DIM",)),
      I(None, "float32", ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("to_q_bias", "float32", ("HIDDEN_SIZE",)),
      I(None, "float32", ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("to_k_bias", "float32", ("HIDDEN_SIZE",)),
      I(None, "float32", ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("to_v_bias", "float32", ("HIDDEN_SIZE",)),
      I(None, "float32", ("HIDDEN_SIZE", "JOINT_ATTENTION_DIM")), I("to_k_context_bias", "float32", ("HIDDEN_SIZE",)),
      I(None, "float32", ("HIDDEN_SIZE", "JOINT_ATTENTION_DIM")), I("to_v_context_bias", "float32", ("HIDDEN_SIZE",)),
      I(None, "float32", ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("to_out_bias", "float32", ("HIDDEN_SIZE",)),
      H, I("pos_idx_axis1"), H, H, H, H, H, H, H,
      I(None, "int")],  # the module constant IS_JOINT_BLOCK is passed; the parameter name is hidden
     dtype_source="recipe name suffix _fp32")

spec(10, "10_qk_norm_rope_softcap_attention_backward_gemma3_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_ATTENTION_HEADS": "heads",
      "NUM_KEY_VALUE_HEADS": "kv_heads", "HEAD_DIM": "head_dim"},
     [I("grad_output", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("cos"), I("sin"),
      I("q_weight", None, ("Q_PROJ_OUT", "HIDDEN_SIZE")), I("k_weight", None, ("KV_PROJ_OUT", "HIDDEN_SIZE")),
      I("v_weight", None, ("KV_PROJ_OUT", "HIDDEN_SIZE")), I("o_weight", None, ("HIDDEN_SIZE", "Q_PROJ_OUT")),
      I("q_norm_weight", None, ("HEAD_DIM",)), I("k_norm_weight", None, ("HEAD_DIM",)),
      I(None, "float"), I(None, "float"), I(None, "float")],  # SCALING, ATTN_LOGIT_SOFTCAPPING, RMS_NORM_EPS
     outputs=7, dtype_source="tensor dtypes hidden (fp32 from the recipe name suffix); the three module "
                             "constants are passed as floats; 7 outputs from the tuple annotation's layout")

spec(11, "11_varlen_vision_attention_qwen_image_edit_bf16.json",
     {"TOTAL_SEQ_LEN": "tokens", "NUM_SEQUENCES": "sequences", "EMBED_DIM": "embed_dim", "NUM_HEADS": "heads",
      "HEAD_DIM": "head_dim", "ROPE_THETA": "rope_theta", "SEQ_SPLITS": "ref:SEQ_SPLITS"},
     [I("hidden_states", None, ("TOTAL_SEQ_LEN", "EMBED_DIM")), I("cu_seqlens", "int64", None),
      H, H, H, H, H, H],
     dtype_source="cu_seqlens int64 from lengths (dtype int64) through cumsum; other dtypes hidden (bf16 from the "
                  "recipe name suffix); the last six inputs' names and order hidden (8 from the return list's layout)")

spec(12, "12_relative_position_local_attention_gemma3n_audio_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_TIMESCALES": "num_timescales"},
     [I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("mask"),
      I("q_proj_weight", None, ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("k_proj_weight", None, ("HIDDEN_SIZE", "HIDDEN_SIZE")),
      I("v_proj_weight", None, ("HIDDEN_SIZE", "HIDDEN_SIZE")), I("pos_proj_weight", None, ("HIDDEN_SIZE", "HIDDEN_SIZE")),
      I("per_dim_scale"), I("inv_timescales", None, ("NUM_TIMESCALES",)),
      I(None, "float")],  # ATTENTION_LOGITS_SOFT_CAP passed as a float (value hidden)
     outputs=1, dtype_source="tensor dtypes hidden (fp32 from the recipe name suffix, bool mask from the >= comparison); "
                             "HEAD_DIM / MAX_BACKWARD hidden module constants (reconstructed)")

# ---------------------------------------------------------------- mlp_norm
spec(31, "31_groupnorm_sd15_fp32.json",
     {"BATCH_SIZE": "batch", "NUM_CHANNELS": "channels", "HEIGHT": "height", "WIDTH": "width",
      "EPS": "eps"},
     [I("x", "float32", ("BATCH_SIZE", "NUM_CHANNELS", "HEIGHT", "WIDTH")),
      I("weight", "float32", ("NUM_CHANNELS",)), I("bias", "float32", ("NUM_CHANNELS",)),
      I(None, "float")],  # the module constant EPS is passed; the parameter name is hidden
     dtype_source="recipe name suffix _fp32")

spec(27, "27_patch_merger_mlp_qwen3_omni_bf16.json",
     {"NUM_PATCHES": "patches", "NUM_GRIDS": "grids", "HIDDEN_SIZE": "hidden_size",
      "HIDDEN_SIZE_EXPANDED": "expr:4 * hidden_size", "OUT_HIDDEN_SIZE": "out_hidden_size", "MERGE_SIZE": "ref:MERGE_SIZE"},
     [I("hidden", None, ("NUM_PATCHES", "HIDDEN_SIZE")), I("grid_thw"), I("ln_weight", None, ("HIDDEN_SIZE",)),
      I("ln_bias", None, ("HIDDEN_SIZE",)),
      I(None, None, ("HIDDEN_SIZE_EXPANDED", "HIDDEN_SIZE_EXPANDED")), I(None, None, ("HIDDEN_SIZE_EXPANDED",)),
      I(None, None, ("OUT_HIDDEN_SIZE", "HIDDEN_SIZE_EXPANDED")), I(None, None, ("OUT_HIDDEN_SIZE",)),
      I(None, "float")],  # EPS passed as the last input (value hidden)
     dtype_source="tensor dtypes hidden (bf16 from the recipe name suffix, int64 grid_thw reconstructed)")

spec(29, "29_gelu_feedforward_flux_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_DIM": "dim", "MLP_HIDDEN_DIM": "hidden"},
     [I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_DIM")),
      I(None, "float32", ("MLP_HIDDEN_DIM", "HIDDEN_DIM")), I(None, "float32", ("MLP_HIDDEN_DIM",)),
      I(None, "float32", ("HIDDEN_DIM", "MLP_HIDDEN_DIM")), I(None, "float32", ("HIDDEN_DIM",))])

spec(32, "32_swiglu_mlp_parakeet_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate"},
     [I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "float32", ("INTERMEDIATE_SIZE_X2", "HIDDEN_SIZE")),
      I(None, "float32", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE"))])

spec(30, "30_gelu_grn_mlp_convnextv2_fp32.json",
     {"BATCH_SIZE": "batch", "HEIGHT": "height", "WIDTH": "width", "DIM": "dim", "HIDDEN_DIM": "hidden"},
     [I(None, "float32", ("BATCH_SIZE", "HEIGHT", "WIDTH", "DIM")),
      I(None, "float32", ("HIDDEN_DIM", "DIM")), I(None, "float32", ("HIDDEN_DIM",)),
      I(None, "float32"), I(None, "float32"),  # [.., HIDDEN_DIM]: the leading dims are hidden
      I(None, "float32", ("DIM", "HIDDEN_DIM")), I(None, "float32", ("DIM",)),
      I(None, "float")])  # eps 1e-06 passed as an input

spec(33, "33_residual_rmsnorm_swiglu_mlp_hermes_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate"},
     [I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("HIDDEN_SIZE",)),
      I(None, "bfloat16", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE")),
      I(None, "float")])  # eps 1e-05 passed as an input
spec(34, "34_swiglu_mlp_backward_hermes_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate"},
     [I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "INTERMEDIATE_SIZE")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "INTERMEDIATE_SIZE")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "INTERMEDIATE_SIZE")),
      I(None, "bfloat16", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")), I(None, "bfloat16", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE"))],
     outputs=4, dtype_source="bfloat16 readable in every draw; input names hidden; 4 outputs from the tuple annotation's layout")

spec(35, "35_residual_layernorm_gelu_ffn_backward_kokoro_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "dim", "INTERMEDIATE_SIZE": "hidden"},
     [I("grad_output", "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("hidden_states", "float32"),
      I("fc1_weight", "float32", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")), I("fc1_output", "float32"),
      I("gelu_output", "float32"), I("fc2_weight", "float32", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE")),
      I("normalized", "float32"), I("var", "float32"), I("ln_weight", "float32", ("HIDDEN_SIZE",)),
      I("eps", "float")],
     outputs=7, dtype_source="dtype=torch.float32 readable in every draw; which [B,S,H] draw is grad_output / "
                             "hidden_states is hidden (same shape); 7 outputs from the tuple annotation's layout")

spec(37, "37_gelu_mlp_backward_step1x_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "dim", "INTERMEDIATE_SIZE": "intermediate"},
     [I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "float32", ("INTERMEDIATE_SIZE", "HIDDEN_SIZE")), I(None, "float32", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE")),
      I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "INTERMEDIATE_SIZE")),
      I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "INTERMEDIATE_SIZE"))],
     outputs=5, dtype_source="make_inputs dtype=torch.float32; 5 outputs from the tuple annotation's layout")

spec(38, "38_residual_rmsnorm_backward_qwen3_4b_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden"},
     [I("grad_output", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("normalized"), I("rstd"),
      I("weight", None, ("HIDDEN_SIZE",))],
     outputs=3, dtype_source="dtypes hidden (bf16 from the recipe name suffix); 3 outputs from the tuple annotation's token layout")

spec(39, "39_adaln_modulation_output_projection_flux_kontext_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "INNER_DIM": "hidden", "OUTPUT_DIM": "out_dim"},
     [I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "INNER_DIM")), I(None, "float32", ("BATCH_SIZE", "INNER_DIM")),
      I(None, "float32", ("MODULATION_DIM", "INNER_DIM")), I(None, "float32", ("MODULATION_DIM",)),
      I(None, "float32", ("OUTPUT_DIM", "INNER_DIM")), I(None, "float32", ("OUTPUT_DIM",)),
      I(None, "float")],  # eps 1e-06 passed as the 7th input
     dtype_source="make_inputs dtype=torch.float32; input names hidden")

spec(40, "40_magnitude_normalized_collapse_gemma3n_e2b_altup_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden"},
     [I("hidden_states", "bfloat16", ("ALTUP_NUM_INPUTS", "BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("HIDDEN_SIZE", "HIDDEN_SIZE")), I(None, "bfloat16", ("HIDDEN_SIZE", "HIDDEN_SIZE")),
      I(None, "float")],  # eps 1e-05 passed as the 4th input
     dtype_source="make_inputs dtype=torch.bfloat16; input names hidden (hidden_states from the compute_dtype line)")

spec(41, "41_qkv_per_head_rmsnorm_gemma3n_e4b_audio_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_HEADS": "heads", "HEAD_DIM": "head_dim"},
     [I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "float32", ("QKV_OUT_SIZE", "HIDDEN_SIZE")), I(None, "float32", ("QKV_OUT_SIZE", "HIDDEN_SIZE")),
      I(None, "float32", ("QKV_OUT_SIZE", "HIDDEN_SIZE")),
      I(None, "float32", ("HEAD_DIM",)), I(None, "float32", ("HEAD_DIM",)),
      I(None, "float")],  # eps 1e-06 passed as the 7th input
     outputs=3, dtype_source="make_inputs dtype=torch.float32; input names hidden")

spec(42, "42_shifted_embedding_dual_rmsnorm_ling_mtp_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "VOCAB_SIZE": "vocab", "HIDDEN_SIZE": "hidden"},
     [I("input_ids"), I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("word_embeddings", None, ("VOCAB_SIZE", "HIDDEN_SIZE")), I("enorm_weight", None, ("HIDDEN_SIZE",)),
      I("hnorm_weight", None, ("HIDDEN_SIZE",)), I("eh_proj_weight", None, ("HIDDEN_SIZE", "CONCAT_SIZE")),
      I(None, "float")],  # RMS_NORM_EPS passed as the 7th input (its value is hidden)
     dtype_source="dtypes hidden (bf16 from the recipe name suffix, int64 ids reconstructed)")

spec(43, "43_embedding_rmsnorm_backward_jamba_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "VOCAB_SIZE": "ref:VOCAB_SIZE", "HIDDEN_SIZE": "hidden"},
     [I("grad_output", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("input_ids", None, ("BATCH_SIZE", "SEQ_LEN")),
      I("hidden_states_fp32", "float32", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("rstd"),
      I("norm_weight", None, ("HIDDEN_SIZE",))],
     outputs=2, dtype_source="hidden_states_fp32 fp32 from its name; other dtypes hidden (bf16 from the recipe name suffix, int64 ids)")

# ---------------------------------------------------------------- moe
spec(45, "45_capacity_factor_expert_dispatch_qwen3_coder_480b_bf16.json",
     {"NUM_TOKENS": "tokens", "HIDDEN_SIZE": "hidden", "MOE_INTERMEDIATE_SIZE": "intermediate",
      "NUM_EXPERTS": "experts", "NUM_EXPERTS_PER_TOK": "top_k", "POPULARITY_STD": "popularity_std"},
     [I("hidden_states", "bfloat16", ("NUM_TOKENS", "HIDDEN_SIZE")), I("selected_experts", "int64"),
      I("routing_weights", "bfloat16", ("NUM_TOKENS", "NUM_EXPERTS_PER_TOK")),
      I("expert_gate_weights", "bfloat16", ("NUM_EXPERTS", "HIDDEN_SIZE", "MOE_INTERMEDIATE_SIZE")),
      I("expert_up_weights", "bfloat16", ("NUM_EXPERTS", "HIDDEN_SIZE", "MOE_INTERMEDIATE_SIZE")),
      I("expert_down_weights", "bfloat16", ("NUM_EXPERTS", "MOE_INTERMEDIATE_SIZE", "HIDDEN_SIZE"))],
     outputs=1, dtype_source="bfloat16 readable in the draws; selected_experts int64 from argsort")

spec(46, "46_router_dispatch_backward_qwen3_coder_30b_bf16.json",
     {"NUM_TOKENS": "tokens", "HIDDEN_SIZE": "hidden", "NUM_EXPERTS": "experts", "TOP_K": "top_k"},
     [I("hidden_states", None, ("NUM_TOKENS", "HIDDEN_SIZE")), I("gate_weight", None, ("NUM_EXPERTS", "HIDDEN_SIZE")),
      I("routing_probs", "float32", ("NUM_TOKENS", "NUM_EXPERTS")), I("selected_experts", "int64", ("NUM_TOKENS", "TOP_K")),
      I("routing_weights_sum", "float32"), I("grad_routing_weights", None, ("NUM_TOKENS", "TOP_K")),
      I("grad_expert_mask", None, ("NUM_EXPERTS", "TOP_K", "NUM_TOKENS")),
      I("grad_router_logits", None, ("NUM_TOKENS", "NUM_EXPERTS"))],
     outputs=2, dtype_source="routing_probs fp32 from softmax(router_logits.float()); selected_experts int64 from topk; "
                             "other dtypes hidden (bf16 from the recipe name suffix); 2 outputs from the return layout")

spec(47, "47_correction_bias_shared_expert_ernie_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_EXPERTS": "experts",
      "TOP_K": "ref:TOP_K", "INTERMEDIATE_SIZE": "intermediate", "SHARED_INTERMEDIATE_SIZE": "shared_intermediate",
      "DECISION_MARGIN": "ref:MARGIN", "REDRAW_LIMIT": "ref:REDRAW_LIMIT"},
     [I("hidden_states", "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("gate_weight", None, ("NUM_EXPERTS", "HIDDEN_SIZE")),
      I("e_score_correction_bias", None, ("1", "NUM_EXPERTS")),
      I(None, "bfloat16", ("NUM_EXPERTS", "INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("NUM_EXPERTS", "INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("NUM_EXPERTS", "HIDDEN_SIZE", "INTERMEDIATE_SIZE")),
      I(None, "bfloat16", ("SHARED_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("SHARED_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, "bfloat16", ("HIDDEN_SIZE", "SHARED_INTERMEDIATE_SIZE")),
      I(None, "float")],  # the literal 1e-10 (norm_min) closes the return list
     outputs=2, dtype_source="bfloat16 readable in the hidden_states and expert-weight draws; gate_weight and the bias "
                             "draw dtype hidden (fp32: the same upstream token as the softmax's dtype=torch.float); "
                             "2 outputs from the tuple annotation")

spec(48, "48_top10_shared_gate_qwen3next_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_EXPERTS": "experts",
      "MOE_INTERMEDIATE_SIZE": "intermediate", "SHARED_EXPERT_INTERMEDIATE_SIZE": "shared_intermediate",
      "TOP_K": "ref:TOP_K", "DECISION_MARGIN": "ref:MARGIN"},
     [I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")), I("router_weight", None, ("NUM_EXPERTS", "HIDDEN_SIZE")),
      I(None, None, ("NUM_EXPERTS", "MOE_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("NUM_EXPERTS", "MOE_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("NUM_EXPERTS", "HIDDEN_SIZE", "MOE_INTERMEDIATE_SIZE")),
      I(None, None, ("SHARED_EXPERT_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("SHARED_EXPERT_INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("HIDDEN_SIZE", "SHARED_EXPERT_INTERMEDIATE_SIZE")),
      I(None, None, ("1", "HIDDEN_SIZE"))],
     outputs=2, dtype_source="dtypes hidden (bf16 from the recipe name suffix); 2 outputs from the tuple annotation's layout")

spec(49, "49_group_limited_topk_routing_ringflash_bf16.json",
     {"NUM_TOKENS": "tokens", "NUM_EXPERTS": "experts", "GATING_DIM": "hidden",
      "NUM_EXPERTS_PER_TOKEN": "ref:NUM_EXPERTS_PER_TOKEN", "NUM_GROUPS": "ref:NUM_GROUPS",
      "TOPK_GROUPS": "ref:TOPK_GROUPS", "ROUTED_SCALING_FACTOR": "ref:ROUTED_SCALING_FACTOR",
      "DECISION_MARGIN": "ref:DECISION_MARGIN", "REDRAW_LIMIT": "ref:REDRAW_LIMIT"},
     [I("hidden_states", "bfloat16", ("NUM_TOKENS", "GATING_DIM")),
      I("weight", "bfloat16", ("NUM_EXPERTS", "GATING_DIM")),
      I("expert_bias", "bfloat16", ("NUM_EXPERTS",)),
      I(None, "float")],  # ROUTED_SCALING_FACTOR itself is returned (parameter name routed_scaling_factor)
     outputs=2, dtype_source="bfloat16 readable in every draw; the scale is the float module constant; 2 outputs "
                             "from the return line")

spec(50, "50_expert_parallel_execution_backward_mimo_fp32.json",
     {"NUM_TOKENS": "tokens", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate",
      "NUM_ROUTED_EXPERTS": "experts", "NUM_EXPERTS_PER_TOKEN": "top_k"},
     [I("grad_output", None, ("NUM_TOKENS", "HIDDEN_SIZE")), I("hidden_states", None, ("NUM_TOKENS", "HIDDEN_SIZE")),
      I("topk_indices"), I("topk_weights", None, ("NUM_TOKENS", "NUM_EXPERTS_PER_TOKEN")),
      I(None, None, ("NUM_ROUTED_EXPERTS", "INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("NUM_ROUTED_EXPERTS", "INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("NUM_ROUTED_EXPERTS", "HIDDEN_SIZE", "INTERMEDIATE_SIZE"))],
     outputs=5, dtype_source="dtypes hidden (fp32 from the recipe name suffix, int64 ids from argsort)")

spec(51, "51_sparse_expert_dispatch_combine_gptoss_fp32.json",
     {"NUM_TOKENS": "tokens", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate",
      "NUM_LOCAL_EXPERTS": "experts", "NUM_EXPERTS_PER_TOKEN": "ref:TOP_K"},
     [I("hidden_states", "float32", ("NUM_TOKENS", "HIDDEN_SIZE")),
      I("router_indices", "int64", ("NUM_TOKENS", "NUM_EXPERTS_PER_TOKEN")),
      I("routing_weights", "float32", ("NUM_TOKENS", "NUM_LOCAL_EXPERTS")),
      I("gate_up_projection", "float32", ("NUM_LOCAL_EXPERTS", "HIDDEN_SIZE", "2 * INTERMEDIATE_SIZE")),
      I("gate_up_projection_bias", "float32", ("NUM_LOCAL_EXPERTS", "2 * INTERMEDIATE_SIZE")),
      I("down_projection", "float32", ("NUM_LOCAL_EXPERTS", "INTERMEDIATE_SIZE", "HIDDEN_SIZE")),
      I("down_projection_bias", "float32", ("NUM_LOCAL_EXPERTS", "HIDDEN_SIZE"))],
     dtype_source="recipe name suffix _fp32; router_indices from .indices of topk")

# ---------------------------------------------------------------- quantization

def _nvfp4_weight(rows, cols):
    """code / scale / global decode of one NVFP4 weight [1, rows, cols]."""
    return [I(None, "float4_e2m1fn_x2", ("1", rows, f"{cols} // 2")),
            I(None, "float8_e4m3fn", ("1", rows, f"{cols} // 16")), I(None, "float")]


spec(52, "52_attention_output_projection_qwen3vl_fp8.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "INPUT_DIM": "input_dim", "HIDDEN_SIZE": "hidden"},
     [I("attn_output", None, ("NUM_TOKENS", "INPUT_DIM")),
      I("o_proj_weight", None, ("HIDDEN_SIZE", "INPUT_DIM")),
      I("o_proj_bias", None, ("HIDDEN_SIZE",))],
     outputs=1, dtype_source="input dtypes hidden (bf16 reconstructed); output cast to attn_output.dtype")

spec(53, "53_mlp_gate_up_projection_qwen3vl_fp8.json",
     {"M": "tokens", "HIDDEN_SIZE": "hidden", "INTERMEDIATE_SIZE": "intermediate"},
     [I("x"), I("scale_x"), I("gate_proj_weight"), I("scale_gate"), I("up_proj_weight"), I("scale_up")],
     outputs=1, dtype_source="code / scale dtypes and shapes hidden (float8_e4m3fn codes, fp32 block scales "
                             "reconstructed); output cast to bfloat16 (readable)")

spec(54, "54_qkv_projection_qk_norm_qwen3vl_fp8.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_ATTENTION_HEADS": "q_heads",
      "NUM_KEY_VALUE_HEADS": "kv_heads", "HEAD_DIM": "head_dim"},
     [I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, None, ("Q_SIZE", "HIDDEN_SIZE")), I("k_weight", None, ("KV_SIZE", "HIDDEN_SIZE")),
      I(None, None, ("KV_SIZE", "HIDDEN_SIZE")),
      I("q_bias", None, ("Q_SIZE",)), I(None, None, ("KV_SIZE",)), I("v_bias", None, ("KV_SIZE",)),
      I(None, None, ("HEAD_DIM",)), I("k_norm_weight", None, ("HEAD_DIM",)), I(None, "float")],
     dtype_source="tensor dtypes hidden (bf16 reconstructed); eps 1e-05 passed as a Python float")

spec(55, "55_multimodal_embedding_projection_qwen3vl_nvfp4.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "NUM_VISION_TOKENS": "vision_tokens", "HIDDEN_SIZE": "hidden",
      "VOCAB_SIZE": "vocab", "VISION_HIDDEN_SIZE": "vision_hidden", "_SF_VEC_SIZE": "ref:SF_VEC"},
     [H, H, I("vision_features", None, None), H, H, I("global_decode_weight"),
      I("vision_proj_bias"), I("vision_token_mask")],
     dtype_source="tensor dtypes hidden (bf16 / int64 ids / bool mask reconstructed); NVFP4 weight codes, "
                  "e4m3 scales and a float global decode as in 57/61")

spec(59, "59_attention_output_projection_nemotron_nvfp4.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "INPUT_DIM": "input_dim", "HIDDEN_SIZE_PADDED": "hidden_padded",
      "_SF_VEC_SIZE": "ref:SF_VEC"},
     [I("hidden_states", None, ("M", "INPUT_DIM")), H, H, H],
     dtype_source="activation dtype hidden (bf16 reconstructed); weight codes/scales/float global as in 57/61; "
                  "output in compute_dtype = promote_types(hidden_states.dtype, float32)")

spec(56, "56_mla_kv_compression_requant_deepseekv31_fp8.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "KV_LORA_RANK": "kv_lora_rank",
      "KV_A_OUTPUT_DIM_PADDED": "kv_a_out_padded", "NUM_HEADS": "heads",
      "QK_NOPE_HEAD_DIM": "ref:QK_NOPE_HEAD_DIM", "V_HEAD_DIM": "ref:V_HEAD_DIM"},
     [I("hidden_states", None, ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("kv_a_proj_weight", None, ("KV_A_OUTPUT_DIM_PADDED", "HIDDEN_SIZE")),
      I("kv_a_layernorm_weight", None, ("KV_LORA_RANK",)),
      I("kv_b_proj_weight", None, ("KV_B_OUTPUT_DIM", "KV_LORA_RANK")), H],
     dtype_source="tensor dtypes hidden (bf16 reconstructed); the fifth (hidden) input reconstructed as eps, a float")

spec(58, "58_quantized_attention_scores_qwen3_14b_nvfp4.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "NUM_ATTENTION_HEADS": "q_heads",
      "NUM_KEY_VALUE_HEADS": "kv_heads", "HEAD_DIM": "head_dim", "_SF_VEC_SIZE": "ref:SF_VEC"},
     [I("query_states", "bfloat16", ("BATCH_SIZE", "NUM_ATTENTION_HEADS", "SEQ_LEN", "HEAD_DIM")),
      I("key_states", "bfloat16", ("BATCH_SIZE", "NUM_KEY_VALUE_HEADS", "SEQ_LEN", "HEAD_DIM")),
      I("value_states", "bfloat16", ("BATCH_SIZE", "NUM_KEY_VALUE_HEADS", "SEQ_LEN", "HEAD_DIM")),
      I("attention_mask", "bfloat16", None)],
     dtype_source="bfloat16 readable in every randn / zeros call")

spec(57, "57_qkvo_attention_block_nova_nvfp4.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_HEADS": "q_heads",
      "NUM_KV_HEADS": "kv_heads", "HEAD_DIM": "head_dim", "_SF_VEC_SIZE": "ref:SF_VEC"},
     [I("hidden_states", "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I("cos", "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HEAD_DIM")),
      I("sin", "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HEAD_DIM"))]
     + _nvfp4_weight("Q_OUT_FEATURES", "HIDDEN_SIZE") + _nvfp4_weight("KV_OUT_FEATURES", "HIDDEN_SIZE")
     + _nvfp4_weight("KV_OUT_FEATURES", "HIDDEN_SIZE") + _nvfp4_weight("HIDDEN_SIZE", "Q_OUT_FEATURES"),
     outputs=1, dtype_source="activation dtype hidden (bf16 reconstructed); fp4/e4m3/float globals from the "
                             "visible helper skeleton and signature annotations")

spec(61, "61_mlp_silu_gating_qwen3_8b_nvfp4.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden",
      "INTERMEDIATE_SIZE": "intermediate", "_SF_VEC_SIZE": "ref:SF_VEC"},
     [I("x", "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE"))]
     + _nvfp4_weight("INTERMEDIATE_SIZE", "HIDDEN_SIZE") + _nvfp4_weight("INTERMEDIATE_SIZE", "HIDDEN_SIZE")
     + _nvfp4_weight("HIDDEN_SIZE", "INTERMEDIATE_SIZE"),
     outputs=1, dtype_source="x dtype hidden (bf16 reconstructed)")

spec(60, "60_mamba2_output_projection_nemotron_nvfp4.json",
     {"M": "m", "HIDDEN_SIZE": "n", "INTERMEDIATE_SIZE": "k"},
     [I(None, "float4_e2m1fn_x2", ("BATCH", "M", "INTERMEDIATE_SIZE // 2")), H, H, H, H, H],
     outputs=1, dtype_source="fp4 operands from the visible helper skeleton; output in compute_dtype "
                             "= promote_types(global_decode_scale_input.dtype, float32), i.e. fp32",
     accepted={})

# ---------------------------------------------------------------- linear_attention
spec(64, "64_mamba_chunk_scan_segsum_granite_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "NUM_HEADS": "heads", "HEAD_DIM": "head_dim",
      "STATE_SIZE": "state", "N_GROUPS": "groups", "CHUNK_SIZE": "ref:CHUNK_SIZE"},
     [I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "NUM_HEADS", "HEAD_DIM")),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_HEADS", "SEQ_LEN")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "N_GROUPS", "STATE_SIZE")),
      I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "N_GROUPS", "STATE_SIZE")),
      I(None, "bfloat16", ("NUM_HEADS",)),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_HEADS", "HEAD_DIM", "STATE_SIZE"))],
     outputs=2)


spec(66, "66_wkv_time_decay_stabilization_rwkv4_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "ATTENTION_HIDDEN_SIZE": "channels"},
     [I(None, "float32", ("ATTENTION_HIDDEN_SIZE",)),
      I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "ATTENTION_HIDDEN_SIZE")),
      I(None, "float32", ("ATTENTION_HIDDEN_SIZE",)),
      I(None, "float32", ("BATCH_SIZE", "SEQ_LEN", "ATTENTION_HIDDEN_SIZE")),
      I(None, "float32", ("BATCH_SIZE", "ATTENTION_HIDDEN_SIZE")),
      I(None, "float32", ("BATCH_SIZE", "ATTENTION_HIDDEN_SIZE")),
      I(None, "float32", ("BATCH_SIZE", "ATTENTION_HIDDEN_SIZE"))],
     dtype_source="recipe name suffix _fp32")


spec(67, "67_hyena_fft_conv_block_hyena_small_fp32.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "D_MODEL": "d_model", "D_INNER": "d_inner", "ORDER": "ref:ORDER",
      "SHORT_FILTER_ORDER": "ref:SHORT_FILTER_ORDER", "FILTER_ORDER": "filter_order", "EMB_DIM": "ref:EMB_DIM",
      "LAYER_NORM_EPS": "eps"},
     [I("hidden_states", "float32", ("BATCH_SIZE", "SEQ_LEN", "D_MODEL")),
      I("norm1_weight", "float32", ("D_MODEL",)), I("norm1_bias", "float32", ("D_MODEL",)),
      I("norm2_weight", "float32", ("D_MODEL",)), I("norm2_bias", "float32", ("D_MODEL",)),
      I(None, "float32"), I(None, "float32"), I(None, "float32"), I(None, "float32"),  # INNER_WIDTH is partly hidden
      I(None, "float32", ("FILTER_ORDER", "EMB_DIM")), I(None, "float32", ("FILTER_ORDER",)),
      I("sin_freq", "float32", ("1", "FILTER_ORDER")),
      I(None, "float32", ("FILTER_ORDER", "FILTER_ORDER")), I(None, "float32", ("FILTER_ORDER",)),
      I(None, "float32", ("FILTER_ORDER", "FILTER_ORDER")), I(None, "float32", ("FILTER_ORDER",)),
      I(None, "float32", ("D_MODEL", "FILTER_ORDER")), I("filter_bias", "float32", ("D_MODEL",)),
      I("exp_mod_deltas", "float32"),
      I(None, "float32", ("D_MODEL", "D_MODEL")), I(None, "float32", ("D_MODEL",)),
      I(None, "float32", ("D_INNER", "D_MODEL")), I(None, "float32", ("D_INNER",)),
      I(None, "float32", ("D_MODEL", "D_INNER")), I(None, "float32", ("D_MODEL",)),
      I(None, "float"), I(None, "float")],  # LAYER_NORM_EPS, EXP_MOD_SHIFT (value hidden)
     outputs=1, dtype_source="recipe name suffix _fp32; the two module constants are passed as floats")

spec(65, "65_mamba2_intra_chunk_diagonal_nemotron_nano_bf16.json",
     {"BATCH_SIZE": "batch", "NUM_CHUNKS": "chunks", "HEAD_DIM": "head_dim", "STATE_SIZE": "state"},
     [I(None, "bfloat16", None), I("a_cumsum", "bfloat16", None),
      I(None, "bfloat16", None), I(None, "bfloat16", None)],
     dtype_source="bfloat16 readable in every draw; CHUNK_SIZE, NUM_HEADS, N_GROUPS hidden (reconstructed)")


spec(63, "63_mamba2_selective_scan_nemotron_h_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "HIDDEN_SIZE": "hidden", "NUM_HEADS": "heads", "HEAD_DIM": "head_dim",
      "SSM_STATE_SIZE": "state", "N_GROUPS": "groups", "CONV_KERNEL_SIZE": "ref:D_CONV",
      "TIME_STEP_LIMIT_MIN": "time_step_limit_min", "TIME_STEP_LIMIT_MAX": "time_step_limit_max",
      "LAYER_NORM_EPSILON": "layer_norm_epsilon"},
     [I(None, "bfloat16", ("BATCH_SIZE", "SEQ_LEN", "HIDDEN_SIZE")),
      I(None, "bfloat16", None), I(None, "bfloat16", None), I(None, "bfloat16", None),  # CONV_DIM's formula is partly hidden
      I(None, "bfloat16", ("NUM_HEADS",)), I(None, "bfloat16", ("NUM_HEADS",)), I(None, "bfloat16", ("NUM_HEADS",)),
      I(None, "bfloat16", ("INTERMEDIATE_SIZE",)),
      I(None, "bfloat16", ("HIDDEN_SIZE", "INTERMEDIATE_SIZE")),
      I(None, "float"), I(None, "float"), I(None, "float")],
     dtype_source="bfloat16 readable in every draw; the three limits/eps are module floats passed as inputs")


spec(62, "62_chunk_gated_delta_rule_qwen3next_bf16.json",
     {"BATCH_SIZE": "batch", "SEQ_LEN": "seq", "NUM_K_HEADS": "qk_heads", "NUM_V_HEADS": "v_heads",
      "HEAD_K_DIM": "head_dim", "HEAD_V_DIM": "head_dim", "CHUNK_SIZE": "ref:CHUNK", "SCALE": "scale"},
     [I(None, "bfloat16", ("BATCH_SIZE", "NUM_K_HEADS", "SEQ_LEN", "HEAD_K_DIM")),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_K_HEADS", "SEQ_LEN", "HEAD_K_DIM")),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_V_HEADS", "SEQ_LEN", "HEAD_V_DIM")),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_V_HEADS", "SEQ_LEN")),
      I(None, "bfloat16", ("BATCH_SIZE", "NUM_V_HEADS", "SEQ_LEN")),
      I(None, "float")],
     dtype_source="bfloat16 readable in every draw; SCALE passed as a float")


# ================================================================ machinery
def norm_dtype(token):
    if token is None:
        return None
    t = token.strip().lower().replace("torch.", "")
    return DTYPES.get(t, t)


def parse_io(text):
    """'name dtype [a, b], comment' -> (name, dtype, [shape exprs] or None)."""
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s+([A-Za-z0-9_]+)?\s*(\[[^\]]*\])?", text)
    name, dtype, shape = m.group(1), m.group(2), m.group(3)
    dims = None
    if shape:
        inner = shape[1:-1].strip()
        dims = [d.strip() for d in inner.split(",")] if inner else []
    return name, norm_dtype(dtype), dims


def safe_eval(expr, env):
    tree = ast.parse(str(expr), mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Tuple,
                                 ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.USub, ast.Mod)):
            raise ValueError(f"unsupported expression {expr!r}")
    return eval(compile(tree, "<expr>", "eval"), {"__builtins__": {}}, dict(env))


def public_constants(layout):
    """Module-level NAME = value lines whose value is fully readable (a value
    may continue on indented lines while its brackets are open)."""
    consts = {}
    lines = layout.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^([A-Z_][A-Z0-9_]*) = ([^\n]+)$", line)
        if not m:
            continue
        value, j = m.group(2), i + 1
        while value.count("(") + value.count("[") > value.count(")") + value.count("]") and j < len(lines) \
                and lines[j].startswith(" "):
            value, j = value + " " + lines[j].strip(), j + 1
        if HOLE in value:
            continue
        try:
            consts[m.group(1)] = safe_eval(value, consts)
        except Exception:
            pass
    return consts


def grounded(layout, text):
    """True if text (a name, or a shape like 'A, B, C') is readable in the layout."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
        return re.search(r"(?<![A-Za-z0-9_])" + re.escape(text) + r"(?![A-Za-z0-9_])", layout) is not None
    return text in layout


def load_reference(pdir):
    path = os.path.join(pdir, "reference.py")
    s = importlib.util.spec_from_file_location(f"fid_ref_{os.path.basename(pdir)}", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def fake_inputs(mod, params, real=False):
    """make_inputs under FakeTensorMode (shapes and dtypes, no memory, no
    compute), or for real (used with the tiny smoke workload only)."""
    import contextlib
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    with (contextlib.nullcontext() if real else FakeTensorMode(allow_non_fake_inputs=True)):
        out = mod.make_inputs(**params, seed=0, device="cpu")
    res = []
    for x in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(x, torch.Tensor):
            res.append((str(x.dtype).replace("torch.", ""), tuple(x.shape)))
        else:
            res.append((type(x).__name__, None))
    return res


def find_problem(number):
    for fam in sorted(os.listdir(os.path.join(ROOT, "problems"))):
        fdir = os.path.join(ROOT, "problems", fam)
        if not os.path.isdir(fdir):
            continue
        for d in sorted(os.listdir(fdir)):
            if d.startswith(f"{number:02d}_"):
                return os.path.join(fdir, d)
    raise FileNotFoundError(f"problem {number}")


def check(number, public_dir, use_fake=True):
    sp = SPECS[number]
    diffs, notes, checked = [], [], 0
    with open(os.path.join(public_dir, RECIPES, sp["recipe"]), encoding="utf-8") as f:
        recipe = json.load(f)
    layout = recipe["layout"]
    pconst = public_constants(layout)
    pdir = find_problem(number)
    with open(os.path.join(pdir, "problem.json"), encoding="utf-8") as f:
        meta = json.load(f)
    params = meta["workloads"]["visible"]
    mod = load_reference(pdir)

    # constants
    for pname, ours in sp["consts"].items():
        if pname not in pconst:
            diffs.append(f"spec: constant {pname} not readable in the recipe")
            continue
        checked += 1
        if ours.startswith("ref:"):
            val = getattr(mod, ours[4:], None)
            where = f"reference.{ours[4:]}"
        elif ours.startswith("expr:"):
            val = safe_eval(ours[5:], params)
            where = f"visible {ours[5:]}"
        else:
            val = params.get(ours)
            where = f"visible.{ours}"
        if isinstance(pconst[pname], (tuple, list)):  # a readable table (captured lengths): equal as lists
            if val is None or list(val) != list(pconst[pname]):
                diffs.append(f"const {pname}={pconst[pname]} vs {where}={val}")
            continue
        if val is None or (isinstance(pconst[pname], (int, float)) and not isinstance(val, (int, float))) \
                or abs(float(val) - float(pconst[pname])) > 1e-12 * max(1.0, abs(float(pconst[pname]))):
            diffs.append(f"const {pname}={pconst[pname]} vs {where}={val}")

    # inputs
    ours_in = [parse_io(s) for s in meta["inputs"]]
    pins = sp["inputs"]
    checked += 1
    if len(ours_in) != len(pins):
        diffs.append(f"inputs: {len(pins)} public vs {len(ours_in)} ours")
    env = dict(pconst)
    env.update({k: v for k, v in params.items()})
    for i, pin in enumerate(pins):
        o = ours_in[i] if i < len(ours_in) else (None, None, None)
        if pin["name"] is not None:
            if not grounded(layout, pin["name"]):
                diffs.append(f"spec: input name {pin['name']} not in the recipe")
            checked += 1
            if o[0] != pin["name"]:
                diffs.append(f"input {i}: name {pin['name']} vs ours {o[0]}")
        if pin["dtype"] is not None:
            checked += 1
            if o[1] is not None and norm_dtype(pin["dtype"]) != o[1]:
                diffs.append(f"input {i}: dtype {pin['dtype']} vs ours {o[1]}")
        if pin["shape"] is not None:
            checked += 1
            for ident in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(pin["shape"])):
                if not grounded(layout, ident):
                    diffs.append(f"spec: {ident} (shape of input {i}) not in the recipe")
            try:
                want = tuple(int(safe_eval(d, pconst)) for d in pin["shape"])
            except Exception as e:
                diffs.append(f"spec: shape of input {i}: {e}")
                continue
            if o[2] is None:
                diffs.append(f"input {i}: public shape {want}, ours has none")
                continue
            try:
                got = tuple(int(safe_eval(d, params)) for d in o[2])
            except Exception:
                got = tuple(o[2])
            if got != want:
                diffs.append(f"input {i} ({o[0]}): shape {want} vs ours {got}")

    # outputs
    if sp["outputs"] is not None:
        checked += 1
        if len(meta["outputs"]) != sp["outputs"]:
            diffs.append(f"outputs: {sp['outputs']} public vs {len(meta['outputs'])} ours")

    # make_inputs agrees with problem.json (cheap: FakeTensorMode)
    if use_fake:
        try:
            try:
                fk, how = fake_inputs(mod, params), "fake"
            except Exception:
                # data-dependent make_inputs (.item(), top-k): run the smoke workload for real
                params = meta["workloads"]["smoke"]
                fk, how = fake_inputs(mod, params, real=True), "smoke"
            if len(fk) != len(ours_in):
                diffs.append(f"make_inputs returns {len(fk)} values, problem.json lists {len(ours_in)}")
            for i, ((dt, shp), o) in enumerate(zip(fk, ours_in)):
                if shp is not None and o[2] is not None:
                    try:
                        want = tuple(int(safe_eval(d, params)) for d in o[2])
                    except Exception:
                        continue
                    if want != shp:
                        diffs.append(f"make_inputs input {i} shape {shp} vs problem.json {want}")
                if o[1] is not None and dt != o[1] and not (shp is None and o[1] in ("float", "int", "scalar")):
                    diffs.append(f"make_inputs input {i} dtype {dt} vs problem.json {o[1]}")
            notes.append(f"make_inputs: {how}")
        except Exception as e:
            notes.append(f"make_inputs: not run ({type(e).__name__})")

    unaccepted = [d for d in diffs if not any(k in d for k in sp["accepted"])]
    return {"problem": number, "recipe": sp["recipe"], "checked": checked, "diffs": diffs,
            "unaccepted": unaccepted, "notes": notes}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--public", required=True, help="folder holding problems/_sol_execbench/*.json")
    ap.add_argument("--problems", default="", help="comma-separated numbers (default: all 42 recipe problems)")
    ap.add_argument("--no-fake", action="store_true", help="do not run make_inputs under FakeTensorMode")
    args = ap.parse_args(argv)
    numbers = [int(n) for n in args.problems.split(",") if n.strip()] or list(RECIPE_PROBLEMS)
    bad = 0
    print(f"{'#':>3}  {'verdict':<9} {'checked':>7}  recipe / differences")
    for n in numbers:
        if n not in SPECS:
            print(f"{n:>3}  {'NO SPEC':<9} {'':>7}  (not yet compared field by field: no spec written)")
            bad += 1
            continue
        r = check(n, args.public, use_fake=not args.no_fake)
        verdict = "DIFFERS" if r["unaccepted"] else ("accepted" if r["diffs"] else "matches")
        bad += bool(r["unaccepted"])
        print(f"{n:>3}  {verdict:<9} {r['checked']:>7}  {r['recipe']}  [{'; '.join(r['notes'])}]")
        for d in r["diffs"]:
            tag = "  " if d in r["unaccepted"] else "  (accepted) "
            print(f"{'':>22}{tag}{d}")
    print(f"{len(numbers) - bad} of {len(numbers)} without unaccepted differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
