"""``launch/lws.yaml``: valid against the vendored LeaderWorkerSet CRD schema (its pod templates are core/v1
``PodTemplateSpec``), strictly (unknown fields rejected, as ``kubectl apply --validate=strict``), with secrets only as
``secretKeyRef``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from ascendflow.compiler import compile_plan, launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.schema import load_spec
from tests.conftest import compose_config

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "data" / "schemas" / "leaderworkerset-v1.json")
                    .read_text())
MULTI_NODE = ["deepseek_r1", "qwen3_235b_tp16_2nodes", "qwen3_235b_tp16_2nodes_ray", "qwen3_235b_tp8pp2_2nodes",
              "qwen3_235b_tp8pp2_2nodes_ray"]


def _strict(schema):
    """Forbid fields the schema does not name, except where Kubernetes keeps unknown fields
    (``x-kubernetes-preserve-unknown-fields``) or the object is a map (``additionalProperties`` given)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


STRICT = _strict(SCHEMA)


def _manifest(recipe: str, *overrides: str) -> dict:
    raw = compose_config([f"+recipe={recipe}", *overrides])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture,
                        model_path=spec.model.path or "/models/x")
    return yaml.safe_load(launch_scripts(plan)["lws.yaml"])


@pytest.mark.parametrize("recipe", MULTI_NODE)
def test_lws_is_valid(recipe):
    doc = _manifest(recipe)
    jsonschema.validate(doc, SCHEMA)
    jsonschema.validate(doc, STRICT)
    assert doc["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and doc["kind"] == "LeaderWorkerSet"
    assert doc["spec"]["leaderWorkerTemplate"]["size"] == 2


def test_strict_schema_rejects_a_misspelt_field():
    doc = _manifest("qwen3_235b_tp16_2nodes")
    doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["resource"] = {}
    jsonschema.validate(doc, SCHEMA)  # the CRD alone keeps unknown fields (pruned by the server)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, STRICT)


def test_lws_pods_ask_for_a_whole_node_and_take_secrets_by_reference():
    doc = _manifest("qwen3_235b_tp16_2nodes_ray", "run.api_key_env=ACME_KEY")
    template = doc["spec"]["leaderWorkerTemplate"]
    leader, worker = (template[t]["spec"] for t in ("leaderTemplate", "workerTemplate"))
    for pod in (leader, worker):
        assert pod["hostNetwork"] is True
        container = pod["containers"][0]
        assert container["resources"] == {"limits": {"huawei.com/Ascend910": 8},
                                          "requests": {"huawei.com/Ascend910": 8}}
        env = {e["name"]: e for e in container["env"]}
        assert env["ACME_KEY"] == {"name": "ACME_KEY", "valueFrom": {"secretKeyRef": {"name": "ascendflow-secrets",
                                                                                       "key": "ACME_KEY"}}}
        assert all("value" not in e for e in container["env"])
    assert leader["containers"][0]["command"] == ["bash", "/ascendflow/launch/node0.sh"]
    assert {e["name"] for e in leader["containers"][0]["env"]} == {
        "ACME_KEY", "ASCENDFLOW_MODEL_PATH", "ASCENDFLOW_NIC", "ASCENDFLOW_NODE0_IP"}
    assert {e["name"] for e in worker["containers"][0]["env"]} == {
        "ACME_KEY", "ASCENDFLOW_MODEL_PATH", "ASCENDFLOW_NIC", "ASCENDFLOW_NODE1_IP"}
    assert worker["containers"][0]["command"][-1].endswith('exec bash /ascendflow/launch/node"$LWS_WORKER_INDEX".sh')


@pytest.mark.parametrize("recipe,overrides,tag", [
    # Issue 20 row 11: lws.yaml pinned v0.23.0-a3 while the plan and preflight.sh pinned 0.23.0.post1; the tutorial's
    # image is v0.23.0.post1-a3 (vllm-ascend docs/source/tutorials, multi-node DeepSeek on A3).
    ("deepseek_r1", [], "v0.23.0.post1-a3"),
    ("qwen3_235b_tp16_2nodes", [], "v0.23.0.post1"),
    ("qwen3_235b_tp16_2nodes", ["hardware.software=vllm-ascend-0.23.0rc1"], "v0.23.0rc1"),
])
def test_every_artifact_pins_the_version_the_plan_pins(recipe, overrides, tag):
    raw = compose_config([f"+recipe={recipe}", *overrides])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/models/x")
    pinned = plan.target.engine["vllm_ascend"]
    scripts = launch_scripts(plan)
    images = {c["image"] for role in ("leaderTemplate", "workerTemplate")
              for c in yaml.safe_load(scripts["lws.yaml"])["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"]}
    assert images == {f"quay.io/ascend/vllm-ascend:{tag}"} and tag.removeprefix("v").startswith(pinned)
    assert f'"vllm-ascend": "{pinned}"' in scripts["preflight.sh"]


PD_MULTI_NODE = {"deepseek_r1_pd_2p1d": ["prefill0", "prefill1", "decode0"],
                 "qwen3_235b_pd_1p1d": ["prefill0", "decode0"],
                 "qwen3_235b_w8a8_pd_3nodes": ["prefill0", "decode0"]}


@pytest.mark.parametrize("recipe", sorted(PD_MULTI_NODE))
def test_pd_lws_one_per_instance_is_valid(recipe):
    raw = compose_config([f"+recipe={recipe}"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/models/x")
    docs = list(yaml.safe_load_all(launch_scripts(plan)["lws.yaml"]))
    assert [d["metadata"]["name"] for d in docs] == [f"ascendflow-{plan.plan_hash}-{i}" for i in PD_MULTI_NODE[recipe]]
    for doc in docs:
        jsonschema.validate(doc, STRICT)
        assert doc["metadata"]["labels"]["ascendflow/pd-role"] == doc["metadata"]["name"].split("-")[-1][:-1]
    # every node of the plan is run by exactly one pod: leaders' node scripts plus the workers' index range
    nodes = []
    for doc in docs:
        t = doc["spec"]["leaderWorkerTemplate"]
        head = int(t["leaderTemplate"]["spec"]["containers"][0]["command"][-1].split("node")[-1].removesuffix(".sh"))
        nodes += range(head, head + t["size"])
    assert sorted(nodes) == list(range(plan.target.nodes))


def test_pd_lws_decode_instance_spans_its_own_nodes():
    """DeepSeek 2P1D: the decode instance is nodes 2-3; its worker runs node3.sh and resolves node 2's IP."""
    raw = compose_config(["+recipe=deepseek_r1_pd_2p1d"])
    raw.pop("hydra", None)
    spec = load_spec(raw)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/models/x")
    decode = list(yaml.safe_load_all(launch_scripts(plan)["lws.yaml"]))[-1]["spec"]["leaderWorkerTemplate"]
    assert decode["size"] == 2
    leader = decode["leaderTemplate"]["spec"]["containers"][0]
    worker = decode["workerTemplate"]["spec"]["containers"][0]
    assert leader["command"] == ["bash", "/ascendflow/launch/node2.sh"]
    assert leader["resources"]["limits"] == {"huawei.com/Ascend910": 16} and leader["ports"][0]["containerPort"] == 7100
    assert worker["command"] == ["bash", "-c", 'export ASCENDFLOW_NODE2_IP="${ASCENDFLOW_NODE2_IP:-$(getent hosts '
                                 '"$LWS_LEADER_ADDRESS" | awk \'{print $1; exit}\')}"; '
                                 "exec bash /ascendflow/launch/node$((LWS_WORKER_INDEX + 2)).sh"]
    ips = {e["name"]: e["valueFrom"] for e in worker["env"] if e["name"].endswith("_IP")}
    assert ips == {"ASCENDFLOW_NODE3_IP": {"fieldRef": {"fieldPath": "status.podIP"}}}
    assert {e["name"] for e in leader["env"] if e["name"].endswith("_IP")} == {"ASCENDFLOW_NODE2_IP"}
