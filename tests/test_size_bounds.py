"""Issue 25 row 1: every size a user types is bounded, and the prediction's cost does not grow past what it needs.

Before: ``workload.num_prompts=100000000000`` in plan mode never returned (``perfmodel/predict.py`` built one list
entry per prompt: 11 GB after 10 minutes and growing); ``-m engine.max_num_seqs='range(1,1000000000)'`` had Hydra list
a billion jobs; ``model.architecture.num_hidden_layers=100000000000`` walked the layers for minutes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from ascendflow.compiler import compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.perfmodel.attach import with_performance
from ascendflow.perfmodel.predict import SIMULATED_REQUESTS
from ascendflow.schema import ConfigError, RunSpec, load_spec
from tests.conftest import REPO, compose_config, run_ascendflow

#: (override, the one line it gives): each size past its bound, as a user types it on the command line.
REFUSED = [
    ("workload.num_prompts=1e11", "workload.num_prompts=100000000000.0: Input should be less than or equal to "
                                  "1000000; set workload.num_prompts to 1000000 or less"),
    ("workload.max_concurrency=2000000", "workload.max_concurrency=2000000: Input should be less than or equal to "
                                         "1000000; set workload.max_concurrency to 1000000 or less"),
    ("workload=rag workload.num_prefixes=1e7", "workload.num_prefixes=10000000.0: Input should be less than or equal to 1000000; "
                                  "set workload.num_prefixes to 1000000 or less"),
    ("workload=random workload.random_input_len=16777217", "workload.random_input_len=16777217: Input should be less than or equal "
                                           "to 16777216; set workload.random_input_len to 16777216 or less"),
    ("workload=random workload.random_output_len=1e9", "workload.random_output_len=1000000000.0: Input should be less than or equal "
                                       "to 16777216; set workload.random_output_len to 16777216 or less"),
    ("workload=rag workload.prefix_suffix_len=1e9", "workload.prefix_suffix_len=1000000000.0: Input should be less than or equal "
                                       "to 16777216; set workload.prefix_suffix_len to 16777216 or less"),
    ("workload.max_output_tokens=1e9", "workload.max_output_tokens=1000000000.0: Input should be less than or equal "
                                       "to 16777216; set workload.max_output_tokens to 16777216 or less"),
    ("workload.request_rate=0.0001", "workload.request_rate=0.0001: Input should be greater than or equal to 0.001; "
                                     "set workload.request_rate to 0.001 or more"),
    ("workload.seed=1e10", "workload.seed=10000000000.0: Input should be less than or equal to 4294967295; set "
                           "workload.seed to 4294967295 or less"),
    ("engine.max_model_len=1e9", "engine.max_model_len=1000000000.0: Input should be less than or equal to 16777216; "
                                 "set engine.max_model_len to 16777216 or less"),
    ("engine.max_num_batched_tokens=1e9", "engine.max_num_batched_tokens=1000000000.0: Input should be less than or "
                                          "equal to 16777216; set engine.max_num_batched_tokens to 16777216 or less"),
    ("engine.max_num_seqs=65537", "engine.max_num_seqs=65537: Input should be less than or equal to 65536; set "
                                  "engine.max_num_seqs to 65536 or less"),
    ("engine.num_speculative_tokens=1000", "engine.num_speculative_tokens=1000: Input should be less than or equal "
                                           "to 64; set engine.num_speculative_tokens to 64 or less"),
    ("slo.max_load=1e11", "slo.max_load=100000000000.0: Input should be less than or equal to 1000000; set "
                          "slo.max_load to 1000000 or less"),
    ("slo.min_load=1e-9", "slo.min_load=1e-09: Input should be greater than or equal to 0.001; set slo.min_load to "
                          "0.001 or more"),
    ("slo.measure_top=1e11", "slo.measure_top=100000000000.0: Input should be less than or equal to 1000000; set "
                             "slo.measure_top to 1000000 or less"),
    ("parallel.nodes=1e9", "parallel.nodes=1000000000.0: Input should be less than or equal to 1024; set "
                           "parallel.nodes to 1024 or less"),
    ("parallel.data_parallel_size=1e9", "parallel.data_parallel_size=1000000000.0: Input should be less than or "
                                        "equal to 4096; set parallel.data_parallel_size to 4096 or less"),
    ("pd.decode.instances=1e9", "pd.decode.instances=1000000000.0: Input should be less than or equal to 4096; set "
                                "pd.decode.instances to 4096 or less"),
    ("graph.max_cudagraph_capture_size=1e9", "graph.max_cudagraph_capture_size=1000000000.0: Input should be less "
                                             "than or equal to 16777216; set graph.max_cudagraph_capture_size to 16777216 "
                                             "or less"),
    ("run.health_timeout_s=1e300", "run.health_timeout_s=1e+300: Input should be less than or equal to 604800; set "
                                   "run.health_timeout_s to 604800 or less"),
]


def _spec(*overrides: str) -> RunSpec:
    raw = compose_config(list(overrides))
    raw.pop("hydra", None)
    return load_spec(raw)


@pytest.mark.parametrize("override,line", REFUSED, ids=[o for o, _ in REFUSED])
def test_a_size_past_its_bound_is_one_line_naming_key_value_rule_and_fix(override, line):
    with pytest.raises(ConfigError) as err:
        _spec("slo=default", *override.split())
    assert str(err.value) == line


def _numeric_fields(model: type[BaseModel], prefix: str, seen: set) -> list[tuple[str, object]]:
    out = []
    for name, field in model.model_fields.items():
        args = typing.get_args(field.annotation) or (field.annotation,)
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel) and arg not in seen:
                seen.add(arg)
                out += _numeric_fields(arg, f"{prefix}{name}.", seen)
        if any(a in (int, float) for a in args):
            out.append((prefix + name, field))
    return out


def test_every_number_a_user_can_type_has_an_upper_bound():
    """A key added later without a bound fails here: the schema walk finds every int and float field of the run's
    config. ``workload.request_rate`` alone is open above: ``inf`` (all requests at once) is its default, and any
    rate costs the same to simulate."""
    fields = _numeric_fields(RunSpec, "", set())
    unbounded = [key for key, field in fields
                 if not any(hasattr(m, "le") or hasattr(m, "lt") for m in field.metadata)]
    assert unbounded == ["workload.request_rate"]
    assert len(fields) > 60  # the walk reached the nested sections (pd roles, hardware, ascend, slo)


def _performance(*overrides: str) -> dict:
    spec = _spec("workload=random", *overrides)
    plan = compile_plan(spec, resolve_model(spec.model, need_weights=False).architecture, model_path="/models/x")
    return with_performance(plan, spec, None, Path.cwd()).performance


def test_a_million_prompts_predict_from_the_first_simulated_ones_in_bounded_time_and_memory():
    """The bound itself (10^6 prompts) costs what 2,048 cost: the same figures, the same simulation."""
    timings, peaks, perf = [], [], {}
    for n in (SIMULATED_REQUESTS, 1_000_000):
        tracemalloc.start()
        start = time.perf_counter()
        perf[n] = _performance("+recipe=qwen3_32b_w8a8", f"workload.num_prompts={n}")
        timings.append(time.perf_counter() - start)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert perf[1_000_000]["predicted"] == perf[SIMULATED_REQUESTS]["predicted"]
    assert perf[1_000_000]["simulated_requests"] == perf[SIMULATED_REQUESTS]["simulated_requests"] == 2048
    assert perf[1_000_000]["simulated_steps"] == perf[SIMULATED_REQUESTS]["simulated_steps"]
    assert perf[1_000_000]["simulated_requests_note"] == (
        "the first 2048 of 1000000 requests simulated: throughput and TPOT are those of a full batch; with every "
        "request sent at once, the TTFT of the later ones (queued behind the first 2048) is not included")
    assert "simulated_requests_note" not in perf[SIMULATED_REQUESTS]
    assert timings[1] < 3 * timings[0] + 1.0, timings
    assert peaks[1] < 2 * peaks[0] + 20e6, peaks


#: Runs a command and prints its exit status, wall time (s) and peak RSS (KiB, ``ru_maxrss`` of its children).
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.monotonic()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "wall_s": time.monotonic() - start, "stderr": proc.stderr,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _measured(args: list[str], cwd: Path) -> dict:
    import os

    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("HYDRA_FULL_ERROR", None)
    out = subprocess.run([sys.executable, "-c", _MEASURE, sys.executable, "-m", "ascendflow", *args], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout)


def test_plan_mode_at_the_prompt_bound_answers_in_seconds_and_past_it_in_one_line(tmp_path):
    """The issue's command: at the bound a plan in seconds and under 1 GiB; past it one line, exit 2."""
    done = _measured(["run.mode=plan", "tracking=none", "workload.num_prompts=1000000"], tmp_path)
    assert done["rc"] == 0, done["stderr"][-2000:]
    assert done["wall_s"] < 90, done  # ~7 s on an idle 2-core machine; before: never returned
    assert done["maxrss_kib"] < 1024 * 1024, done  # ~110 MiB measured; before: 11 GB and growing
    plan = json.loads(next(tmp_path.glob("outputs/runs/*/*/plan.json")).read_text())
    assert plan["performance"]["simulated_requests"] == 2048
    assert plan["performance"]["status"] == "estimate"
    refused = _measured(["run.mode=plan", "tracking=none", "workload.num_prompts=100000000000"], tmp_path)
    assert refused["rc"] == 2
    assert refused["stderr"].strip().splitlines() == [
        "error: workload.num_prompts=100000000000: Input should be less than or equal to 1000000; set "
        "workload.num_prompts to 1000000 or less"]
    assert refused["wall_s"] < 60


def test_a_sweep_of_too_many_jobs_and_too_many_optuna_trials_are_one_line_before_any_job(tmp_path):
    res = run_ascendflow(["-m", "run.mode=plan", "tracking=none", "engine.max_num_seqs=range(1,1000000000)"],
                         tmp_path, timeout=300)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "error: engine.max_num_seqs='range(1,1000000000)': the swept values make 999999999 jobs, more than the "
        "10000 one sweep may run; sweep fewer values (a coarser range() step), or split the sweep")
    assert not list(tmp_path.glob("outputs/multirun/*/*/0"))  # no job ran
    res = run_ascendflow(["-m", "+sweep=tune_throughput", "run.mode=serve", "tracking=none",
                          "hydra.sweeper.n_trials=1000000000"], tmp_path, timeout=300)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "error: hydra.sweeper.n_trials=1000000000: is more than the 10000 jobs one sweep may run; set "
        "hydra.sweeper.n_trials to 10000 or less, or split the search into several sweeps")


def test_an_inline_architecture_size_past_its_bound_is_one_line():
    spec = _spec("+recipe=qwen2_5_7b", "model.architecture.num_hidden_layers=1e11")
    with pytest.raises(ConfigError) as err:
        resolve_model(spec.model, need_weights=False)
    assert str(err.value) == ("model.architecture.num_hidden_layers=100000000000.0: Input should be less than or "
                              "equal to 4096; set model.architecture.num_hidden_layers to 4096 or less")
