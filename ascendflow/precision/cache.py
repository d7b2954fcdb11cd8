"""The reference engine's results, kept between precision reports.

Comparing several candidates (W8A8, W8A8_DYNAMIC, another graph mode) against one float reference is the usual
work; the reference's greedy outputs and logprobs do not change while its inputs do not, so a report reuses them
instead of starting the reference engine again (about a third of a report's time here: one engine start and
three generate calls of the two).

The key covers everything that decides the reference's numbers: the worker's job (prompt and text token ids,
``max_tokens``), the engine arguments with the model directory replaced by a digest of its files' contents, the
installed vLLM and torch versions, and the worker's own source. Any change is a different key: a miss, never a stale
hit. ``precision.reference_cache=false`` always runs the reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

#: Where entries live: ``$ASCENDFLOW_PRECISION_CACHE/<key>.json``, by default
#: ``$XDG_CACHE_HOME/ascendflow/precision_reference/`` (``~/.cache`` when ``XDG_CACHE_HOME`` is unset).
CACHE_DIR = Path(os.environ.get("ASCENDFLOW_PRECISION_CACHE") or
                 Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ascendflow" / "precision_reference")
_WORKER = Path(__file__).resolve().parent / "worker.py"


def model_digest(model_dir: str | Path) -> str:
    """sha256 over every regular file of ``model_dir`` (relative path and content, in sorted order), hex.

    Reads the whole checkpoint once (about 0.5 s for SmolLM2-135M's 270 MB here).

    Raises:
        OSError: the directory cannot be read.
    """
    root = Path(model_dir).resolve()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".ascendflow")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cache_key(job: dict[str, Any]) -> str:
    """The entry's key for a worker ``job`` (``llm`` kwargs, ``prompts``, ``max_tokens``, ``texts``, ``teacher``):
    sha256 hex of the job with the model path replaced by :func:`model_digest`, plus vLLM's and torch's versions and
    the worker's source."""
    llm = {**job["llm"], "model": model_digest(job["llm"]["model"])}
    material = {"job": {**job, "llm": llm}, "vllm": _version("vllm"), "torch": _version("torch"),
                "worker": hashlib.sha256(_WORKER.read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def load(key: str) -> dict[str, Any] | None:
    """The cached worker result for ``key``, or ``None`` (absent or unreadable: the caller runs the engine)."""
    try:
        return json.loads((CACHE_DIR / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def store(key: str, result: dict[str, Any]) -> Path | None:
    """Write ``result`` under ``key`` atomically (a temporary file renamed into place); ``None`` when the cache
    directory is not writable (a full or read-only disk costs the reuse, never the report)."""
    tmp = None
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=CACHE_DIR, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(result, f)
        path = CACHE_DIR / f"{key}.json"
        os.replace(tmp, path)
        return path
    except OSError:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        return None
