"""Bad precision inputs are refused with one line and exit code 2, before any engine starts."""

from __future__ import annotations

from pathlib import Path

from tests.precision.helpers import other_tokenizer
from tests.precision.test_report import run_precision


def test_reference_with_another_tokenizer_is_refused(tmp_path: Path) -> None:
    from ascendflow.models.smollm2 import ensure_smollm2

    ref = other_tokenizer(ensure_smollm2(), tmp_path / "ref")
    proc = run_precision([f"precision.reference.model={ref}"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"error: precision.reference.model='{ref}': its tokenizer differs from the candidate's "
                     f"(vocabulary 49153 vs 49152 tokens, first difference [('<|ascendflow_extra|>', 49152)]); "
                     f"the report compares token by token, use a reference with the candidate's tokenizer"]


def test_quantized_candidate_needs_a_reference(tmp_path: Path) -> None:
    proc = run_precision(["model=smollm2_135m_w8a8", "quantization=w8a8_dynamic_ascend"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "error: precision.reference.model=None: the candidate is an msModelSlim W8A8_DYNAMIC checkpoint; name its "
        "float model, e.g. precision.reference.model=smollm2_135m"]
