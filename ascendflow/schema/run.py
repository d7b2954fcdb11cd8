"""Run option (``conf/run/*.yaml``): what to do with the plan."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from ascendflow.schema.base import Spec
from ascendflow.schema.baseline import BaselineSpec
from ascendflow.schema.bounds import MAX_LATENCY_MS, MAX_SECONDS


class RunOptions(Spec):
    """How the runner executes the plan.

    Attributes:
        mode: ``auto`` (serve when the plan's hardware is on this machine, else plan only), ``plan``, ``serve``,
            ``offline``, ``capacity`` (serve, then search the highest load meeting the ``slo`` option; the engine
            starts once, see :mod:`ascendflow.capacity`), ``rehearse`` (run a multi-node plan's own launch scripts
            here, one process group per node, on the CPU engine with a tiny model; see docs/rehearsal.md), ``attach``
            (benchmark, or capacity-search with ``attach_capacity``, a deployment already running at ``server_url``,
            started by the plan's own launch scripts; nothing is started here; see docs/attach.md), ``search``
            (enumerate, compile and rank deployments for the ``search`` option's space at the ``slo`` targets;
            writes the top picks as recipes; see docs/search.md).
        host: address the server binds for a local run.
        port: server port for a local run; ``None`` picks a free one. Launch scripts use ``launch_port``.
        launch_port: port written into launch scripts for target nodes.
        health_timeout_s: seconds to wait for ``/health`` after starting the server.
        shutdown_grace_s: seconds between SIGTERM and SIGKILL when stopping the server.
        objective: what the job returns to a sweeper: ``output_throughput`` (tokens/s, to maximise),
            ``throughput_and_p99_ttft`` (tokens/s up, p99 TTFT in ms down; for multi-objective search) or
            ``capacity_rps`` (requests/s at the SLO, from ``run.mode=capacity``; 0 when no load met it).
        slo_p99_ttft_ms: p99 TTFT limit in ms; a job above it (or failed) scores 0 tokens/s so searches move away.
        max_failed_fraction: largest share of failed benchmark requests a run may have and still end FINISHED (with a
            warning and the ``failed_requests`` tag); above it the run ends FAILED (exit 1) and scores the failed-job
            objective. Default 0: any failed request fails the run.
        api_key_env: name of the environment variable holding the server's API key. Launch scripts and local runs
            give it to vLLM as ``VLLM_API_KEY`` (read like ``--api-key``, ``vllm/entrypoints/serve/middleware/
            register.py``) and the benchmark client sends it (``OPENAI_API_KEY``); its value is never written.
            ``None``: no key (local runs bind ``host``, 127.0.0.1 by default).
        server_url: base URL of a running deployment for ``run.mode=attach``, as vLLM's benchmark client takes it
            (``vllm bench serve --base-url``): ``http(s)://host:port``, without ``/v1`` and without credentials (the
            key comes from ``api_key_env``). Only read by ``run.mode=attach``.
        attach_capacity: ``run.mode=attach`` searches the SLO capacity (the ``slo`` option, as ``run.mode=capacity``)
            instead of one benchmark of the workload.
        attach_allow_mismatch: ``run.mode=attach`` records a deployment whose KV cache knobs (``/metrics``
            ``vllm:cache_config_info``) differ from the plan's, tagged ``ascendflow.attach_mismatch`` and warned,
            instead of refusing it (exit 2); ``python -m ascendflow.perfmodel.fit`` skips such runs.
        profile: profile the benchmark window of a served run with vLLM's torch profiler (trace and top operators
            in ``<run dir>/profile``; see :mod:`ascendflow.profiling`).
        baseline: the source deployment's measured figures of a migrated plan (:mod:`ascendflow.schema.baseline`);
            ``python -m ascendflow.compare RUN_ID`` shows them beside this run's.
    """

    mode: Literal["auto", "plan", "serve", "offline", "capacity", "rehearse", "attach", "search"] = "auto"
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)
    launch_port: int = Field(default=8000, ge=1, le=65535)
    health_timeout_s: float = Field(default=900, gt=0, le=MAX_SECONDS)
    shutdown_grace_s: float = Field(default=20, gt=0, le=MAX_SECONDS)
    objective: Literal["output_throughput", "throughput_and_p99_ttft", "capacity_rps"] = "output_throughput"
    slo_p99_ttft_ms: float | None = Field(default=None, gt=0, le=MAX_LATENCY_MS)
    max_failed_fraction: float = Field(default=0.0, ge=0, le=1)
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    server_url: str | None = None
    attach_capacity: bool = False
    attach_allow_mismatch: bool = False
    profile: bool = False
    baseline: BaselineSpec = Field(default_factory=BaselineSpec)

    @field_validator("server_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None and not BASE_URL.fullmatch(value):
            raise ValueError("is not a server's base URL: give http(s)://host:port as vllm bench serve --base-url "
                             "takes it, with no credentials in it (the key goes in the variable run.api_key_env names)")
        return value


#: A server's base URL: scheme, host[:port], an optional path; no userinfo (``user:key@``), no spaces.
BASE_URL = re.compile(r"https?://[^\s/@]+(/[^\s@]*)?")
