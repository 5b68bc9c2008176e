"""Memory budget: count every byte a GPU holds while it trains or serves a transformer.

Model states of mixed-precision Adam: 2Ψ bf16 weights + 2Ψ bf16 grads + KΨ (fp32 master, m, v; K = 12);
ZeRO stage 1/2/3 shards optimizer / +grads / +weights over N_d ranks (Rajbhandari et al. 2020, 1910.02054).
Activations per layer: sbh(34 + 5as/h) bytes, then /t with TP+SP (Korthikanti et al. 2022, arXiv 2205.05198).
KV cache: 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes. Check: `grade exercise 22`.
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
    """Weights of one SwiGLU MLP, w2(silu(w1 x) * w3 x): w1, w3 map dim -> ffn_dim, w2 ffn_dim -> dim."""
    return 3 * dim * ffn_dim


def gqa_attention_params(cfg: LlamaConfig) -> int:
    """Weights of one grouped-query attention block: wq (dim -> n_heads*head_dim), wk and wv
    (dim -> n_kv_heads*head_dim each), wo (n_heads*head_dim -> dim). No biases."""
    q_out, kv_out = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = [(cfg.dim, q_out), (cfg.dim, kv_out), (cfg.dim, kv_out), (q_out, cfg.dim)]
    return sum(a * b for a, b in shapes)


def llama_params(cfg: LlamaConfig) -> int:
    """Every weight of a Llama model: the token embedding (vocab x dim); per layer one attention block, one
    SwiGLU MLP and two RMSNorm weight vectors (dim each); a final RMSNorm (dim); the output head
    (dim -> vocab), which adds nothing when cfg.tie_embeddings."""
    layers = cfg.n_layers * (
        gqa_attention_params(cfg) + swiglu_mlp_params(cfg.dim, cfg.ffn_dim) + 2 * cfg.dim
    )
    embeddings = (1 if cfg.tie_embeddings else 2) * cfg.vocab_size * cfg.dim
    return embeddings + layers + cfg.dim


def mla_attention_params(cfg: DeepSeekV3Config) -> int:
    """Weights of one multi-head latent attention block, as DeepSeek-V3's modeling_deepseek.py builds it:
    q_a (dim -> q_lora_rank), q_a_norm (q_lora_rank), q_b (q_lora_rank -> n_heads*(qk_nope + qk_rope)),
    kv_a (dim -> kv_lora_rank + qk_rope), kv_a_norm (kv_lora_rank),
    kv_b (kv_lora_rank -> n_heads*(qk_nope + v_head_dim)), o (n_heads*v_head_dim -> dim). No biases."""
    qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    shapes = [
        (cfg.dim, cfg.q_lora_rank), (1, cfg.q_lora_rank), (cfg.q_lora_rank, cfg.n_heads * qk),
        (cfg.dim, cfg.kv_lora_rank + cfg.qk_rope_head_dim), (1, cfg.kv_lora_rank),
        (cfg.kv_lora_rank, cfg.n_heads * (cfg.qk_nope_head_dim + cfg.v_head_dim)),
        (cfg.n_heads * cfg.v_head_dim, cfg.dim),
    ]  # fmt: skip
    return sum(a * b for a, b in shapes)


def deepseek_v3_params(cfg: DeepSeekV3Config) -> dict[str, int]:
    """Weights of the main model, the multi-token-prediction module excluded: {"total": ..., "active": ...}.

    total: embedding, output head (unless tied), final RMSNorm (dim), and per layer: MLA, two RMSNorms (dim
    each), then a dense SwiGLU MLP (dense_ffn_dim) in the first n_dense_layers layers, else an MoE: router
    weight (n_routed_experts x dim) + router bias (n_routed_experts), n_shared_experts + n_routed_experts
    SwiGLU experts (moe_ffn_dim). active: what one token's forward pass reads, i.e. the same minus the routed
    experts it was not sent to.
    """
    expert = swiglu_mlp_params(cfg.dim, cfg.moe_ffn_dim)
    n_moe = cfg.n_layers - cfg.n_dense_layers
    common = cfg.vocab_size * cfg.dim * (1 if cfg.tie_embeddings else 2) + cfg.dim
    common += cfg.n_layers * (mla_attention_params(cfg) + 2 * cfg.dim)
    common += cfg.n_dense_layers * swiglu_mlp_params(cfg.dim, cfg.dense_ffn_dim)
    common += n_moe * (cfg.n_routed_experts * (cfg.dim + 1) + cfg.n_shared_experts * expert)
    total = common + n_moe * cfg.n_routed_experts * expert
    active = common + n_moe * cfg.n_activated_experts * expert
    return {"total": total, "active": active}


# ------------------------------------------------------------------------------------------------------------
# 22.training_state: weights, gradients and optimizer state per GPU


def training_state_bytes(
    num_params: int, *, zero_stage: int, dp_degree: int, tp_degree: int = 1, pp_degree: int = 1
) -> dict[str, float]:
    """Bytes per GPU of mixed-precision Adam's model states: {"params", "grads", "optimizer", "total"}.

    params: bf16 weights, 2 B each; grads: bf16 gradients, 2 B each; optimizer: fp32 master weights + Adam
    momentum + Adam variance, 4 + 4 + 4 B each. Tensor and pipeline parallelism first split the model evenly
    over tp_degree * pp_degree GPUs. ZeRO then shards over the dp_degree data-parallel ranks: stage 0 (plain
    DDP) nothing, stage 1 the optimizer state, stage 2 also the gradients, stage 3 also the weights.
    """
    psi = num_params / tp_degree / pp_degree
    frac = [1.0, 1.0, 1.0]  # weights, grads, optimizer: the share of each this GPU keeps
    for stage, i in ((1, 2), (2, 1), (3, 0)):
        if zero_stage >= stage:
            frac[i] = 1 / dp_degree
    params, grads, optimizer = 2 * psi * frac[0], 2 * psi * frac[1], (4 + 4 + 4) * psi * frac[2]
    return {"params": params, "grads": grads, "optimizer": optimizer, "total": params + grads + optimizer}


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
    """Bytes of activations one transformer layer keeps for backward, per GPU (Korthikanti et al. 2022).

    A GPT-style layer: 16-bit activations, 1-byte dropout masks, multi-head attention, a 4h MLP. recompute is
    "none", "selective" (attention's softmax and dropout internals are recomputed in backward) or "full" (only
    the layer input is kept). sequence_parallel shards the LayerNorm/dropout regions along the sequence; it
    changes nothing when tp_degree is 1.
    """
    s, b, h, a, t = seq_len, micro_batch, hidden, n_heads, tp_degree
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh
    if sequence_parallel and t > 1:
        coeff = 34 / t
    else:
        coeff = 10 + 24 / t
    if recompute == "none":
        coeff += 5 * a * s / (h * t)
    return sbh * coeff


# ------------------------------------------------------------------------------------------------------------
# 22.kv_cache: what inference keeps per generated token


def kv_cache_bytes(
    cfg: LlamaConfig, *, seq_len: int, batch: int, bytes_per_elem: int = 2, tp_degree: int = 1
) -> int:
    """Bytes of K and V cached for `batch` sequences of `seq_len` tokens, per GPU.

    Every layer caches one key and one value vector of head_dim per KV head per token. Tensor parallelism
    splits the KV heads over tp_degree GPUs; when tp_degree > n_kv_heads each GPU still holds one whole head
    (a replica).
    """
    per_token_per_layer = 2 * cfg.head_dim * bytes_per_elem  # one K and one V vector per head
    heads = cfg.n_kv_heads // tp_degree if tp_degree <= cfg.n_kv_heads else 1  # a replica past n_kv_heads
    return per_token_per_layer * heads * cfg.n_layers * batch * seq_len


def mla_kv_cache_bytes(cfg: DeepSeekV3Config, *, seq_len: int, batch: int, bytes_per_elem: int = 2) -> int:
    """Bytes MLA caches for `batch` sequences of `seq_len` tokens: per layer and token, the compressed K/V
    latent (kv_lora_rank) and the decoupled RoPE key (qk_rope_head_dim), both shared by all heads."""
    per_token = cfg.n_layers * bytes_per_elem * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    return per_token * batch * seq_len
