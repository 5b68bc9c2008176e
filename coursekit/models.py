"""Transformer models as data, for the planning exercises (21, 23, 24, 25): shapes and parameter counts.

    from coursekit.models import MODELS
    m = MODELS["llama3_70b"]          # frozen ModelSpec: .n_layers 80, .dim 8192, .params 70_553_706_496, ...
    m.is_moe, m.dense_params          # False, all of them

Shapes come from the released configs; parameter counts are what exercise 22's counter gives for those shapes
(ground-truth.md §11 and Appendix A), next to the published rounded totals they agree with. Nothing here is a
formula a student writes: exercise 22 grades the counting; the planners only read the results.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """What a parallelism planner needs to know about a decoder-only transformer."""

    name: str
    n_layers: int
    dim: int
    """Hidden size h: the width of the activations sent by TP, PP and EP."""
    n_heads: int
    """Query heads: TP must divide them (Megatron-LM asserts num_attention_heads % tp == 0)."""
    n_kv_heads: int
    """Key/value heads: TP must divide them too (GQA's num_query_groups % tp == 0)."""
    ffn_dim: int
    """Dense SwiGLU width (of the dense layers, for an MoE)."""
    vocab_size: int
    params: int
    """Every parameter of the model."""
    active_params: int
    """Parameters one token's forward pass touches (params, if dense); training costs 6x this per token."""
    n_experts: int = 0
    """Routed experts per MoE layer; 0 for a dense model."""
    top_k: int = 0
    """Routed experts each token is sent to."""
    moe_layers: int = 0
    """Layers whose MLP is an MoE."""
    expert_params: int = 0
    """Parameters of all routed experts of all MoE layers: what expert parallelism shards."""
    source: str = ""

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def dense_params(self) -> int:
        """Parameters outside the routed experts: sharded by TP and PP, replicated over DP and EP."""
        return self.params - self.expert_params

    def to_dict(self) -> dict[str, Any]:
        """Plain data, to cross the judge/worker boundary; ModelSpec.from_dict turns it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown ModelSpec field(s) {unknown}")
        return cls(**data)


_LLAMA3 = (
    "pytorch/torchtitan torchtitan/models/llama3/__init__.py and huggingface.co/meta-llama config.json "
    "(ground-truth.md §11); 8B and 70B are untied, vocab 128256; parameter count = exercise 22's counter"
)

MODELS: dict[str, ModelSpec] = {
    # Hugging Face model page: "8.03B params"; ground-truth.md Appendix A: 8.0303B
    "llama3_8b": ModelSpec(
        name="Llama-3 8B", n_layers=32, dim=4096, n_heads=32, n_kv_heads=8, ffn_dim=14336,
        vocab_size=128256, params=8_030_261_248, active_params=8_030_261_248, source=_LLAMA3,
    ),
    # Hugging Face model page: "70.6B params"; ground-truth.md Appendix A: 70.5537B
    "llama3_70b": ModelSpec(
        name="Llama-3 70B", n_layers=80, dim=8192, n_heads=64, n_kv_heads=8, ffn_dim=28672,
        vocab_size=128256, params=70_553_706_496, active_params=70_553_706_496, source=_LLAMA3,
    ),
    # Llama 3 paper (arXiv 2407.21783) Table 3: 126 layers, 16384 dim, FFN 53248, 128 heads, 8 KV heads
    "llama3_405b": ModelSpec(
        name="Llama-3.1 405B", n_layers=126, dim=16384, n_heads=128, n_kv_heads=8, ffn_dim=53248,
        vocab_size=128256, params=405_853_388_800, active_params=405_853_388_800, source=_LLAMA3,
    ),
    # arXiv 2412.19437: "671B total parameters with 37B activated for each token"; 61 layers, the first 3
    # dense (ffn 18432), then 58 MoE layers of 1 shared + 256 routed experts (ffn 2048), top-8 (torchtitan
    # deepseek_v3/__init__.py `_671b`, ground-truth.md §11). Routed experts: 58 x 256 x 3 x 7168 x 2048.
    # MLA has no separate KV heads: its up-projected K and V have all 128 heads.
    "deepseek_v3": ModelSpec(
        name="DeepSeek-V3 671B", n_layers=61, dim=7168, n_heads=128, n_kv_heads=128, ffn_dim=18432,
        vocab_size=129280, params=671_026_419_200, active_params=37_552_297_472,
        n_experts=256, top_k=8, moe_layers=58, expert_params=653_908_770_816,
        source="torchtitan deepseek_v3 `_671b` and DeepSeek-V3 config.json; counts = exercise 22's counter",
    ),
}  # fmt: skip
