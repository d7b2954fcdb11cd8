"""The reference cache's key and store (ascendflow/precision/cache.py), on real files."""

from __future__ import annotations

from pathlib import Path

from ascendflow.precision import cache


def _model(root: Path, weights: bytes) -> Path:
    root.mkdir()
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(weights)
    return root


def _job(model: Path, **over) -> dict:
    return {"llm": {"model": str(model), "dtype": "bfloat16", "enforce_eager": True}, "prompts": [[1, 2, 3]],
            "max_tokens": 16, "texts": [[4, 5]], "teacher": None, **over}


def test_the_key_follows_the_weights_not_the_path(tmp_path):
    a, b = _model(tmp_path / "a", b"\x01" * 64), _model(tmp_path / "b", b"\x01" * 64)
    assert cache.model_digest(a) == cache.model_digest(b)
    assert cache.cache_key(_job(a)) == cache.cache_key(_job(b))  # same files elsewhere: the same reference
    (b / "model.safetensors").write_bytes(b"\x01" * 63 + b"\x02")  # one byte of the weights changed
    assert cache.cache_key(_job(a)) != cache.cache_key(_job(b))
    assert cache.cache_key(_job(a)) != cache.cache_key(_job(a, max_tokens=32))
    assert cache.cache_key(_job(a)) != cache.cache_key(_job(a, prompts=[[1, 2, 4]]))


def test_store_then_load_round_trips_and_an_unwritable_directory_costs_only_the_reuse(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "c")
    assert cache.load("k") is None
    result = {"greedy": [[7, 8]], "teacher_logprobs": [[None, -0.5]]}
    assert cache.store("k", result) == tmp_path / "c" / "k.json"
    assert cache.load("k") == result
    # A cache directory that cannot be made (a file in its path; as a full or read-only disk): no entry, no error.
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "file" / "c")
    assert cache.store("k", result) is None and cache.load("k") is None
