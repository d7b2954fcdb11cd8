"""The compiler as named passes: ``compile_colocated``, ``compile_plan`` and every pass, check and graph-capture step
stay short enough to read (at most 80 lines each, docstring included), measured with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

COMPILER = Path(__file__).resolve().parents[2] / "ascendflow" / "compiler"
LIMIT = 80
#: The compile entry points, the passes, the refusals they call and the graph pass's own steps.
MODULES = ["compile.py", "deployment.py", *sorted(p.relative_to(COMPILER).as_posix()
                                                  for d in ("passes", "checks") for p in (COMPILER / d).glob("*.py")),
           "graph/capture.py"]


def function_lengths(source: str) -> dict[str, int]:
    """``{function name: lines from its ``def`` (or first decorator) to its last line}``, nested ones included."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out[node.name] = node.end_lineno - first + 1
    return out


def test_the_measure_counts_every_line():
    assert function_lengths("def f():\n    '''doc'''\n\n    return 1\n\n\n@x\ndef g(): pass\n") == {"f": 4, "g": 2}


def test_every_pass_is_short():
    assert "passes/kv.py" in MODULES and "checks/memory.py" in MODULES
    long = {f"{m}:{name}": n for m in MODULES for name, n in function_lengths((COMPILER / m).read_text()).items()
            if n > LIMIT}
    assert long == {}, f"functions over {LIMIT} lines (split them into named steps): {long}"


def test_compile_colocated_is_a_list_of_passes():
    tree = ast.parse((COMPILER / "compile.py").read_text())
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "compile_colocated")
    called = [c.func.id for c in ast.walk(entry) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    passes = [name for name in called if name.endswith("_pass")]
    assert passes == ["placement_pass", "inputs_pass", "graph_pass", "memory_pass", "kv_pass", "launch_pass"]
