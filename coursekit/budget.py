"""Memory and compute budgets that the planning exercises (21, 24, 25) are given rather than write.

Exercise 22 grades these formulas; the planners reuse them. Bytes everywhere, never GB.
- training_state_bytes: mixed-precision Adam, 2 + 2 + 12 bytes per parameter, ZeRO stages 0-3
  (Rajbhandari et al. 2020, arXiv 1910.02054, §3.1 and §5; ground-truth.md §9).
- activation_bytes_per_layer: Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, the six rows
  (ground-truth.md §18.1). GPT-style layers; for Llama's SwiGLU/GQA and DeepSeek's MoE an approximation.
"""

from __future__ import annotations

MFU = 0.40
"""Model flops utilisation the planners assume. Llama 3 (arXiv 2407.21783, Table 4, as relayed by
glennklockwood.com/garden/llama-3.1) reports 380-430 TFLOPs per H100 for 405B on 8k-16k GPUs, 38-43% of the
dense bf16 peak; ground-truth.md §12 works its examples at 40%."""

USABLE_MEMORY_FRACTION = 0.90
"""Share of a GPU's memory a plan may fill. A course assumption, not a measurement: the rest goes to the CUDA
context, NCCL buffers, temporary tensors and allocator fragmentation, none of which the formulas count."""

RECOMPUTE = ("none", "selective", "full")


def training_state_bytes(num_params: float, *, zero_stage: int, dp_degree: int) -> dict[str, float]:
    """Bytes per GPU of the weights, gradients and optimizer state of `num_params` parameters (already split
    by TP/PP/EP) under ZeRO stage 0-3 over `dp_degree` ranks: {"params", "grads", "optimizer", "total"}."""
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    params, grads, optimizer = 2.0 * num_params, 2.0 * num_params, 12.0 * num_params  # bf16, bf16, fp32 x3
    if zero_stage >= 1:
        optimizer /= dp_degree
    if zero_stage >= 2:
        grads /= dp_degree
    if zero_stage >= 3:
        params /= dp_degree
    return {"params": params, "grads": grads, "optimizer": optimizer, "total": params + grads + optimizer}


def activation_bytes_per_layer(
    *, seq_len: int, micro_batch: int, hidden: int, n_heads: int, tp_degree: int, sequence_parallel: bool,
    recompute: str,
) -> float:  # fmt: skip
    """Bytes one transformer layer keeps for backward, per GPU (Korthikanti et al. 2022, Table 2)."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    s, b, h, a, t = seq_len, micro_batch, hidden, n_heads, tp_degree
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh  # only the layer input (§5; not divided by t)
    replicated = 10 / t if sequence_parallel else 10  # LayerNorm/dropout regions: sharded only with SP
    if recompute == "selective":
        return sbh * (replicated + 24 / t)  # attention's 5as/h part recomputed
    return sbh * (replicated + 24 / t + 5 * a * s / (h * t))


def train_flops(active_params: float, tokens: float, recompute: str) -> float:
    """Flops of one training step: 6 per active parameter per token, 2 forward + 4 backward (Kaplan et al.
    2020, arXiv 2001.08361, §2.1); 8 with full recomputation: Narayanan et al. 2021 (arXiv 2104.04473, §5.1)
    note that their eq. (3) "assumes activation recomputation and takes into account ... the extra forward
    pass", hence "training time ~ 8TP/(nX)" (eq. 4). Selective recomputation redoes only the attention
    scores, which 6N does not count in the first place: 6."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    return (8 if recompute == "full" else 6) * active_params * tokens
