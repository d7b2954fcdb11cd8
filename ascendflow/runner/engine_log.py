"""Facts parsed from the engine's log: the KV capacity vLLM reports, model load size and time."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ascendflow.runner.engine_facts import parse_engine_facts

#: Formats of the model-loading line that :func:`parse_engine_log` reports as ``model_load_gib`` (see log_formats).
_LOAD_FORMATS = ("vllm_model_loading", "ascend_loading_weights")


def parse_engine_log(text: str) -> dict[str, Any]:
    """Extract the facts vLLM logs at start-up (every format of :mod:`ascendflow.runner.log_formats`).

    Returns:
        ``reported_kv_cache_tokens`` (int), ``reported_max_concurrency`` (float, requests of ``max_model_len``),
        ``reported_max_model_len`` (int), ``kv_cache_pool`` (``CPU``/``GPU``/``NPU``), ``model_load_gib`` and
        ``model_load_s`` — each only when its line is present. Several KV lines (one per worker before vLLM takes
        the minimum) report the minimum, as the engine does.
    """
    items = parse_engine_facts(text)
    facts: dict[str, Any] = {}
    if (tokens := items.items.get("kv_cache_tokens")) is not None:
        facts.update(kv_cache_pool=items.text.get("kv_cache_pool"), reported_kv_cache_tokens=int(tokens.value))
    if (concurrency := items.items.get("max_concurrency")) is not None:
        facts.update(reported_max_model_len=int(items.items["max_model_len"].value),
                     reported_max_concurrency=concurrency.value)
    if (weights := items.items.get("weights_bytes")) is not None and weights.format in _LOAD_FORMATS:
        facts["model_load_gib"] = weights.logged
    if (load := items.items.get("load_s")) is not None:
        facts["model_load_s"] = load.value
    return facts


def parse_engine_log_file(path: Path) -> dict[str, Any]:
    """:func:`parse_engine_log` on a file (empty dict when it does not exist)."""
    return parse_engine_log(path.read_text(errors="replace")) if path.exists() else {}


#: Exception lines in a log: ``ValueError: ...`` (with an optional ``(Worker pid=N) ERROR ... [file:line]`` prefix).
_EXCEPTION = re.compile(r"\b((?:[A-Z]\w*)?(?:Error|Exception)): (.+)$")
#: Wrapper errors that only point back at the real cause.
_GENERIC = ("Engine core initialization failed", "Worker failed with error", "please check the stack trace")


#: A process of the engine killed by a signal. vllm/v1/engine/utils.py (0.32.0) ``wait_for_engine_startup``:
#: "Failed core proc(s): {'EngineCore_DP0': -9}" (multiprocessing exit codes: -N = signal N).
_CORE_KILLED = re.compile(r"Failed core proc\(s\): \{'([^']+)': (-\d+)")
#: The same message with no failed process recorded: the core vanished before reporting (measured here: a core
#: SIGKILLed during start-up logs "Failed core proc(s): {}" and no other exception).
_CORE_VANISHED = "Failed core proc(s): {}"
#: vllm/v1/engine/core_client.py (0.32.0) ``MPClient`` liveness monitor, once the engine runs.
_CORE_GONE = "engine core exited unexpectedly"
#: vLLM's wrapper for a dead engine (vllm/v1/engine/exceptions.py ``EngineDeadError``): points back at the cause.
_GENERIC_DEAD = ("EngineCore encountered an issue",
                 # vllm/utils/system_utils.py set_ulimit's warning quotes an OSError it did not hit
                 "Consider increasing with ulimit")


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def death_cause(text: str) -> str | None:
    """Why the engine core died, when the log says it was killed by a signal or vanished while running (``None``
    otherwise; a core that vanished during start-up is :func:`failure_cause`'s last resort, because vLLM logs the same
    "Failed core proc(s): {}" after a real exception too)."""
    if m := _CORE_KILLED.search(text):
        return (f"engine core process {m.group(1)} was killed by {_signal_name(-int(m.group(2)))} (out-of-memory "
                f"killer, or a person)")
    if _CORE_GONE in text:
        return ("the engine core process exited unexpectedly (vLLM: \"engine core exited unexpectedly\"; killed, or "
                "out of memory)")
    return None


def _balanced(cause: str) -> str:
    """``cause`` without the closing brackets of text around it: an exception quoted inside brackets, as Python's
    ``-m`` prints a missing module (``python: Error while finding module specification for 'vllm.x'
    (ModuleNotFoundError: No module named 'vllm')``), is matched up to the line's end (issue 25 row 10: the
    rehearsal's error line ended ``No module named 'vllm')``)."""
    while cause.endswith(")") and cause.count(")") > cause.count("("):
        cause = cause[:-1].rstrip()
    return cause


def failure_cause(text: str) -> str | None:
    """Why the engine failed: a killed or vanished engine core (:func:`death_cause`), else the first specific
    exception in the log (``ValueError: Available memory on node 0 ...``), skipping vLLM's wrappers ("Engine core
    initialization failed", "EngineCore encountered an issue"...), else a core that vanished during start-up;
    ``None`` when there is none."""
    if cause := death_cause(text):
        return cause
    for line in text.splitlines():
        m = _EXCEPTION.search(line)
        if m and not any(g in m.group(2) for g in (*_GENERIC, *_GENERIC_DEAD)):
            return _balanced(f"{m.group(1)}: {m.group(2).strip()}")
    for line in reversed(text.splitlines()):
        if ("Address already in use" in line or "OSError" in line) and not any(g in line for g in _GENERIC_DEAD):
            return line.strip()
    if _CORE_VANISHED in text:
        return ("the engine core process died during start-up without reporting an error (vLLM: \"Failed core "
                "proc(s): {}\"; killed, or out of memory)")
    return None


#: The report nanobind prints when an interpreter that loaded one of its extensions (Triton's) tears down without
#: freeing everything: ``nanobind: leaked 514 functions!``, `` - leaked function "create_erf"``, `` - ... skipped
#: remainder``, ``See https://nanobind.readthedocs.io/...``. vLLM's API server prints it as it exits; it says
#: nothing about why the engine died, and it filled the 15-line tail under the error line (issue 20, row 12h).
_TEARDOWN_NOISE = re.compile(r"^\s*(nanobind: |- leaked |- \.\.\. skipped remainder|See https://nanobind\.)")


#: Lines of a log that say nothing about a failure: blank, separators (``=====``, ``-----Time to First Token-----``),
#: tqdm progress (``50%|####| 16/32 [00:05<...]``) and vLLM's client's plotting tip
#: (``vllm/benchmarks/serve.py`` ``benchmark``, vLLM 0.32.0).
_NOT_A_MESSAGE = re.compile(r"^\s*$|^\s*[=\-]+[^=\-]*[=\-]+\s*$|^[=\-]+$|\d+/\d+ \[|^tip: ")
#: The opening line of the result table vLLM's benchmark client prints (``"{s:{c}^{n}}".format(s=" Serving Benchmark
#: Result ", n=50, c="=")``, ``vllm/benchmarks/serve.py`` ``benchmark``, vLLM 0.32.0); it ends with ``"=" * 50``.
_RESULT_TABLE = re.compile(r"^=+ Serving Benchmark Result =+$")
#: Log records below WARNING: uvicorn's access log, which vLLM's API server writes for every request
#: (``INFO:     127.0.0.1:41496 - "GET /health HTTP/1.1" 200 OK``), and vLLM's own INFO/DEBUG records
#: (``(APIServer pid=7) INFO 12-03 15:01:02 [launcher.py:195] Route: ...``, vllm/logger.py's format). They are the
#: last lines of an API server killed by a signal, never its cause (new-user trial of 2026-12-03: an access-log line
#: was quoted as the cause of a SIGKILLed server).
_INFO_RECORD = re.compile(r'\b(INFO|DEBUG)(:\s| \d\d-\d\d \d\d:\d\d:\d\d)')


def last_message(text: str) -> str | None:
    """The last line of a log that says something (at most 300 characters), or ``None``: blank lines, separators,
    progress bars, nanobind's teardown report, INFO/DEBUG log records (uvicorn's access log, vLLM's INFO lines) and vLLM's benchmark result table (its rows are
    figures, not a cause) are skipped."""
    kept: list[str] = []
    in_table = False
    for line in text.splitlines():
        stripped = line.strip()
        if _RESULT_TABLE.match(stripped):
            in_table = True
        elif in_table and re.fullmatch(r"=+", stripped):
            in_table = False
        elif (not in_table and not _NOT_A_MESSAGE.search(line) and not _TEARDOWN_NOISE.match(line)
              and not _INFO_RECORD.search(line)):
            kept.append(stripped)
    return kept[-1][:300] if kept else None


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, for error messages, without nanobind's teardown leak report."""
    if not path.exists():
        return ""
    kept = [ln for ln in path.read_text(errors="replace").splitlines() if not _TEARDOWN_NOISE.match(ln)]
    return "\n".join(kept[-lines:])
