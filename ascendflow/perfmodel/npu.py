"""Step time on an Ascend NPU: each op class at its calibrated achieved efficiency, plus communication and
per-step overhead. Pure.

One engine step of one DP rank (the scheduler prices each rank's batch) is::

    layers × (GEMMs + MoE experts + attention + elementwise + TP/EP collectives) + LM head
    + step_overhead_s + (eager_layer_overhead_s × layers when the step is replayed piecewise)

and a step that replays no graph takes ``max(device time, host launch time) + step_overhead_s``.

Each op is a roofline ``max(flops / (eff_gemm × peak), bytes / (eff_mem × bandwidth))`` (Williams, Waterman,
Patterson, "Roofline", CACM 52(4), 2009) at *achieved* efficiencies fitted to public vllm-ascend measurements
(:mod:`ascendflow.perfmodel.calibration`), never at peak. Terms and the source of each form:

* **Weight bytes by quantization** (``W8A8``, ``W8A8_DYNAMIC``, ``W4A8_DYNAMIC``, ``W8A16``): bytes per element from
  :func:`ascendflow.compiler.memory.quant_bytes.quant_bytes` (vllm-ascend ``quantization/methods/w8a8_static.py``,
  ``w8a8_dynamic.py``); int8-activation schemes run on the int8 cube at twice the fp16 peak (910B/910C: 589.8/707.9
  TOPS int8 vs 294.9/353.8 TFLOPS fp16, ``shared/reference/ascend_perf_training.md`` §3).
* **MoE experts read at the batch size**: a batch of ``B`` tokens, each routed to ``k`` distinct experts of ``E``
  uniformly and independently, touches ``E·(1−(1−k/E)^B)`` distinct experts in expectation (the classical occupancy
  count, Feller, *An Introduction to Probability Theory*, vol. 1, ch. II.11 / IV.2; a token leaves a given expert
  unpicked with probability ``1−k/E``); ``B`` counts the tokens of every DP rank, which meet in the EP group's
  dispatch (vllm-ascend ``ops/fused_moe``: MC2 / all-to-all over ``tp × dp`` ranks). Expert weights are spread over
  ``tp × dp`` ranks (vLLM ``FusedMoE``: EP or flattened TP over DP×TP); compute is ``2·B·k·3·H·I / tp`` per rank.
* **The busiest EP rank sets the MoE layer's time** (expert parallelism): with ``--enable-expert-parallel`` each of
  the ``R = tp × dp`` ranks holds ``E / R`` whole experts (vLLM ``FusedMoE`` ``determine_expert_map``, linear
  placement) and the combine (MC2 ``npu_moe_distribute_combine``, or the all-to-all's second exchange;
  vllm-ascend ``ops/fused_moe/moe_comm_method.py``) returns only when every rank has finished its experts, so a
  rank reads the weights of the experts hit on the *busiest* rank, not the mean. Each expert is hit with
  ``p = 1−(1−k/E)^B`` (the occupancy count above), the hits of one rank are ``Binomial(E/R, p)`` (independent
  experts: an approximation, exact for ``k = 1``), and the expected maximum over ``R`` ranks is
  ``Σ_{x<E/R} (1 − F(x)^R)`` (order statistics of i.i.d. variables, David & Nagaraja, *Order Statistics*, 3rd ed.,
  §4.2; :func:`busiest_rank_experts`). No constant: at decode (Kimi-K2, 384 experts, 16 ranks, one token) the
  busiest rank reads 1.99 experts where the mean is 0.5; at large batches every expert is hit and the factor is 1.
  Without EP every rank holds a ``1/R`` slice of every expert and the mean is exact.
* **W4A16 experts dequantize to bf16 inside the grouped matmul** (vllm-ascend ``ops/fused_moe/moe_mlp.py``
  ``quant_apply_mlp`` at v0.20.2rc1: ``torch_npu.npu_grouped_matmul(..., antiquant_scale, antiquant_offset)``,
  weight-only "antiquant": the int4 weight is turned into the activation dtype per element, ``scale × (w +
  offset)``, Ascend C ``AscendAntiQuant``, and multiplied on the bf16 cube). On Atlas A2/A3 the cube (AIC) and
  vector (AIV) cores are separate and exchange tiles through global memory/L2 (Ascend C "separated architecture"),
  so the kernel moves the dequantized weights at the activation dtype: the expert weights are priced at
  ``dtype_bytes`` per element (2 for bf16), not at the 0.625 B they occupy (:data:`ANTIQUANT_EXPERT_SCHEMES`;
  resident memory stays 0.625 B: :mod:`ascendflow.compiler.memory.quant_bytes`). ESTIMATE (a form, no fitted
  constant): the Kimi-K2 tutorial rows' TPOT grows 4.2 ms per decode row from 1 to 8 rows, this form with the
  busiest-rank term 4.2 ms, int4 bytes 1.5 ms (measured error: ``benchmarks/data/perf_corpus_eval.json``, family
  ``kimi_k2``, out of sample). Consistent in sign with vllm-ascend PR #4541 (weight-only W8A16 linear layers,
  ``npu_weight_quant_batchmatmul``: half the bytes of bf16, TPOT only 14 % lower at TP2, concurrency 10).
* **MLA decode on the latent cache with absorbed projections** (DeepSeek-V2 paper, arXiv 2405.04434 §2.1.2;
  vllm-ascend ``attention/mla_v1.py`` ``_forward_decode``): per token and rank, GEMMs ``q_a``, ``q_b``, ``kv_a``,
  ``W_UK`` (``h × nope × kv_lora``), ``W_UV`` (``h × kv_lora × v``) and ``o``; attention reads ``(kv_lora + rope)``
  elements per cached token (one latent, not split by TP) and does ``2·h·(2·kv_lora + rope)`` flops per cached
  token. Prefill decompresses with ``kv_b`` (``kv_lora → h × (nope + v)``) and runs MHA (``_forward_prefill``).
* **Attention**: decode reads every cached K/V element once (paged attention, memory-bound); a prefill chunk of
  ``n`` tokens over ``c`` cached costs ``4·n·(c + n/2)·h·d`` flops (causal; FlashAttention, arXiv 2205.14135).
* **TP all-reduce** after attention and after the MLP (Megatron-LM, arXiv 1909.08053 §3: two all-reduces per layer),
  ring cost ``α + 2(n−1)/n × bytes / bw`` (Patarasuk & Yuan, JPDC 69(2), 2009), ``bw`` HCCS inside a node and RoCE
  across nodes; the LM head's logits all-gather ``α + (n−1)/n × bytes / bw``.
* **EP dispatch and combine** (MC2: vllm-ascend ``ops/fused_moe/moe_comm_method.py``): each a collective moving
  ``B·k·H`` activations of which ``(ep−1)/ep`` leave the rank: ``α + bytes × (ep−1)/ep / bw``, two per MoE layer.
* **Per-step overhead** (scheduling, input preparation, sampling, output processing): ``step_overhead_s``; a step
  that is not replayed as one full graph also launches kernels of each layer from the host (vLLM
  ``compilation_config.cudagraph_mode``; ACL graphs in vllm-ascend ``compilation/acl_graph.py``):
  a step replayed **piecewise** (``PIECEWISE``, or the piecewise half of a native ``FULL_AND_PIECEWISE``, with its
  token count within the largest capture size: vLLM's ``CUDAGraphWrapper`` replays the pieces between the
  attention splitting ops, ``CompilationConfig.splitting_ops``, and the attention runs eagerly) adds
  ``eager_layer_overhead_s`` per layer; a step that replays **no graph** launches every op from the host while the
  device runs those already queued (ACL streams run asynchronously to the host; ``TASK_QUEUE_ENABLE``, set in
  vllm-ascend's images and tutorials, adds a second dispatch stage), so it takes ``max(device time, host launch
  time)``: host-bound at small batches, device-bound at large ones. Its host time per layer is
  ``eager_layer_overhead_s`` under ``--enforce-eager`` (plain PyTorch) and for a mixed step or one beyond the
  capture sizes under ``FULL_DECODE_ONLY``/``FULL`` (vllm-ascend keeps ``enable_npugraph_ex`` there, which compiles
  the general-shape graph), and ``eager_layer_overhead_s × eager_full_factor`` for a ``PIECEWISE`` model's step
  beyond its largest capture size (vLLM ``CudagraphDispatcher.dispatch`` returns ``NONE``;
  ``compilation/piecewise_backend.py`` runs the general-shape split graph, each piece's ``CUDAGraphWrapper``
  falling through; vllm-ascend ``platform.py`` ``check_and_update_config`` turns ``enable_npugraph_ex`` off for
  ``PIECEWISE``, v0.20.2rc1): its own constant, because no enforce-eager row measures that path (1.0 unless
  ``benchmarks/perf_corpus_eval.py``'s grouped leave-one-family-out choice ships another value). E.g. Kimi-K2 at TP16 on vllm-ascend 0.20.2rc1 captures
  sizes 1, 2, 4, 8 (``max_num_seqs`` 12: ``platform.py`` ``_get_default_max_cudagraph_capture_size`` =
  ``max_num_seqs × (1 + spec tokens)``, vLLM's 1, 2, 4, 8, 16, ... ladder up to it): its tutorial's TPOT is
  57–87 ms at 1–8 concurrent requests and 200–230 ms at 10–12 (``docs/source/tutorials/models/Kimi-K2-Thinking.md``
  §8).
* **MTP** (DeepSeek-V3, arXiv 2412.19437 §2.2, §5.4.3): a decode row verifies ``1 + s`` tokens and runs the draft
  layer ``s`` times, and emits ``(1 − α^(s+1)) / (1 − α)`` tokens on average (Leviathan et al., ICML 2023, eq. 1;
  :func:`accepted_per_step`); a decode-only step's time is divided by it (the scheduler counts one token per row
  per step). ``α = mtp_accept_length − 1``; default ``mtp_accept_length`` (``s = 1``): 1.85 (the report's 85–90 %
  acceptance of the second token), so ``s = 3`` emits 3.18.
  The acceptance is a per-family parameter: a model type in :data:`MTP_ACCEPT_LENGTH` takes its own public default
  instead of the calibration's (Qwen3.5 / Qwen3.6: ESTIMATE, see there).
* **Hybrid Gated DeltaNet layers** (Qwen3-Next, Qwen3.5: ``layer_types`` / ``full_attention_interval``): only the
  ``full_attention`` layers run attention over the KV cache (their Q projection doubled by the output gate,
  ``attn_output_gate``: vLLM 0.32.0 ``qwen3_next.py`` ``Qwen3NextAttention``, ``q_proj`` of ``2 × heads × head_dim``);
  a ``linear_attention`` layer runs ``QwenGatedDeltaNetAttention`` (vLLM 0.32.0
  ``layers/mamba/gdn/qwen_gdn_linear_attn.py``): GEMMs ``in_proj_qkvz`` (hidden → 2·key + 2·value dims),
  ``in_proj_ba`` (hidden → 2 × V heads) and ``out_proj`` (value dims → hidden), split by TP, and the gated delta rule
  on a recurrent state of ``V heads × head_k × head_v`` per request (``mamba_utils.py``
  ``gated_delta_net_state_shape``; its bytes the plan's ``kv_cache.mamba_page_bytes``), read and written once per
  row and step (memory-bound), ``8 · head_k · head_v``
  flops per token and V head (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", arXiv 2412.06464 eq. 4–5:
  ``S k``, the rank-1 update, the decay and ``S q``, 2 flops per state element each), plus its conv state
  ``conv_dim × (kernel − 1)``. The MTP draft layer is a full-attention layer (``qwen3_5_mtp.py``).
* **EAGLE-3** (``method: eagle3``; vLLM ``v1/spec_decode/llm_base_proposer.py`` ``propose``, the draft
  ``model_executor/models/llama_eagle3.py``): the target verifies ``1 + s`` tokens per decode row as for MTP; the
  draft is a separate one-layer Llama model (``plan.draft``: its ``config.json``, or the ESTIMATE from the target's
  shape): its first pass runs on every token of the step (``fc``: ``3 × target hidden → hidden`` over the three
  target hidden states, the layer with its ``qkv_proj`` reading ``2 × hidden``, then the draft LM head over
  ``draft_vocab_size`` on the rows), and ``s − 1`` more passes at the batch (one token per row: layer + LM head),
  all in the model dtype at the target's TP. A step without graph replay launches the draft's ``s`` layers from the
  host too. Tokens per step: :func:`accepted_per_step` at ``eagle3_accept_length`` (ESTIMATE, not fitted:
  :data:`EAGLE3_ACCEPT_LENGTH`).
* **Async scheduling** (``--async-scheduling``; vLLM ``vllm/v1/engine/core.py`` ``step_with_batch_queue``): the
  host's per-step time overlaps the device's forward pass: ``max(device, step_overhead_s)`` instead of the sum.
* **Chunked prefill**: the scheduler cuts prompts to the token budget; a chunk is priced over its cached prefix.
* **Prefill efficiency**: a step that holds a prefill chunk runs its compute-bound ops at
  ``gemm_efficiency × prefill_efficiency`` (the roofline with a per-kernel-class achieved efficiency, Williams et
  al. 2009: prefill runs the fused prefill attention and large-M GEMMs outside graph replay); 1.0 unless
  ``benchmarks/perf_corpus_eval.py``'s grouped leave-one-family-out choice ships another value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ascendflow.compiler.memory.quant_bytes import quant_bytes
from ascendflow.perfmodel.steptime import Work

#: Schemes whose activations are quantized to int8, so their GEMMs run on the int8 cube (2× the fp16 peak).
INT8_ACTIVATION_SCHEMES = ("W8A8", "W8A8_DYNAMIC", "W4A8_DYNAMIC")
#: Expert schemes whose grouped matmul dequantizes the weights to the activation dtype in the kernel (weight-only
#: "antiquant" ``npu_grouped_matmul``): priced at the activation dtype's bytes per weight (module docstring).
ANTIQUANT_EXPERT_SCHEMES = ("W4A16",)
#: Mean tokens emitted per decode step with one MTP token, by text model type (per-family default; other types take
#: the calibration's ``mtp_accept_length``). Qwen3.5 / Qwen3.6 (``qwen3_5_mtp``): ESTIMATE 1.89 from the public
#: "golden MTP acceptance length" 3.39 at 3 speculative tokens for Qwen3.5 (sgl-project/sglang PR #35194,
#: ``docs/cookbook/autoregressive/Qwen/Qwen3.5.mdx``, 2026-08-17; GPU, thinking on), inverted through
#: :func:`accepted_per_step`: ``(1 − α⁴)/(1 − α) = 3.39`` at ``α = 0.890``. Not fitted to any corpus row; measured
#: error (with the rest of the model, grouped leave-one-family-out, 2026-12-04): output tokens/s MAPE 61 % over the
#: 23 Qwen3.5/3.6 CI rows (``docs/performance_model.md``); no corpus row measures their TPOT or TTFT.
MTP_ACCEPT_LENGTH: dict[str, float] = {"qwen3_5_moe_text": 1.89, "qwen3_5_text": 1.89}
#: Gated-DeltaNet flops per token, V head and state element (see the module docstring).
GDN_FLOPS_PER_STATE_ELEMENT = 8
#: Model types whose full-attention layers carry an output gate unless ``attn_output_gate`` is false (vLLM
#: ``qwen3_next.py``: ``getattr(config, "attn_output_gate", True)``).
GATED_ATTENTION_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
#: ``eagle3_accept_length`` default, ESTIMATE (a public measurement, not fitted on any corpus row): vLLM's
#: acceptance-length test (``tests/v1/spec_decode/test_acceptance_length.py``, MT-Bench, 80 prompts, temperature 0)
#: expects Llama-3.1-8B-Instruct with RedHatAI's EAGLE-3 speculator at ``num_speculative_tokens = 3`` to emit a mean
#: 2.60 tokens per step (acceptance per position 0.7296, 0.5208, 0.3545). With i.i.d. acceptance
#: (:func:`accepted_per_step`) ``1 + α + α² + α³ = 2.60`` gives ``α = 0.717`` (positions 0.717, 0.514, 0.369 against
#: the measured 0.730, 0.521, 0.355), stored as the mean at ``s = 1``: ``1 + α``. The same test's Qwen3-8B (2.26) and
#: gpt-oss-20b (2.56) speculators bracket it; the corpus's drafts (MiniMax-M2.5/M2.7, Qwen3-30B/32B) have no public
#: acceptance figure. Measured error: unmeasured (the corpus rows that run EAGLE-3 score the whole prediction only).
EAGLE3_ACCEPT_LENGTH = 1.717
#: Elementwise passes over the hidden state per layer (2 RMSNorms, rotary, SiLU×mul, 2 residual adds, read+write):
#: a count of vLLM's Qwen3/Llama decoder-layer ops (``vllm/model_executor/models/qwen3.py``), each ~2 passes.
ELEMENTWISE_PASSES = 10


@lru_cache(maxsize=None)
def bytes_per_weight(scheme: str | None, dtype_bytes: int) -> float:
    """Resident bytes per weight element of ``scheme`` (``None``: the model dtype), from
    :func:`~ascendflow.compiler.memory.quant_bytes.quant_bytes` on a 4096 × 4096 projection (per-row scales
    included)."""
    if not scheme:
        return float(dtype_bytes)
    return quant_bytes(4096, 4096, scheme, "bfloat16", dtype_bytes) / 4096 ** 2


@dataclass(frozen=True)
class NpuConstants:
    """Calibrated constants of one hardware generation (meaning and source: ``calibration/<hardware>.yaml``)."""

    gemm_efficiency: float
    memory_efficiency: float
    step_overhead_s: float
    eager_layer_overhead_s: float
    collective_latency_s: float
    hccs_bandwidth_gbps: float
    internode_bandwidth_gbps: float
    mtp_accept_length: float
    prefill_efficiency: float = 1.0
    eager_full_factor: float = 1.0
    eagle3_accept_length: float = EAGLE3_ACCEPT_LENGTH


@dataclass(frozen=True)
class NpuLayout:
    """What the step model needs from the plan: parallel sizes, quantization, graph mode, speculative tokens."""

    tp: int = 1
    dp: int = 1
    ep: bool = False
    nodes: int = 1
    devices_per_node: int = 8
    linear_scheme: str | None = None
    expert_scheme: str | None = None
    full_graph_decode: bool = False
    piecewise_graph: bool = False
    max_capture_size: int = 0
    spec_tokens: int = 0
    async_scheduling: bool = False
    #: ``engine_args.speculative_config.method`` (``""``: none); ``eagle3`` prices the separate draft.
    spec_method: str = ""


def accepted_per_step(spec_tokens: int, accept_length_1: float) -> float:
    """Mean tokens a decode row emits per step with ``spec_tokens`` draft tokens: ``(1 − α^(s+1)) / (1 − α)`` for a
    per-token acceptance rate ``α`` (Leviathan et al., "Fast Inference from Transformers via Speculative Decoding",
    ICML 2023, eq. 1: i.i.d. acceptance), ``α = accept_length_1 − 1`` from the calibrated mean at ``s = 1``
    (default 1.85: DeepSeek-V3 report, arXiv 2412.19437 §5.4.3). 1 without speculation."""
    if spec_tokens <= 0:
        return 1.0
    a = min(max(accept_length_1 - 1.0, 0.0), 0.999)
    return (1.0 - a ** (spec_tokens + 1)) / (1.0 - a)


def distinct_experts(experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a batch of ``tokens`` touches when each picks ``top_k`` of ``experts`` uniformly:
    ``E·(1−(1−k/E)^B)`` (occupancy; see the module docstring). 0 for a dense model."""
    if not experts:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def busiest_rank_experts(experts: int, top_k: int, tokens: float, ranks: int) -> float:
    """Expected distinct experts hit on the busiest of ``ranks`` EP ranks holding ``ceil(experts / ranks)`` experts
    each, every expert hit independently with ``p = 1−(1−k/E)^B``: ``Σ_{x<n} (1 − F(x)^R)`` for ``F`` the
    ``Binomial(n, p)`` CDF (module docstring). ``ranks = 1``: :func:`distinct_experts`. 0 for a dense model."""
    if not experts or tokens <= 0:
        return 0.0
    r = max(int(ranks), 1)
    n = -(-int(experts) // r)
    p = 1.0 - (1.0 - top_k / experts) ** tokens
    if r == 1:
        return n * p
    if p >= 1.0:
        return float(n)
    pmf, cdf, total = (1.0 - p) ** n, 0.0, 0.0
    for x in range(n):
        cdf += pmf
        total += 1.0 - min(cdf, 1.0) ** r
        pmf *= (n - x) / (x + 1) * p / (1.0 - p)
    return total


def full_attention_layers(arch: Mapping[str, Any]) -> int | None:
    """Full-attention layers of a Gated-DeltaNet hybrid (``layer_types``, else every ``full_attention_interval``-th
    layer, as transformers' ``Qwen3NextConfig`` derives them); ``None`` for a model without ``linear_attention``
    layers (every layer is priced as attention)."""
    if not arch.get("linear_num_value_heads"):
        return None
    layers = int(arch["num_hidden_layers"])
    kinds = arch.get("layer_types")
    if kinds:
        return sum(1 for k in kinds[:layers] if k != "linear_attention")
    interval = int(arch.get("full_attention_interval") or 0)
    return layers // interval if interval else None


def _arch_int(arch: Mapping[str, Any], *names: str, default: int = 0) -> int:
    for n in names:
        v = arch.get(n)
        if v:
            return int(v[0] if isinstance(v, (list, tuple)) else v)
    return default


@dataclass(frozen=True)
class NpuStepModel:
    """Step time of one DP rank on an NPU (seconds); see the module docstring for every term.

    Built by :func:`npu_step_model`; ``peak_flops`` (fp16/bf16 cube, FLOP/s) and ``bandwidth_bps`` (HBM, B/s) are
    the hardware option's per-device peaks. The terms that depend only on a step's token and row counts (GEMMs,
    MoE layer, LM head) are memoised per instance (``_memo``): a simulation prices the same counts thousands of
    times, and a memoised term is the same float, so every step time is bit-for-bit what it was without it.
    """

    arch: Mapping[str, Any]
    layout: NpuLayout
    constants: NpuConstants
    peak_flops: float
    bandwidth_bps: float
    dtype_bytes: int = 2
    #: One request's Gated-DeltaNet state on one layer and rank (recurrent + conv state), as the plan's KV pass sizes
    #: it (``kv_cache.mamba_page_bytes``); 0: from the architecture in the model dtype.
    gdn_state_bytes: int = 0
    #: The EAGLE-3 draft's architecture (``plan.draft.architecture``), ``None`` without one.
    draft: Mapping[str, Any] | None = None
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def overhead_s(self) -> float:
        """Fixed per-step overhead (s) of a graph-replayed step."""
        return self.constants.step_overhead_s

    # -- primitives ---------------------------------------------------------------------------------------------
    def _roof(self, flops: float, nbytes: float, int8: bool = False) -> float:
        c = self.constants
        peak = self.peak_flops * (2.0 if int8 else 1.0)
        return max(flops / (c.gemm_efficiency * peak), nbytes / (c.memory_efficiency * self.bandwidth_bps))

    def _gemm(self, t: float, k: float, n: float, scheme: str | None) -> float:
        """A ``[t, k] × [k, n]`` projection with weights in ``scheme``."""
        if t <= 0:
            return 0.0
        w = k * n * bytes_per_weight(scheme, self.dtype_bytes)
        return self._roof(2.0 * t * k * n, w + self.dtype_bytes * t * (k + n),
                          int8=scheme in INT8_ACTIVATION_SCHEMES)

    def _bw(self, group: int, spans_nodes: bool) -> float:
        c = self.constants
        return (c.internode_bandwidth_gbps if spans_nodes else c.hccs_bandwidth_gbps) * 1e9

    def _all_reduce(self, nbytes: float, n: int, spans_nodes: bool) -> float:
        if n <= 1:
            return 0.0
        return self.constants.collective_latency_s + 2 * (n - 1) / n * nbytes / self._bw(n, spans_nodes)

    # -- layer pieces --------------------------------------------------------------------------------------------
    def _attention_gemms(self, t: int, decode: int) -> float:
        key = ("attention_gemms", t, decode)
        if key not in self._memo:
            self._memo[key] = self._attention_gemms_s(t, decode)
        return self._memo[key]

    def _attention_gemms_s(self, t: int, decode: int) -> float:
        a, lay, s = self.arch, self.layout, self.layout.linear_scheme
        hidden, heads = int(a["hidden_size"]), max(int(a["num_attention_heads"]) // lay.tp, 1)
        if a.get("kv_lora_rank"):
            c, r = int(a["kv_lora_rank"]), int(a.get("qk_rope_head_dim") or 64)
            dn, dv = int(a.get("qk_nope_head_dim") or 128), int(a.get("v_head_dim") or 128)
            q = int(a.get("q_lora_rank") or 0)
            time = self._gemm(t, hidden, c + r, s) + self._gemm(t, heads * dv, hidden, s)
            time += (self._gemm(t, hidden, q, s) + self._gemm(t, q, heads * (dn + r), s)) if q else \
                self._gemm(t, hidden, heads * (dn + r), s)
            pre = t - decode
            # absorbed W_UK / W_UV on decode rows (bf16 copies: mla_weights.py), kv_b decompression on prefill rows
            time += self._gemm(decode, dn, heads * c, None) + self._gemm(decode, c, heads * dv, None)
            time += self._gemm(pre, c, heads * (dn + dv), None)
            return time
        kv_heads = max(int(a.get("num_key_value_heads") or a["num_attention_heads"]) // lay.tp, 1)
        d = int(a.get("head_dim") or hidden // int(a["num_attention_heads"]))
        gate = 2 if a.get("model_type") in GATED_ATTENTION_TYPES and a.get("attn_output_gate") is not False else 1
        return self._gemm(t, hidden, (gate * heads + 2 * kv_heads) * d, s) + self._gemm(t, heads * d, hidden, s)

    def _gdn(self, t: int, rows: int) -> float:
        """One Gated-DeltaNet layer's mixer on ``t`` tokens of ``rows`` requests (see the module docstring)."""
        a, lay, s = self.arch, self.layout, self.layout.linear_scheme
        hidden = int(a["hidden_size"])
        nv = max(int(a["linear_num_value_heads"]) // lay.tp, 1)
        dk, dv = int(a.get("linear_key_head_dim") or 128), int(a.get("linear_value_head_dim") or 128)
        key = int(a.get("linear_num_key_heads") or 0) * dk // lay.tp
        value = nv * dv
        gemms = (self._gemm(t, hidden, 2 * key + 2 * value, s) + self._gemm(t, hidden, 2 * nv, s)
                 + self._gemm(t, value, hidden, s))
        state = self.gdn_state_bytes or self.dtype_bytes * (
            nv * dk * dv + (2 * key + value) * (int(a.get("linear_conv_kernel_dim") or 4) - 1))
        rule = self._roof(GDN_FLOPS_PER_STATE_ELEMENT * t * nv * dk * dv, 2 * rows * state)
        return gemms + rule

    def _attention_constants(self) -> tuple[int, int, int]:
        """``(KV bytes per cached token, decode flops per cached token, prefill flops per query-key pair)``."""
        a, lay = self.arch, self.layout
        hidden, heads = int(a["hidden_size"]), max(int(a["num_attention_heads"]) // lay.tp, 1)
        b = self.dtype_bytes
        if a.get("kv_lora_rank"):
            c, r = int(a["kv_lora_rank"]), int(a.get("qk_rope_head_dim") or 64)
            dqk = int(a.get("qk_nope_head_dim") or 128) + r
            dv = int(a.get("v_head_dim") or 128)
            return (c + r) * b, 2 * heads * (2 * c + r), 2 * heads * (dqk + dv)
        kv_heads = max(int(a.get("num_key_value_heads") or a["num_attention_heads"]) // lay.tp, 1)
        d = int(a.get("head_dim") or hidden // int(a["num_attention_heads"]))
        return 2 * kv_heads * d * b, 4 * heads * d, 4 * heads * d

    def _attention(self, ctx: int, prefill_flops: float, prefill_kv_tokens: int) -> float:
        """Attention of one step: decode rows over ``ctx`` cached tokens in all (each row's cached + 1), prefill
        rows of ``prefill_flops`` flops reading ``prefill_kv_tokens`` tokens' K/V."""
        kv_per_token, dec_flops_per_token, _ = self._constants()
        q = 1 + self.layout.spec_tokens
        time = self._roof(q * dec_flops_per_token * ctx, kv_per_token * ctx) if ctx else 0.0
        if prefill_flops:
            time += self._roof(prefill_flops, kv_per_token * prefill_kv_tokens)
        return time

    def _constants(self) -> tuple[int, int, int]:
        if "attention" not in self._memo:
            self._memo["attention"] = self._attention_constants()
        return self._memo["attention"]

    def _mlp(self, t: int, dense: bool) -> float:
        """Dense MLP (``dense``) or MoE layer (routed experts + shared experts + router) on ``t`` tokens."""
        key = ("mlp", t, dense)
        if key not in self._memo:
            self._memo[key] = self._mlp_s(t, dense)
        return self._memo[key]

    def _mlp_s(self, t: int, dense: bool) -> float:
        a, lay = self.arch, self.layout
        hidden = int(a["hidden_size"])
        if dense:
            inter = _arch_int(a, "intermediate_size", default=4 * hidden) // lay.tp
            return self._gemm(t, hidden, 2 * inter, lay.linear_scheme) + self._gemm(t, inter, hidden,
                                                                                     lay.linear_scheme)
        experts, k = _arch_int(a, "n_routed_experts", "num_experts"), _arch_int(a, "num_experts_per_tok", default=1)
        inter = _arch_int(a, "moe_intermediate_size")
        ranks = lay.tp * lay.dp
        global_tokens = t * lay.dp
        # experts whose weights this rank waits on: the busiest EP rank's whole experts, or without EP a 1/ranks
        # slice of every expert hit (module docstring)
        read = busiest_rank_experts(experts, k, global_tokens, ranks) if lay.ep else \
            distinct_experts(experts, k, global_tokens) / ranks
        per_weight = float(self.dtype_bytes) if lay.expert_scheme in ANTIQUANT_EXPERT_SCHEMES else \
            bytes_per_weight(lay.expert_scheme, self.dtype_bytes)
        weight = read * 3 * hidden * inter * per_weight
        rows = t * k / lay.tp
        time = self._roof(2.0 * rows * 3 * hidden * inter, weight + self.dtype_bytes * rows * (2 * hidden + 3 * inter),
                          int8=lay.expert_scheme in INT8_ACTIVATION_SCHEMES)
        shared = _arch_int(a, "n_shared_experts") * inter + _arch_int(a, "shared_expert_intermediate_size")
        if shared:
            # W4A16 is a FusedMoE-only method (quant_bytes.py): the shared experts are Linear layers at linear_scheme
            sch = lay.linear_scheme if lay.expert_scheme in ANTIQUANT_EXPERT_SCHEMES else lay.expert_scheme
            time += self._gemm(t, hidden, 2 * shared // lay.tp, sch)
            time += self._gemm(t, shared // lay.tp, hidden, sch)
        time += self._gemm(t, hidden, experts, None)  # router gate (FLOAT in msModelSlim checkpoints)
        if lay.ep:
            ep = ranks
            spans = lay.nodes > 1 and ep > lay.devices_per_node
            moved = t * k * hidden * self.dtype_bytes * (ep - 1) / ep
            time += 2 * (self.constants.collective_latency_s + moved / self._bw(ep, spans))
        return time

    def _draft_model(self) -> "NpuStepModel":
        """The EAGLE-3 draft as a one-layer dense model (model dtype, no speculation) at this layout's TP; its
        ``vocab_size`` is the draft's LM-head rows (``draft_vocab_size``, default its ``vocab_size``)."""
        if "draft_model" not in self._memo:
            d = dict(self.draft or {})
            d["vocab_size"] = d.get("draft_vocab_size") or d["vocab_size"]
            d["num_hidden_layers"] = int(d.get("num_hidden_layers") or 1)
            for k in ("kv_lora_rank", "n_routed_experts", "num_experts", "num_local_experts"):
                d.pop(k, None)
            lay = replace(self.layout, spec_tokens=0, spec_method="", linear_scheme=None, expert_scheme=None)
            self._memo["draft_model"] = NpuStepModel(d, lay, self.constants, self.peak_flops, self.bandwidth_bps,
                                                     self.dtype_bytes)
        return self._memo["draft_model"]

    def _eagle3_pass(self, t: int, decode: int, rows: int, ctx: int, first: bool) -> float:
        """One forward of the EAGLE-3 draft on ``t`` tokens (``decode`` of them decode rows) with its LM head on
        ``rows`` rows: ``first`` adds ``fc`` (3 target hidden states → hidden) and the layer's second ``hidden``
        of ``qkv_proj`` input (embeddings and hidden states concatenated, ``llama_eagle3.py``)."""
        d, lay = self._draft_model(), self.layout
        a = d.arch
        h, layers = int(a["hidden_size"]), int(a["num_hidden_layers"])
        spans = lay.nodes > 1 and lay.tp > lay.devices_per_node
        act = t * h * self.dtype_bytes
        heads = max(int(a["num_attention_heads"]) // lay.tp, 1)
        kv = max(int(a.get("num_key_value_heads") or a["num_attention_heads"]) // lay.tp, 1)
        hd = int(a.get("head_dim") or h // int(a["num_attention_heads"]))
        layer = (d._attention_gemms(t, decode) + d._attention(ctx, 0.0, 0) + d._roof(0.0, ELEMENTWISE_PASSES * act)
                 + 2 * d._all_reduce(act, lay.tp, spans) + d._mlp(t, True))
        time = layers * layer
        if first:
            target_h = int(a.get("target_hidden_size") or self.arch["hidden_size"])
            time += d._gemm(t, 3 * target_h, h, None) + d._gemm(t, h, (heads + 2 * kv) * hd, None)
        vocab = -(-int(a["vocab_size"]) // lay.tp)
        time += d._gemm(rows, h, vocab, None)
        if lay.tp > 1:
            time += self.constants.collective_latency_s + (lay.tp - 1) / lay.tp * rows * vocab * lay.tp * 4 / \
                self._bw(lay.tp, spans)
        return time

    def eagle3_draft_s(self, t: int, decode: int, rows: int, ctx: int) -> float:
        """Seconds of the EAGLE-3 draft in one step of ``t`` target tokens, ``decode`` decode rows of ``rows``,
        decode context ``ctx``: the first pass on all ``t`` tokens, then ``s − 1`` passes at the ``rows`` rows
        (``llm_base_proposer.py`` ``propose``: the loop over ``num_speculative_tokens − 1``)."""
        return (self._eagle3_pass(t, decode, rows, ctx, True)
                + (self.layout.spec_tokens - 1) * self._eagle3_pass(rows, decode, rows, ctx, False))

    # -- the step --------------------------------------------------------------------------------------------------
    def step_s(self, batch: Sequence[Work]) -> float:
        """Seconds for one engine step of this DP rank over ``batch``."""
        pre_flops_per_pair = self._constants()[2]
        return self._step(sum(1 for w in batch if w.new == 1), sum(w.new for w in batch), len(batch),
                          sum(w.cached + 1 for w in batch if w.new == 1),
                          sum(pre_flops_per_pair * w.new * (w.cached + w.new / 2) for w in batch if w.new > 1),
                          sum(w.cached + w.new for w in batch if w.new > 1), any(w.new > 1 for w in batch))

    def decode_step_s(self, rows: int, ctx: int) -> float:
        """:meth:`step_s` of ``rows`` decode rows (one new token each) whose ``cached + 1`` sum to ``ctx``, without
        the batch: the same float (the scheduler's decode runs price thousands of such steps)."""
        return self._step(rows, rows, rows, ctx, 0, 0, False)

    def _step(self, decode: int, new: int, rows: int, ctx: int, prefill_flops: float, prefill_kv_tokens: int,
              has_prefill: bool) -> float:
        """A step from its counts: ``decode`` rows of one new token, ``new`` tokens in all, ``rows`` rows, decode
        context ``ctx``, prefill attention flops and K/V tokens, whether a prefill chunk is in it."""
        a, lay, c = self.arch, self.layout, self.constants
        if c.prefill_efficiency != 1.0 and has_prefill:
            # a step with a prefill chunk runs the compute-bound prefill kernels at their own achieved efficiency
            if "prefill_model" not in self._memo:
                self._memo["prefill_model"] = replace(self, constants=replace(
                    c, gemm_efficiency=c.gemm_efficiency * c.prefill_efficiency, prefill_efficiency=1.0))
            return self._memo["prefill_model"]._step(decode, new, rows, ctx, prefill_flops, prefill_kv_tokens,
                                                     has_prefill)
        t = new + decode * lay.spec_tokens
        if not t:
            return 0.0
        if "layers" not in self._memo:
            layers = int(a["num_hidden_layers"])
            experts = _arch_int(a, "n_routed_experts", "num_experts")
            self._memo["layers"] = (int(a["hidden_size"]), layers, experts,
                                    min(_arch_int(a, "first_k_dense_replace"), layers) if experts else layers,
                                    full_attention_layers(a))
        hidden, layers, experts, dense_layers, full_layers = self._memo["layers"]
        tp_spans = lay.nodes > 1 and lay.tp > lay.devices_per_node
        act = t * hidden * self.dtype_bytes
        rest = self._roof(0.0, ELEMENTWISE_PASSES * act) + self._all_reduce(act, lay.tp, tp_spans)
        common = (self._attention_gemms(t, decode * (1 + lay.spec_tokens))
                  + self._attention(ctx, prefill_flops, prefill_kv_tokens) + rest)
        # a Gated-DeltaNet hybrid: the mixer of its linear-attention layers (all MoE or all dense alike in Qwen3-Next
        # and Qwen3.5, so the mean mixer over the layers is priced on each)
        mixer = common if full_layers is None else \
            (full_layers * common + (layers - full_layers) * (self._gdn(t, rows) + rest)) / layers
        moe_reduce = 0.0 if lay.ep else self._all_reduce(act, lay.tp, tp_spans)
        time = dense_layers * (mixer + self._mlp(t, True) + self._all_reduce(act, lay.tp, tp_spans))
        if layers > dense_layers:
            time += (layers - dense_layers) * (mixer + self._mlp(t, False) + moe_reduce)
        vocab = -(-int(a["vocab_size"]) // lay.tp)
        head = ("lm_head", rows)
        if head not in self._memo:
            self._memo[head] = self._gemm(rows, hidden, vocab, None)
        time += self._memo[head]
        if lay.tp > 1:
            time += c.collective_latency_s + (lay.tp - 1) / lay.tp * rows * vocab * lay.tp * 4 / \
                self._bw(lay.tp, tp_spans)
        eagle3 = lay.spec_tokens and lay.spec_method == "eagle3" and self.draft is not None
        if eagle3:  # the separate one-layer draft: its first pass on the step's tokens, s - 1 at the batch
            time += self.eagle3_draft_s(t, decode, rows, ctx)
        elif lay.spec_tokens:  # the MTP draft layer, once per speculative token, on the decode rows
            time += lay.spec_tokens * (common + self._mlp(decode, not experts)) * decode / t
        full_graph = lay.full_graph_decode and decode == rows and rows <= lay.max_capture_size
        piecewise = lay.piecewise_graph and t <= lay.max_capture_size
        if piecewise and not full_graph:
            time += c.eager_layer_overhead_s * layers
        elif not full_graph:
            # no graph at all: the host launches every op while the device runs those already queued (ACL streams
            # run asynchronously to the host), so the step takes the longer of the two; a PIECEWISE-compiled
            # model's step beyond its capture sizes runs its split FX graph op by op (eager_full_factor)
            host = c.eager_layer_overhead_s * layers * (c.eager_full_factor if lay.piecewise_graph else 1.0)
            if eagle3:  # and the draft's layer once per speculative token
                host += c.eager_layer_overhead_s * lay.spec_tokens * int(self.draft.get("num_hidden_layers") or 1)
            time = max(time, host)
        # async scheduling overlaps the host's scheduling and output processing with the device's forward pass
        # (vLLM --async-scheduling: the engine core schedules step n+1 while step n runs, vllm/v1/engine/core.py
        # step_with_batch_queue), so the host's per-step time is hidden up to the device time
        time = max(time, c.step_overhead_s) if lay.async_scheduling else time + c.step_overhead_s
        if lay.spec_tokens and decode == rows:
            time /= accepted_per_step(lay.spec_tokens, c.eagle3_accept_length if eagle3 else
                                      MTP_ACCEPT_LENGTH.get(a.get("model_type"), c.mtp_accept_length))
        return time


def model_class(arch: Mapping[str, Any]) -> str:
    """``dense``, ``moe`` or ``mla_moe``: the model class whose measured error labels a prediction."""
    if arch.get("kv_lora_rank"):
        return "mla_moe"
    return "moe" if _arch_int(arch, "n_routed_experts", "num_experts") else "dense"


def layout_of(plan: Mapping[str, Any], quantization: Mapping[str, Any] | None) -> NpuLayout:
    """The :class:`NpuLayout` of a plan dict (``engine_args``, ``target``, ``graph``) and the run's quantization
    spec (``linear_scheme``, ``expert_scheme``; ``None``: model dtype)."""
    ea, graph, target = plan["engine_args"], plan.get("graph") or {}, plan["target"]
    mode = str(graph.get("cudagraph_mode") or "NONE").upper()
    sizes = graph.get("capture_sizes") or []
    spec = ea.get("speculative_config") or {}
    q = quantization or {}
    return NpuLayout(
        tp=int(ea.get("tensor_parallel_size") or 1), dp=int(ea.get("data_parallel_size") or 1),
        ep=bool(ea.get("enable_expert_parallel")), nodes=int(target.get("nodes") or 1),
        devices_per_node=int(target.get("devices_per_node") or 8),
        linear_scheme=q.get("linear_scheme"), expert_scheme=q.get("expert_scheme"),
        full_graph_decode=not graph.get("enforce_eager") and mode.startswith("FULL"),
        piecewise_graph=not graph.get("enforce_eager") and mode in ("PIECEWISE", "FULL_AND_PIECEWISE"),
        max_capture_size=max(sizes) if sizes else 0, spec_tokens=int(spec.get("num_speculative_tokens") or 0),
        async_scheduling=ea.get("async_scheduling") is True, spec_method=str(spec.get("method") or ""))


def npu_step_model(plan: Mapping[str, Any], hardware: Mapping[str, Any], constants: NpuConstants,
                   quantization: Mapping[str, Any] | None) -> NpuStepModel:
    """The NPU step model of ``plan`` on ``hardware`` (its ``peak_tflops_bf16``, ``memory_bandwidth_gbps``).

    Raises:
        KeyError: the hardware option has no peak figures.
    """
    dtype_bytes = 4 if str(plan["engine_args"].get("dtype")) == "float32" else 2
    draft = (plan.get("draft") or {}).get("architecture")
    return NpuStepModel(plan["model"]["architecture"], layout_of(plan, quantization), constants,
                        float(hardware["peak_tflops_bf16"]) * 1e12, float(hardware["memory_bandwidth_gbps"]) * 1e9,
                        dtype_bytes, gdn_state_bytes=int((plan.get("kv_cache") or {}).get("mamba_page_bytes") or 0),
                        draft=draft)
