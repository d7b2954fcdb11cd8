"""``python -m ascendflow.import``: the recipe on stdout (or ``-o``), the round trip and the named options on stderr,
``--to`` with a baseline, ``compare-baseline``; bad input is one ``error:`` line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ascendflow.importer.cli import main

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "tests" / "data" / "import_vllm" / "ci" / "Qwen3-32B-Int8@v0.23.0.yaml"


def test_unparsable_command_is_one_line_from_the_real_process():
    proc = subprocess.run([sys.executable, "-m", "ascendflow.import", "vllm serve 'Qwen/Qwen3-8B --max-model-len 4"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("error: command=\"vllm serve 'Qwen/Qwen3-8B --max-model-len 4\": is not a shell command "
                           "line (No closing quotation)\n")


def test_unknown_model_and_unknown_flag_are_one_line(capsys):
    assert main(["vllm serve mistralai/Mistral-7B-v0.1 --max-model-len 4096"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: model='mistralai/Mistral-7B-v0.1': matches no model option") and err.count("\n") == 1
    assert main(["vllm serve Qwen/Qwen3-8B --max-modle-len 4096"]) == 2
    assert capsys.readouterr().err == ("error: command='--max-modle-len': is not a flag of the installed vLLM's vllm "
                                       "serve (vllm serve --help); fix: did you mean --max-model-len or --max-log-len or "
                                       "--model? else drop it\n")


@pytest.mark.parametrize("arg", ["/nonexistent/file.yaml", "deploy.sh", "configs/serve"])
def test_a_missing_file_is_named_as_one(arg, capsys):
    # new-user trial 2026-12-03: "is not `vllm serve`; give ... or a file" for a path that does not exist.
    assert main([arg]) == 2
    assert capsys.readouterr().err == (f"error: command={arg!r}: no such file: {arg}; fix: give an existing file "
                                       "(a shell file of `vllm serve` commands or a vllm-ascend CI config) or a "
                                       "quoted `vllm serve MODEL ...` command\n")


def test_ci_config_case_to_a_recipe_file(tmp_path, capsys):
    out = tmp_path / "recipe" / "q32.yaml"
    assert main([str(CI), "--case", "Qwen3-32B-W8A8-single-a3", "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == ["round trip: 11 options the same, 6 written explicitly (vLLM's defaults), 1 not written "
                        "(named), 0 unexplained", f"wrote {out}"]
    recipe = yaml.safe_load(out.read_text())
    assert recipe["defaults"] == [{"override /hardware": "atlas_800i_a3"}, {"override /model": "qwen3_32b"},
                                  {"override /graph": "eager"}, {"override /quantization": "w8a8_dynamic_ascend"}]
    assert recipe["engine"] == {"max_model_len": 40960, "max_num_seqs": 80, "max_num_batched_tokens": 40960,
                                "gpu_memory_utilization": 0.9, "block_size": 128, "enable_prefix_caching": False}
    assert recipe["ascend"] == {"additional_config": {"other": {"weight_prefetch_config": {"enabled": True}}},
                                "hccl_op_expansion_mode_aiv": True, "env": {"VLLM_ASCEND_ENABLE_FLASHCOMM": "1"}}


def test_a_ci_test_case_s_benchmark_is_the_recipe_workload(tmp_path, capsys):
    """The test case's performance benchmark (AISBench ``perf``: GSM8K-in3500, ``max_out_len`` 1500, 304 prompts,
    ``batch_size`` 76, all at once) is the recipe's workload, planned as vLLM's random dataset; before, the recipe
    took ascendflow's default chat workload (new-user trial of 2026-12-04, PD and co-located alike)."""
    out = tmp_path / "recipe" / "q32.yaml"
    assert main([str(CI), "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert ("named workload: CI's performance case perf (vllm-ascend/GSM8K-in3500-bs400) as the random dataset: 3500 "
            "input tokens (ESTIMATE: the dataset name's in<N>, AISBench's prompt through the chat template), 1500 "
            "output (max_out_len, EOS ignored), 304 prompts, concurrency 76 (batch_size), all at once (request_rate "
            "0)") in err
    recipe = yaml.safe_load(out.read_text())
    assert recipe["defaults"][-1] == {"override /workload": "random"}
    assert recipe["workload"] == {"random_input_len": 3500, "random_output_len": 1500, "num_prompts": 304,
                                  "max_concurrency": 76, "request_rate": float("inf"), "ignore_eos": True}
    # the case without benchmarks keeps the default workload, named
    assert main([str(CI), "--case", "Qwen3-32B-W8A8-single-a3", "-o", str(out)]) == 0
    assert ("named workload: the CI config has no performance benchmark case: the workload option's defaults"
            in capsys.readouterr().err.splitlines())
    assert "workload" not in yaml.safe_load(out.read_text())


def test_migrate_with_a_baseline_then_compare(tmp_path, capsys):
    bench = tmp_path / "h200.json"
    bench.write_text(json.dumps({"output_throughput": 2000.0, "median_ttft_ms": 80.0, "median_tpot_ms": 12.0}))
    out = tmp_path / "recipe" / "q8.yaml"
    rc = main(["vllm serve Qwen/Qwen3-8B --max-model-len 16384", "--to", "hardware=atlas_800i_a2",
               "release=vllm-ascend-0.23.0", "--baseline", str(bench), "-o", str(out)])
    assert rc == 0
    printed = capsys.readouterr()
    text = printed.out
    assert "hardware                   nvidia_h200           atlas_800i_a2" in text
    assert "source baseline (measured): median_ttft_ms 80, median_tpot_ms 12, output_throughput 2000" in text
    assert f"  measured with a model it does not name on nvidia_h200 (the source side: the figures name no " \
           f"hardware), from {bench}" in text.splitlines()
    # a file without vllm bench serve's model_id cannot be checked against the command's model: said in one line
    assert f"warning: --baseline {bench} names no model (a result file's model_id, a run's param model.id): not " \
           "checked against Qwen/Qwen3-8B" in printed.err.splitlines()
    assert "# Source baseline (measured): {\"median_tpot_ms\": 12.0, \"median_ttft_ms\": 80.0, " \
           "\"output_throughput\": 2000.0}" in out.read_text()
    # the plan carries them (run.baseline): python -m ascendflow.compare RUN_ID shows them beside the run's
    assert yaml.safe_load(out.read_text())["run"]["baseline"] == {
        "source": str(bench), "hardware": "nvidia_h200",
        "metrics": {"median_ttft_ms": 80.0, "median_tpot_ms": 12.0, "output_throughput": 2000.0}}
    saved = json.loads(out.with_suffix(".baseline.json").read_text())
    # new-user trial 2026-12-04: "source" was "command line" (where the command came from), not the figures' file
    assert saved == {"recipe": "q8", "source": str(bench), "hardware": "nvidia_h200",
                     "metrics": {"output_throughput": 2000.0, "median_ttft_ms": 80.0, "median_tpot_ms": 12.0},
                     "imported_from": "command line"}
    ascend = tmp_path / "a2.json"
    ascend.write_text(json.dumps({"output_throughput": 1500.0, "median_ttft_ms": 100.0, "median_tpot_ms": 15.0}))
    assert main(["compare-baseline", str(out.with_suffix(".baseline.json")), str(ascend)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "median_ttft_ms            80.00        100.00  1.250 (worse)",
        "median_tpot_ms            12.00         15.00  1.250 (worse)",
        "output_throughput       2000.00       1500.00  0.750 (worse)"]


def _import(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ascendflow.import", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_a_bad_to_is_one_line_before_the_command_is_parsed():
    """New-user trial 2026-12-03: ``--to hardware=nope`` came after "named model: ..." and "round trip: ..." lines,
    8-16 s of parsing (vLLM's import) and round trip. Now one line, the only stderr line, nothing on stdout."""
    options = ("ascend_950dt, atlas_300i_duo, atlas_800i_a2, atlas_800i_a2_910b4, atlas_800i_a3, cpu, "
               "nvidia_a100_80gb, nvidia_h100, nvidia_h200")
    from ascendflow.compiler.rules.software import version_matrix

    rows = ", ".join(sorted(version_matrix()))
    cases = {
        ("--to", "hardware=nope"): f"--to hardware='nope': is not a hardware option (conf/hardware); fix: pick from: "
                                   f"{options}",
        ("--to", "hardware=atlas_800i_3"): "--to hardware='atlas_800i_3': is not a hardware option (conf/hardware); "
                                           f"fix: did you mean hardware=atlas_800i_a3? pick from: {options}",
        ("--to", "hardware=atlas_800i_a3", "release=vllm-ascend-9.9.9"):
            "--to release='vllm-ascend-9.9.9': is not a version-matrix row (ascendflow/compiler/rules/data/"
            f"version_matrix.yaml); fix: did you mean release=vllm-ascend-0.23.0? pick from: {rows}",
        ("--to", "release=vllm-ascend-9.9.9"): "--to='release=vllm-ascend-9.9.9': needs hardware=OPTION "
                                               "(conf/hardware); fix: e.g. --to hardware=atlas_800i_a3",
        ("--to", "hw=x"): "--to='hw=x': takes hardware=OPTION and optionally release=ROW; fix: e.g. "
                          "--to hardware=atlas_800i_a3 release=vllm-ascend-0.23.0",
    }
    for to, line in cases.items():
        proc = _import("vllm serve Qwen/Qwen3-8B", *to)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: {line}\n"), to


def test_to_without_out_is_one_line_and_writes_nothing(tmp_path):
    """New-user trial 2026-12-04: ``--to hardware=atlas_800i_a3`` without ``-o`` printed the report, wrote nothing and
    said nothing (exit 0). The import alone prints its recipe on stdout; a migration's stdout is its report, so the
    target recipe needs ``-o``: one line with the fix, before the command is parsed, nothing written."""
    proc = subprocess.run([sys.executable, "-m", "ascendflow.import", "vllm serve Qwen/Qwen3-8B --max-model-len 16384",
                           "--to", "hardware=atlas_800i_a3"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", "error: --to='hardware=atlas_800i_a3': writes the target recipe, and needs -o PATH for it (the report "
               "on stdout is not the recipe); fix: add -o recipes/recipe/NAME.yaml (then python -m ascendflow "
               "+recipe=NAME run.mode=plan)\n")
    assert list(tmp_path.iterdir()) == []


def test_a_baseline_without_to_is_one_line(tmp_path):
    """``--baseline`` without ``--to`` was read and dropped without a word (only a migration carries it)."""
    bench = ROOT / "tests" / "data" / "import_vllm" / "bench" / "smollm2_cpu_c8.json"
    proc = _import("vllm serve Qwen/Qwen3-8B", "--baseline", str(bench))
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"error: --baseline='{bench}': is carried into a migrated recipe (run.baseline), and is read only with "
               "--to; fix: add --to hardware=OPTION -o PATH, or drop --baseline\n")


def test_a_value_vllm_s_parser_refuses_names_the_flag_its_rule_and_the_fix():
    """New-user trial 2026-12-03: ``command='vllm serve': vLLM's parser: argument --max-model-len: invalid
    human_readable_int_or_auto value: 'abc'`` named the command, not the flag, and gave no fix."""
    proc = _import("vllm serve Qwen/Qwen3-8B --max-model-len abc")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines()[-1] == (
        "error: --max-model-len='abc': is not a valid human_readable_int_or_auto (vLLM's parser, type of "
        "--max-model-len); fix: give an integer such as 32768 or 32k (k = 1000, K = 1024), or auto")
    proc = _import("vllm serve Qwen/Qwen3-8B --tensor-parallel-size")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines()[-1] == (
        "error: --tensor-parallel-size: expects one value and none was given (vLLM's parser: expected one argument); "
        "fix: give one (--tensor-parallel-size 8) or drop the flag")
    assert [line for line in proc.stderr.splitlines() if line.startswith("error")] == [proc.stderr.splitlines()[-1]]
