"""``python -m ascendflow.upgrade --to ROW [--json] [OVERRIDES...]``: what an engine upgrade changes for a deployment.

Composes the deployment with Hydra exactly as ``python -m ascendflow`` does (same ``conf/``, recipes, overrides;
:func:`ascendflow.job_inputs.job_inputs`), compiles it on its own row (``hardware.software``) and on ``--to``, and
prints what changes: capture list, KV tokens and concurrency, memory terms, engine defaults, release rules, warnings,
refusals and launch arguments (:func:`ascendflow.upgrade.diff.plan_diff`). ``--json`` prints the diff as JSON.

Nothing starts and nothing is recorded: the advice is a query over two plans (no engine, no MLflow run; record a
plan with ``run.mode=plan`` when it is wanted). Exit 0 with the diff, also when one side is refused (the refusal is
part of the advice); exit 2 with one ``error:`` line for bad input (an unknown or other-platform ``--to`` row or
current row ``hardware.software``, an override that does not compose, a config the schema refuses).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ascendflow.compiler.rules.software import version_matrix
from ascendflow.schema.errors import ConfigError

GIB = 1 << 30


def target_row(name: str, platform: str) -> str:
    """The version-matrix row ``--to`` names (``vllm-ascend-0.25.1rc1``; a bare ``0.25.1rc1`` is read as a
    vllm-ascend row).

    Raises:
        ConfigError: see :func:`matrix_row`.
    """
    return matrix_row("--to", name, platform)


def matrix_row(key: str, name: str, platform: str) -> str:
    """The version-matrix row ``name`` (given as ``key``: ``--to``, or ``hardware.software`` for the deployment's
    current row) names; a bare ``0.25.1rc1`` is read as a vllm-ascend row.

    Raises:
        ConfigError: no such row, or a row of another platform, naming the rows that fit.
    """
    matrix = version_matrix()
    row = name if name in matrix else f"vllm-ascend-{name}"
    fitting = [n for n, r in matrix.items() if r["platform"] == platform]
    if row not in matrix:
        raise ConfigError(key, name, f"is not a row of the version matrix; rows for {platform}: "
                                     f"{', '.join(fitting)} (a new release: python scripts/ingest_release.py "
                                     f"VERSION drafts its row)")
    if matrix[row]["platform"] != platform:
        raise ConfigError(key, name, f"is a {matrix[row]['platform']} row but the deployment's hardware is "
                                     f"{platform}; rows for {platform}: {', '.join(fitting)}")
    return row


def compose(overrides: list[str]) -> Any:
    """The deployment's validated spec, composed as ``python -m ascendflow OVERRIDES`` composes it.

    Raises:
        ConfigError: an override that does not compose (:func:`ascendflow.__main__.refuse_bad_overrides`), or the
            spec's first broken rule.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ascendflow.__main__ import CONF_DIR, refuse_bad_overrides
    from ascendflow.job_inputs import job_inputs

    refuse_bad_overrides(overrides)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="ascendflow"):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    return job_inputs(cfg).valid_spec()


def compile_on(spec: Any, model: Any, row: str) -> Any:
    """The plan of ``spec`` with ``hardware.software=row``, or the refusal's one-line text."""
    from ascendflow.runner.detect import compile_for_this_host

    moved = spec.model_copy(update={"hardware": spec.hardware.model_copy(update={"software": row})})
    try:
        return compile_for_this_host(moved, model)
    except ConfigError as exc:
        return str(exc)


def advise(overrides: list[str], to: str) -> dict[str, Any]:
    """The upgrade diff of the deployment ``overrides`` compose, from its row to ``to``.

    Raises:
        ConfigError: bad input (see :func:`compose`, :func:`matrix_row`): also an unknown current row
            (``hardware.software``), which has no plan to compare.
    """
    from ascendflow.models.resolve import resolve_model
    from ascendflow.upgrade.diff import plan_diff

    spec = compose(overrides)
    current_row = matrix_row("hardware.software", spec.hardware.software, spec.hardware.kind)
    row = target_row(to, spec.hardware.kind)
    model = resolve_model(spec.model, need_weights=False)
    current = compile_on(spec, model, current_row)
    target = compile_on(spec, model, row)
    return plan_diff(current, target, current_row=current_row, target_row=row)


def _bytes(n: float, sign: str = "") -> str:
    """GiB, or MiB below 1 GiB (graph pools are MiB)."""
    return f"{n / GIB:{sign},.2f} GiB" if abs(n) >= GIB else f"{n / (1 << 20):{sign},.1f} MiB"


def _value(key: str, value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and key.endswith("_bytes"):
        return _bytes(value)
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "—" if value is None else str(value)


def _delta(key: str, pair: dict[str, Any]) -> str:
    a, b = pair["current"], pair["target"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        d = b - a
        text = _bytes(d, "+") if key.endswith("_bytes") else f"{d:+,.2f}" if isinstance(d, float) else f"{d:+,}"
        return text + (f" ({d / a:+.1%})" if a else "")
    return ""


def _version_change(pair: dict[str, Any]) -> str:
    """``upgrade`` or ``downgrade`` for two PEP 440 versions (a CANN 9.1.0 → 9.0.1 row says so); "" for what is not
    a version (Python's ``>=3.10,<3.12`` range) or an unchanged one."""
    from packaging.version import InvalidVersion, Version

    try:
        a, b = Version(str(pair["current"])), Version(str(pair["target"]))
    except (InvalidVersion, TypeError):
        return ""
    return "upgrade" if b > a else "downgrade" if b < a else ""


def _engine_rows(table: Any, figures: dict[str, Any], label: str = "") -> None:
    """Rows of one engine's changed figures (the plan's, or one PD role's: ``label`` ``prefill``/``decode`` heads
    each section)."""
    for section in ("cudagraph_mode", "kv", "memory", "engine_args"):
        for key, pair in figures[section].items():
            table.add_row(f"{label} {section}".strip(), key, _value(key, pair["current"]), _value(key, pair["target"]),
                          _delta(key, pair))


def _size_line(out: Any, figures: dict[str, Any], label: str = "") -> None:
    """One engine's capture-size line (``label``: the PD role)."""
    sizes = figures["capture_sizes"]
    head = f"{label} capture sizes" if label else "capture sizes"
    if sizes["added"] or sizes["removed"]:
        out.print(f"{head}: {len(sizes['current'])} → {len(sizes['target'])}; added {sizes['added']}, "
                  f"removed {sizes['removed']}")
    else:
        out.print(f"{head}: unchanged ({len(sizes['current'])})")


def _added_removed(out: Any, change: dict[str, list], title: str) -> None:
    for item in change["removed"]:
        out.print(f"[red]- {title}[/] {item}", soft_wrap=True)
    for item in change["added"]:
        out.print(f"[green]+ {title}[/] {item}", soft_wrap=True)


def _changes(figures: dict[str, Any]) -> bool:
    return any(figures[k] for k in ("cudagraph_mode", "kv", "memory", "engine_args")) or any(
        figures[k]["added"] or figures[k]["removed"] for k in ("capture_sizes", "serve_command"))


def render(diff: dict[str, Any]) -> None:
    """Print the diff with rich: one table of changed figures, then refusals, capture sizes, warnings, arguments. A
    PD plan's figures, capture sizes and arguments are printed per role, each labelled (``prefill kv``)."""
    from rich.console import Console
    from rich.table import Table

    out = Console()
    rows = diff["rows"]
    out.print(f"[bold]upgrade[/] current {rows['current']} → target {rows['target']}")
    for side in ("current", "target"):
        if diff["refusals"][side]:
            out.print(f"[red]refused on {rows[side]}[/] ({side}): {diff['refusals'][side]}", soft_wrap=True)
    if any(diff["refusals"].values()):
        return
    roles = diff.get("roles")
    if roles:
        out.print(f"PD deployment: the {' and '.join(roles)} roles are compared separately (one instance each)")
    table = Table("section", "item", "current", "target", "change")
    for key, pair in rows.get("engine", {}).items():
        if key != "row":
            table.add_row("versions", key, _value(key, pair["current"]), _value(key, pair["target"]),
                          _version_change(pair))
    if roles:
        for name, figures in roles.items():
            _engine_rows(table, figures, name)
    else:
        _engine_rows(table, diff)
    for key, pair in diff["rules"].items():
        table.add_row("rules", key, _value(key, pair["current"]), _value(key, pair["target"]), _delta(key, pair))
    out.print(table)
    engines = roles or {"": diff}
    for name, figures in engines.items():
        _size_line(out, figures, name)
    _added_removed(out, diff["warnings"], "warning")
    for name, figures in engines.items():
        _added_removed(out, figures["serve_command"], f"{name} launch argument".strip())
    if "proxy_command" in diff:
        _added_removed(out, diff["proxy_command"], "proxy argument")
    proxy = diff.get("proxy_command", {"added": [], "removed": []})
    if not diff["rules"] and not any(_changes(f) for f in engines.values()) and not any(
            d["added"] or d["removed"] for d in (diff["warnings"], proxy)):
        out.print("no change to this deployment's plan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ascendflow.upgrade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", required=True, help="target software row, e.g. vllm-ascend-0.25.1rc1")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m ascendflow")
    args = parser.parse_args(argv)
    try:
        diff = advise(args.overrides, args.to)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(diff, indent=2))
    else:
        render(diff)
    return 0


if __name__ == "__main__":
    sys.exit(main())
