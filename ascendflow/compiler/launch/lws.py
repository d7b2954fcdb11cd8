"""Kubernetes LeaderWorkerSet manifest for a multi-node Ascend plan (pure text): ``launch/lws.yaml``.

One LWS group is one deployment of the plan: the leader pod runs ``node0.sh`` (it serves the API), worker pod ``k``
runs ``node<k>.sh``. A PD plan has one LWS per instance of each role (:class:`LWSGroup`; its leader runs the
instance's first node ``node<h>.sh``, worker ``k`` runs ``node<h + k>.sh``). The scripts come from a ConfigMap made
from the run's ``launch/`` directory (docs/multinode.md); the pod only supplies what the scripts ask for at launch:

- ``ASCENDFLOW_NODE0_IP`` (``<h>`` for a PD instance): the leader's pod IP (``status.podIP``; with ``hostNetwork``
  the node's IP, which HCCL needs); on workers the leader's address ``LWS_LEADER_ADDRESS`` (set by LWS, ``api/leaderworkerset/v1``
  ``leaderworkerset_types.go``) resolved to an IP by ``getent``;
- ``ASCENDFLOW_NODE<k>_IP``: the pod's own IP (each worker reads only its own ``k``, ``LWS_WORKER_INDEX``);
- other ``ASCENDFLOW_*`` values (NIC name, model path): ``configMapKeyRef`` of ConfigMap ``ascendflow-cluster``;
- secrets (API keys): ``secretKeyRef`` of Secret ``ascendflow-secrets``, never a value.

Device requests: ``hardware.k8s_device_resource`` per node (MindCluster Ascend Device Plugin: ``huawei.com/Ascend910``
for Atlas A2/A3 training and inference servers, hiascend.com MindCluster 7.3.0 ``dlruntime_ug_005``; Huawei Cloud CCE's
plugin names them ``huawei.com/ascend-1980``, as vllm-ascend's own CI manifest
``tests/e2e/nightly/multi_node/scripts/lws.yaml.jinja2`` at v0.23.0 does). ``/dev/shm`` is a memory volume (reference
§7: multi-card containers need a large ``--shm-size``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import yaml

from ascendflow.compiler.plan import Plan

#: The LWS API (kubernetes-sigs/lws ``config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml``).
LWS_API = "leaderworkerset.x-k8s.io/v1"
#: Where the launch ConfigMap is mounted in each pod.
LAUNCH_DIR = "/ascendflow/launch"
CLUSTER_CONFIGMAP = "ascendflow-cluster"
SECRETS = "ascendflow-secrets"
#: ``/dev/shm`` size per pod (reference §7: ``--shm-size`` 8g for multi-card containers).
SHM = "8Gi"


def lws_name(plan: Plan) -> str:
    """``ascendflow-<plan_hash>``: the LWS and its launch ConfigMap (``<name>-launch``)."""
    return f"ascendflow-{plan.plan_hash}"


def image(plan: Plan) -> str:
    """The release's public image: ``quay.io/ascend/vllm-ascend:v<vllm_ascend>`` (``-a3`` for Atlas A3; vllm-ascend
    ``docs/source/installation.md``, e.g. ``v0.23.0.post1-a3``); replace it with your registry's copy. The tag is the
    version-matrix row's ``vllm_ascend`` pin, the one ``preflight.sh`` and the plan pin (not the row's name)."""
    tag = plan.target.engine.get("vllm_ascend") or plan.target.engine["row"].removeprefix("vllm-ascend-")
    return f"quay.io/ascend/vllm-ascend:v{tag}" + ("-a3" if "A3" in plan.target.hardware.upper() else "")


def _env(refs: list[str], *, leader: bool, head: int = 0) -> list[dict]:
    """Pod env for the script refs: ``ASCENDFLOW_NODE<head>_IP`` is the leader's pod IP, every other node's IP a
    worker's own pod IP (each worker reads only its own); other ``ASCENDFLOW_*`` from the cluster ConfigMap, the
    rest from the Secret."""
    env: list[dict] = []
    for ref in refs:
        node = re.fullmatch(r"ASCENDFLOW_NODE(\d+)_IP", ref)
        if node and leader == (int(node.group(1)) == head):
            env.append({"name": ref, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        elif node:
            continue  # the leader reads only its own IP; a worker resolves the leader's from LWS_LEADER_ADDRESS
        elif ref.startswith("ASCENDFLOW_"):
            env.append({"name": ref, "valueFrom": {"configMapKeyRef": {"name": CLUSTER_CONFIGMAP, "key": ref}}})
        else:
            env.append({"name": ref, "valueFrom": {"secretKeyRef": {"name": SECRETS, "key": ref}}})
    return env


def _pod(plan: Plan, refs: list[str], *, leader: bool, group: "LWSGroup") -> dict:
    resource = plan.target.k8s_device_resource
    head = group.head
    if leader:
        command = ["bash", f"{LAUNCH_DIR}/node{head}.sh"]
    else:
        ip = f"ASCENDFLOW_NODE{head}_IP"
        resolve = (f'export {ip}="${{{ip}:-$(getent hosts "$LWS_LEADER_ADDRESS" '
                   "| awk '{print $1; exit}')}\"; " if ip in refs else "")
        index = '"$LWS_WORKER_INDEX"' if head == 0 else f"$((LWS_WORKER_INDEX + {head}))"
        command = ["bash", "-c", resolve + f"exec bash {LAUNCH_DIR}/node{index}.sh"]
    container = {
        "name": "vllm-leader" if leader else "vllm-worker",
        "image": image(plan),
        "command": command,
        "env": _env(refs, leader=leader, head=head),
        "resources": {"limits": {resource: group.devices}, "requests": {resource: group.devices}},
        "volumeMounts": [{"name": "launch", "mountPath": LAUNCH_DIR}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if leader:
        container["ports"] = [{"containerPort": group.port, "name": "http"}]
        container["readinessProbe"] = {"httpGet": {"path": "/health", "port": group.port}, "periodSeconds": 10}
    labels = {"ascendflow/plan": plan.plan_hash, "role": "leader" if leader else "worker"}
    if group.pd_role:
        labels["ascendflow/pd-role"] = group.pd_role
    return {
        "metadata": {"labels": labels},
        "spec": {
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "containers": [container],
            "volumes": [
                {"name": "launch", "configMap": {"name": f"{lws_name(plan)}-launch", "defaultMode": 0o755}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM}},
            ],
        },
    }


class LWSGroup(NamedTuple):
    """One LeaderWorkerSet group: its first (leader) node, node count, devices per pod, the leader's API port and,
    for a PD instance, its name (``prefill0``) and role."""

    head: int
    size: int
    devices: int
    port: int
    instance: str = ""
    pd_role: str = ""


def lws_manifest(plan: Plan, required_refs: list[str], group: LWSGroup | None = None) -> str:
    """One LeaderWorkerSet (size = nodes of the group, one replica), YAML text: the whole co-located plan, or one PD
    instance (``group``: its nodes run ``node<head + LWS_WORKER_INDEX>.sh``).

    Args:
        plan: a multi-node plan.
        required_refs: the ``${NAME}`` references the group's launch scripts require (see module docstring for the
            source of each in the pod).
        group: the PD instance; ``None``: every node of the plan from node 0, the API port of its serve command.
    """
    if group is None:
        group = LWSGroup(head=0, size=plan.target.nodes, devices=max(len(w.devices) for w in plan.workers),
                         port=int(plan.serve_command[plan.serve_command.index("--port") + 1]))
    name = lws_name(plan) + (f"-{group.instance}" if group.instance else "")
    labels = {"ascendflow/plan": plan.plan_hash, **({"ascendflow/pd-role": group.pd_role} if group.pd_role else {})}
    doc = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": group.size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _pod(plan, required_refs, leader=True, group=group),
                "workerTemplate": _pod(plan, required_refs, leader=False, group=group),
            },
        },
    }
    what = (f"{group.pd_role} instance {group.instance}, nodes {group.head}..{group.head + group.size - 1}"
            if group.instance else plan.launcher)
    header = (f"# ascendflow plan {plan.plan_hash}: LeaderWorkerSet, {group.size} pods ({what}). "
              f"Apply: see docs/multinode.md\n")
    return header + yaml.safe_dump(doc, sort_keys=False, width=120)
