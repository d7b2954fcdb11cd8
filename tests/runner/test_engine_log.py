"""Parsing of vLLM's start-up log lines (formats from vllm/v1/core/kv_cache_utils.py, gpu_model_runner.py)."""

from __future__ import annotations

from ascendflow.runner.bench import progress_from_log
from ascendflow.runner.engine_log import failure_cause, parse_engine_log

CPU_LINE = ("(EngineCore pid=4726) INFO 11-29 16:31:05 [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, "
            "Maximum concurrency for 2,048 tokens per request: 22.75x")
NPU_LINES = ("INFO [gpu_model_runner.py:5150] Model loading took 7.63 GiB memory and 12.500000 seconds\n"
             "INFO [kv_cache_utils.py:1100] NPU KV cache size: 182,784 tokens, Maximum concurrency for 4,096 tokens "
             "per request: 44.62x\n")


def test_cpu_kv_line():
    facts = parse_engine_log("noise\n" + CPU_LINE + "\nmore noise")
    assert facts == {"kv_cache_pool": "CPU", "reported_kv_cache_tokens": 46_592, "reported_max_model_len": 2048,
                     "reported_max_concurrency": 22.75}


def test_npu_kv_and_model_load_lines():
    facts = parse_engine_log(NPU_LINES)
    assert facts["reported_kv_cache_tokens"] == 182_784 and facts["kv_cache_pool"] == "NPU"
    assert facts["model_load_gib"] == 7.63 and facts["model_load_s"] == 12.5


def test_no_lines_no_facts():
    assert parse_engine_log("engine failed before allocating the KV cache") == {}


def test_benchmark_progress_is_the_last_tqdm_count():
    assert progress_from_log(" 12%|█▎        | 1/8 [00:02<00:14,  2.03s/it] 38%|███▊      | 3/8 [00:03<00:05") == (3, 8)
    assert progress_from_log("Starting main benchmark run...") is None


def test_failure_cause_skips_vllms_wrappers():
    log = "\n".join([
        "(Worker pid=4345) ERROR 11-29 16:29:25 [multiproc_executor.py:1063] ValueError: Available memory on node 0 "
        "(20.2/22.71 GiB) on kv cache allocation is less than requested memory for kv (27.94 GiB).",
        "(EngineCore pid=4253) ERROR [core.py:1510] RuntimeError: Worker failed with error 'x', please check the "
        "stack trace above for the root cause",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    assert failure_cause(log) == ("ValueError: Available memory on node 0 (20.2/22.71 GiB) on kv cache allocation "
                                  "is less than requested memory for kv (27.94 GiB).")
    assert failure_cause("OSError: [Errno 98] Address already in use") == "OSError: [Errno 98] Address already in use"
    assert failure_cause("all good") is None


def test_an_engine_failure_is_one_line_and_the_traceback_stays_in_the_log(tmp_path):
    # Issue 20 row 12c: 14 lines of the engine's traceback followed the error line.
    from ascendflow.runner.server import engine_failure

    log = tmp_path / "engine.log"
    log.write_text("(APIServer pid=7) INFO 12-02 01:00:00 [api_server.py:1] vLLM API server version 0.32.0\n"
                   "Traceback (most recent call last):\n"
                   '  File "/venv/lib/python3.11/site-packages/vllm/config/model.py", line 512, in __post_init__\n'
                   "    hf_config = get_config(self.hf_config_path or self.model, ...)\n"
                   "ValueError: Invalid repository ID or local directory specified: '/m'.\n")
    assert engine_failure("engine exited with code 1 before it was healthy", log) == (
        "engine exited with code 1 before it was healthy: ValueError: Invalid repository ID or local directory "
        f"specified: '/m'. (log: {log})")
    log.write_text("INFO starting\nthe last thing it said\n")  # no error line found: the log's last line, still one
    assert engine_failure("engine died", log) == f"engine died: the last thing it said (log: {log})"


def test_the_tail_under_an_engine_error_leaves_out_nanobind_s_teardown_report(tmp_path):
    """Issue 20 row 12h: vLLM's API server prints nanobind's leak report as it exits; the tail shows the log's
    last real lines instead."""
    from ascendflow.runner.engine_log import log_tail

    log = tmp_path / "engine.log"
    log.write_text("(APIServer pid=1) ERROR 12-02 01:42:30 [core_client.py:600] Engine core proc EngineCore died "
                   "unexpectedly, shutting down client.\n"
                   "nanobind: leaked 41 instances!\n - leaked instance 0x7f of type \"triton._C.libtriton.ir.context\"\n"
                   " - ... skipped remainder\nnanobind: leaked 514 functions!\n - leaked function \"create_erf\"\n"
                   " - ... skipped remainder\nnanobind: this is likely caused by a reference counting issue in the "
                   "binding code.\nSee https://nanobind.readthedocs.io/en/latest/refleaks.html\n")
    tail = log_tail(log)
    assert "nanobind" not in tail and tail.endswith("shutting down client."), tail


#: bench.log of vLLM 0.32.0's client whose server died mid-run (shape of ``vllm/benchmarks/serve.py`` ``benchmark``:
#: the failed requests' errors, then the result table closed by ``"=" * 50``, then nanobind's teardown report).
_DIED_BENCH_LOG = (
    "Starting main benchmark run...\nTraffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\n"
    "Maximum request concurrency: None\n"
    "\r  0%|          | 0/32 [00:00<?, ?it/s]\r 34%|###4      | 11/32 [00:04<00:08,  2.41it/s]"
    "\r100%|##########| 32/32 [00:05<00:00,  6.02it/s]\n"
    "Failed requests during benchmark run detected (capping to 10):\n"
    "Error 0: Traceback (most recent call last):\n"
    "  File \"/v/lib/python3.11/site-packages/aiohttp/client.py\", line 770, in _request\n"
    "    resp = await handler(req)\n"
    "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n\n"
    "Error 9: Service Unavailable\n"
    "tip: install termplotlib and gnuplot to plot the metrics\n"
    "============ Serving Benchmark Result ============\n"
    "Successful requests:                     11        \nFailed requests:                         21        \n"
    "Benchmark duration (s):                  5.31      \n"
    "---------------Time to First Token----------------\nMean TTFT (ms):                          795.26    \n"
    "==================================================\n"
    "nanobind: leaked 4 instances!\n - leaked instance 0x7fe155910428 of type \"triton._C.libtriton.ir.attribute\"\n"
    "See https://nanobind.readthedocs.io/en/latest/refleaks.html\n")


def test_the_cause_of_a_benchmark_death_is_the_client_s_last_message_not_a_separator(tmp_path):
    """New-user trial, defect 2: the cause was the result table's closing ``=====`` line; it is the last line that
    says something (no error class of the client's matches the engine's error search: a plain reason here)."""
    from ascendflow.runner.engine_log import last_message
    from ascendflow.runner.server import engine_failure

    assert last_message(_DIED_BENCH_LOG) == "Error 9: Service Unavailable"
    assert last_message("==========\n\n 50%|#####     | 1/2 [00:01<00:01]\n") is None
    log = tmp_path / "bench.log"
    log.write_text(_DIED_BENCH_LOG.replace("Error 0: Traceback", "Error 0: Tb").replace(
        "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected\n", ""))
    assert engine_failure("engine died during the benchmark (/health answered 503)", log) == (
        f"engine died during the benchmark (/health answered 503): Error 9: Service Unavailable (log: {log})")


def test_a_model_directory_gone_after_the_check_is_named_before_vllm_s_message(tmp_path):
    """Issue 25 row 12: vLLM takes a --model that is no directory for a hub repo id, so the one line said
    ``HFValidationError: Repo id must be …`` (or ``ValidationError … VllmConfig``), not that the path is gone."""
    from ascendflow.runner.server import engine_failure, gone_model_path

    log = tmp_path / "engine.log"
    log.write_text("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
                   f"'namespace/repo_name': '{tmp_path}/model'. Use `repo_type` argument if needed.\n")
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path / "model"), "--port", "1"]
    assert gone_model_path(argv) == str(tmp_path / "model")
    assert engine_failure("engine exited with code 1 before it was healthy", log, argv) == (
        f"engine exited with code 1 before it was healthy: the model directory {tmp_path}/model is gone: it was "
        "removed, moved or unmounted after the run checked it; put it back (or point model.path at a copy) and run "
        "again (vLLM: HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
        f"'{tmp_path}/model'. Use `repo_type` argument if needed.) (log: {log})")
    (tmp_path / "model").mkdir()  # present: vLLM's own message alone, as before
    assert engine_failure("engine died", log, argv) == (
        "engine died: HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
        f"'{tmp_path}/model'. Use `repo_type` argument if needed. (log: {log})")
    # A hub id is never taken for a missing path
    assert gone_model_path(["vllm", "--model", "HuggingFaceTB/SmolLM2-135M-Instruct"]) is None
    assert gone_model_path(["vllm", "--port", "1"]) is None


def test_an_exception_quoted_in_brackets_leaves_the_brackets_out():
    """Issue 25 row 10: the rehearsal's error line ended ``No module named 'vllm')`` — Python's own ``-m`` message
    for a missing module (the real interpreter's output here, for a module that exists nowhere)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-I", "-m", "vllm_absent_module.api_server"], capture_output=True,
                         text=True, timeout=60).stderr
    assert out.endswith(": Error while finding module specification for 'vllm_absent_module.api_server' "
                        "(ModuleNotFoundError: No module named 'vllm_absent_module')\n"), out
    assert failure_cause(out) == "ModuleNotFoundError: No module named 'vllm_absent_module'"
    assert failure_cause("ValueError: bad value (see x)") == "ValueError: bad value (see x)"  # balanced: kept


def test_a_killed_api_server_s_access_log_is_not_its_cause(tmp_path):
    """New-user trial of 2026-12-03, defect 3: ``kill -9`` of the API server mid-benchmark quoted its last access-log
    line (``INFO: 127.0.0.1:41496 - "GET /health HTTP/1.1" 200 OK``) as the cause."""
    from ascendflow.runner.engine_log import last_message
    from ascendflow.runner.server import engine_failure

    log = tmp_path / "engine.log"
    log.write_text('(APIServer pid=7) INFO 12-03 15:01:02 [launcher.py:195] Route: /metrics, Methods: GET\n'
                   '(APIServer pid=7) INFO:     127.0.0.1:41490 - "POST /v1/completions HTTP/1.1" 200 OK\n'
                   'INFO:     127.0.0.1:41496 - "GET /health HTTP/1.1" 200 OK\n')
    assert last_message(log.read_text()) is None  # INFO records say nothing about a death
    log.write_text(log.read_text() + "(APIServer pid=7) WARNING 12-03 15:01:03 [api.py:9] slow request\n")
    assert last_message(log.read_text()) == "(APIServer pid=7) WARNING 12-03 15:01:03 [api.py:9] slow request"
    log.write_text('INFO:     127.0.0.1:41496 - "GET /health HTTP/1.1" 200 OK\n')
    assert engine_failure("engine died during the benchmark (engine process was killed by SIGKILL (code -9))", log) == (
        f"engine died during the benchmark (engine process was killed by SIGKILL (code -9)) (log: {log})")
