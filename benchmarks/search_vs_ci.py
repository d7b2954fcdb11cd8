"""The deployment search against the public record: for every vendored vllm-ascend CI config ascendflow can plan,
search the same devices with the config's workload and say where CI's own layout ranks and what the top pick is
predicted to gain over it; writes ``outputs/bench/search_vs_ci.json`` and (``--docs``) the table in docs/search.md.

The vendored CI configs: ``tests/data/ci_pd/`` (PD and co-located multi-node configs, imported by
``python -m ascendflow.import``'s PD reader, :func:`ascendflow.importer.sources.read_pd_config`; the ones it refuses are listed with its reason) and the performance corpus
``ascendflow/perfmodel/corpus/ci_rows.json`` (every ``tests/e2e`` performance case ascendflow expresses, imported by
``scripts/import_ci_config.py``; ``tests/data/ci_configs/`` are that importer's test copies of the same files). Rows with
the same search inputs and the same CI layout (they differ in the benchmark's concurrency or prompt count only: the
search sizes the load to each candidate) are searched once.

Each search (in process, :func:`ascendflow.search.run.search` with the interval step of ``run.mode=search``): the CI
spec's model, hardware, software release, quantization, ``engine`` and workload lengths; ``search.nodes`` = CI's
nodes; the default space plus CI's own ``max_num_seqs`` / ``max_num_batched_tokens`` / graph modes (so CI's exact
knobs are among the candidates); ``search.pipeline_parallel_sizes=[1]`` (no CI config uses PP, and PP > 1 candidates
are compiled but never ranked). SLO: CI's perf cases have none (they measure throughput at a fixed concurrency), so
the issue's p99 TTFT 2 s and TPOT 50 ms; where no candidate meets it (long prompts), the nearest SLO a candidate
meets, rounded up (TTFT to 500 ms, TPOT to 5 ms), stated in the row. CI's layout is read by
:func:`ascendflow.search.match.candidate_of` and found by :func:`~ascendflow.search.match.find_row`; a PD pair the
search pruned as dominated is priced from the same cached role figures (:func:`ascendflow.search.run.pd_row`).

Usage: ``python benchmarks/search_vs_ci.py [--only SUBSTRING] [--docs]``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from ascendflow.compiler import compile_plan  # noqa: E402
from ascendflow.modes.search import SearchMode, quantization_options  # noqa: E402
from ascendflow.models.resolve import resolve_model  # noqa: E402
from ascendflow.perfmodel.attach import calibration_file  # noqa: E402
from ascendflow.perfmodel.calibration import load_calibration  # noqa: E402
from ascendflow.platforms import platform_for  # noqa: E402
from ascendflow.runner.detect import host_facts  # noqa: E402
from ascendflow.importer.sources import read_pd_config  # noqa: E402
from ascendflow.schema import ConfigError, load_spec  # noqa: E402
from ascendflow.search.evaluate import Evaluator  # noqa: E402
from ascendflow.search.match import candidate_of, find_row, gain, rank_of  # noqa: E402
from ascendflow.search.run import pd_row, search  # noqa: E402
from ascendflow.search.space import Candidate  # noqa: E402

CONF = ROOT / "conf"
CI_PD = ROOT / "tests" / "data" / "ci_pd"
CORPUS = ROOT / "ascendflow" / "perfmodel" / "corpus" / "ci_rows.json"
OUT = ROOT / "outputs" / "bench" / "search_vs_ci.json"
MATRIX = ROOT / "ascendflow" / "compiler" / "rules" / "data" / "version_matrix.yaml"
DOCS = ROOT / "docs" / "search.md"
#: The issue's SLO (issue 29): CI's perf cases carry none.
SLO = {"p99_ttft_ms": 2000.0, "p99_tpot_ms": 50.0}
#: The issue's workload, for a CI config without a performance case.
DEFAULT_LENGTHS = (3500, 1500)
#: The search's own defaults (``schema/search.py``), to which CI's knobs are added.
GRID = {"max_num_seqs": [16, 32, 64], "max_num_batched_tokens": [4096, 8192],
        "graph_modes": ["NONE", "PIECEWISE", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"], "pd_prefill_graph_modes": ["NONE"]}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ci_importer = _load("import_ci_config", ROOT / "scripts" / "import_ci_config.py")


def _compose(overrides: list[str]) -> dict[str, Any]:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    raw = OmegaConf.to_container(cfg, resolve=True)
    raw.pop("hydra", None)
    return raw


def _merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and key != "other":
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)



# -- the cases ---------------------------------------------------------------------------------------------------
def corpus_cases() -> list[dict[str, Any]]:
    """One case per corpus row: CI's spec (its overrides) and the citation."""
    data = json.loads(CORPUS.read_text())
    out = []
    for r in data["rows"]:
        ov = [o for o in r["overrides"] if not o.startswith(("workload.num_prompts", "workload.max_concurrency",
                                                            "workload.request_rate"))]
        out.append({"id": r["id"], "citation": f"vllm-ascend {r['citation']}", "source": "perf corpus",
                    "ci_raw": _compose(ov), "nodes": None, "workload_note": "CI's perf case",
                    "proxy": r.get("proxy")})
    return out


def pd_cases() -> list[dict[str, Any]]:
    """One case per ``tests/data/ci_pd`` config: the imported recipe composed as Hydra composes it, or the
    importer's refusal."""
    out = []
    for path in sorted(CI_PD.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        header = path.read_text().splitlines()[0]
        cite = header.split("vllm-project/vllm-ascend, ", 1)[-1].split(" (")[0] if "vllm-ascend" in header else path.name
        case = {"id": path.stem, "citation": f"vllm-ascend {cite.replace(' at tag ', '@')}", "source": "tests/data/ci_pd"}
        try:
            recipe = read_pd_config(str(path), name="ci").recipe
        except ConfigError as exc:
            out.append({**case, "refused": f"the CI importer refuses it: {exc}"})
            continue
        groups = [f"{k.removeprefix('override /')}={v}" for d in recipe["defaults"] for k, v in d.items()]
        # the release CI ran: the file's tag (tests/data/ci_pd/<name>@<tag>.yaml), where ascendflow has its rules row
        tag = path.stem.rsplit("@", 1)[-1].removeprefix("v")
        if f"vllm-ascend-{tag}:" in MATRIX.read_text():
            groups.append(f"hardware.software=vllm-ascend-{tag}")
        ci_raw = _compose(groups)
        # the recipe's workload (CI's perf case, ascendflow.importer.ci.carry_workload) is left out: the search sizes
        # its own load per candidate, and the lengths are set below from the same case, as the published runs did
        _merge(ci_raw, {k: v for k, v in recipe.items() if k not in ("defaults", "_notes", "workload")})
        benches = [b for b in (raw.get("benchmarks") or {}).values()
                   if isinstance(b, dict) and b.get("case_type") == "performance" and int(b.get("max_out_len") or 0) > 1]
        if benches:
            w = ci_importer.workload_of(benches[-1])
            isl, osl, note = w["input_len"], w["output_len"], f"CI's perf case ({w['dataset']})"
        else:
            (isl, osl), note = DEFAULT_LENGTHS, "no CI perf case: the issue's 3,500 / 1,500"
        ci_raw["workload"].update({"random_input_len": isl, "random_output_len": osl})
        out.append({**case, "ci_raw": ci_raw, "nodes": int(raw["num_nodes"]), "workload_note": note})
    return out


def search_raw(ci_raw: dict[str, Any], cand: Candidate, nodes: int, slo: dict[str, float]) -> tuple[dict, list[str]]:
    """The search's config from CI's: its model, hardware, release, quantization, engine and workload; the default
    space plus CI's knobs; PD roles' shared settings lifted to ``engine`` (notes say which)."""
    raw = copy.deepcopy(ci_raw)
    notes: list[str] = []
    grid = copy.deepcopy(GRID)
    if cand.kind == "colocated":
        assert cand.knobs
        grid["max_num_seqs"].append(cand.knobs.max_num_seqs)
        grid["max_num_batched_tokens"].append(cand.knobs.max_num_batched_tokens)
        grid["graph_modes"].append(cand.knobs.cudagraph_mode)
    else:
        assert cand.prefill and cand.decode
        pd = raw["pd"]
        grid["max_num_seqs"].append(cand.decode.knobs.max_num_seqs)
        grid["max_num_batched_tokens"].append(cand.prefill.knobs.max_num_batched_tokens)
        grid["graph_modes"].append(cand.decode.knobs.cudagraph_mode)
        grid["pd_prefill_graph_modes"].append(cand.prefill.knobs.cudagraph_mode)
        raw["engine"]["max_num_seqs"] = cand.prefill.knobs.max_num_seqs
        gmus = {pd[r].get("gpu_memory_utilization") for r in ("prefill", "decode")} - {None}
        if gmus:
            raw["engine"]["gpu_memory_utilization"] = max(gmus)
            if len(gmus) > 1:
                notes.append(f"roles' gpu_memory_utilization {sorted(gmus)}: the search gives both {max(gmus)}")
        ks = {r: pd[r].get("num_speculative_tokens") for r in ("prefill", "decode")}
        if ks["decode"] is not None:
            raw["engine"]["num_speculative_tokens"] = ks["decode"]
            if ks["prefill"] not in (None, ks["decode"]):
                notes.append(f"prefill num_speculative_tokens {ks['prefill']}: the search gives both roles the "
                             f"decode's {ks['decode']}")
        raw["pd"] = _compose([])["pd"]
        raw["parallel"]["nodes"] = nodes
        raw["search"]["pd_max_nodes_per_instance"] = max(raw["search"]["pd_max_nodes_per_instance"],
                                                        cand.prefill.layout.nodes, cand.decode.layout.nodes)
    raw["run"]["mode"] = "search"
    raw["search"].update({k: sorted(set(v), key=v.index) for k, v in grid.items()})
    raw["search"].update({"nodes": nodes, "pipeline_parallel_sizes": [1], "children": "none"})
    raw["slo"].update(slo)
    return raw, notes


def run_search(spec) -> tuple[Any, Evaluator]:
    """The search as ``run.mode=search`` runs it (``modes/search.py`` ``SearchMode.plan``), then its intervals."""
    model = resolve_model(spec.model, need_weights=False)
    calibration = (load_calibration(spec.hardware.name, calibration_file(spec))
                   if platform_for(spec.hardware.kind).step_calibration else None)
    evaluator = Evaluator(spec, model.architecture, model_path=model.path or spec.model.path or spec.model.id,
                          host=host_facts(spec.hardware), checkpoint=model.checkpoint, draft=None,
                          quantizations=quantization_options(spec), calibration=calibration)
    result = search(spec, evaluator, spec.search.nodes)
    if result.ranked:
        SearchMode()._intervals(result, None)
    return result, evaluator


def _round_up(value: float, step: float) -> float:
    return math.ceil(value / step) * step


def ci_row(result, evaluator: Evaluator, spec, cand: Candidate) -> dict[str, Any] | None:
    """CI's row among the search's rows, else (a PD pair pruned before it became a row) priced from the cached role
    figures, with the group's interval ratio."""
    row = find_row(result.rows, cand)
    if row is not None or cand.kind != "pd":
        return dict(row) if row is not None else None
    assert cand.prefill and cand.decode
    pp = evaluator.role(cand.quantization, cand.prefill, spec.search.pd_connector)
    dp = evaluator.role(cand.quantization, cand.decode, spec.search.pd_connector)
    for p in (pp, dp):
        if p.status != "ranked":
            return {"status": p.status if p.status != "ranked" else "misses SLO", "reason": p.reason,
                    "error": p.error, "label": cand.label(), "pruned": True}
    row = pd_row(cand.quantization, cand.prefill, pp, cand.decode, dp, cand.prefill_instances,
                 cand.decode_instances, result.nodes, result.devices_per_node, evaluator.osl, spec.slo.targets)
    row["pruned"] = True
    peer = next((r for r in result.ranked if r["kind"] == "pd" and r.get("tps_low") is not None), None)
    if peer:
        for k in ("tps_low", "tps_high"):
            row[k] = row["tps_per_device"] * peer[k] / peer["tps_per_device"]
    return row


def describe(case: dict[str, Any]) -> dict[str, Any]:
    """What a case is without searching it: citation, devices, workload and CI's layout as the search names it."""
    out = {k: case[k] for k in ("id", "citation", "source") if k in case}
    if case.get("refused"):
        return out
    spec = load_spec(case["ci_raw"])
    cand, _ = candidate_of(spec, spec.hardware.devices_per_node)
    return out | {"model": spec.model.name, "hardware": spec.hardware.name, "software": spec.hardware.software,
                  "quantization": spec.quantization.name, "nodes": case["nodes"] or spec.parallel.nodes,
                  "isl": spec.workload.random_input_len, "osl": spec.workload.random_output_len,
                  "ci_layout": cand.label()}


def evaluate_case(case: dict[str, Any]) -> dict[str, Any]:
    """Search one case and place CI's layout in it."""
    out = {k: case[k] for k in ("id", "citation", "source") if k in case}
    if case.get("refused"):
        return {**out, "status": "not searched", "reason": case["refused"]}
    ci_spec = load_spec(case["ci_raw"])
    nodes = case["nodes"] or ci_spec.parallel.nodes
    ci_plan = ""
    try:
        plan = compile_plan(ci_spec, resolve_model(ci_spec.model, need_weights=False).architecture,
                            model_path="MODEL", host=host_facts(ci_spec.hardware))
        ci_plan = "compiles"
    except ConfigError as exc:
        plan, ci_plan = None, f"refused: {exc}"
    eng = ci_spec.engine
    if plan is not None and not ci_spec.pd.enabled and (eng.max_num_seqs is None or eng.max_num_batched_tokens is None):
        # CI left them to vLLM: the values its plan resolves (compiler/passes/launch.py vllm_defaults)
        fill = {k: int(plan.engine_args[k]) for k in ("max_num_seqs", "max_num_batched_tokens")
                if getattr(eng, k) is None}
        ci_spec = ci_spec.model_copy(update={"engine": eng.model_copy(update=fill)})
        case = {**case, "ci_raw": {**case["ci_raw"], "engine": {**case["ci_raw"]["engine"], **fill}}}
    cand, notes = candidate_of(ci_spec, ci_spec.hardware.devices_per_node)
    if plan is not None and not ci_spec.pd.enabled and eng.max_num_seqs is None:
        notes.append(f"max_num_seqs left to vLLM by CI: {cand.knobs.max_num_seqs} as the plan resolves it")
    out.update({"model": ci_spec.model.name, "hardware": ci_spec.hardware.name, "software": ci_spec.hardware.software,
                "quantization": ci_spec.quantization.name, "nodes": nodes,
                "isl": ci_spec.workload.random_input_len, "osl": ci_spec.workload.random_output_len,
                "workload_note": case["workload_note"], "ci_layout": cand.label(), "proxy": case.get("proxy"),
                "ci_plan": ci_plan})
    slo = dict(SLO)
    for attempt in range(2):
        raw, more = search_raw(case["ci_raw"], cand, nodes, slo)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            spec = load_spec(raw)
            SearchMode().check(spec)
            result, evaluator = run_search(spec)
        except ConfigError as exc:
            return {**out, "status": "search refused", "reason": str(exc), "notes": notes + more}
        if result.ranked or attempt or not result.nearest:
            break
        slo = {"p99_ttft_ms": _round_up(result.nearest["p99_ttft_ms"], 500.0),
               "p99_tpot_ms": _round_up(result.nearest["p99_tpot_ms"], 5.0)}
    out.update({"slo": slo, "slo_note": "the issue's" if slo == SLO else "the nearest SLO a candidate meets, rounded up",
                "notes": notes + more, "search_s": round(time.perf_counter() - start, 1),
                "search_cpu_s": round(time.process_time() - cpu, 1), "enumerated": result.counts.enumerated,
                "infeasible": result.counts.infeasible, "ranked": len(result.ranked)})
    top = result.ranked[0] if result.ranked else None
    if top:
        out["top"] = {k: top.get(k) for k in ("label", "tps_per_device", "tps_low", "tps_high", "capacity_rps",
                                               "devices", "p99_ttft_ms", "p99_tpot_ms")}
    row = ci_row(result, evaluator, spec, cand)
    if row is None:
        out.update({"status": "not enumerated", "reason": "the search has no candidate with CI's layout"})
        return out
    out["ci"] = {k: row.get(k) for k in ("label", "status", "reason", "error", "note", "tps_per_device", "tps_low",
                                           "tps_high", "capacity_rps", "p99_ttft_ms", "p99_tpot_ms", "pruned",
                                           "lowest")}
    out["status"] = row["status"]
    if row["status"] == "ranked" and top:
        out["rank"] = rank_of(result.ranked, row)
        out["of"] = len(result.ranked) + (1 if row.get("pruned") else 0)
        out["gain"] = gain(top, row)
    return out


# -- the docs table ----------------------------------------------------------------------------------------------
def _fmt_gain(g: dict[str, Any] | None) -> str:
    if not g or g.get("gain_percent") is None:
        return "—"
    interval = (f" [{g['gain_low']:+.0f}, {g['gain_high']:+.0f}]" if g.get("gain_low") is not None
                else " (no interval)")
    return f"{g['gain_percent']:+.0f} %{interval}"


def _fmt_tps(r: dict[str, Any] | None) -> str:
    if not r or r.get("tps_per_device") is None:
        return "—"
    iv = f" [{r['tps_low']:.0f}, {r['tps_high']:.0f}]" if r.get("tps_low") is not None else ""
    return f"{r['tps_per_device']:.1f}{iv}"


def table(results: list[dict[str, Any]]) -> str:
    """The markdown table of docs/search.md (one row per searched case, configs sharing a search together)."""
    lines = ["| CI config | devices · workload · SLO | CI's layout | feasible | rank | CI tok/s/device | top pick | "
             "top tok/s/device | gain of top over CI |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cites = "<br>".join(r.get("citations") or [r["citation"]])
        slo = r.get("slo") or {}
        where = (f"{r['nodes']} × {r['hardware']} ({r['software']}, {r['quantization']}) · {r['isl']}/{r['osl']}"
                 if r.get("hardware") else "—")
        if slo:
            where += (f" · TTFT {slo.get('p99_ttft_ms', 0):g} ms, TPOT {slo.get('p99_tpot_ms', 0):g} ms"
                      + ("" if r.get("slo_note") == "the issue's" else " (nearest met)"))
        if r["status"] in ("not searched", "search refused", "not enumerated"):
            lines.append(f"| {cites} | {where} | {r.get('ci_layout', '—')} | {r['status']}: {r['reason']} | — | — "
                         f"| {r.get('top', {}).get('label', '—')} | {_fmt_tps(r.get('top'))} | — |")
            continue
        ci = r.get("ci") or {}
        if r["status"] == "infeasible":
            feas = f"no: {ci.get('reason')}"
        elif r["status"] == "ranked":
            feas = "yes" + (" (PD pair pruned as dominated)" if ci.get("pruned") else "")
        elif r["status"] == "misses SLO":
            low = ci.get("lowest") or {}
            at = (f" (at its lowest load p99 TTFT {low['p99_ttft_ms']:.0f} ms, TPOT {low['p99_tpot_ms']:.1f} ms)"
                  if low.get("p99_ttft_ms") is not None and low.get("p99_tpot_ms") is not None else "")
            feas = f"yes; misses the SLO at any load{at}"
        else:
            feas = f"yes, {r['status']}" + (f": {ci['note']}" if ci.get("note") else "")
        rank = f"{r['rank']} of {r['of']}" if r.get("rank") else "—"
        if r.get("rank") and r.get("gain") and abs(r["gain"].get("gain_percent") or 1) < 0.05:
            rank += " (the top pick's figure)"
        lines.append(f"| {cites} | {where} | {ci.get('label') or r.get('ci_layout')} | {feas} | {rank} | "
                     f"{_fmt_tps(ci if r['status'] == 'ranked' else None)} | {r.get('top', {}).get('label', '—')} | {_fmt_tps(r.get('top'))} | "
                     f"{_fmt_gain(r.get('gain'))} |")
    return "\n".join(lines)


def _cite(r: dict[str, Any]) -> str:
    """``path@commit``, and the perf case for a corpus row (``<config>:<case>@<commit>``)."""
    if r.get("source") == "perf corpus" and ":" in r["id"]:
        return f"{r['citation']} ({r['id'].split(':', 1)[1].rsplit('@', 1)[0]})"
    return r["citation"]


def _group(results: list[dict[str, Any]], keys: dict[str, str]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for r in results:
        k = keys[r["id"]]
        if k in seen:
            seen[k]["citations"].append(_cite(r))
        else:
            seen[k] = {**r, "citations": [_cite(r)]}
    return list(seen.values())


BEGIN, END = "<!-- search_vs_ci:begin -->", "<!-- search_vs_ci:end -->"


def write_docs(text: str) -> None:
    doc = DOCS.read_text()
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN) + len(BEGIN)] + "\n" + text + "\n" + doc[doc.index(END):]
    else:
        raise SystemExit(f"{DOCS}: no {BEGIN} marker")
    DOCS.write_text(doc)


def dedupe_key(case: dict[str, Any]) -> str:
    """Cases with the same search inputs and the same CI layout search once (the benchmark's concurrency and prompt
    count do not enter the search)."""
    if case.get("refused"):
        return case["id"]
    raw = copy.deepcopy(case["ci_raw"])
    for k in ("num_prompts", "max_concurrency", "request_rate", "seed"):
        raw["workload"].pop(k, None)
    raw["graph"].pop("cudagraph_capture_sizes", None)
    return json.dumps([raw, case.get("nodes")], sort_keys=True, default=str)


#: Wall seconds one case may take (a forked child per case): long-prompt cases simulate 128K-token prefills.
CASE_TIMEOUT_S = 180


def _child(case: dict[str, Any], queue) -> None:
    try:
        queue.put(evaluate_case(case))
    except Exception as exc:  # noqa: BLE001 - reported in the row, the other cases go on
        queue.put({k: case[k] for k in ("id", "citation", "source") if k in case} | {
            "status": "search refused", "reason": f"{type(exc).__name__}: {exc}"})


def evaluate_bounded(case: dict[str, Any], timeout_s: float = CASE_TIMEOUT_S) -> dict[str, Any]:
    """:func:`evaluate_case` in a forked child, stopped after ``timeout_s`` (then reported as not searched)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(case, queue))
    proc.start()
    try:
        return queue.get(timeout=timeout_s)
    except Exception:  # noqa: BLE001 - queue.Empty: the child ran past its time
        proc.terminate()
        return describe(case) | {"status": "not searched",
                                 "reason": f"the search did not finish in {timeout_s:.0f} s on this machine"}
    finally:
        proc.join(5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="cases whose id contains this")
    parser.add_argument("--docs", action="store_true", help="write the table into docs/search.md")
    parser.add_argument("--table-only", action="store_true", help="the table from the last results file, no search")
    parser.add_argument("--case-timeout", type=float, default=CASE_TIMEOUT_S,
                        help=f"seconds each search may take before it is reported as not searched (default {CASE_TIMEOUT_S})")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the searched cases' rows in the last results file (with --only)")
    args = parser.parse_args()
    if args.table_only:
        results = json.loads(OUT.read_text())["results"]
        cases = {c["id"]: c for c in pd_cases() + corpus_cases()}
        for r in results:  # a case stopped by its time limit in an earlier version of this script: describe it
            if r["status"] == "not searched" and "ci_layout" not in r and r["id"] in cases:
                r.update({k: v for k, v in describe(cases[r["id"]]).items() if k not in r})
        text = table(_group(results, {r["id"]: r.get("same_search_as", r["id"]) for r in results}))
        print(text)
        if args.docs:
            write_docs(text)
        return 0
    cases = pd_cases() + corpus_cases()
    if args.only:
        cases = [c for c in cases if args.only in c["id"]]
    keys = {c["id"]: dedupe_key(c) for c in cases}
    done: dict[str, dict[str, Any]] = {}
    results = []
    for case in cases:
        k = keys[case["id"]]
        if k not in done:
            print(f"[{time.strftime('%H:%M:%S')}] {case['id']}", flush=True)
            done[k] = evaluate_bounded(case, args.case_timeout)
            print(json.dumps({x: done[k].get(x) for x in ("status", "rank", "of", "ci_layout", "gain", "search_cpu_s")},
                             default=str), flush=True)
            results.append(done[k])
        else:
            results.append({**done[k], "id": case["id"], "citation": case["citation"], "same_search_as": done[k]["id"]})
    for r in results:  # the group key of the table: the case whose search it shares
        r.setdefault("same_search_as", r["id"])
    if args.merge and OUT.exists():  # the earlier rows, in their order, with this run's rows in place of theirs
        new = {r["id"]: r for r in results}
        results = [new.pop(r["id"], r) for r in json.loads(OUT.read_text())["results"]] + list(new.values())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "loadavg_1m": os.getloadavg()[0],
                               "slo_default": SLO, "results": results}, indent=1, default=str))
    print(f"wrote {OUT}")
    text = table(_group(results, {r["id"]: r["same_search_as"] for r in results}))
    print(text)
    if args.docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
