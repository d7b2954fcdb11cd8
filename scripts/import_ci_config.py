"""Build the NPU measurement corpus from vllm-ascend's CI configs: ``python scripts/import_ci_config.py GIT_DIR``.

vllm-ascend's nightly and weekly CI (``tests/e2e/nightly/**``, ``tests/e2e/weekly/**``) keeps one YAML per model
deployment: the ``vllm serve`` arguments of every node and AISBench benchmark cases; a ``case_type: performance``
case holds a ``baseline`` (AISBench *Output Token Throughput*, tok/s of the whole service, ``tools/aisbench.py``) that
CI compares each night's run with (pass at ``threshold`` x baseline). Each change of a baseline is a measurement made
at that commit's date on that date's main branch. This script reads a vllm-ascend git directory (every branch, not
the PR refs) and, for every performance case at every commit where its baseline changed, emits a corpus row:

- ``citation``: ``path@commit`` (12 hex digits) and the commit date;
- ``hardware``: from ``.github/workflows/configs/{nightly,weekly}_config.yaml`` at that commit (section ``a2``,
  ``a3``, ``a3_560t``, ``310p``; runner label ``os``), else from ``npu_per_node`` (16: A3) or the file name
  (``-A2``, ``-A3``, ``310p``);
- ``release``: the newest vllm-ascend tag at or before the commit date (the main branch CI runs is ahead of it);
- ``workload``: AISBench dataset ``GSM8K-in<N>`` (the prompt padded to about ``N`` tokens through the chat template)
  or ``random``, ``max_out_len`` (``ignore_eos`` is on in CI's perf cases: output length = ``max_out_len``),
  ``num_prompts``, ``batch_size`` (= max concurrency), ``request_rate`` (0 = all at once);
- ``argv``: the ``vllm serve`` argv of every node as CI starts it;
- ``overrides``: the ascendflow command line (``python -m ascendflow ...``) of the row when ascendflow can express
  it, else ``missing``: the knobs (flags, models, hardware) it has no key for.

Skipped, each counted in the output's ``skipped``: placeholder baselines (≤ 5 tok/s: before vllm-ascend PR #14553,
2026-08-19, most baselines were 1 or 5), numbers that appear in more than one file (copied between configs: which
file measured them is unknown), unchanged baselines, and every kept-out source (:data:`KEPT_OUT`: the performance
model's check rows, never fitted).

Writes ``ascendflow/perfmodel/corpus/ci_rows.json`` (``--out``). Pure functions below; I/O only in ``main``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

import yaml

from ascendflow.importer.ci import ci_workload as workload_of  # the importer's reading of a CI case

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ascendflow" / "perfmodel" / "corpus" / "ci_rows.json"
CI_GLOBS = ("tests/e2e/nightly/", "tests/e2e/weekly/")

#: Kept out of the corpus and of every fit (issue 28 item 2): the check rows. Globs on the file's path inside the
#: vllm-ascend repository (``fnmatch``, ``*`` crosses ``/``).
KEPT_OUT = (
    "tests/e2e/*/Qwen3-30B-A3B-W8A8.yaml", "tests/e2e/*/Qwen3-32B-Int8.yaml", "tests/e2e/*/Qwen3_32b_w8a8_ml_A3.yaml",
    "tests/e2e/*/DeepSeek-R1-0528-W8A8.yaml", "tests/e2e/*/Deepseek_R1_W8A8_A3.yaml",
    "tests/e2e/*/Qwen3_32b_W8A8_wl_A3.yaml", "tests/e2e/*/Qwq_32b_A3.yaml",
    "tests/e2e/*/Prefix-Cache-Qwen3-32B-Int8.yaml", "tests/e2e/*/Prefix-Cache-DeepSeek-R1-0528-W8A8.yaml",
    "tests/e2e/*/Kimi-K2-Thinking.yaml", "tests/e2e/*/Qwen3.5-27B-*",
    "tests/e2e/*multi_node/*/Qwen3-235B-A22B.yaml", "tests/e2e/*/Qwen3-235B-disagg-pd.yaml",
    "tests/e2e/*/Qwen3-235B-A22B-Mooncake-Layerwise.yaml",
    "tests/e2e/multicard/2-cards/test_qwen3_performance.py",
    "docs/source/developer_guide/evaluation/using_evalscope.md",
)
#: PRs and issues kept out (curated PR rows must not cite them).
KEPT_OUT_PRS = (11266, 7474, 12923, 7829, 1811)
KEPT_OUT_ISSUES = (1605,)
#: Baselines at or below this are placeholders (1 or 5 before vllm-ascend PR #14553, 2026-08-19).
PLACEHOLDER_MAX = 5.0

#: CI model repo (lower case, without the org) -> (ascendflow model option, linear scheme or None). Only models whose
#: architecture the catalogue (``conf/model``) holds. DeepSeek-V3/V3.1/R1 share DeepseekV3ForCausalLM's shape fields.
MODELS: dict[str, str] = {
    "qwen3-8b": "qwen3_8b", "qwen3-14b": "qwen3_14b", "qwen3-32b": "qwen3_32b", "qwen3-30b-a3b": "qwen3_30b_a3b",
    "qwen3-235b-a22b": "qwen3_235b_a22b", "qwen2.5-7b-instruct": "qwen2_5_7b_instruct",
    "qwen3-0.6b": "qwen3_0_6b", "qwen3-4b": "qwen3_4b", "deepseek-v3.1": "deepseek_r1", "deepseek-v3": "deepseek_r1",
    "deepseek-r1": "deepseek_r1", "deepseek-r1-0528": "deepseek_r1", "kimi-k2-instruct": "kimi_k2",
    "deepseek-v3.2": "deepseek_r1", "deepseek-v3.1-terminus": "deepseek_r1",
    # MiniMax-M2.7 has MiniMax-M2.5's config.json shape fields (conf/model/minimax_m2_5.yaml): one option, one family
    "minimax-m2.5": "minimax_m2_5", "minimax-m2.7": "minimax_m2_5",
    "qwen3.5-397b-a17b": "qwen3_5_397b_a17b", "qwen3.5-122b-a10b": "qwen3_5_122b_a10b",
    "qwen3.6-35b-a3b": "qwen3_6_35b_a3b",
}
#: Catalogue options whose W8A8 checkpoints are msModelSlim W8A8_DYNAMIC throughout (MoE models), and the option of
#: each msModelSlim scheme the importer expresses. MiniMax-M2: msModelSlim ``lab_practice/minimax_m2/minimax_m27_w8a8.yaml``
#: (QuaRot, then per-channel int8 weights and per-token int8 activations on ``*self_attn*`` and the experts; verified
#: on vllm-ascend A3).
DYNAMIC_W8A8 = ("qwen3_30b_a3b", "qwen3_235b_a22b", "deepseek_r1", "kimi_k2", "qwen3_5_397b_a17b",
                "qwen3_5_122b_a10b", "qwen3_6_35b_a3b", "minimax_m2_5")
QUANT_OPTIONS = {"W4A8": "w4a8_dynamic_ascend"}
#: vLLM MTP method names whose draft is the target's own MTP layers (ascendflow ``MTP_METHODS``).
MTP_METHODS = ("mtp", "deepseek_mtp", "qwen3_next_mtp", "qwen3_5_mtp")
#: Catalogue options that stand in for a model with the same shape fields but a different attention; the row says so.
PROXIES = {"deepseek-v3.2": "DeepSeek-V3.2 = DeepSeek-V3.1 shapes + DSA sparse attention (lightning indexer, top-2048 "
                            "keys): planned as deepseek_r1, its attention priced dense"}
#: Hardware section of the workflow configs -> ascendflow hardware option.
SECTIONS = {"a2": "atlas_800i_a2", "a3": "atlas_800i_a3", "a3_560t": "atlas_800i_a3", "310p": "atlas_300i_duo"}
#: ascendflow's software rows (``conf/hardware`` ``software``; compiler/rules/data/version_matrix.yaml) in order.
RELEASES = ("0.11.0", "0.13.0", "0.18.0", "0.23.0", "0.25.1rc1", "0.26.0rc1")
#: vLLM flags ascendflow sets from its own keys (value -> override) or ignores (no effect on the step model).
IGNORED = {"--host", "--port", "--trust-remote-code", "--seed", "--served-model-name", "--reasoning-parser",
           "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank", "--headless",
           "--data-parallel-size-local", "--data-parallel-rank", "--load-format", "--load_format",
           "--default-chat-template-kwargs", "--tool-call-parser", "--enable-auto-tool-choice",
           "--chat-template", "--api-server-count", "--distributed-executor-backend", "--allowed-local-media-path",
           "--tokenizer-mode", "--safetensors-load-strategy", "--profiler-config", "--model-loader-extra-config",
           "--enable-force-include-usage", "--enable-chunked-prefill", "--disable-log-stats",
           "--disable-log-requests", "--no-enable-log-requests"}


def kept_out(path: str) -> bool:
    """Whether ``path`` (inside the vllm-ascend repo) is one of the kept-out check sources (:data:`KEPT_OUT`)."""
    return any(fnmatch.fnmatch(path, g) for g in KEPT_OUT)


# -- git --------------------------------------------------------------------------------------------------------------
def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True,
                          text=True).stdout


def versions(git_dir: str) -> list[dict[str, str]]:
    """Every (commit, date, path, blob) where a CI YAML changed, on every branch (not the PR refs), oldest first,
    one entry per (path, blob) (a blob merged into several branches counts once, at its first date)."""
    out = _git(git_dir, "log", "--branches", "--format=C %H %cs", "--raw", "--no-abbrev", "--no-renames",
               "--", *[g + "**/*.yaml" for g in CI_GLOBS])
    seen, rows, commit, date = set(), [], "", ""
    for line in out.splitlines():
        if line.startswith("C "):
            _, commit, date = line.split()
        elif line.startswith(":"):
            meta, path = line.split("\t", 1)
            blob = meta.split()[3]
            if set(blob) == {"0"} or (path, blob) in seen:
                continue
            seen.add((path, blob))
            rows.append({"commit": commit, "date": date, "path": path, "blob": blob})
    rows.sort(key=lambda r: (r["date"], r["path"]))
    return rows


def read_blobs(git_dir: str, blobs: Iterable[str]) -> dict[str, str]:
    """Text of each blob (``git cat-file --batch``)."""
    blobs = list(dict.fromkeys(blobs))
    proc = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "--batch"], input=("\n".join(blobs) + "\n").encode(),
                          capture_output=True, check=True)
    data, out, i = proc.stdout, {}, 0
    for b in blobs:
        head_end = data.index(b"\n", i)
        size = int(data[i:head_end].split()[2])
        out[b] = data[head_end + 1: head_end + 1 + size].decode("utf-8", "replace")
        i = head_end + 1 + size + 1
    return out


def tags(git_dir: str) -> list[tuple[str, str]]:
    """``(date, tag)`` of every vllm-ascend release tag, oldest first."""
    out = _git(git_dir, "for-each-ref", "--format=%(creatordate:short) %(refname:short)", "refs/tags")
    return sorted(tuple(line.split()) for line in out.splitlines() if line.strip())


def release_at(date: str, tag_dates: list[tuple[str, str]]) -> str | None:
    """The newest tag dated at or before ``date`` (``None`` before the first)."""
    best = None
    for d, t in tag_dates:
        if d <= date:
            best = t
    return best


def software_row(tag: str | None) -> str:
    """The ascendflow software row (``vllm-ascend-<v>``) nearest at or below ``tag``'s version (:data:`RELEASES`)."""
    def key(v: str) -> tuple:
        m = re.match(r"v?(\d+)\.(\d+)\.(\d+)(rc(\d+))?", v or "")
        return (int(m[1]), int(m[2]), int(m[3]), int(m[5]) if m[5] else 99) if m else (0,)
    best = RELEASES[0]
    for r in RELEASES:
        if key(r) <= key(tag or ""):
            best = r
    return f"vllm-ascend-{best}"


# -- hardware ------------------------------------------------------------------------------------------------------------
def runner_map(workflow_yaml: str) -> dict[str, tuple[str, str]]:
    """Config file name -> (section, runner label) from a ``configs/{nightly,weekly}_config.yaml`` text."""
    try:
        data = yaml.safe_load(workflow_yaml) or {}
    except yaml.YAMLError:
        return {}
    out: dict[str, tuple[str, str]] = {}

    def walk(node: Any, section: str) -> None:
        if isinstance(node, dict):
            if "config_file_path" in node:
                out.setdefault(Path(str(node["config_file_path"])).name, (section, str(node.get("os") or "")))
            for v in node.values():
                walk(v, section)
        elif isinstance(node, list):
            for v in node:
                walk(v, section)
    if isinstance(data, dict):
        for section, node in data.items():
            walk(node, str(section))
    return out


def hardware_of(path: str, raw: dict[str, Any], runners: dict[str, tuple[str, str]]) -> tuple[str | None, str]:
    """(ascendflow hardware option or ``None``, how it was found) of one config."""
    name = Path(path).name
    if name in runners and runners[name][0] in SECTIONS:
        section, label = runners[name]
        return SECTIONS[section], f"{section} runner {label}".strip()
    low = name.lower()
    if "310p" in low or "/310p/" in path:
        return "atlas_300i_duo", "file name (310p)"
    if re.search(r"[-_]a5\b|_a5\.", low):
        return None, "file name (A5: no ascendflow hardware option)"
    if re.search(r"[-_]a2([-_.]|$)", low):
        return "atlas_800i_a2", "file name (A2)"
    if re.search(r"[-_]a3([-_.]|$)", low) or int(raw.get("npu_per_node") or 0) == 16:
        return "atlas_800i_a3", "file name (A3)" if "a3" in low else "npu_per_node 16 (A3)"
    if int(raw.get("npu_per_node") or 0) == 8:
        return "atlas_800i_a2", "npu_per_node 8 (A2)"
    return None, "not found (no runner entry, no hint in the file name)"


# -- cases --------------------------------------------------------------------------------------------------------------
def _argv_list(cmd: Any) -> list[str]:
    if cmd is None:
        return []
    if isinstance(cmd, str):
        return shlex.split(cmd)
    return [str(x) for x in cmd]


def perf_cases(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Every performance case of one CI config: ``{"case", "model", "argv": [per node], "envs", "bench"}``.

    Formats (vllm-ascend ``tests/e2e/nightly``): single node (``test_cases[]`` with ``model``, ``server_cmd`` +
    ``server_cmd_extra``, ``benchmarks``; ``single_node/models/scripts/single_node_config.py``); multi node
    internal DP (``deployment[].server_cmd``, one ``vllm serve`` per node, top-level ``benchmarks``;
    ``multi_node/internal_dp/scripts/multi_node_config.py``); multi node external DP (``templates`` per node:
    one ``vllm serve`` per DP rank; recorded as the node's template)."""
    out = []
    if isinstance(raw.get("test_cases"), list):
        for tc in raw["test_cases"]:
            if not isinstance(tc, dict):
                continue
            argv = ["vllm", "serve", str(tc.get("model"))] + _argv_list(tc.get("server_cmd")) + \
                _argv_list(tc.get("server_cmd_extra"))
            for key, b in (tc.get("benchmarks") or {}).items():
                if isinstance(b, dict) and b.get("case_type") == "performance":
                    out.append({"case": f"{tc.get('name')}/{key}", "model": str(tc.get("model")), "argv": [argv],
                                "envs": tc.get("envs") or {}, "bench": b, "nodes": 1})
        return out
    benches = raw.get("benchmarks") or {}
    nodes: list[list[str]] = []
    if isinstance(raw.get("deployment"), list):
        nodes = [_argv_list(d.get("server_cmd")) for d in raw["deployment"] if isinstance(d, dict)]
    elif isinstance(raw.get("templates"), list):
        conf = {int(c.get("node_index", i)): c for i, c in enumerate(raw.get("config") or []) if isinstance(c, dict)}
        for t in raw["templates"]:
            if not isinstance(t, dict):
                continue
            c = conf.get(int(t.get("node_index") or 0), {})
            fill = {"TP_SIZE": c.get("tp_size"), "DP_SIZE": c.get("dp_size")}
            nodes.append(["vllm", "serve", str(raw.get("model"))] + [
                re.sub(r"\$\{(TP_SIZE|DP_SIZE)\}", lambda m: str(fill[m[1]]), a) for a in
                _argv_list(t.get("server_cmd_template"))])
    for key, b in benches.items():
        if isinstance(b, dict) and b.get("case_type") == "performance":
            out.append({"case": key, "model": str(raw.get("model")), "argv": nodes,
                        "envs": (raw.get("env_common") or {}), "bench": b,
                        "nodes": int(raw.get("num_nodes") or len(nodes) or 1),
                        "pd": "disaggregated_prefill" in json.dumps(raw.get("routing") or raw.get(
                            "disaggregated_prefill") or "") or bool(raw.get("disaggregated_prefill"))})
    return out


def parse_argv(argv: list[str]) -> dict[str, Any]:
    """``--flag value`` pairs after ``vllm serve MODEL``; bare flags map to ``True``; ``--a=b`` split."""
    flags: dict[str, Any] = {}
    rest = argv[3:] if argv[:2] == ["vllm", "serve"] else argv
    i = 0
    rest = [t for tok in rest for t in (shlex.split(tok) if tok.startswith("--") and " " in tok.strip() else [tok])]
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--"):
            i += 1
            continue
        if "=" in tok:
            k, v = tok.split("=", 1)
            flags["--" + k[2:].replace("_", "-")], i = v, i + 1
            continue
        tok = "--" + tok[2:].replace("_", "-")
        if i + 1 == len(rest) or rest[i + 1].startswith("--"):
            flags[tok], i = True, i + 1
        else:
            flags[tok], i = rest[i + 1], i + 2
    return flags


def model_option(repo: str) -> tuple[str | None, str | None]:
    """(ascendflow model option, quantization from the repo name) of a CI model repo, e.g.
    ``vllm-ascend/Qwen3-32B-W8A8`` -> ``("qwen3_32b", "W8A8")``; ``(None, ...)`` when the catalogue lacks it."""
    name = repo.split("/")[-1].lower()
    quant = None
    for q in ("w8a8", "w4a8", "w4a4", "int8", "w8a8c8", "mxfp8", "fp8"):
        if re.search(rf"[-_]{q}", name):
            quant = q.upper()
            break
    base = re.sub(r"[-_](w8a8.*|w4a8.*|w4a4.*|int8.*|fp8.*|mxfp.*|instruct-w.*|quarot.*|bf16.*|mtp.*)$", "", name)
    for k in sorted(MODELS, key=len, reverse=True):
        if base == k or base == k + "-instruct":
            return MODELS[k], quant
    return None, quant


def express(case: dict[str, Any], hardware: str | None, software: str) -> tuple[list[str] | None, list[str]]:
    """The ascendflow overrides of one case, or ``(None, missing knobs)``."""
    missing: list[str] = []
    model, quant = model_option(case["model"])
    if model is None:
        missing.append(f"model {case['model']} (no conf/model option)")
    if hardware is None:
        missing.append("hardware (no ascendflow hardware option for the runner)")
    if case.get("pd"):
        missing.append("PD deployment (the corpus prices co-located serving only)")
    if not case["argv"]:
        missing.append("no vllm serve command")
        return None, missing
    flags = parse_argv(case["argv"][0])
    w = workload_of(case["bench"])
    if w["input_len"] is None:
        missing.append(f"dataset {w['dataset']} (input length not in its name)")
    if w["output_len"] is None or w["num_prompts"] is None:
        missing.append("max_out_len/num_prompts")
    ov = [f"hardware={hardware}", f"hardware.software={software}", f"model={model}"]
    try:
        tp = int(flags.pop("--tensor-parallel-size", 1) or 1)
        dp = int(flags.pop("--data-parallel-size", 1) or 1)
    except ValueError as exc:
        return None, missing + [f"parallel sizes not literal ({exc})"]
    ep = bool(flags.pop("--enable-expert-parallel", False))
    nodes = int(case.get("nodes") or 1)
    ov += [f"parallel.tensor_parallel_size={tp}", f"parallel.data_parallel_size={dp}",
           f"parallel.enable_expert_parallel={str(ep).lower()}", f"parallel.nodes={nodes}"]
    if "--pipeline-parallel-size" in flags and int(flags.pop("--pipeline-parallel-size")) > 1:
        missing.append("--pipeline-parallel-size (PP not predicted)")
    q = flags.pop("--quantization", None)
    if q == "ascend" or quant in ("W8A8", "INT8"):
        if quant in QUANT_OPTIONS:
            ov.append(f"quantization={QUANT_OPTIONS[quant]}")
        else:
            if quant in ("W4A4", "W8A8C8", "MXFP8", "FP8"):
                missing.append(f"quantization {quant} (no ascendflow quantization option)")
            ov.append("quantization=w8a8_dynamic_ascend" if model in DYNAMIC_W8A8 else "quantization=w8a8_ascend")
    comp = flags.pop("--compilation-config", None)
    graph = "full_and_piecewise"
    if flags.pop("--enforce-eager", False):
        graph = "eager"
    ov.append(f"graph={graph}")
    if comp and graph != "eager":
        try:
            cc = json.loads(comp) if isinstance(comp, str) else comp
        except json.JSONDecodeError:
            cc = {}
        mode = str(cc.get("cudagraph_mode") or "").upper()
        if mode == "FULL_DECODE_ONLY":
            ov[-1] = "graph=full_decode_only"
        elif mode == "PIECEWISE":
            ov[-1] = "graph=piecewise"
        if cc.get("cudagraph_capture_sizes"):
            ov.append("graph.cudagraph_capture_sizes=[" + ",".join(str(int(s)) for s in cc["cudagraph_capture_sizes"])
                      + "]")
    simple = {"--max-num-seqs": "engine.max_num_seqs", "--max-model-len": "engine.max_model_len",
              "--max-num-batched-tokens": "engine.max_num_batched_tokens", "--block-size": "engine.block_size",
              "--gpu-memory-utilization": "engine.gpu_memory_utilization"}
    for flag, key in simple.items():
        if flag in flags:
            ov.append(f"{key}={flags.pop(flag)}")
    if "--max-num-seqs" not in case["argv"][0]:
        ov.append("engine.max_num_seqs=null")
    for flag in ("--max-model-len", "--max-num-batched-tokens"):
        if flag not in case["argv"][0]:
            ov.append(f"{simple[flag]}=null")
    if flags.pop("--no-enable-prefix-caching", False):
        ov.append("engine.enable_prefix_caching=false")
    if flags.pop("--enable-prefix-caching", False):
        ov.append("engine.enable_prefix_caching=true")
    if flags.pop("--async-scheduling", False):
        ov.append("engine.async_scheduling=true")
    if flags.pop("--no-async-scheduling", False):
        ov.append("engine.async_scheduling=false")
    flags.pop("--no-enforce-eager", None)
    if "--dtype" in flags:
        ov.append(f"engine.dtype={flags.pop('--dtype')}")
    spec = flags.pop("--speculative-config", None)
    if spec:
        try:
            sc = json.loads(spec) if isinstance(spec, str) else spec
        except json.JSONDecodeError:
            sc = {"method": "(not valid JSON: vLLM's parser refuses it)"}
        method, n = sc.get("method"), sc.get("num_speculative_tokens")
        if method in MTP_METHODS and n:
            eager = str(sc.get("enforce_eager")).lower()  # CI writes true or "true"
            extra = ",enforce_eager:true" if eager == "true" else ",enforce_eager:false" if eager == "false" else ""
            ov.append(f"engine.speculative_config={{method:{method},num_speculative_tokens:{int(n)}{extra}}}")
        elif method == "eagle3" and n and sc.get("model") and re.fullmatch(r"[\w./-]+", str(sc["model"])):
            # the draft's config.json is not on this machine: the plan prices it from the target's shape (ESTIMATE,
            # compile.py); its enforce_eager travels with it (the draft's graph mode)
            eager = ",enforce_eager:true" if sc.get("enforce_eager") is True else ""
            ov.append(f"engine.speculative_config={{method:eagle3,model:'{sc['model']}',"
                      f"num_speculative_tokens:{int(n)}{eager}}}")
        else:
            missing.append(f"--speculative-config method {method}")
    if "--mm-processor-cache-gb" in flags:  # host memory only (model.mm_processor_cache_gb)
        ov.append(f"model.mm_processor_cache_gb={float(flags.pop('--mm-processor-cache-gb')):g}")
    if "--mm-encoder-tp-mode" in flags:  # the vision tower's weights per rank (model.mm_encoder_tp_mode)
        ov.append(f"model.mm_encoder_tp_mode={flags.pop('--mm-encoder-tp-mode')}")
    flags.pop("--additional-config", None)  # vllm-ascend tuning switches: not priced by the step model
    for f in flags:
        if f not in IGNORED:
            missing.append(f)
    if w["prefix_percent"] and w["input_len"]:
        # a shared prefix of that share of each prompt (AISBench ``*_prefix90_in32768_*``): vLLM's
        # prefix_repetition dataset, the prefix random_input_len and the rest the suffix; ESTIMATE: one prefix shared
        # by every prompt (the dataset's prefix count is not in its name)
        pre = min(max(round(w["input_len"] * w["prefix_percent"] / 100), 1), w["input_len"] - 1)
        # (conf/workload/rag.yaml is the option whose dataset is prefix_repetition)
        ov += ["workload=rag", "workload.ignore_eos=true", f"workload.random_input_len={pre}",
               f"workload.prefix_suffix_len={w['input_len'] - pre}", "workload.num_prefixes=1"]
    else:
        ov += ["workload=random", "workload.ignore_eos=true"]
        if w["prefix_percent"]:
            missing.append(f"prefix share {w['prefix_percent']} % of a dataset without an input length")
        elif w["input_len"]:
            ov.append(f"workload.random_input_len={w['input_len']}")
    if w["output_len"]:
        ov.append(f"workload.random_output_len={w['output_len']}")
    if w["num_prompts"]:
        ov.append(f"workload.num_prompts={w['num_prompts']}")
    ov.append(f"workload.max_concurrency={w['max_concurrency'] or 'null'}")
    ov.append(f"workload.request_rate={w['request_rate'] if w['request_rate'] else 'inf'}")
    return (None if missing else ov), missing


def family_of(model_repo: str) -> str:
    """Grouping key of leave-one-family-out: the model name without org and quantization suffixes."""
    name = model_repo.split("/")[-1].lower()
    return re.sub(r"[-_](w8a8.*|w4a8.*|w4a4.*|int8.*|fp8.*|mxfp.*|quarot.*|bf16.*|eagle.*)$", "", name)


def build_corpus(git_dir: str, kept_out_only: bool = False) -> dict[str, Any]:
    """The corpus (``rows``, ``unexpressible``, ``skipped``) from a vllm-ascend git directory; ``kept_out_only``:
    the kept-out check's rows instead (only those, for scoring; never written into the corpus)."""
    vers = versions(git_dir)
    blobs = read_blobs(git_dir, [v["blob"] for v in vers])
    tag_dates = tags(git_dir)
    runner_cache: dict[str, dict[str, tuple[str, str]]] = {}

    def runners(commit: str) -> dict[str, tuple[str, str]]:
        if commit not in runner_cache:
            m: dict[str, tuple[str, str]] = {}
            for wf in ("nightly_config.yaml", "weekly_config.yaml"):
                try:
                    m.update(runner_map(_git(git_dir, "show", f"{commit}:.github/workflows/configs/{wf}")))
                except subprocess.CalledProcessError:
                    pass
            runner_cache[commit] = m
        return runner_cache[commit]

    skipped = {"kept_out": 0, "placeholder": 0, "unchanged": 0, "copied": 0, "unparsable": 0}
    last: dict[tuple[str, str], float] = {}
    candidates = []
    for v in vers:
        try:
            raw = yaml.safe_load(blobs[v["blob"]])
        except yaml.YAMLError:
            skipped["unparsable"] += 1
            continue
        if not isinstance(raw, dict):
            continue
        for case in perf_cases(raw):
            try:
                value = float(case["bench"].get("baseline"))
            except (TypeError, ValueError):
                continue
            key = (v["path"], case["case"])
            if last.get(key) == value:
                skipped["unchanged"] += 1
                continue
            last[key] = value
            if value <= PLACEHOLDER_MAX:
                skipped["placeholder"] += 1
                continue
            candidates.append((v, raw, case, value))
    files_of: dict[float, set[str]] = {}
    for v, _, _, value in candidates:
        files_of.setdefault(value, set()).add(Path(v["path"]).name)
    rows, unexpressible, done = [], [], set()
    for v, raw, case, value in candidates:
        if kept_out(v["path"]) != kept_out_only:  # counted for copies above, never emitted
            what = "not_kept_out" if kept_out_only else "kept_out"
            skipped[what] = skipped.get(what, 0) + 1
            continue
        if len(files_of[value]) > 1:
            skipped["copied"] += 1
            continue
        if (Path(v["path"]).name, case["case"], value) in done:  # the same change merged into another branch
            skipped["unchanged"] += 1
            continue
        done.add((Path(v["path"]).name, case["case"], value))
        hw, hw_how = hardware_of(v["path"], raw, runners(v["commit"]))
        tag = release_at(v["date"], tag_dates)
        software = software_row(tag)
        overrides, missing = express(case, hw, software)
        proxy = PROXIES.get(family_of(case["model"]).removesuffix("-w8a8"))
        row = {"id": f"{Path(v['path']).stem}:{case['case']}@{v['commit'][:12]}",
               "citation": f"{v['path']}@{v['commit'][:12]}", "date": v["date"], "file": v["path"],
               "case": case["case"], "model_repo": case["model"], "family": family_of(case["model"]),
               "hardware": hw, "hardware_source": hw_how, "release_tag": tag, "software": software,
               "workload": workload_of(case["bench"]), "metric": "output_throughput",
               "metric_source": "AISBench Output Token Throughput (tok/s), CI baseline", "value": value,
               "threshold": case["bench"].get("threshold"), "argv": case["argv"],
               "envs": {k: str(x) for k, x in (case.get("envs") or {}).items()},
               **({"proxy": proxy} if proxy else {})}
        if overrides is None:
            unexpressible.append({**row, "missing": missing})
        else:
            rows.append({**row, "overrides": overrides})
    return {"version": 1, "source": "vllm-ascend CI configs (tests/e2e/nightly/**, tests/e2e/weekly/**), every branch",
            "generated_by": "scripts/import_ci_config.py", "rows": rows, "unexpressible": unexpressible,
            "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", help="a vllm-ascend git directory (bare or .git)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--kept-out", action="store_true", help="write the kept-out check's rows instead (to --out, "
                                                            "which must then not be the corpus file)")
    args = ap.parse_args(argv)
    if args.kept_out and args.out.resolve() == OUT.resolve():
        ap.error("--kept-out writes the check rows: give --out outside ascendflow/perfmodel/corpus/")
    corpus = build_corpus(args.git_dir, kept_out_only=args.kept_out)
    corpus["head"] = _git(args.git_dir, "rev-parse", "refs/heads/main").strip()[:12]
    corpus["generated"] = dt.date.today().isoformat()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(corpus, indent=1, sort_keys=False) + "\n")
    print(f"{len(corpus['rows'])} expressible rows, {len(corpus['unexpressible'])} unexpressible, skipped "
          f"{corpus['skipped']} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
