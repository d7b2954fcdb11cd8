"""The measurement corpus (issue 28): ``scripts/import_ci_config.py`` turns vllm-ascend CI configs into cited rows,
skips placeholders, copies, unchanged baselines and the kept-out check; the committed corpus is what the importer
derives from the vllm-ascend mirror and holds no kept-out source; predictions carry 80 % intervals by class."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import import_ci_config as ici  # noqa: E402
from ascendflow.perfmodel.corpus import CI_ROWS, PR_ROWS, corpus_counts  # noqa: E402
from ascendflow.perfmodel.predict import format_interval, interval_of, predicted_metrics  # noqa: E402

DATA = ROOT / "tests" / "data" / "ci_configs"
MIRROR = Path("/work/.mirror/vllm-project+vllm-ascend/repo")


def _case(name: str) -> dict:
    raw = yaml.safe_load((DATA / name).read_text())
    (case,) = ici.perf_cases(raw)
    return case


def test_single_node_config_gives_its_argv_workload_and_overrides():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/Qwen3-32B-Int8-A2.yaml@1f95052cb43a
    case = _case("Qwen3-32B-Int8-A2.yaml")
    assert case["case"] == "Qwen3-32B-W8A8-aclgraph-a2/perf"
    assert case["bench"]["baseline"] == 1065.179
    assert case["argv"] == [[
        "vllm", "serve", "vllm-ascend/Qwen3-32B-W8A8", "--quantization", "ascend", "--no-enable-prefix-caching",
        "--tensor-parallel-size", "4", "--port", "$SERVER_PORT", "--max-model-len", "40960",
        "--max-num-batched-tokens", "40960", "--block-size", "128", "--trust-remote-code", "--reasoning-parser",
        "qwen3", "--gpu-memory-utilization", "0.9", "--compilation-config",
        '{"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":[1,12,16,20,24,32,48,60,64,68,72,76,80]}']]
    assert ici.workload_of(case["bench"]) == {
        "dataset": "vllm-ascend/GSM8K-in3500-bs400", "input_len": 3500, "output_len": 1500, "num_prompts": 288,
        "max_concurrency": 72, "request_rate": None, "prefix_percent": None}
    assert ici.express(case, "atlas_800i_a2", "vllm-ascend-0.25.1rc1") == ([
        "hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.25.1rc1", "model=qwen3_32b",
        "parallel.tensor_parallel_size=4", "parallel.data_parallel_size=1", "parallel.enable_expert_parallel=false",
        "parallel.nodes=1", "quantization=w8a8_ascend", "graph=full_decode_only",
        "graph.cudagraph_capture_sizes=[1,12,16,20,24,32,48,60,64,68,72,76,80]", "engine.max_model_len=40960",
        "engine.max_num_batched_tokens=40960", "engine.block_size=128", "engine.gpu_memory_utilization=0.9",
        "engine.max_num_seqs=null", "engine.enable_prefix_caching=false", "workload=random",
        "workload.ignore_eos=true", "workload.random_input_len=3500", "workload.random_output_len=1500",
        "workload.num_prompts=288", "workload.max_concurrency=72", "workload.request_rate=inf"], [])


def test_multi_node_config_gives_one_argv_per_node_and_the_dp_layout():
    # vllm-ascend tests/e2e/nightly/multi_node/internal_dp/config/Qwen3-235B-A22B-A2.yaml@1f95052cb43a
    case = _case("Qwen3-235B-A22B-A2.yaml")
    assert [a[:3] for a in case["argv"]] == [["vllm", "serve", "Qwen/Qwen3-235B-A22B"]] * 2
    assert "--headless" in case["argv"][1] and "--headless" not in case["argv"][0]
    overrides, missing = ici.express(case, "atlas_800i_a2", "vllm-ascend-0.25.1rc1")
    assert missing == []
    assert overrides[:8] == ["hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.25.1rc1",
                             "model=qwen3_235b_a22b", "parallel.tensor_parallel_size=8",
                             "parallel.data_parallel_size=2", "parallel.enable_expert_parallel=true",
                             "parallel.nodes=2", "graph=full_and_piecewise"]
    assert overrides[-2:] == ["workload.max_concurrency=256", "workload.request_rate=4.8"]


def test_hardware_comes_from_the_workflow_runner_then_the_file():
    workflow = ("a2:\n  single_node:\n    test_config:\n      - name: x\n        os: linux-aarch64-a2b3-4\n"
                "        config_file_path: Qwen3-32B-Int8-A2.yaml\n310p:\n  single_node:\n    test_config:\n"
                "      - name: y\n        os: linux-aarch64-310p-4\n        config_file_path: Qwen3-8B-w8a8sc-310p.yaml\n")
    runners = ici.runner_map(workflow)
    assert runners == {"Qwen3-32B-Int8-A2.yaml": ("a2", "linux-aarch64-a2b3-4"),
                       "Qwen3-8B-w8a8sc-310p.yaml": ("310p", "linux-aarch64-310p-4")}
    assert ici.hardware_of("c/Qwen3-8B-w8a8sc-310p.yaml", {}, runners) == ("atlas_300i_duo",
                                                                           "310p runner linux-aarch64-310p-4")
    assert ici.hardware_of("c/Foo-A3.yaml", {}, {}) == ("atlas_800i_a3", "file name (A3)")
    assert ici.hardware_of("c/Foo.yaml", {"npu_per_node": 16}, {}) == ("atlas_800i_a3", "npu_per_node 16 (A3)")
    assert ici.hardware_of("c/Foo_A5.yaml", {}, {})[0] is None


def test_unexpressible_cases_name_the_missing_knob():
    case = _case("Qwen3-8B-w8a8sc-310p.yaml")
    case = {**case, "model": "Eco-Tech/Qwen3.6-27B-w8a8",
            "argv": [case["argv"][0] + ["--speculative-config", '{"method": "dflash", "num_speculative_tokens": 3}',
                                         "--mm-processor-cache-type", "shm"]]}
    overrides, missing = ici.express(case, "atlas_800i_a3", "vllm-ascend-0.25.1rc1")
    assert overrides is None
    assert missing == ["model Eco-Tech/Qwen3.6-27B-w8a8 (no conf/model option)",
                       "--speculative-config method dflash", "--mm-processor-cache-type"]


def test_qwen3_5_config_expresses_its_mtp_w8a8_and_multimodal_flags():
    # vllm-ascend tests/e2e/nightly/single_node/models/configs/Qwen3.5-122B-A10B-W8A8-A3.yaml@1f95052cb43a
    case = _case("Qwen3.5-122B-A10B-W8A8-A3.yaml")
    assert (case["case"], case["model"], case["bench"]["baseline"]) == (
        "Qwen3.5-122B-A10B-W8A8-A3/perf", "Eco-Tech/Qwen3.5-122B-A10B-w8a8-mtp", 1110.187)
    sizes = ("1,4,8,12,16,24,32,48,56,64,72,84,96,108,112,128,160,172,196,200,212,232,256,160,172,196,200,212,232,"
             "256,272,288,312,328,344,360,384,400,416,432,448,480,512")
    assert ici.express(case, "atlas_800i_a3", "vllm-ascend-0.25.1rc1") == ([
        "hardware=atlas_800i_a3", "hardware.software=vllm-ascend-0.25.1rc1", "model=qwen3_5_122b_a10b",
        "parallel.tensor_parallel_size=4", "parallel.data_parallel_size=1", "parallel.enable_expert_parallel=true",
        "parallel.nodes=1", "quantization=w8a8_dynamic_ascend", "graph=full_decode_only",
        f"graph.cudagraph_capture_sizes=[{sizes}]", "engine.max_num_seqs=128", "engine.max_model_len=131072",
        "engine.max_num_batched_tokens=16384", "engine.gpu_memory_utilization=0.9",
        "engine.speculative_config={method:qwen3_5_mtp,num_speculative_tokens:3,enforce_eager:true}",
        "model.mm_processor_cache_gb=0", "workload=random", "workload.ignore_eos=true",
        "workload.random_input_len=3500", "workload.random_output_len=1500", "workload.num_prompts=320",
        "workload.max_concurrency=80", "workload.request_rate=inf"], [])
    # a W4A8 export and --mm-encoder-tp-mode (the 122B W4A8 A3 config's flags)
    w4 = {**case, "model": "Eco-Tech/Qwen3.5-122B-A10B-w4a8",
          "argv": [case["argv"][0] + ["--mm-encoder-tp-mode", "data"]]}
    overrides, missing = ici.express(w4, "atlas_800i_a3", "vllm-ascend-0.25.1rc1")
    assert missing == []
    assert "quantization=w4a8_dynamic_ascend" in overrides and "model.mm_encoder_tp_mode=data" in overrides
    assert ici.model_option("Eco-Tech/Qwen3.6-35B-A3B-w8a8") == ("qwen3_6_35b_a3b", "W8A8")
    assert ici.family_of("Eco-Tech/Qwen3.5-397B-A17B-w4a8-mtp") == "qwen3.5-397b-a17b"


def test_every_kept_out_source_is_excluded_and_nothing_else():
    kept = ["tests/e2e/nightly/single_node/models/configs/" + n for n in (
        "Qwen3-30B-A3B-W8A8.yaml", "Qwen3-32B-Int8.yaml", "Qwen3_32b_w8a8_ml_A3.yaml", "DeepSeek-R1-0528-W8A8.yaml",
        "Deepseek_R1_W8A8_A3.yaml", "Qwen3_32b_W8A8_wl_A3.yaml", "Qwq_32b_A3.yaml", "Prefix-Cache-Qwen3-32B-Int8.yaml",
        "Prefix-Cache-DeepSeek-R1-0528-W8A8.yaml", "Kimi-K2-Thinking.yaml", "Qwen3.5-27B-w8a8-A2.yaml",
        "Qwen3.5-27B-w8a8-A3.yaml")] + [
        "tests/e2e/weekly/single_node/configs/Qwen3.5-27B-w8a8-long.yaml",
        "tests/e2e/nightly/multi_node/internal_dp/config/Qwen3-235B-A22B.yaml",
        "tests/e2e/nightly/multi_node/config/Qwen3-235B-A22B.yaml",
        "tests/e2e/nightly/multi_node/internal_dp/config/Qwen3-235B-disagg-pd.yaml",
        "tests/e2e/weekly/multi_node/internal_dp/config/Qwen3-235B-A22B-Mooncake-Layerwise.yaml",
        "tests/e2e/multicard/2-cards/test_qwen3_performance.py",
        "docs/source/developer_guide/evaluation/using_evalscope.md"]
    kept_in = ["tests/e2e/nightly/single_node/models/configs/" + n for n in (
        "Qwen3-32B-Int8-A2.yaml", "Qwen3-30B-A3B-W4A8-llm-compressor.yaml", "Qwen3-235B-A22B-W8A8.yaml",
        "Kimi-K2.5.yaml", "Qwen3.5-122B-A10B-W8A8-A3.yaml")] + [
        "tests/e2e/nightly/multi_node/internal_dp/config/Qwen3-235B-A22B-A2.yaml",
        "tests/e2e/nightly/single_node/models/configs/Qwen3-235B-A22B.yaml"]
    assert [p for p in kept if not ici.kept_out(p)] == []
    assert [p for p in kept_in if ici.kept_out(p)] == []


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-08-20T00:00:00",
                        "GIT_COMMITTER_DATE": "2026-08-20T00:00:00", "PATH": "/usr/bin:/bin"})


def test_importer_keeps_each_baseline_change_and_skips_placeholders_copies_and_the_kept_out(tmp_path):
    repo = tmp_path / "va"
    cfg = repo / "tests/e2e/nightly/single_node/models/configs"
    cfg.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    a2 = (DATA / "Qwen3-32B-Int8-A2.yaml").read_text()
    kept = (DATA / "Qwen3-32B-Int8.yaml").read_text()
    steps = [("baseline: 1065.179", "baseline: 5"),     # placeholder: skipped
             ("baseline: 1065.179", "baseline: 1000.5"),  # a measurement
             ("baseline: 1065.179", "baseline: 1000.5"),  # unchanged (only a comment changes): skipped
             ("baseline: 1065.179", "baseline: 1065.179")]  # a new measurement
    for i, (old, new) in enumerate(steps):
        (cfg / "Qwen3-32B-Int8-A2.yaml").write_text(a2.replace(old, new) + f"# step {i}\n")
        (cfg / "Qwen3-32B-Int8.yaml").write_text(kept + f"# step {i}\n")   # kept out: never a row
        if i == 3:  # the same number in another file: copied, so neither is kept
            (cfg / "Copy-A2.yaml").write_text(a2.replace("1065.179", "1000.5").replace("Qwen3-32B-W8A8-aclgraph",
                                                                                          "copy"))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"step {i}")
    corpus = ici.build_corpus(str(repo / ".git"))
    assert [(r["case"], r["value"], r["hardware"], r["hardware_source"]) for r in corpus["rows"]] == [
        ("Qwen3-32B-W8A8-aclgraph-a2/perf", 1065.179, "atlas_800i_a2", "file name (A2)")]
    assert corpus["rows"][0]["citation"].startswith("tests/e2e/nightly/single_node/models/configs/"
                                                    "Qwen3-32B-Int8-A2.yaml@")
    assert corpus["rows"][0]["overrides"][:3] == ["hardware=atlas_800i_a2", "hardware.software=vllm-ascend-0.11.0",
                                                  "model=qwen3_32b"]
    assert corpus["unexpressible"] == []
    # unchanged: the A2 file once, the kept-out file three times (its baseline never changes; counted before it)
    assert corpus["skipped"] == {"kept_out": 1, "placeholder": 1, "unchanged": 4, "copied": 2, "unparsable": 0}
    checked = ici.build_corpus(str(repo / ".git"), kept_out_only=True)
    # the check's row: its hardware is in the workflow config this toy repo lacks, so it is listed unexpressible
    assert [(r["file"].split("/")[-1], r["value"], r["missing"]) for r in checked["unexpressible"]] == [
        ("Qwen3-32B-Int8.yaml", 1249.018, ["hardware (no ascendflow hardware option for the runner)"])]
    assert checked["rows"] == []


def test_committed_corpus_holds_no_kept_out_source_and_meets_the_size_targets():
    ci = json.loads(CI_ROWS.read_text())
    assert [r["file"] for r in ci["rows"] + ci["unexpressible"] if ici.kept_out(r["file"])] == []
    assert all("@" in r["citation"] and r["value"] > ici.PLACEHOLDER_MAX for r in ci["rows"] + ci["unexpressible"])
    assert all(r["missing"] for r in ci["unexpressible"])
    pr = yaml.safe_load(PR_ROWS.read_text())["rows"]
    cited = " ".join(r["citation"] for r in pr)
    assert [n for n in ici.KEPT_OUT_PRS + ici.KEPT_OUT_ISSUES if f"#{n}" in cited] == []
    counts = corpus_counts()
    assert counts["rows"] >= 80 and counts["models"] >= 10
    assert counts["hardware"] == ["atlas_300i_duo", "atlas_800i_a2", "atlas_800i_a3"]


@pytest.mark.skipif(not MIRROR.exists(), reason="no vllm-ascend mirror on this machine")
def test_committed_corpus_is_what_the_importer_derives_from_the_mirror():
    committed = json.loads(CI_ROWS.read_text())
    head = subprocess.run(["git", f"--git-dir={MIRROR}", "rev-parse", "refs/heads/main"], capture_output=True,
                          text=True).stdout.strip()[:12]
    if head != committed["head"]:
        pytest.skip(f"the mirror's main is {head}, the corpus was imported at {committed['head']}")
    derived = ici.build_corpus(str(MIRROR))
    assert derived["rows"] == committed["rows"]
    assert derived["unexpressible"] == committed["unexpressible"]


INTERVALS = {"coverage": 0.8, "file": "intervals.yaml",
             "classes": {"atlas_a2_a3": {"output_throughput": {"q10_log": -0.2, "q90_log": 0.3, "residuals": 19},
                                         "median_tpot_ms": {"q10_log": -0.5, "q90_log": 0.1, "residuals": 15},
                                         "median_ttft_ms": {"q10_log": -1.0, "q90_log": 0.0, "residuals": 14}},
                         "atlas_300i_duo": {"output_throughput": {"q10_log": -0.3, "q90_log": -0.2,
                                                                  "residuals": 2}}}}


def test_interval_is_the_class_residual_quantiles_around_each_figure():
    import math
    pred = {"median_ttft_ms": 100.0, "p99_ttft_ms": 300.0, "median_tpot_ms": 50.0, "p99_tpot_ms": 60.0,
            "output_throughput": 2000.0, "request_throughput": 1.0}
    low, high, info = interval_of(pred, INTERVALS, "atlas_a2_a3")
    r = lambda x: round(x, 3)  # noqa: E731
    assert low == {"median_ttft_ms": 100.0, "p99_ttft_ms": 300.0, "median_tpot_ms": r(50 / math.exp(0.1)),
                   "p99_tpot_ms": r(60 / math.exp(0.1)), "output_throughput": r(2000 / math.exp(0.3)),
                   "request_throughput": r(1 / math.exp(0.3))}
    assert high == {"median_ttft_ms": r(100 * math.e), "p99_ttft_ms": r(300 * math.e),
                    "median_tpot_ms": r(50 * math.exp(0.5)), "p99_tpot_ms": r(60 * math.exp(0.5)),
                    "output_throughput": r(2000 * math.exp(0.2)), "request_throughput": r(math.exp(0.2))}
    assert {k: info[k] for k in ("coverage", "class", "source", "residuals")} == {
        "coverage": 0.8, "class": "atlas_a2_a3", "source": "intervals.yaml", "residuals": 14}
    # a class without every metric's residuals says so, and borrows no other class's
    low, high, info = interval_of(pred, INTERVALS, "atlas_300i_duo")
    assert (low, high, info["status"], info["class"]) == (None, None, "no measured error", "atlas_300i_duo")
    assert interval_of(pred, INTERVALS, "roofline")[2]["status"] == "no measured error"


def test_interval_reaches_mlflow_metrics_and_the_summary_format():
    perf = {"predicted": {"output_throughput": 2210.0}, "predicted_low": {"output_throughput": 1750.0},
            "predicted_high": {"output_throughput": 2600.0},
            "capacity": {"capacity_rps": 2.0, "capacity_load": 8, "capacity_rps_low": 1.5, "capacity_rps_high": 2.4}}
    assert predicted_metrics(perf) == {
        "predicted_output_throughput": 2210.0, "predicted_output_throughput_low": 1750.0,
        "predicted_output_throughput_high": 2600.0, "predicted_capacity_rps": 2.0, "predicted_capacity_load": 8.0,
        "predicted_capacity_rps_low": 1.5, "predicted_capacity_rps_high": 2.4}
    assert format_interval(2210.0, 1750.0, 2600.0, ",.0f", "tok/s") == "2,210 tok/s (1,750–2,600)"
    assert format_interval(2210.0, None, None, ",.0f", "tok/s") == "2,210 tok/s"
    # a biased class: the interval wholly above (or below) the figure says so (new-user trial: "773 ms (932–1,997)")
    assert format_interval(773.0, 932.0, 1997.0, ",.0f", "ms") == \
        "773 ms (932–1,997: above the model's figure, which runs low for this class)"
    assert format_interval(900.0, 500.0, 800.0) == "900 (500–800: below the model's figure, which runs high for this class)"


def test_a_prefix_share_dataset_becomes_vllms_prefix_repetition_workload():
    # AISBench vllm-ascend/GSM8K_prefix90_in32768_*: 90 % of each 32,768-token prompt is the shared prefix
    case = _case("Qwen3-32B-Int8-A2.yaml")
    case["bench"] = {**case["bench"], "dataset_path": "vllm-ascend/GSM8K_prefix90_in32768_bs800"}
    assert ici.workload_of(case["bench"])["prefix_percent"] == 90
    overrides, missing = ici.express(case, "atlas_800i_a2", "vllm-ascend-0.25.1rc1")
    assert missing == []
    assert overrides[-9:] == ["workload=rag", "workload.ignore_eos=true",
                              "workload.random_input_len=29491", "workload.prefix_suffix_len=3277",
                              "workload.num_prefixes=1", "workload.random_output_len=1500",
                              "workload.num_prompts=288", "workload.max_concurrency=72", "workload.request_rate=inf"]
    # the overrides compose as `python -m ascendflow` composes them (a missing option failed every prefix row)
    from ascendflow.perfmodel.arch import _spec
    w = _spec(overrides).workload
    assert (w.dataset, w.random_input_len, w.prefix_suffix_len, w.num_prefixes, w.random_output_len, w.num_prompts,
            w.max_concurrency) == ("prefix_repetition", 29491, 3277, 1, 1500, 288, 72)
