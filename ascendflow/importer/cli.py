"""``python -m ascendflow.import SOURCE [options]``: a ``vllm serve`` deployment as an ascendflow recipe.

``SOURCE`` is one command (``'vllm serve MODEL --tensor-parallel-size 8 ...'``), a shell file with one
``vllm serve`` per node (``export`` lines set each command's environment), or a vllm-ascend CI config: single node
(``tests/e2e/nightly/single_node/models/configs/*.yaml``; ``--case NAME`` picks a test case, default the first),
multi-node internal DP (every node's command), or PD (``multi_node/*/config/*PD*.yaml``: a ``pd`` recipe whose
prefill and decode commands round-trip per node and DP rank; :mod:`ascendflow.importer.pd`).

Prints the recipe (``-o PATH`` writes it; ``-o recipes/recipe/NAME.yaml`` makes ``+recipe=NAME`` work), then checks the
round trip: the recipe's plan must write the same ``vllm serve`` back (options as a set, values as vLLM's parser types
them); every difference is listed on stderr with its reason, and one without a reason fails (exit 1).

``--to hardware=atlas_800i_a3 [release=vllm-ascend-0.23.0]`` migrates: plans the deployment on that hardware and row,
prints it side by side with the source (per-device memory, KV cache, whether the layout fits, the nearest layouts that
do, quantization the release does not serve with the msModelSlim command, flags and env that change, the version-matrix
row) and writes the target recipe to ``-o`` (required with ``--to``). ``--baseline FILE|RUN_ID`` carries the source's
measured figures (``vllm bench serve`` result JSON, or an MLflow run id or ``runs:/<id>``; another model's figures are
refused): printed, written into the target recipe (``run.baseline``, with the model, hardware and contention they were
measured with: the plan carries them, its run logs them, and ``python -m ascendflow.compare RUN_ID`` of the first
Ascend measurement, attach mode, shows them beside its own) and beside it as ``<recipe>.baseline.json`` (``python -m
ascendflow.import compare-baseline BASELINE.json ATTACH_RUN_ID`` compares that file with any run or result file).

A CI config's performance benchmark is the recipe's workload (:func:`ascendflow.importer.ci.carry_workload`).

Bad input (an unparsable command, an unknown flag or model, a plan ascendflow refuses): one ``error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from pathlib import Path

from ascendflow.schema.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ascendflow.import", description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="a vllm serve command, a shell file of commands (one per node), or a CI config")
    p.add_argument("--hardware", default=None, help="hardware option the command ran on (conf/hardware); default: "
                                                    "nvidia_h200 for a command or shell file; for a vllm-ascend CI "
                                                    "config atlas_800i_a3, atlas_800i_a2 when its name says A2")
    p.add_argument("--model", default=None, help="model option (conf/model) when the checkpoint name does not say; "
                                                 "'local' for a local checkpoint directory")
    p.add_argument("--quantization-option", default=None, help="quantization option of an msModelSlim checkpoint "
                                                               "(default w8a8_dynamic_ascend)")
    p.add_argument("--release", default=None, help="source version-matrix row (hardware.software)")
    p.add_argument("--name", default=None, help="recipe name (default: checkpoint name and TP)")
    p.add_argument("--case", default=None, help="CI config: the test case to import (default the first)")
    p.add_argument("-o", "--out", default=None, help="write the recipe here (default: stdout); with --to, the target "
                                                     "recipe, and -o is required")
    p.add_argument("--to", nargs="+", default=None, metavar="KEY=VALUE",
                   help="migrate: hardware=OPTION [release=ROW]")
    p.add_argument("--baseline", default=None, help="with --to: the source's measured figures, a vllm bench serve "
                                                    "result JSON or an MLflow run id (runs:/ID); of the source's model")
    p.add_argument("--tracking-uri", default=None, help="MLflow store of --baseline RUN_ID")
    return p


def _to(values: list[str]) -> tuple[str, str | None]:
    """``--to hardware=OPTION [release=ROW]`` checked against ``conf/hardware`` and the version matrix before the
    source is read: a bad key, option or row is one line at once (it was found after parsing and the round trip,
    8-16 s, under their report lines). Raises ConfigError naming the key, the value, the rule and the fix."""
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or key not in ("hardware", "release") or not value:
            raise ConfigError("--to", item, "takes hardware=OPTION and optionally release=ROW; fix: e.g. "
                                            "--to hardware=atlas_800i_a3 release=vllm-ascend-0.23.0")
        pairs[key] = value
    if "hardware" not in pairs:
        raise ConfigError("--to", " ".join(values), "needs hardware=OPTION (conf/hardware); fix: e.g. "
                                                    "--to hardware=atlas_800i_a3")
    from ascendflow.importer.recipe import check_target

    check_target(pairs["hardware"], pairs.get("release"))
    return pairs["hardware"], pairs.get("release")


def _quiet() -> None:
    """vLLM's import logs INFO lines; the importer's output is the recipe and its report."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    logging.getLogger("vllm").setLevel(logging.WARNING)


def run(argv: list[str]) -> int:
    """Import (and migrate); returns the exit code. Raises ConfigError on bad input."""
    args = _parser().parse_args(argv)
    if args.to:
        to_hardware, to_release = _to(args.to)
        if not args.out:
            # new-user trial of 2026-12-04: --to without -o printed the report and wrote nothing, without a word
            raise ConfigError("--to", " ".join(args.to), "writes the target recipe, and needs -o PATH for it (the "
                                                         "report on stdout is not the recipe); fix: add -o "
                                                         "recipes/recipe/NAME.yaml (then python -m ascendflow "
                                                         "+recipe=NAME run.mode=plan)")
    elif args.baseline:
        raise ConfigError("--baseline", args.baseline, "is carried into a migrated recipe (run.baseline), and is "
                                                       "read only with --to; fix: add --to hardware=OPTION -o PATH, "
                                                       "or drop --baseline")
    baseline = None
    if args.baseline:
        from ascendflow.importer.baseline import read_record

        baseline = read_record(args.baseline, args.tracking_uri)
    _quiet()
    from ascendflow.importer.ci import ci_hardware
    from ascendflow.importer.sources import is_pd_config, read_source, read_yaml
    from ascendflow.importer.recipe import to_recipe
    from ascendflow.importer.roundtrip import round_trip

    is_ci = args.source.endswith((".yaml", ".yml")) and Path(args.source).is_file()
    if is_ci and is_pd_config(args.source):
        return _run_pd(args, argv)
    commands = read_source(args.source)
    raw = read_yaml(args.source) if is_ci else None
    if is_ci and "test_cases" in raw:
        names = [c.name for c in commands]
        commands = [c for c in commands if args.case is None or c.name == args.case][:1]
        if not commands:
            raise ConfigError("--case", args.case, f"is no test case of {args.source} ({', '.join(names)})")
        if len(names) > 1:
            print(f"importing test case {commands[0].name} of {', '.join(names)} (--case NAME picks another)",
                  file=sys.stderr)
    if baseline:
        _check_baseline(baseline, args, commands[0])
    hardware = args.hardware or (ci_hardware(args.source, raw) if is_ci else "nvidia_h200")
    if baseline and baseline.hardware and baseline.hardware != hardware:
        print(f"note: --baseline was measured on {baseline.hardware} (the run's param hardware.name), the source "
              f"side is planned on {hardware}; the recipe records {baseline.hardware} (--hardware "
              f"{baseline.hardware} plans the source as measured)", file=sys.stderr)
    name = args.name or (Path(args.out).stem if args.out else None)  # -o recipes/recipe/NAME.yaml: +recipe=NAME
    imported = to_recipe(commands, hardware=hardware, model=args.model, name=None if args.to else name,
                         quantization=args.quantization_option, release=args.release)
    if is_ci:  # the CI config's benchmark lengths, prompts, concurrency and rate: the recipe's workload
        from ascendflow.importer.ci import carry_workload
        from ascendflow.importer.sources import ci_benchmarks

        carry_workload(imported.recipe, imported.named, ci_benchmarks(raw, commands[0].name))
    from ascendflow.importer.command import mask_secrets, mask_text

    again = "python -m ascendflow.import " + mask_text(shlex.join(mask_secrets(argv)))
    _, trips = round_trip(imported)
    for k, trip in enumerate(trips):
        node = f"node {k}: " if len(trips) > 1 else ""
        for flag, why in imported.named:
            if k == 0:
                print(f"named {flag}: {why}", file=sys.stderr)
        for flag, what in trip.unexplained:
            print(f"round trip: {node}{flag}: {what} (no reason known)", file=sys.stderr)
        print(f"round trip: {node}{len(trip.same)} options the same, {len(trip.written_explicitly)} written "
              f"explicitly (vLLM's defaults), {len(trip.not_written)} not written (named), "
              f"{len(trip.unexplained)} unexplained", file=sys.stderr)
    ok = all(t.ok for t in trips)
    if not args.to:
        text = imported.text(again)
        _emit(text, args.out)
        return 0 if ok else 1
    from ascendflow.importer.migrate import migrate, render

    migration = migrate(imported, to_hardware, to_release, baseline=baseline, name=name)
    print(render(migration))
    target = migration.recipe
    header = again
    if baseline:
        header += "\n# Source baseline (measured): " + json.dumps(baseline.metrics, sort_keys=True)
    _emit(target.text(header), args.out)
    if baseline:
        # where the figures were read (the file, or the run and its store), not where the command came from
        path = Path(args.out).with_suffix(".baseline.json")
        path.write_text(json.dumps({"recipe": target.name, **baseline.spec(hardware),
                                    "imported_from": imported.commands[0].source}, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return 0 if ok else 1


def _check_baseline(baseline, args: argparse.Namespace, command) -> None:
    """Refuse a ``--baseline`` of another model than the imported command's (its positional, its
    ``--served-model-name``, its model option); warn in one line where the figures name no model."""
    from ascendflow.importer.baseline import check_model
    from ascendflow.importer.recipe import model_option

    served = command.values.get("served_model_name") or []
    deployed = [command.model, *([served] if isinstance(served, str) else served)]
    option = args.model
    if option is None:
        try:
            option = model_option(command.model)
        except ConfigError:
            option = None  # to_recipe names the unknown model next
    if baseline.model is None:
        print(f"warning: --baseline {args.baseline} names no model (a result file's model_id, a run's param "
              f"model.id): not checked against {command.model}", file=sys.stderr)
    check_model(baseline, args.baseline, deployed, option)


def _run_pd(args: argparse.Namespace, argv: list[str]) -> int:
    """A PD CI config: its ``pd`` recipe, and the round trip of every process CI starts (per node, per DP rank)."""
    from ascendflow.importer.command import mask_secrets, mask_text
    from ascendflow.importer.pd_roundtrip import pd_round_trip
    from ascendflow.importer.sources import read_pd_config

    if args.to or args.baseline:
        raise ConfigError("--to" if args.to else "--baseline", args.source, "a PD config is imported for the Ascend "
                                                                          "hardware it runs on; migrate a co-located "
                                                                          "deployment")
    imported = read_pd_config(args.source, name=args.name or (Path(args.out).stem if args.out else None),
                              release=args.release)
    for flag, why in imported.named:
        print(f"named {flag}: {why}", file=sys.stderr)
    _, trips = pd_round_trip(imported)
    for k, ranks in enumerate(trips):
        role = imported.nodes[k][0].role
        for r, trip in enumerate(ranks):
            for flag, what in trip.unexplained:
                print(f"round trip: node {k} ({role}) process {r}: {flag}: {what} (no reason known)", file=sys.stderr)
        print(f"round trip: node {k} ({role}): {len(ranks)} processes, "
              f"{sum(not t.ok for t in ranks)} with an unexplained difference", file=sys.stderr)
    _emit(imported.text("python -m ascendflow.import " + mask_text(shlex.join(mask_secrets(argv)))), args.out)
    return 0 if all(t.ok for ranks in trips for t in ranks) else 1


def _emit(text: str, out: str | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(f"wrote {out}", file=sys.stderr)


def compare_main(argv: list[str]) -> int:
    """``compare-baseline BASELINE.json RUN_ID [--tracking-uri URI]``: the source figures beside an Ascend run's."""
    p = argparse.ArgumentParser(prog="python -m ascendflow.import compare-baseline")
    p.add_argument("baseline", help="<recipe>.baseline.json written by --to ... --baseline, or a bench result JSON")
    p.add_argument("run_id", help="the Ascend measurement: an MLflow run (run.mode=attach), or a bench result JSON")
    p.add_argument("--tracking-uri", default=None)
    args = p.parse_args(argv)
    from ascendflow.importer.baseline import compare_baseline, read_baseline, render_comparison

    path = Path(args.baseline)
    if path.is_file():
        raw = json.loads(path.read_text())
        base = raw["metrics"] if isinstance(raw, dict) and "metrics" in raw else read_baseline(args.baseline)
    else:
        base = read_baseline(args.baseline, args.tracking_uri)
    measured = read_baseline(args.run_id, args.tracking_uri)
    print(render_comparison(compare_baseline(base, measured)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: one ``error:`` line and exit 2 on bad input."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["compare-baseline"]:
            return compare_main(argv[1:])
        return run(argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
