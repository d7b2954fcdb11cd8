"""Bad precision inputs are refused with one line and exit code 2, before any engine starts."""

from __future__ import annotations

from pathlib import Path

from tests.precision.helpers import other_tokenizer, run_precision


def test_reference_with_another_tokenizer_is_refused(tmp_path: Path) -> None:
    from ascendflow.models.smollm2 import ensure_smollm2

    ref = other_tokenizer(ensure_smollm2(), tmp_path / "ref")
    proc = run_precision([f"precision.reference.model={ref}"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"error: precision.reference.model='{ref}': its tokenizer differs from the candidate's "
                     f"(vocabulary 49153 vs 49152 tokens, first difference [('<|ascendflow_extra|>', 49152)]); "
                     f"the report compares token by token, use a reference with the candidate's tokenizer"]


def test_a_quantized_checkpoint_ascendflow_did_not_build_needs_a_reference(tmp_path: Path) -> None:
    # The same msModelSlim files without ascendflow's marker: nothing records their float source.
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8

    built = ensure_smollm2_w8a8()
    foreign = tmp_path / "foreign-w8a8"
    foreign.mkdir()
    for f in built.iterdir():
        if f.name != ".ascendflow-complete":
            (foreign / f.name).symlink_to(f)
    proc = run_precision(["model=local", f"model.path={foreign}", "quantization=w8a8_dynamic_ascend"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "error: precision.reference.model=None: the candidate is an msModelSlim W8A8_DYNAMIC checkpoint; name its "
        "float model, e.g. precision.reference.model=smollm2_135m"]


def test_a_checkpoint_ascendflow_built_knows_its_float_source(tmp_path: Path) -> None:
    # Issue 16 item 5: the W8A8 build records its source; the report's default reference is that bf16 model.
    import json
    import shutil

    from ascendflow.models.checkpoint import float_source
    from ascendflow.models.msmodelslim_w8a8 import ensure_smollm2_w8a8
    from ascendflow.models.smollm2 import ensure_smollm2

    built = ensure_smollm2_w8a8()
    source, name = float_source(built)
    assert source == ensure_smollm2().resolve() and name in ("smollm2_135m", "SmolLM2-135M-Instruct-bf16")
    assert float_source(ensure_smollm2()) is None  # the GGUF-converted source records no float folder
    # A marker whose recorded source sha256 is not the source folder's (a source rebuilt from other weights): none.
    copy = tmp_path / "SmolLM2-135M-Instruct-w8a8-msmodelslim"
    copy.mkdir()
    marker = json.loads((built / ".ascendflow-complete").read_text())
    (copy / ".ascendflow-complete").write_text(json.dumps({**marker, "source_sha256": "0" * 64}))
    shutil.copytree(ensure_smollm2(), tmp_path / marker["source"], symlinks=True)
    assert float_source(copy) is None
