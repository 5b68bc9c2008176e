"""Memory budget: count every byte a GPU holds while it trains or serves a transformer.

Parameters from a config; model states of mixed-precision Adam under ZeRO (Rajbhandari et al. 2020, arXiv
1910.02054); activations kept for backward (Korthikanti et al. 2022, arXiv 2205.05198); the KV cache of
inference (GQA; MLA, DeepSeek-V2, arXiv 2405.04434). Check: `grade exercise 22`.
Symbols: Ψ parameters, N_d data-parallel degree, s sequence, b micro-batch, h hidden, a heads, t TP degree.
Every function returns a number of parameters or of BYTES: never GB (1e9 B) or GiB (2**30 B).
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 10**9  # decimal gigabyte: datasheets and nccl-tests use it (ground-truth.md §0.1)
GiB = 2**30  # binary gibibyte: 40 GiB = 42.9 GB, a 7% gap that is easy to lose


@dataclass(frozen=True)
class LlamaConfig:
    """A dense Llama-style decoder: GQA attention, SwiGLU MLP, RMSNorm, no biases anywhere."""

    vocab_size: int
    dim: int  # hidden size h
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (GQA: n_heads // n_kv_heads query heads share one K/V head)
    ffn_dim: int  # SwiGLU inner width
    tie_embeddings: bool = False  # True: the output head reuses the embedding matrix

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


@dataclass(frozen=True)
class DeepSeekV3Config:
    """A DeepSeek-V3-style MoE decoder with MLA attention. The first `n_dense_layers` layers have a dense
    SwiGLU MLP, every later one an MoE of shared + routed experts (top-`n_activated_experts` per token)."""

    vocab_size: int
    dim: int
    n_layers: int
    n_dense_layers: int
    dense_ffn_dim: int
    n_heads: int
    q_lora_rank: int  # d_c' in DeepSeek-V2 §2.1.2: width of the compressed query
    kv_lora_rank: int  # d_c: width of the compressed K/V latent, the thing MLA caches
    qk_nope_head_dim: int  # d_h: per-head query/key width without RoPE
    qk_rope_head_dim: int  # d_h^R: per-head width of the decoupled RoPE query/key
    v_head_dim: int
    n_routed_experts: int
    n_shared_experts: int
    n_activated_experts: int  # routed experts per token (top-k)
    moe_ffn_dim: int  # SwiGLU inner width of ONE expert
    tie_embeddings: bool = False


# Llama-3 (same shapes as Llama-3.1): pytorch/torchtitan torchtitan/models/llama3/__init__.py gives dim,
# n_layers, n_heads, n_kv_heads, and ffn_dim_multiplier 1.3 / multiple_of 1024 (8B) or 4096 (70B), so the FFN
# width is int(8*dim/3) * 1.3 rounded up: 14336 and 28672. Vocab 128256, embeddings untied (ground-truth.md
# §11). The released configs agree: https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
LLAMA3_8B = LlamaConfig(vocab_size=128256, dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336)
LLAMA3_70B = LlamaConfig(vocab_size=128256, dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28672)

# DeepSeek-V3 671B: torchtitan torchtitan/models/deepseek_v3/__init__.py (`_671b`; ground-truth.md §11), the
# same as https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json (first_k_dense_replace 3,
# intermediate_size 18432, moe_intermediate_size 2048, n_routed_experts 256, num_experts_per_tok 8).
DEEPSEEK_V3 = DeepSeekV3Config(
    vocab_size=129280, dim=7168, n_layers=61, n_dense_layers=3, dense_ffn_dim=18432,
    n_heads=128, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
    v_head_dim=128,
    n_routed_experts=256, n_shared_experts=1, n_activated_experts=8, moe_ffn_dim=2048,
)  # fmt: skip


# ------------------------------------------------------------------------------------------------------------
# 22.parameters: count weights from a config


def swiglu_mlp_params(dim: int, ffn_dim: int) -> int:
    """Weights of one SwiGLU MLP (Shazeer 2020, arXiv 2002.05202) that maps dim -> dim through an
    inner width of ffn_dim, as Llama builds it. No biases."""
    raise NotImplementedError("TODO(22.parameters): not implemented yet")


def gqa_attention_params(cfg: LlamaConfig) -> int:
    """Weights of one grouped-query attention block as Llama builds it: cfg.n_heads query heads and
    cfg.n_kv_heads key/value heads, each cfg.head_dim wide, and the output projection back to cfg.dim. No
    biases."""
    raise NotImplementedError("TODO(22.parameters): not implemented yet")


def llama_params(cfg: LlamaConfig) -> int:
    """Every weight of a Llama model as torchtitan's llama3 model builds it: the token embedding,
    every layer (attention, SwiGLU MLP and the layer's RMSNorm weights), the final RMSNorm and the output
    head, which is the embedding itself when cfg.tie_embeddings."""
    raise NotImplementedError("TODO(22.parameters): not implemented yet")


def mla_attention_params(cfg: DeepSeekV3Config) -> int:
    """Weights of one multi-head latent attention block, norms included, as DeepSeek-V3's
    modeling_deepseek.py builds it (DeepseekV3Attention with q_lora_rank set; DeepSeek-V2 §2.1). No
    biases."""
    raise NotImplementedError("TODO(22.parameters): not implemented yet")


def deepseek_v3_params(cfg: DeepSeekV3Config) -> dict[str, int]:
    """Weights of the main model, the multi-token-prediction module excluded: {"total": ...,
    "active": ...}, as DeepSeek-V3's modeling_deepseek.py builds it from the config: the first n_dense_layers
    layers with a dense SwiGLU MLP (dense_ffn_dim), every later one an MoE whose router has a weight and a
    bias (e_score_correction_bias), with shared and routed SwiGLU experts (moe_ffn_dim); embeddings, final
    RMSNorm and output head as for Llama.

    total: every stored weight. active: the weights one token's forward pass reads.
    """
    raise NotImplementedError("TODO(22.parameters): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 22.training_state: weights, gradients and optimizer state per GPU


def training_state_bytes(
    num_params: int, *, zero_stage: int, dp_degree: int, tp_degree: int = 1, pp_degree: int = 1
) -> dict[str, float]:
    """Bytes per GPU of mixed-precision Adam's model states: {"params", "grads", "optimizer", "total"}.

    params: the bf16 weights; grads: the bf16 gradients; optimizer: the fp32 master weights and Adam's two
    fp32 moments (ZeRO §3.1). The model is split evenly by tensor and pipeline parallelism over
    tp_degree x pp_degree GPUs, then ZeRO stage `zero_stage` (0: plain DDP; 1, 2, 3: ZeRO §5) acts over the
    dp_degree data-parallel ranks. Floats: a shard need not be a whole byte count. ValueError for a stage
    outside 0-3.
    """
    raise NotImplementedError("TODO(22.training_state): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 22.activations: what one transformer layer stores for its backward pass


def activation_bytes_per_layer(
    *,
    seq_len: int,
    micro_batch: int,
    hidden: int,
    n_heads: int,
    tp_degree: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Bytes of activations one transformer layer keeps for backward, per GPU, as Korthikanti et
    al. 2022 count them for a GPT-style layer (16-bit activations, 1-byte dropout masks, multi-head
    attention, a 4h MLP).

    recompute: "none", "selective" (their §5: attention's score-sized tensors are recomputed in backward) or
    "full" (each layer's input is all that is kept). sequence_parallel: their §4.2.2, on top of tp_degree-way
    tensor parallelism (§4.2.1). ValueError for any other recompute.
    """
    raise NotImplementedError("TODO(22.activations): not implemented yet")


# ------------------------------------------------------------------------------------------------------------
# 22.kv_cache: what inference keeps per generated token


def kv_cache_bytes(
    cfg: LlamaConfig, *, seq_len: int, batch: int, bytes_per_elem: int = 2, tp_degree: int = 1
) -> int:
    """Bytes of keys and values cached for `batch` sequences of `seq_len` tokens, per GPU, with
    `bytes_per_elem` per element, when tp_degree-way tensor parallelism splits the KV heads as vLLM's
    LlamaAttention does. ValueError unless tp_degree divides cfg.n_kv_heads or is a multiple of it.
    """
    raise NotImplementedError("TODO(22.kv_cache): not implemented yet")


def mla_kv_cache_bytes(cfg: DeepSeekV3Config, *, seq_len: int, batch: int, bytes_per_elem: int = 2) -> int:
    """Bytes MLA caches for `batch` sequences of `seq_len` tokens, with `bytes_per_elem` per
    element (DeepSeek-V2, arXiv 2405.04434, §2.1.3-2.1.4, Table 1)."""
    raise NotImplementedError("TODO(22.kv_cache): not implemented yet")
