"""``scripts/ingest_release.py``: the extraction gives the committed rows back from excerpts of real releases.

The fixtures under ``tests/data/releases/<version>/`` were cut from the vllm-ascend sources at each tag with
``--cut-fixture`` (the policy-table row, the Dockerfile/pyproject/setup.py pin lines, and each ``additional_config``
read as one expression): CI has PyPI at most, and must be fast.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "releases"
DATA = ROOT / "ascendflow" / "compiler" / "rules" / "data"


@pytest.fixture(scope="module")
def ingest():
    spec = importlib.util.spec_from_file_location("ingest_release", ROOT / "scripts" / "ingest_release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version", ["0.18.0", "0.20.2rc1", "0.25.1rc1"])
def test_extraction_equals_the_committed_rows(ingest, version):
    source = ingest.DirSource(FIXTURES / version)
    keys = yaml.safe_load((DATA / "additional_config_keys.yaml").read_text())[version]
    matrix = yaml.safe_load((DATA / "version_matrix.yaml").read_text())[f"vllm-ascend-{version}"]
    pins, _ = ingest.extract_pins(source, version)
    assert sorted(ingest.extract_keys(source)) == sorted(keys)
    assert pins == {k: None if v is None else str(v) for k, v in matrix.items()}


def test_pin_sources_and_disagreements(ingest):
    # v0.18.0: its own table row (torch_npu 2.9.0.post1+git4c901a4, local part dropped; triton from pyproject, the
    # table names a dev build); v0.25.1rc1: no table row, every pin from the build files.
    _, notes_018 = ingest.extract_pins(ingest.DirSource(FIXTURES / "0.18.0"), "0.18.0")
    _, notes_025 = ingest.extract_pins(ingest.DirSource(FIXTURES / "0.25.1rc1"), "0.25.1rc1")
    assert notes_018 == ["torch_npu: table says 2.9.0.post1, build files say 2.9.0"]
    assert notes_025 == ["docs/source/community/versioning_policy.md has no row for v0.25.1rc1: pins read from "
                         "Dockerfile/pyproject.toml/setup.py"]


def test_keys_from_helpers_and_other_modules(ingest):
    # v0.20.2rc1 reads enable_dsa_cp in utils.py and enable_hamming_sparse in attention/kvcomp_attn/attention_utils.py
    keys = ingest.extract_keys(ingest.DirSource(FIXTURES / "0.20.2rc1"))
    assert keys[:3] == ["xlite_graph_config", "ascend_compilation_config", "ascend_fusion_config"]
    assert keys[-2:] == ["enable_hamming_sparse", "enable_dsa_cp"]  # modules in path order after ascend_config.py
    assert len(keys) == len(set(keys)) == 40


def test_cited_files_resolve_to_the_nearest_package_file(ingest, tmp_path):
    for path in ["vllm_ascend/utils.py", "vllm_ascend/lora/utils.py", "vllm_ascend/worker/worker.py",
                 "vllm_ascend/distributed/kv/worker.py", "vllm_ascend/_310p/worker_310p.py",
                 "vllm_ascend/attention/mla_v1.py", "vllm_ascend/attention/sfa_v1.py"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(path)
    rules = ("vllm_ascend/_310p/worker_310p.py (halved); utils.py update_aclgraph_sizes; worker.py; mla_v1.py; "
             "vLLM vllm/config/vllm.py")
    cited = ingest.cited_files(rules, ingest.DirSource(tmp_path))
    assert cited == ["vllm_ascend/_310p/worker_310p.py", "vllm_ascend/attention/mla_v1.py", "vllm_ascend/utils.py",
                     "vllm_ascend/worker/worker.py"]
    other = tmp_path / "other"
    (other / "vllm_ascend/attention").mkdir(parents=True)
    (other / "vllm_ascend/attention/mla_v1.py").write_text("changed")
    assert ingest.changed_files(ingest.DirSource(tmp_path), ingest.DirSource(other), cited) == [
        ("vllm_ascend/_310p/worker_310p.py", "removed"), ("vllm_ascend/attention/mla_v1.py", "changed"),
        ("vllm_ascend/utils.py", "removed"), ("vllm_ascend/worker/worker.py", "removed")]
