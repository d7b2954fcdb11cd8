"""Hardware kinds are compared only inside the platform modules (``ascendflow/platforms/``, docs/architecture.md).

Everything else asks :func:`ascendflow.platforms.platform_for` what its kind does. The package is read with ``ast``;
a *hardware-kind comparison* is an ``==``/``!=``/``in``/``not in`` between an expression that names a kind
(``x.kind``, a variable ``kind``, ``x["kind"]``, ``x.get("kind")``, a call given ``"hardware.kind"``) and a string
literal (or a tuple/list/set of them) that is a kind (``cpu``, ``npu``, ``gpu``, or ``cuda``); a dict display keyed by
every hardware kind (a per-kind table such as the old ``SERVE_PREFIX``) counts too. Comparing two kinds with each
other (a version-matrix row's ``platform`` against ``hardware.kind``) is a data match, not a branch, and is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ascendflow.platforms import PLATFORMS

PACKAGE = Path(__file__).resolve().parents[1] / "ascendflow"
#: The values a hardware kind (``HardwareSpec.kind``) or its torch device type takes.
KINDS = frozenset(PLATFORMS) | {p.device_type for p in PLATFORMS.values()}
#: Where kinds may be compared: the platform modules.
PLATFORM_DIR = PACKAGE / "platforms"
#: Kind comparisons still allowed outside the platform modules, per file, at most this many (none left).
ALLOWED: dict[str, int] = {}


def _names_kind(node: ast.expr) -> bool:
    """``node`` is an expression whose value is a hardware kind."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value == "kind":
                return True
        return any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.endswith("hardware.kind")
                   for a in node.args)
    return False


def _is_kind_literal(node: ast.expr) -> bool:
    """``node`` is a kind string, or a tuple/list/set of literals with at least one kind string."""
    if isinstance(node, ast.Constant):
        return node.value in KINDS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in KINDS for e in node.elts)
    return False


def kind_comparisons(source: str, filename: str = "<source>") -> list[int]:
    """Line numbers of the hardware-kind comparisons (and per-kind dict tables) in ``source``."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            ops_ok = all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
            if ops_ok and any(map(_names_kind, operands)) and any(map(_is_kind_literal, operands)):
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if set(PLATFORMS) <= keys:
                lines.append(node.lineno)
    return sorted(lines)


def package_kind_comparisons(package: Path = PACKAGE) -> dict[str, list[int]]:
    """``{path relative to the repo: [line, ...]}`` for every module of ``package`` outside the platform modules."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if path.is_relative_to(PLATFORM_DIR):
            continue
        lines = kind_comparisons(path.read_text(), str(path))
        if lines:
            found[str(path.relative_to(package.parent))] = lines
    return found


def test_kinds_are_compared_only_in_platform_modules():
    found = package_kind_comparisons()
    bad = {path: lines for path, lines in found.items() if len(lines) > ALLOWED.get(path, 0)}
    assert not bad, ("hardware kinds compared outside ascendflow/platforms/ (ask platform_for(kind) for an "
                     "attribute instead; a new difference between kinds is a new Platform attribute): "
                     + "; ".join(f"{p} lines {ls}" for p, ls in bad.items()))


def test_the_allow_list_names_only_files_that_still_compare_kinds():
    """An entry whose file no longer compares kinds (or no longer exists) is removed, not kept as a loophole."""
    found = package_kind_comparisons()
    stale = sorted(p for p in ALLOWED if p not in found)
    assert not stale, f"ALLOWED names files without kind comparisons; remove them: {stale}"


def test_the_detector_finds_each_form_and_ignores_other_kinds():
    """The detector itself: each form of a kind comparison is found, other ``kind`` fields (KV specs, tensor kinds)
    and comparisons of two kinds are not."""
    source = "\n".join([
        'a = hw.kind == "npu"',  # 1
        'b = spec.hardware.kind != "cpu"',  # 2
        'c = kind in ("cpu", "gpu")',  # 3
        'd = plan["target"]["kind"] == "cpu"',  # 4
        'e = hardware.get("kind") == "npu"',  # 5
        'f = OmegaConf.select(config, "hardware.kind", default="cpu") == "cpu"',  # 6
        'g = {"cpu": 1, "npu": 2, "gpu": 3}',  # 7
        'h = s.kind == "mamba"',  # 8: a KV spec's kind
        'i = row["platform"] != hardware.kind',  # 9: two kinds matched, no branch
        'j = device_type == "npu"',  # 10: a torch device string, not named kind
        'k = {"cpu": "cpu", "cuda": "h200", "npu": "a2"}',  # 11: not keyed by every hardware kind
    ])
    assert kind_comparisons(source) == [1, 2, 3, 4, 5, 6, 7]
