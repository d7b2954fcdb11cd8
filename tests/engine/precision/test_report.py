"""``python -m ascendflow.precision`` end to end: two real vLLM engines (eager, 256 MiB KV) one after the other.

Reduced prompt set for test time (4 prompts × 16 tokens; the figures in docs/w8a8_precision.md use the full
16 × 32): about 2 minutes per report on 2 cores. The three reports share one reference (SmolLM2 bf16, eager) and one
reference cache for this session (``ASCENDFLOW_PRECISION_CACHE``): the first report runs it, the others reuse it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.precision.helpers import SCALE_FACTOR, corrupt_scales, run_precision

SMALL = ["precision.num_prompts=4", "precision.max_tokens=16"]


@pytest.fixture(scope="module")
def reference_cache(tmp_path_factory) -> Path:
    """A reference cache shared by this module's reports, empty at the start of the session."""
    return tmp_path_factory.mktemp("precision_reference")


def expected_reference_result(cache: Path) -> str:
    """What the next report's ``reference_result`` must start with: ``cache`` once a report stored the shared
    reference (every report here has the same one), else ``engine``."""
    return "cache " if list(cache.glob("*.json")) else "engine"


def _report(cwd: Path) -> dict:
    (path,) = cwd.glob("outputs/precision/*/*/precision_report.json")
    return json.loads(path.read_text())


def _mlflow_run(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ascendflow-precision")
    (run,) = client.search_runs([exp.experiment_id])
    return client, run


def test_bf16_against_itself_agrees_exactly(tmp_path: Path, mlflow_uri: str, reference_cache: Path) -> None:
    expected = expected_reference_result(reference_cache)
    proc = run_precision(SMALL, tmp_path, mlflow_uri, reference_cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = _report(tmp_path)
    # The same computation twice is run once: no candidate engine, its results are the reference's.
    assert r["reference_result"].startswith(expected) and r["engine_seconds"]["candidate"] is None
    assert "candidate engine:" not in proc.stdout + proc.stderr
    assert r["note"].endswith("(the candidate engine was not started: its results are the reference's)")
    assert (r["prompts"], r["greedy_agreement"], r["first_divergence"], r["top1_agreement"], r["mean_abs_dlogprob"],
            r["max_abs_dlogprob"], r["breaches"]) == (4, 1.0, [None] * 4, 1.0, 0.0, 0.0, [])
    assert r["perplexity_reference"] == r["perplexity_candidate"]
    client, run = _mlflow_run(mlflow_uri)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["greedy_agreement"] == 1.0 and run.data.metrics["mean_abs_dlogprob"] == 0.0
    names = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    assert {"precision_report.json", "dlogprob_hist.png"} <= set(names)
    # Issue 20 row 12f: the README's command compares bf16 with itself; the report says so, and names the run.
    assert r["note"].startswith("candidate equals reference (SmolLM2-135M-Instruct-bf16, bfloat16, no quantization, "
                                "same graph mode): every metric is perfect by construction")
    assert run.data.tags["precision.note"] == r["note"]
    assert "warning: candidate equals reference" in proc.stdout
    assert f"MLflow run {run.info.run_id} (experiment {run.info.experiment_id}); see it with:" in proc.stdout


def test_w8a8_against_bf16_within_thresholds(tmp_path: Path, mlflow_uri: str, reference_cache: Path) -> None:
    # Issue 16 item 5: no precision.reference.model; the checkpoint's recorded float source is the reference.
    from ascendflow.models.smollm2 import ensure_smollm2

    expected = expected_reference_result(reference_cache)
    proc = run_precision(["model=smollm2_135m_w8a8", "quantization=w8a8_dynamic_ascend", *SMALL], tmp_path,
                         mlflow_uri, reference_cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = _report(tmp_path)
    assert r["reference_result"].startswith(expected) and r["engine_seconds"]["candidate"][0] > 0
    assert (r["engine_seconds"]["reference"] is None) == (expected == "cache ")
    assert r["reference"]["model"] == str(ensure_smollm2().resolve()) and "note" not in r
    assert r["reference_choice"].endswith(": the float model this checkpoint was quantized from (recorded when "
                                          "ascendflow built it; precision.reference.model chooses another)")
    assert f"reference: {r['reference_choice']}" in " ".join(proc.stdout.split())
    assert r["candidate"]["quantization"] == "ascend" and r["reference"]["dtype"] == "bfloat16"
    assert r["breaches"] == []
    assert 0 < r["mean_abs_dlogprob"] < 0.25 and r["top1_agreement"] >= 0.85
    assert r["perplexity_candidate"] / r["perplexity_reference"] < 1.10
    _, run = _mlflow_run(mlflow_uri)
    assert run.info.status == "FINISHED"


def test_corrupted_scales_fail_the_thresholds(tmp_path: Path, mlflow_uri: str, reference_cache: Path) -> None:
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

    broken = corrupt_scales(ensure_smollm2_w8a8(), tmp_path / "broken")
    expected = expected_reference_result(reference_cache)
    proc = run_precision(["model=local", f"model.path={broken}", "quantization=w8a8_dynamic_ascend",
                          "precision.reference.model=smollm2_135m", *SMALL], tmp_path, mlflow_uri, reference_cache)
    assert proc.returncode == 1, proc.stderr[-3000:]
    r = _report(tmp_path)
    assert r["reference_result"].startswith(expected)
    assert r["breaches"] and SCALE_FACTOR == 4.0
    assert proc.stderr.strip().splitlines()[-1].startswith("error: precision thresholds breached: ")
    client, run = _mlflow_run(mlflow_uri)
    assert run.info.status == "FAILED"
    assert "precision_report.json" in {a.path for a in client.list_artifacts(run.info.run_id)}
