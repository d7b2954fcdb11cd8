"""The package's import graph: no circles, and nothing runs back up a layer (docs/architecture.md).

The graph is read from the source with ``ast``: every ``import``/``from`` statement anywhere in a module (module level,
inside functions, classes and ``try`` blocks, and inside ``if TYPE_CHECKING:`` blocks too: none are excluded), with
relative imports resolved. An import inside a function that dodges a cycle is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ascendflow"

#: The layers, lowest first; a module may import its own layer or a lower one. Each layer names rooms: a room holds
#: the module of that name and every module below it (``ascendflow.runner`` holds ``ascendflow.runner.local``), except
#: the package root ``ascendflow``, which holds only ``ascendflow/__init__.py`` (``__version__``, no imports).
#: Where rooms nest, the longest name wins.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("ascendflow", "ascendflow.schema", "ascendflow.platforms", "ascendflow.console",
                    "ascendflow.interrupts", "ascendflow.secret_logging", "ascendflow.workloads",
                    "ascendflow.kernels")),
    ("compiler/models", ("ascendflow.compiler", "ascendflow.models")),
    ("perfmodel/capacity", ("ascendflow.capacity", "ascendflow.perfmodel")),
    ("runner", ("ascendflow.runner", "ascendflow.profiling", "ascendflow.rehearsal", "ascendflow.vllm_plugin")),
    ("tracking", ("ascendflow.tracking",)),
    ("entry points", ("ascendflow.app", "ascendflow.__main__", "ascendflow.job_inputs", "ascendflow.modes", "ascendflow.sweeps",
                      "ascendflow.search",
                      "ascendflow.perfmodel.fit",
                      "ascendflow.report", "ascendflow.sync", "ascendflow.calibrate", "ascendflow.precision", "ascendflow.compare",
                      "ascendflow.compare_baseline",
                      "ascendflow.upgrade", "ascendflow.importer", "ascendflow.import")),
)

#: Floors inside the compiler, lowest first (same rule): output types and release rules at the bottom, the passes,
#: then the launchers, then the entry that wires them. ``ascendflow.compiler`` here is ``compiler/__init__.py`` only.
COMPILER_FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("types and rules", ("ascendflow.compiler.plan", "ascendflow.compiler.rules")),
    ("passes", ("ascendflow.compiler.checks", "ascendflow.compiler.placement", "ascendflow.compiler.memory",
                "ascendflow.compiler.graph")),
    ("launch", ("ascendflow.compiler.launch",)),
    ("entry", ("ascendflow.compiler", "ascendflow.compiler.compile", "ascendflow.compiler.deployment",
               "ascendflow.compiler.passes")),
)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """``{module: {imported module: line}}`` over every ``.py`` file of ``package`` (its own modules only).

    ``from a.b import c`` counts as an import of ``a.b.c`` when that is a module, else of ``a.b``; an import of a name
    that is no module (``a.b.X``) counts as an import of its nearest enclosing module. Importing a submodule is not
    counted as importing its parent package (Python runs the parent's ``__init__`` first, but that is no arrow
    between the two in the code).
    """
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for module, path in paths.items():
        arrows: dict[str, int] = {}
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in paths else source
                         for alias in node.names]
            else:
                continue
            for name in names:
                target = known(name) if name.split(".")[0] == package.name else None
                if target and target != module:
                    arrows.setdefault(target, node.lineno)
        graph[module] = arrows
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle ``[a, b, ..., a]`` of ``graph``, or ``None`` (depth-first search, white/grey/black)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


#: Rooms that hold only the module of their own name (a package's ``__init__``), per floor table.
EXACT = {"LAYERS": {"ascendflow"}, "COMPILER_FLOORS": {"ascendflow.compiler"}}


def floor_of(module: str, floors: tuple[tuple[str, tuple[str, ...]], ...]) -> int | None:
    """Index of the floor whose longest matching room holds ``module`` (``None`` when none does)."""
    exact = EXACT["LAYERS"] if floors is LAYERS else EXACT["COMPILER_FLOORS"] if floors is COMPILER_FLOORS else set()
    best: tuple[int, int] | None = None
    for index, (_, rooms) in enumerate(floors):
        for room in rooms:
            if module == room or (module.startswith(room + ".") and room not in exact):
                if best is None or len(room) > best[1]:
                    best = (index, len(room))
    return best[0] if best else None


def up_arrows(graph: dict[str, dict[str, int]], floors, within: str = "") -> list[str]:
    """Every arrow from a module to a module on a higher floor, as ``a (floor) -> b (floor), line N``."""
    bad = []
    for module, arrows in sorted(graph.items()):
        if not module.startswith(within):
            continue
        for target, line in sorted(arrows.items()):
            if not target.startswith(within):
                continue
            low, high = floor_of(module, floors), floor_of(target, floors)
            if low is not None and high is not None and high > low:
                bad.append(f"{module} ({floors[low][0]}) -> {target} ({floors[high][0]}), line {line}")
    return bad


GRAPH = import_graph()


def test_every_module_has_a_layer():
    unassigned = sorted(m for m in GRAPH if floor_of(m, LAYERS) is None)
    assert not unassigned, f"modules in no layer (add their room to LAYERS): {unassigned}"
    in_compiler = [m for m in GRAPH if m.startswith("ascendflow.compiler")]
    unassigned = sorted(m for m in in_compiler if floor_of(m, COMPILER_FLOORS) is None)
    assert not unassigned, f"compiler modules in no floor (add their sub-package to COMPILER_FLOORS): {unassigned}"


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(
        f"{a} (line {GRAPH[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def room_graph(graph: dict[str, dict[str, int]], depth: int, within: str = "") -> dict[str, dict[str, int]]:
    """The graph between rooms: modules cut to their first ``depth`` dotted parts (arrows inside a room dropped)."""
    rooms: dict[str, dict[str, int]] = {}
    for module, arrows in graph.items():
        if not module.startswith(within):
            continue
        room = ".".join(module.split(".")[:depth])
        for target, line in arrows.items():
            other = ".".join(target.split(".")[:depth])
            if target.startswith(within) and other != room:
                rooms.setdefault(room, {}).setdefault(other, line)
    return rooms


@pytest.mark.parametrize("depth,within", [(2, ""), (3, "ascendflow.compiler.")], ids=["rooms", "compiler"])
def test_no_cycle_between_rooms(depth, within):
    """Rooms on one layer (``perfmodel`` and ``capacity``; the compiler's passes) may import each other one way only."""
    rooms = room_graph(GRAPH, depth, within)
    cycle = find_cycle(rooms)
    assert cycle is None, "cycle between rooms: " + " -> ".join(cycle)


@pytest.mark.parametrize("floors,within", [(LAYERS, ""), (COMPILER_FLOORS, "ascendflow.compiler")],
                         ids=["package", "compiler"])
def test_no_import_runs_back_up(floors, within):
    bad = up_arrows(GRAPH, floors, within)
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    """The builder itself: a cycle made only of a function-level relative import is found and named."""
    pkg = tmp_path / "ascendflow"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from ascendflow.sub.b import f\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .a import g  # dodges nothing\n")
    graph = import_graph(pkg)
    assert graph["ascendflow.sub.a"] == {"ascendflow.sub.b": 1}
    assert graph["ascendflow.sub.b"] == {"ascendflow.sub.a": 2}
    assert find_cycle(graph) == ["ascendflow.sub.a", "ascendflow.sub.b", "ascendflow.sub.a"]
    floors = (("low", ("ascendflow.sub.a",)), ("high", ("ascendflow.sub.b",)))
    assert up_arrows(graph, floors) == ["ascendflow.sub.a (low) -> ascendflow.sub.b (high), line 1"]
