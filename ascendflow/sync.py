"""``python -m ascendflow.sync [RUN_DIR ...]``: upload runs kept locally while the MLflow store was unreachable.

Without arguments, every run directory under ``./outputs`` with a ``mlflow_pending.json``. Exit code 0 when all were
uploaded, 1 when one could not be (the store is still unreachable: it stays pending), 2 for a directory without a
pending record.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ascendflow.tracking.pending import PENDING_FILE, pending_run_dirs, sync_run_dir


def main(argv: list[str] | None = None) -> int:
    """Command line entry; prints one line per run directory."""
    parser = argparse.ArgumentParser(prog="python -m ascendflow.sync", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="*", type=Path, help="run directories (default: all pending under outputs/)")
    args = parser.parse_args(argv)
    run_dirs = args.run_dirs or pending_run_dirs(Path.cwd() / "outputs")
    code = 0
    for run_dir in run_dirs:
        if not (run_dir / PENDING_FILE).exists():
            print(f"error: {run_dir}: no {PENDING_FILE} (nothing to upload)", file=sys.stderr)
            code = max(code, 2)
            continue
        try:
            run_id = sync_run_dir(run_dir)
        except Exception as exc:  # the store is still unreachable: keep the record
            print(f"error: {run_dir}: not uploaded ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                  f"kept for a later try", file=sys.stderr)
            code = max(code, 1)
            continue
        print(f"uploaded {run_dir} as MLflow run {run_id}")
    if not run_dirs:
        print("nothing to upload: no run directory under outputs/ has a pending record")
    return code


if __name__ == "__main__":
    sys.exit(main())
