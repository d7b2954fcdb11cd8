"""Runs a PD plan's own role scripts and proxy here, benchmarks through the proxy, and reads the KV-transfer evidence.

Each node is ``bash rehearsal/launch/node<k>.sh`` (its roles' engines, the connector swapped by
:func:`ascendflow.rehearsal.pd_scale.swap_connector`, the plan's API and handshake ports) in its own
:class:`~ascendflow.runner.process.ManagedProcess` with the node environment of
:func:`ascendflow.rehearsal.nodes.node_env`; the proxy is the plan's ``rehearsal/launch/proxy.sh`` with
``ASCENDFLOW_PD_PROXY_DIR`` set to ``rehearsal/proxy/``, whose ``load_balance_proxy_server_example.py`` (and layerwise
twin) runs :mod:`ascendflow.rehearsal.pd_proxy`. Every process is stopped at the end, on error and on Ctrl-C (process
groups, then any process carrying this run's directory and a node rank).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

from ascendflow.compiler import Plan
from ascendflow.compiler.launch.pd_proxy import PROXY_SCRIPTS
from ascendflow.rehearsal.nodes import NODE_RANK_ENV, node_env, reap_strays
from ascendflow.rehearsal.pd_evidence import consumer_lines, decode_evidence, prefill_evidence
from ascendflow.rehearsal.scale import LOCAL_IP
from ascendflow.rehearsal.vllm_cli import write_shim
from ascendflow.runner.bench import bench_argv
from ascendflow.runner.engine_log import parse_engine_log_file
from ascendflow.runner.local import run_bench_client
from ascendflow.runner.process import ManagedProcess
from ascendflow.runner.server import EngineStartError, engine_failure, healthy
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

Status = Callable[[str], None]
PROXY_RANK = "proxy"


def kv_store_dir(run_dir: Path) -> Path:
    """Where the rehearsal's ``ExampleConnector`` keeps the KV it moves (``shared_storage_path``); removed at the end
    (23,040 B per token of SmolLM2-135M: 5.9 MB per 256-token prompt)."""
    return run_dir / "rehearsal" / "kv_store"


def write_proxy_dir(proxy_dir: Path) -> None:
    """``proxy_dir/<script>`` for every proxy kind of :data:`PROXY_SCRIPTS`: runs
    :func:`ascendflow.rehearsal.pd_proxy.main` with this interpreter's ``ascendflow``."""
    proxy_dir.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    for script in PROXY_SCRIPTS.values():
        (proxy_dir / script).write_text(f"import sys\nsys.path.insert(0, {root.as_posix()!r})\n"
                                        "from ascendflow.rehearsal.pd_proxy import main\nmain()\n")


def busy_ports(plan: Plan) -> list[tuple[str, int]]:
    """``(key, port)`` of every API port of the roles and the proxy's port that is in use on 127.0.0.1 now (the
    rehearsal keeps the plan's ports)."""
    ports = [(f"pd.{name}.api_port", port) for name, role in plan.roles.items() for _, port in role.endpoints]
    ports.append(("pd.proxy.port", plan.proxy.port))
    busy = []
    for key, port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((LOCAL_IP, port))
            except OSError:
                busy.append((key, port))
    return busy


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read().decode()


def _wait_healthy(urls: list[str], procs: dict[str, ManagedProcess], timeout_s: float, status: Status, what: str,
                  since: float) -> float:
    """Seconds since ``since`` (``time.monotonic()``) until every ``urls`` answers 200; the progress line names
    ``what`` and counts from ``since``, so waiting for the proxy after the endpoints goes on counting (it restarted
    at "… 0 s" and called the proxy a "PD endpoint", issue 25 row 10).

    Raises:
        EngineStartError: a process exited first, or ``timeout_s`` passed (counted from this call).
    """
    start = time.monotonic()
    while not all(healthy(u) for u in urls):
        for name, proc in procs.items():
            if proc.returncode is not None:
                raise EngineStartError(engine_failure(f"rehearsal {name} exited with code {proc.returncode} before "
                                                      f"{what} answered /health; every node stopped", proc.log_path))
        if time.monotonic() - start > timeout_s:
            first = next(iter(procs.values()))
            raise EngineStartError(engine_failure(f"{what} not healthy after {time.monotonic() - start:.0f} s "
                                                  "(raise run.health_timeout_s)", first.log_path))
        status(f"waiting for /health of {what} … {time.monotonic() - since:.0f} s")
        time.sleep(1)
    return time.monotonic() - since


def rehearse_pd(plan: Plan, spec: RunSpec, run_dir: Path, status: Status) -> dict[str, Any]:
    """Start every node's role script and the proxy, benchmark through the proxy with vLLM's client, read the
    evidence of KV transfer (:mod:`ascendflow.rehearsal.pd_evidence`), stop everything.

    Returns:
        ``{"benchmark", "engine" (the decode node's log facts), "engine_start_s" (until every endpoint and the
        proxy answered), "port" (the proxy's), "engine_metrics" (the ``pd.*`` evidence)}``.

    Raises:
        ConfigError: one of the plan's API ports or the proxy's port is in use here (nothing started).
        EngineStartError: a node or the proxy exited before the end, or an endpoint was not healthy within
            ``run.health_timeout_s``.
    """
    if busy := busy_ports(plan):
        key, port = busy[0]
        raise ConfigError(key, port, f"port {port} is in use on this machine and a PD rehearsal keeps the plan's "
                                     f"ports (in use: {', '.join(str(p) for _, p in busy)}); stop what listens there "
                                     f"or give the rehearsal another port ({key}=...)")
    base = run_dir / "rehearsal"
    bin_dir, proxy_dir = base / "bin", base / "proxy"
    write_shim(bin_dir)
    write_proxy_dir(proxy_dir)
    tmp = Path(tempfile.mkdtemp(prefix="afr-"))
    node_ranks = sorted({w.node_rank for w in plan.workers})
    endpoints = {name: [f"http://{LOCAL_IP}:{port}" for _, port in role.endpoints] for name, role in plan.roles.items()}
    decode_node = plan.roles["decode"].workers[0].node_rank
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, tmp, True)
        stack.callback(shutil.rmtree, kv_store_dir(run_dir), True)
        stack.callback(reap_strays, run_dir, spec.run.shutdown_grace_s)
        procs: dict[str, ManagedProcess] = {}
        for k in node_ranks:
            procs[f"node {k}"] = stack.enter_context(ManagedProcess(
                ["bash", str(base / "launch" / f"node{k}.sh")], node_env(plan, k, run_dir, bin_dir, tmp),
                base / f"node{k}.log", spec.run.shutdown_grace_s))
        status(f"{len(node_ranks)} PD node(s) starting (logs: {base}/node<k>.log)")
        urls = [u + "/health" for role in endpoints.values() for u in role]
        since = time.monotonic()
        _wait_healthy(urls, procs, spec.run.health_timeout_s, status, f"the {len(urls)} PD endpoints", since)
        env = {**node_env(plan, 0, run_dir, bin_dir, tmp), NODE_RANK_ENV: PROXY_RANK,
               "ASCENDFLOW_PD_PROXY_DIR": str(proxy_dir)}
        procs["proxy"] = stack.enter_context(ManagedProcess(["bash", str(base / "launch" / "proxy.sh")], env,
                                                            base / "proxy.log", spec.run.shutdown_grace_s))
        proxy_url = f"http://{LOCAL_IP}:{plan.proxy.port}"
        start_s = _wait_healthy([proxy_url + "/health"], procs, 60, status, "the proxy", since)
        status(f"every PD endpoint and the proxy healthy after {start_s:.0f} s; vLLM's benchmark client → proxy")
        args = bench_argv(spec.workload, base_url=proxy_url, served_model_name=spec.model.served_name,
                          tokenizer=plan.engine_args["model"], run_dir=run_dir)
        benchmark = run_bench_client(args, run_dir, spec, status, procs["proxy"], proxy_url + "/health", None)
        for name, proc in procs.items():
            if proc.returncode is not None:
                raise EngineStartError(engine_failure(f"rehearsal {name} exited with code {proc.returncode} during "
                                                      "the benchmark; every node stopped", proc.log_path))
        evidence: dict[str, float] = {}
        for url in endpoints["prefill"]:
            for k, v in prefill_evidence(_get(url + "/metrics")).items():
                evidence[k] = evidence.get(k, 0.0) + v
        log = consumer_lines(procs[f"node {decode_node}"].log_path.read_text(errors="replace"))
        for i, url in enumerate(endpoints["decode"]):
            for k, v in decode_evidence(_get(url + "/metrics"), log if i == 0 else "").items():
                evidence[k] = evidence.get(k, 0.0) + v
        status("benchmark done; stopping every node and the proxy")
    return {"benchmark": benchmark, "engine": parse_engine_log_file(procs[f"node {decode_node}"].log_path),
            "engine_start_s": start_s, "port": plan.proxy.port, "engine_metrics": evidence}
