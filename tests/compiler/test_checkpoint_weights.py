"""Weights counted from real checkpoints agree with the architecture-based count, for every layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ascendflow.compiler.memory.checkpoint_weights import checkpoint_bytes
from ascendflow.compiler.memory.weights import Layout, pp_partition, weight_bytes
from ascendflow.models.checkpoint import read_inventory
from ascendflow.models.smollm2 import ensure_smollm2
from ascendflow.models.tiny_deepseek import TINY_DEEPSEEK_V3_CONFIG, ensure_tiny_deepseek
from ascendflow.schema import ModelArchitecture


def _load(path):
    return ModelArchitecture.from_hf_config(json.loads((path / "config.json").read_text())), read_inventory(path)


@pytest.mark.parametrize("tp,pp", [(1, 1), (3, 1), (9, 1), (1, 2), (3, 4)])
def test_smollm2_checkpoint_count_equals_the_estimate(tp, pp):
    a, inv = _load(ensure_smollm2())
    assert inv.quant_description is None and inv.total_bytes == 269_030_016
    stages = pp_partition(a.num_hidden_layers, pp)
    for i, layers in enumerate(stages):
        layout = Layout(tp=tp, ep=1, first_stage=i == 0, last_stage=i == pp - 1, layers=layers, pp=pp)
        assert checkpoint_bytes(inv, a, layout, "bfloat16") == weight_bytes(a, layout, dtype="bfloat16")


@pytest.mark.parametrize("tp,ep", [(1, 1), (2, 1), (4, 1), (2, 4), (4, 8)])
def test_tiny_deepseek_checkpoint_count_equals_the_estimate(tp, ep):
    a, inv = _load(ensure_tiny_deepseek())
    layout = Layout(tp=tp, ep=ep, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
    cfg = TINY_DEEPSEEK_V3_CONFIG
    bias_upcast = (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"]) * cfg["n_routed_experts"] * 2
    assert checkpoint_bytes(inv, a, layout, "bfloat16") + bias_upcast == weight_bytes(a, layout, dtype="bfloat16")


@pytest.mark.parametrize("tp", [1, 3])
def test_msmodelslim_w8a8_checkpoint_count_equals_the_w8a8_estimate(tp):
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

    a, inv = _load(ensure_smollm2_w8a8())
    assert inv.quant_type == "W8A8_DYNAMIC"
    assert inv.quant_description["model.layers.0.self_attn.q_proj.weight"] == "W8A8_DYNAMIC"
    assert inv.tensors["model.layers.0.self_attn.q_proj.weight"].dtype == "I8"
    layout = Layout(tp=tp, ep=1, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
    counted = checkpoint_bytes(inv, a, layout, "bfloat16")
    assert counted == weight_bytes(a, layout, dtype="bfloat16", linear_scheme="W8A8_DYNAMIC")
    if tp == 1:
        # By hand: int8 weights as stored; per output row weight_scale and weight_offset loaded into bf16 params
        # (vllm_ascend quantization/methods/w8a8_dynamic.py get_perchannel_param, v0.23.0) plus the float32
        # weight_scale_fp32 copy made after loading: 2 + 2 + 4 B (the stored fp32 scale + offset are 4 + 4 B: the
        # same total, by coincidence of the bf16 model); FLOAT tensors (fp32 on disk) in bf16; the stored lm_head
        # copy of the tied embedding is not loaded.
        int8 = sum(t.nbytes for t in inv.tensors.values() if t.dtype == "I8")
        params = sum(t.shape[0] * (2 + 2 + 4) for n, t in inv.tensors.items() if n.endswith("weight_scale"))
        floats = sum(t.nbytes // 2 for n, t in inv.tensors.items()
                     if inv.quant_description[n] == "FLOAT" and not n.startswith("lm_head"))
        assert counted == int8 + params + floats
        assert int8 == 106_168_320


#: msModelSlim 26.1.0 W8A8 static recipe (per-tensor asymmetric activations, per-channel int8 weights), the
#: ``linear_quant`` step of its ``lab_practice`` W8A8 presets without smoothing; ``{dataset}``: calibration file.
STATIC_W8A8_YAML = """\
apiversion: modelslim_v1
metadata: {{config_id: ascendflow-smollm2-w8a8-static, score: 50, verified_model_types: [],
           label: {{w_bit: 8, a_bit: 8, is_sparse: False, kv_cache: False}}}}
spec:
  process:
    - type: "linear_quant"
      qconfig:
        act: {{scope: "per_tensor", dtype: "int8", symmetric: False, method: "minmax"}}
        weight: {{scope: "per_channel", dtype: "int8", symmetric: True, method: "minmax"}}
      include: [ "*" ]
  runner: "model_wise"
  save:
    - type: "ascendv1_saver"
      part_file_size: 4
  dataset: "{dataset}"
"""


def _smollm2_w8a8_static():
    """SmolLM2-135M quantized W8A8 static by the real msModelSlim CLI on CPU (about 100 s on 2 cores the first
    time, measured; then reused from the model cache)."""
    import os
    import shutil
    import subprocess
    import tempfile

    from ascendflow.models.cache import model_cache_dir
    from ascendflow.models.msmodelslim_w8a8 import find_msmodelslim_python

    final = model_cache_dir() / "SmolLM2-135M-Instruct-w8a8-static-test"
    if (final / "quant_model_description.json").is_file():
        return final
    python, source = find_msmodelslim_python(), ensure_smollm2()
    work = Path(tempfile.mkdtemp(prefix="static", dir=model_cache_dir()))
    try:
        (work / "calib.jsonl").write_text("".join(json.dumps({"inputs_pretokenized": p}) + "\n" for p in (
            "The capital of France is", "Explain in one sentence why the sky is blue.")))
        (work / "cfg.yaml").write_text(STATIC_W8A8_YAML.format(dataset=work / "calib.jsonl"))
        resave = ("import sys, torch; from transformers import AutoModelForCausalLM as M, AutoTokenizer as T; "
                  "M.from_pretrained(sys.argv[1], dtype=torch.float32).save_pretrained(sys.argv[2]); "
                  "T.from_pretrained(sys.argv[1]).save_pretrained(sys.argv[2])")
        subprocess.run([python, "-c", resave, str(source), str(work / "fp32")], check=True, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=1800)
        subprocess.run([python, "-m", "msmodelslim.cli", "quant", "--model_type", "default", "--model_path",
                        str(work / "fp32"), "--save_path", str(work / "out"), "--device", "cpu", "--config_path",
                        str(work / "cfg.yaml")], check=True, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=1800)
        shutil.copy2(source / "config.json", work / "out" / "config.json")  # bf16 source dtype
        os.replace(work / "out", final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def test_msmodelslim_w8a8_static_checkpoint_count_equals_the_12_byte_per_row_estimate():
    a, inv = _load(_smollm2_w8a8_static())
    assert inv.quant_type == "W8A8"
    q = "model.layers.0.self_attn.q_proj."
    # What msModelSlim stores for a static layer (no weight_scale/weight_offset: vllm-ascend allocates them anyway).
    assert {n[len(q):]: (t.dtype, t.shape) for n, t in inv.tensors.items() if n.startswith(q)} == {
        "weight": ("I8", (576, 576)), "deq_scale": ("I64", (576,)), "quant_bias": ("I32", (576,)),
        "input_scale": ("F32", (1,)), "input_offset": ("F32", (1,))}
    for dtype, per_row in (("bfloat16", 12), ("float16", 16)):
        for tp, pp in ((1, 1), (3, 1), (9, 1), (3, 2)):
            for i, layers in enumerate(pp_partition(a.num_hidden_layers, pp)):
                layout = Layout(tp=tp, ep=1, first_stage=i == 0, last_stage=i == pp - 1, layers=layers, pp=pp)
                assert checkpoint_bytes(inv, a, layout, dtype) == weight_bytes(a, layout, dtype=dtype,
                                                                               linear_scheme="W8A8")
        # By hand at TP1: int8 weights; per output row quant_bias 4 + deq_scale (4 bf16 / 8 fp16) + weight_scale and
        # weight_offset 2 + 2; per vLLM module (qkv, o, gate_up, down) input_scale 2 + input_offset 1 + three
        # aclnn_input_* copies of its input width; FLOAT tensors in the model dtype, the tied lm_head not loaded.
        whole = Layout(tp=1, ep=1, first_stage=True, last_stage=True, layers=range(a.num_hidden_layers))
        int8 = sum(t.nbytes for t in inv.tensors.values() if t.dtype == "I8")
        rows = sum(t.shape[0] for n, t in inv.tensors.items() if n.endswith(".weight") and t.dtype == "I8")
        modules = 30 * ((3 + 3 * 576 * 2) * 3 + (3 + 3 * 1536 * 2))  # qkv, o_proj, gate_up (input 576); down (1536)
        floats = (49152 * 576 + 30 * 2 * 576 + 576) * 2
        assert checkpoint_bytes(inv, a, whole, dtype) == int8 + rows * per_row + modules + floats
