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
    ### BEGIN SOLUTION 22.parameters
    # Shazeer 2020 (arXiv 2002.05202): FFN_SwiGLU = (Swish(xW) * xV) W2, three matrices: gate, up and down
    return 3 * dim * ffn_dim
    ### END SOLUTION


def gqa_attention_params(cfg: LlamaConfig) -> int:
    """Weights of one grouped-query attention block as Llama builds it: cfg.n_heads query heads and
    cfg.n_kv_heads key/value heads, each cfg.head_dim wide, and the output projection back to cfg.dim. No
    biases."""
    ### BEGIN SOLUTION 22.parameters
    q_width = cfg.n_heads * cfg.head_dim  # 4096 for Llama-3 8B
    kv_width = cfg.n_kv_heads * cfg.head_dim  # 1024 for Llama-3 8B: GQA makes K and V 4x narrower than Q
    return cfg.dim * q_width + 2 * cfg.dim * kv_width + q_width * cfg.dim  # wq + (wk, wv) + wo
    ### END SOLUTION


def llama_params(cfg: LlamaConfig) -> int:
    """Every weight of a Llama model as torchtitan's llama3 model builds it: the token embedding,
    every layer (attention, SwiGLU MLP and the layer's RMSNorm weights), the final RMSNorm and the output
    head, which is the embedding itself when cfg.tie_embeddings."""
    ### BEGIN SOLUTION 22.parameters
    embedding = cfg.vocab_size * cfg.dim  # 525.3 M for Llama-3 8B
    head = 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.dim  # Llama-3 8B/70B do NOT tie: another 525.3 M
    norms = 2 * cfg.dim  # attention_norm + ffn_norm, one weight vector each
    layer = gqa_attention_params(cfg) + swiglu_mlp_params(cfg.dim, cfg.ffn_dim) + norms  # 218.1 M for 8B
    return embedding + cfg.n_layers * layer + cfg.dim + head  # + final norm
    ### END SOLUTION


def mla_attention_params(cfg: DeepSeekV3Config) -> int:
    """Weights of one multi-head latent attention block, norms included, as DeepSeek-V3's
    modeling_deepseek.py builds it (DeepseekV3Attention with q_lora_rank set; DeepSeek-V2 §2.1). No
    biases."""
    ### BEGIN SOLUTION 22.parameters
    qk_head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim  # 192: each query is [no-RoPE part | RoPE part]
    q = cfg.dim * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * cfg.n_heads * qk_head_dim
    # kv_a also emits the ONE RoPE key that all heads share (DeepSeek-V2 §2.1.3), hence + qk_rope_head_dim
    kv_a = cfg.dim * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank
    # kv_b rebuilds every head's no-RoPE key and its value from the latent
    kv_b = cfg.kv_lora_rank * cfg.n_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)
    o = cfg.n_heads * cfg.v_head_dim * cfg.dim
    return q + kv_a + kv_b + o  # 187.1 M for DeepSeek-V3
    ### END SOLUTION


def deepseek_v3_params(cfg: DeepSeekV3Config) -> dict[str, int]:
    """Weights of the main model, the multi-token-prediction module excluded: {"total": ...,
    "active": ...}, as DeepSeek-V3's modeling_deepseek.py builds it from the config: the first n_dense_layers
    layers with a dense SwiGLU MLP (dense_ffn_dim), every later one an MoE whose router has a weight and a
    bias (e_score_correction_bias), with shared and routed SwiGLU experts (moe_ffn_dim); embeddings, final
    RMSNorm and output head as for Llama.

    total: every stored weight. active: the weights one token's forward pass reads.
    """
    ### BEGIN SOLUTION 22.parameters
    expert = swiglu_mlp_params(cfg.dim, cfg.moe_ffn_dim)  # 44.0 M: small "fine-grained" experts
    router = cfg.n_routed_experts * cfg.dim + cfg.n_routed_experts  # gate weight + e_score_correction_bias
    shared_part = router + cfg.n_shared_experts * expert  # every token goes through these
    moe_total = shared_part + cfg.n_routed_experts * expert
    moe_active = shared_part + cfg.n_activated_experts * expert  # top-8 of 256 routed experts
    dense_mlp = swiglu_mlp_params(cfg.dim, cfg.dense_ffn_dim)

    common = mla_attention_params(cfg) + 2 * cfg.dim  # attention + its two norms: in every layer, always used
    n_moe = cfg.n_layers - cfg.n_dense_layers  # 58 MoE layers after 3 dense ones
    embeddings = cfg.vocab_size * cfg.dim * (1 if cfg.tie_embeddings else 2) + cfg.dim  # + final norm
    base = embeddings + cfg.n_layers * common + cfg.n_dense_layers * dense_mlp
    return {"total": base + n_moe * moe_total, "active": base + n_moe * moe_active}
    ### END SOLUTION


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
    ### BEGIN SOLUTION 22.training_state
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    # TP shards every weight matrix and PP gives each stage its own layers: each GPU owns 1/(t*p) of the
    # model. Even split assumed: replicated norms and a heavier first/last stage (embeddings) are ignored.
    psi = num_params / (tp_degree * pp_degree)
    # ZeRO §3.1 (Rajbhandari et al. 2020): mixed-precision Adam keeps 2Ψ fp16/bf16 weights + 2Ψ grads + KΨ
    # optimizer, K = 12 = fp32 master copy 4 + momentum 4 + variance 4 (forget the master copy: K = 8)
    params, grads, optimizer = 2 * psi, 2 * psi, 12 * psi
    # ZeRO §5 / Fig. 1 (P_os, P_os+g, P_os+g+p): each stage divides one more term by N_d, cumulatively
    if zero_stage >= 1:
        optimizer /= dp_degree  # stage 1: 2Ψ + 2Ψ + KΨ/N_d
    if zero_stage >= 2:
        grads /= dp_degree  # stage 2: 2Ψ + (2Ψ + KΨ)/N_d: a rank keeps only the grads its shard updates
    if zero_stage >= 3:
        params /= dp_degree  # stage 3: (2Ψ + 2Ψ + KΨ)/N_d: weights all-gathered layer by layer when needed
    return {"params": params, "grads": grads, "optimizer": optimizer, "total": params + grads + optimizer}
    ### END SOLUTION


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
    ### BEGIN SOLUTION 22.activations
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    s, b, h, a, t = seq_len, micro_batch, hidden, n_heads, tp_degree
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh  # §5: only the 2-byte layer input is stored; the paper does not shard it by t
    # §4.1 eq. 1, per layer: attention 11sbh + 5as²b, MLP 19sbh, two LayerNorms 4sbh -> sbh(34 + 5as/h).
    # Of the 34, 24 live inside the TP regions (sharded by t); 10 (LayerNorm and dropout in/outputs) do not,
    # unless sequence parallelism shards them along s. 5as/h (attention scores) is sharded by heads.
    attention_scores = 5 * a * s / (h * t)  # 0 after selective recomputation: exactly these are recomputed
    replicated = 10 / t if sequence_parallel else 10  # §4.2.2 eq. 4 with SP, §4.2.1 eq. 2 without
    if recompute == "selective":
        return sbh * (replicated + 24 / t)  # Table 2: sbh(34/t) with SP, sbh(10 + 24/t) with TP alone
    return sbh * (replicated + 24 / t + attention_scores)
    ### END SOLUTION


# ------------------------------------------------------------------------------------------------------------
# 22.kv_cache: what inference keeps per generated token


def kv_cache_bytes(
    cfg: LlamaConfig, *, seq_len: int, batch: int, bytes_per_elem: int = 2, tp_degree: int = 1
) -> int:
    """Bytes of keys and values cached for `batch` sequences of `seq_len` tokens, per GPU, with
    `bytes_per_elem` per element, when tp_degree-way tensor parallelism splits the KV heads as vLLM's
    LlamaAttention does. ValueError unless tp_degree divides cfg.n_kv_heads or is a multiple of it.
    """
    ### BEGIN SOLUTION 22.kv_cache
    if cfg.n_kv_heads % tp_degree and tp_degree % cfg.n_kv_heads:
        raise ValueError(f"tp_degree {tp_degree} must divide n_kv_heads {cfg.n_kv_heads} or be a multiple")
    # vLLM vllm/model_executor/models/llama.py, LlamaAttention:
    #     num_kv_heads = max(1, total_num_kv_heads // tp_size)
    kv_heads = max(1, cfg.n_kv_heads // tp_degree)
    # 2 = one K and one V; n_kv_heads, not n_heads: GQA's whole point is a 4x (8B) or 8x (70B) smaller cache
    per_token = 2 * cfg.n_layers * kv_heads * cfg.head_dim * bytes_per_elem  # 131072 B for Llama-3 8B, t = 1
    return per_token * seq_len * batch
    ### END SOLUTION


def mla_kv_cache_bytes(cfg: DeepSeekV3Config, *, seq_len: int, batch: int, bytes_per_elem: int = 2) -> int:
    """Bytes MLA caches for `batch` sequences of `seq_len` tokens, with `bytes_per_elem` per
    element (DeepSeek-V2, arXiv 2405.04434, §2.1.3-2.1.4, Table 1)."""
    ### BEGIN SOLUTION 22.kv_cache
    # DeepSeek-V2 §2.1.3-2.1.4, Table 1 (arXiv 2405.04434): MLA caches (d_c + d_h^R) * l elements per token,
    # "equal to GQA with only 2.25 groups" when d_c = 4 d_h and d_h^R = d_h / 2. No factor 2: K and V both
    # come out of the one latent. 576 elements per layer for DeepSeek-V3; MHA would cache 2 * 128 * 128.
    per_token = cfg.n_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * bytes_per_elem  # 70272 B in bf16
    tokens = seq_len * batch
    return per_token * tokens
    ### END SOLUTION
