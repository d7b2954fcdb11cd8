"""Write the installed vLLM's ``vllm serve`` flags into ascendflow/runner/data/vllm_serve_flags.json (one entry per
vLLM version; other versions' entries are kept), the table :mod:`ascendflow.runner.serve_flags` checks
``engine.extra_args`` against.

    python scripts/serve_flags.py           # adds or replaces the installed vLLM's entry
    python scripts/serve_flags.py --check   # exits 1 when the stored entry differs from the installed parser
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import vllm

from ascendflow.runner.serve_flags import DATA, parser_flags

PATH = Path(__file__).resolve().parent.parent / "ascendflow" / "runner" / DATA


def main(argv: list[str]) -> int:
    table = json.loads(PATH.read_text()) if PATH.exists() else {}
    version = vllm.__version__.split("+")[0]
    flags = dict(sorted(parser_flags().items()))
    if "--check" in argv:
        same = table.get(version) == flags
        print(f"vLLM {version}: {'matches' if same else 'differs from'} {PATH}")
        return 0 if same else 1
    table[version] = flags
    PATH.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    print(f"vLLM {version}: {len(flags)} option strings written to {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
