"""A measurement taken on a shared host says so (issue 25, row 9): the host window sees real busy processes outside
the run and real vLLM-titled engine processes of another user, and a contended run's summary, tags and record mark
its prediction error not comparable. Real processes, real ``/proc``; no engine."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ascendflow.perfmodel.attach import with_performance
from ascendflow.report import result_record, summary_rows
from ascendflow.runner.contention import (
    OTHER_CPU_FRACTION,
    HostWindow,
    OtherEngine,
    OtherProcess,
    contention_tags,
    findings,
    is_vllm_engine,
    other_engines,
    verdict,
)
from ascendflow.runner.neighbours import concurrency_warning, other_engine_runs
from ascendflow.runner.server import RUN_DIR_ENV
from tests.conftest import plan_for

REPO = Path(__file__).resolve().parents[2]
BUSY = [sys.executable, "-c", "while True: pass"]
#: A busy loop any user can run (root's Python lives under /root, mode 0700 here).
SH_BUSY = ["/bin/sh", "-c", "while :; do :; done"]
SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
AS_ROOT = os.geteuid() == 0


def _nobody() -> dict:
    """Popen arguments that start a process as the user ``nobody`` (root only)."""
    entry = pwd.getpwnam("nobody")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "cwd": "/"}


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        p.kill()
        p.wait()


def test_a_busy_process_outside_the_run_makes_the_window_contended_and_is_named():
    run_root = subprocess.Popen(SLEEP)  # the measured run's tree: one sleeping process
    busy = subprocess.Popen(SH_BUSY, **(_nobody() if AS_ROOT else {}))  # another user's busy loop, outside that tree
    try:
        time.sleep(0.3)
        window = HostWindow(root_pid=run_root.pid)
        window.before()
        window.begin()
        time.sleep(2.0)
        c = window.end(top=1000)
    finally:
        _stop(busy, run_root)
    (mine,) = [p for p in c.top_others if p.pid == busy.pid]
    assert mine.name == "sh"
    assert mine.user == ("nobody" if AS_ROOT else pwd.getpwuid(os.geteuid()).pw_name)
    assert mine.cores >= 0.2, c  # a spinning loop on 2 shared cores (load 5 here): at least 0.2 of one
    assert c.contended and c.other_cpu_cores >= mine.cores - 0.05
    assert c.reasons[0] == (f"other processes used {c.other_cpu_cores:.2f} of {c.cores} cores (limit "
                            f"{OTHER_CPU_FRACTION * c.cores:.2f}, OTHER_CPU_FRACTION={OTHER_CPU_FRACTION})")
    assert c.cores == psutil.cpu_count() and 1.9 <= c.window_s <= 10 and c.load_before is not None


def test_the_run_s_own_busy_child_is_not_counted_as_another_s():
    """The same busy loop, measured over the same seconds by two windows: rooted at this process (the loop is the
    run's own child, as the engine and the benchmark client are) and rooted at a sleeper (the loop is another's)."""
    sleeper = subprocess.Popen(SLEEP)
    busy = subprocess.Popen(BUSY)
    try:
        time.sleep(0.3)
        own, foreign = HostWindow(), HostWindow(root_pid=sleeper.pid)
        own.begin()
        foreign.begin()
        time.sleep(2.0)
        c_foreign = foreign.end(top=1000)
        c_own = own.end(top=1000)
    finally:
        _stop(busy, sleeper)
    assert busy.pid not in [p.pid for p in c_own.top_others] and busy.pid in c_own.own_pids
    assert busy.pid not in c_foreign.own_pids and sleeper.pid in c_foreign.own_pids
    (loop,) = [p for p in c_foreign.top_others if p.pid == busy.pid]
    # What the own window leaves out is at least the loop's CPU (plus this test process's own, a few hundredths).
    assert c_foreign.other_cpu_cores - c_own.other_cpu_cores >= loop.cores - 0.05, (c_own, c_foreign)


def _fake_vllm_server(tmp: Path, run_dir: Path) -> subprocess.Popen:
    """A real process started exactly as ascendflow starts an engine (``python -m vllm.entrypoints.openai.api_server
    --model M``, ``ASCENDFLOW_RUN_DIR`` set) from a stand-in module that starts a child titled as vLLM titles its
    engine core (``VLLM::EngineCore``, setproctitle) and sleeps; it prints the child's pid once the title is set."""
    pkg = tmp / "fake" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(
        "import subprocess, sys, time\n"
        "core = subprocess.Popen([sys.executable, '-c', 'import setproctitle, time; "
        "setproctitle.setproctitle(\"VLLM::EngineCore\"); print(\"titled\", flush=True); time.sleep(120)'], "
        "stdout=subprocess.PIPE, text=True)\n"
        "core.stdout.readline()\n"
        "print(core.pid, flush=True)\n"
        "time.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp / "fake"), RUN_DIR_ENV: str(run_dir)}
    return subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], env=env,
                            stdout=subprocess.PIPE, text=True)


def test_a_vllm_engine_is_one_engine_with_its_core_and_the_run_s_own_is_left_out(tmp_path):
    server = _fake_vllm_server(tmp_path, tmp_path / "other_run")
    try:
        core_pid = int(server.stdout.readline())
        assert psutil.Process(core_pid).cmdline()[0] == "VLLM::EngineCore"
        seen = other_engines(exclude=set())  # as another run sees it (nothing of it is that run's)
        own = other_engines(exclude={os.getpid(), server.pid, core_pid})  # as the run that started it sees it
    finally:
        for p in psutil.Process(server.pid).children(recursive=True):
            p.kill()
        _stop(server)
    user = pwd.getpwuid(os.geteuid()).pw_name
    assert [e for e in seen if e.pid in (server.pid, core_pid)] == [OtherEngine(
        server.pid, user, "vllm.entrypoints.openai.api_server")]
    assert [e for e in own if e.pid in (server.pid, core_pid)] == []
    assert [is_vllm_engine(a) for a in (["vllm", "serve", "m"], ["/x/bin/vllm", "serve"], ["VLLM::Worker_TP0"],
                                         ["python", "-m", "vllm.entrypoints.cli.main", "bench", "serve"],
                                         ["python", "-m", "ascendflow.runner.bench", "--model", "m"], [])] == \
        [True, True, True, False, False, False]


@pytest.mark.skipif(not AS_ROOT, reason="needs root to start processes as another user")
def test_another_user_s_engine_is_seen_where_concurrent_engines_was_blind(tmp_path):
    """The causes of the row: ``concurrent_engines`` reads ``ASCENDFLOW_RUN_DIR`` from ``/proc/<pid>/environ``, which
    only the owner may read, and which an engine not started by ascendflow does not carry; the command line and
    vLLM's process title are readable by every user."""
    server = _fake_vllm_server(tmp_path, tmp_path / "root_s_run")
    # nobody's engine core: a real process of another user, titled as vLLM titles it, no ASCENDFLOW_RUN_DIR.
    core = subprocess.Popen(["/bin/bash", "-c", "exec -a VLLM::EngineCore sleep 120"],
                            env={"PATH": "/usr/bin:/bin"}, **_nobody())
    try:
        core_pid = int(server.stdout.readline())
        time.sleep(0.2)  # bash has exec'd
        engines = other_engines(exclude=set())
        runs = other_engine_runs(Path("/nowhere"))
        as_nobody = {part: subprocess.run(["/bin/cat", f"/proc/{server.pid}/{part}"], capture_output=True,
                                          timeout=10, **_nobody()) for part in ("environ", "cmdline")}
    finally:
        for p in psutil.Process(server.pid).children(recursive=True):
            p.kill()
        _stop(server, core)
    assert [(e.pid, e.user, e.kind) for e in engines if e.pid in (server.pid, core_pid, core.pid)] == sorted(
        [(server.pid, "root", "vllm.entrypoints.openai.api_server"), (core.pid, "nobody", "VLLM::EngineCore")])
    assert str(tmp_path / "root_s_run") in runs  # the old check sees ascendflow's own runs only, by run directory
    assert as_nobody["environ"].returncode != 0 and b"Permission denied" in as_nobody["environ"].stderr
    assert b"vllm.entrypoints.openai.api_server" in as_nobody["cmdline"].stdout


def _predicted_plan():
    """The main job's plan on a fixed-length workload with its performance section, as the job prices it."""
    spec, plan = plan_for(["workload=random"])
    return with_performance(plan, spec, None, Path.cwd())


def _contended():
    return verdict(cores=2, window_s=41.2, other_cpu_cores=1.104, steal_cores=0.0, host_busy_percent=100.0,
                   load_before=2.04, load_end=3.12,
                   engines=[OtherEngine(4242, "alice", "vllm serve"),
                            OtherEngine(5151, "root", "vllm.entrypoints.openai.api_server")],
                   top_others=[OtherProcess(4243, "VLLM::EngineCore", "alice", 0.61)])


def test_a_contended_run_s_line_tags_record_and_summary_mark_the_prediction_error_not_comparable(tmp_path):
    c = _contended()
    figures = ("load 3.1 on 2 cores (2.0 before the engine started), other processes used 1.10 of 2 cores over 41 s "
               "(pid 4243 VLLM::EngineCore alice 0.61), 2 other vLLM engine(s) (pids 4242 alice, 5151 root)")
    assert c.contended and c.reasons == [
        "other processes used 1.10 of 2 cores (limit 0.20, OTHER_CPU_FRACTION=0.1)",
        "2 other vLLM engine(s) on the host (pids 4242, 5151)"]
    assert c.line() == (f"measured under contention: {figures}; prediction error not comparable (MLflow tag "
                        "measurement.contention=true; perfmodel.fit leaves this run out)")
    section = c.to_json()
    assert contention_tags(section, has_prediction_error=True) == {
        "measurement.contention": "true",
        "measurement.contention_reason": "; ".join(c.reasons) + " — " + figures,
        "prediction_error.comparable": "false"}

    plan = _predicted_plan()
    pred = plan.performance["predicted"]
    benchmark = {"completed": 16, "failed": 0, "output_throughput": pred["output_throughput"] / 11.39,
                 "median_tpot_ms": pred["median_tpot_ms"] * 4, "median_ttft_ms": pred["median_ttft_ms"] * 9}
    outcome = {"benchmark": benchmark, "engine": {"reported_kv_cache_tokens": plan.kv_cache.tokens},
               "contention": section}
    record = result_record(plan, outcome)
    m = record["metrics"]
    assert sorted(k for k in m if "rel_error" in k) == [
        "kv_cache_tokens_rel_error",  # memory: not moved by contention, still compared
        "median_tpot_ms_rel_error_contended", "median_ttft_ms_rel_error_contended",
        "output_throughput_rel_error_contended"]
    assert round(100 * m["output_throughput_rel_error_contended"]) == 1039  # the raw figure, kept
    assert {k: v for k, v in m.items() if k.startswith("host.")} == {
        "host.other_cpu_cores": 1.104, "host.busy_percent": 100.0, "host.load1_end": 3.12, "host.cores": 2.0,
        "host.other_engines": 2.0, "host.load1_before": 2.04}
    assert record["contention"]["contended"] is True and record["contention"]["line"] == c.line()
    rows = summary_rows(plan, record, {"plan": tmp_path / "plan.json"})
    assert rows["host (benchmark)"] == f"{figures} — contended: prediction error not comparable"
    assert rows["perf model"] == (f"predicted {pred['output_throughput']:,.0f} tok/s, TPOT median "
                                  f"{pred['median_tpot_ms']:,.1f} ms, TTFT median {pred['median_ttft_ms']:,.0f} ms "
                                  f"({plan.performance['source']}) — not compared: measured under contention")
    assert "%" not in rows["perf model"]


def test_a_quiet_run_keeps_its_prediction_error(tmp_path):
    quiet = verdict(cores=2, window_s=40.0, other_cpu_cores=0.03, steal_cores=0.0, host_busy_percent=71.5,
                    load_before=0.4, load_end=1.9, engines=[], top_others=[])
    assert not quiet.contended and quiet.reasons == []
    assert contention_tags(quiet.to_json(), has_prediction_error=True) == {"measurement.contention": "false"}
    plan = _predicted_plan()
    pred = plan.performance["predicted"]
    record = result_record(plan, {"benchmark": {"completed": 4, "output_throughput": pred["output_throughput"] / 2},
                                  "contention": quiet.to_json()})
    assert record["metrics"]["output_throughput_rel_error"] == 1.0
    rows = summary_rows(plan, record, {"plan": tmp_path / "plan.json"})
    assert rows["host (benchmark)"] == ("load 1.9 on 2 cores (0.4 before the engine started), other processes used "
                                        "0.03 of 2 cores over 40 s — not contended")
    assert rows["perf model"] == f"predicted {pred['output_throughput']:.0f} tok/s (+100 %)"


def test_compare_flags_a_contended_run_and_fit_leaves_it_out(tmp_path, mlflow_uri):
    """Two sweep jobs recorded as the job records them (its tags and ``result.json`` metrics) in a real SQLite
    store: ``ascendflow.compare`` flags the contended one and shows no model error for it; ``perfmodel.fit``'s reader
    leaves it out with the reason."""
    from mlflow.tracking import MlflowClient

    from ascendflow.compare import compare
    from ascendflow.perfmodel.fit import read_rows

    plan = _predicted_plan()
    pred = plan.performance["predicted"]
    client = MlflowClient(tracking_uri=mlflow_uri)
    exp = client.create_experiment("shared-host", artifact_location=(tmp_path / "artifacts").as_uri())
    parent = client.create_run(exp, tags={"ascendflow.sweep": "parent", "sweep.keys": "engine.max_num_seqs"})
    (tmp_path / "plan.json").write_text(plan.to_json())
    ids = {}
    for name, c in (("engine.max_num_seqs=8", verdict(2, 40.0, 0.03, 0.0, 70.0, 0.4, 1.9, [], [])),
                    ("engine.max_num_seqs=16", _contended())):
        run = client.create_run(exp, run_name=name, tags={"mlflow.parentRunId": parent.info.run_id})
        ids[name] = run.info.run_id
        outcome = {"benchmark": {"completed": 8, "output_throughput": pred["output_throughput"] / 2},
                   "contention": c.to_json()}
        for k, v in result_record(plan, outcome)["metrics"].items():
            client.log_metric(run.info.run_id, k, v)
        client.log_param(run.info.run_id, "engine.max_num_seqs", name.split("=")[1])
        for k, v in contention_tags(c.to_json(), True).items():
            client.set_tag(run.info.run_id, k, v)
        client.log_artifact(run.info.run_id, str(tmp_path / "plan.json"))
        client.set_terminated(run.info.run_id, "FINISHED")
    client.set_terminated(parent.info.run_id, "FINISHED")

    table, _, _ = compare(None, mlflow_uri, tmp_path / "cmp")
    assert table[["run", "contended"]].values.tolist() == [["engine.max_num_seqs=8", False],
                                                           ["engine.max_num_seqs=16", True]]
    errors = table["output_throughput_rel_error"].tolist()
    assert errors[0] == 1.0 and errors[1] != errors[1]  # NaN: the contended run logged no model error

    _, skipped = read_rows(mlflow_uri, "shared-host", None)
    reason = client.get_run(ids["engine.max_num_seqs=16"]).data.tags["measurement.contention_reason"]
    assert f"{ids['engine.max_num_seqs=16']}: measured under contention (measurement.contention: {reason})" in skipped
    assert not any(s.startswith(ids["engine.max_num_seqs=8"] + ": measured under contention") for s in skipped)


def test_a_contended_capacity_search_keeps_its_capacity_and_marks_its_error(tmp_path):
    spec, plan = plan_for(["workload=random", "run.mode=capacity"])
    plan = with_performance(plan, spec, None, Path.cwd())
    predicted = plan.performance["capacity"]["capacity_rps"]
    capacity = {"capacity_rps": predicted / 4, "capacity_load": 2.0, "capacity_rps_per_device": predicted / 4,
                "capacity_goodput_rps": predicted / 4, "slo_met": True, "capacity_at_range_max": False,
                "load_points": 3, "variable": "max_concurrency", "targets": {"p99_ttft_ms": 2000.0}}
    outcome = {"benchmark": {"completed": 8, "output_throughput": 20.0}, "capacity": capacity,
               "contention": _contended().to_json()}
    record = result_record(plan, outcome)
    m = record["metrics"]
    assert "capacity_rps_rel_error" not in m and m["capacity_rps_rel_error_contended"] == 3.0
    rows = summary_rows(plan, record, {"plan": tmp_path / "plan.json"})
    assert rows["perf model"] == (f"predicted capacity {predicted:.2f} req/s at the SLO — not compared: measured "
                                  "under contention")
    assert rows["capacity at SLO"].startswith(f"{predicted / 4:.2f} req/s at max_concurrency=2")


def test_findings_give_a_served_run_its_tags_and_warnings():
    """What serve and capacity mode add to the run: ``concurrent_engines`` counts whichever sees more (ascendflow run
    directories, or any user's vLLM engines), then the contention tags and line."""
    c = _contended().to_json()
    tags, warnings = findings({"concurrent_engines": ["/runs/a"], "contention": c}, has_prediction_error=True)
    assert tags == {"concurrent_engines": "2", **contention_tags(c, True)}
    assert warnings == [concurrency_warning({"/runs/a"}), c["line"]]
    quiet = verdict(2, 40.0, 0.03, 0.0, 70.0, 0.4, 1.9, [], []).to_json()
    assert findings({"concurrent_engines": [], "contention": quiet}, True) == ({"measurement.contention": "false"}, [])
    assert findings({}, True) == ({}, [])  # a run that was not judged (offline, attach)
