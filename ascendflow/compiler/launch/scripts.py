"""Launch scripts (pure text): ``node<k>.sh`` per node, ``preflight.sh`` for Ascend targets, and the Ray and LWS
files of the launchers that need them (:mod:`.ray_cluster`, :mod:`.lws`). The argv inside each script was built at
compile time by the plan's launcher (:mod:`.multinode_dp`, :mod:`.nnodes`, :mod:`.ray_cluster`).
"""

from __future__ import annotations

import json

from ascendflow.compiler.launch.common import ref_guard, required_refs, shell_value
from ascendflow.compiler.launch.lws import lws_manifest
from ascendflow.compiler.launch.registry import launcher_for
from ascendflow.compiler.plan import Plan
from ascendflow.platforms import platform_for

def launch_scripts(plan: Plan) -> dict[str, str]:
    """Shell scripts for the target nodes: ``node<k>.sh`` (exports, the launcher's head lines, then ``exec`` of the
    node's argv), the launcher's own files (:meth:`~ascendflow.compiler.launch.base.Launcher.scripts`) and, for
    Ascend targets, ``preflight.sh`` (and ``lws.yaml`` when multi-node with ``k8s_device_resource``).
    """
    scripts: dict[str, str] = {}
    launcher = launcher_for(plan.launcher)
    for worker in plan.workers:
        head = launcher.head_lines(plan, worker.node_rank, shell_value)
        texts = [*plan.env.values(), *worker.env.values(), *worker.command, *head]
        lines = [
            "#!/usr/bin/env bash",
            f"# ascendflow plan {plan.plan_hash}: node {worker.node_rank} of {plan.target.nodes} "
            f"({plan.target.hardware}, {plan.target.device_name}; {plan.target.engine['row']})",
            f"# {launcher.ranks_line(plan, worker.node_rank)}, devices {worker.devices}. Generated: recompile instead of editing.",
            "set -euo pipefail",
            "",
            *ref_guard(required_refs(texts)),
            *(f"export {k}={shell_value(v)}" for k, v in sorted(plan.env.items())),
            *(f"export {k}={shell_value(v)}" for k, v in sorted(worker.env.items())),
            "",
            *head,
            "exec " + " ".join(shell_value(a) for a in worker.command) + ' "$@"',
        ]
        scripts[f"node{worker.node_rank}.sh"] = "\n".join(lines) + "\n"
    if platform_for(plan.target.kind).device_preflight:
        scripts["preflight.sh"] = preflight_script(plan)
    scripts.update(launcher.scripts(plan))
    if platform_for(plan.target.kind).k8s_manifests and plan.target.nodes > 1 and plan.target.k8s_device_resource:
        scripts["lws.yaml"] = lws_manifest(plan, required_refs=required_refs(
            [t for w in plan.workers for t in [*plan.env.values(), *w.env.values(), *w.command]]))
    return scripts


def preflight_script(plan: Plan) -> str:
    """Checks to run on every Ascend node before ``node<k>.sh``: CANN and NNAL environment sourced, devices visible
    (``npu-smi info``), installed versions equal to the plan's row (else the pip command that fixes them), and on
    multi-node plans the HCCS/RoCE links of every device (``hccn_tool -i N -link -g`` and ``-net_health -g``).
    """
    row = plan.target.engine
    # The most devices one node's workers use (a node may run several workers: DP ranks, PD instances)
    per_node: dict[int, int] = {}
    for w in plan.workers:
        per_node[w.node_rank] = per_node.get(w.node_rank, 0) + len(w.devices)
    devices = max(per_node.values())
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
        f"# 2. At least {devices} devices visible: the devices the runtime numbers (ASCEND_RT_VISIBLE_DEVICES"
        f" 0-{devices - 1} in launch/node<k>.sh),",
        "#    counted by torch_npu (torch.npu.device_count(), CANN aclrtGetDeviceCount). Not npu-smi's NPU IDs, which",
        "#    may count packages: an Atlas A3's 16 devices are 8 910C packages of two dies (its docs write 128G x 8).",
        "command -v npu-smi >/dev/null || fail \"npu-smi not found: install the Ascend driver\"",
        "found=$(python3 -c 'import torch, torch_npu; print(torch.npu.device_count())' 2>/dev/null || echo 0)",
        f'[ "$found" -ge {devices} ] || fail "$found devices visible to torch_npu (0 also when torch_npu does not '
        f'import: see check 3), the plan needs {devices} per node (devices 0-{devices - 1})"',
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
