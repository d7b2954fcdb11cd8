"""A running deployment, started by the plan's own launch scripts on its nodes, measured from here
(``run.mode=attach``): check it is the plan's, then benchmark it with vLLM's client and scrape its ``/metrics``.

Nothing is started but the benchmark client; the engine's log stays on its nodes (``python -m ascendflow.calibrate``
adds it to the run later).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from ascendflow.compiler import Plan
from ascendflow.runner.bench import bench_argv, bench_command_text, served_name, tokenizer_for
from ascendflow.runner.engine_metrics import WindowMetrics
from ascendflow.runner.local import Serving, Status, check_alive_after, run_bench_client
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.spec import RunSpec

#: Seconds to wait for the deployment's answer to one check request.
PROBE_TIMEOUT_S = 10


def base_url(spec: RunSpec) -> str:
    """``run.server_url`` without a trailing ``/``.

    Raises:
        ConfigError: ``run.server_url`` is unset, or ends in ``/v1`` (vLLM's client adds the endpoint itself).
    """
    url = spec.run.server_url
    if not url:
        raise ConfigError("run.server_url", None, "run.mode=attach measures a running deployment and needs its URL; "
                                                  "set run.server_url=http://<node0>:<port> (the launch scripts' "
                                                  f"port is run.launch_port={spec.run.launch_port})")
    url = url.rstrip("/")
    if url.endswith("/v1"):
        raise ConfigError("run.server_url", spec.run.server_url, "is the server's base URL as vllm bench serve "
                                                                 f"--base-url takes it, without /v1; use {url[:-3]}")
    return url


def served_models(url: str, api_key: str | None, key_env: str | None) -> dict[str, int | None]:
    """The models the deployment at ``url`` serves, by name, with each one's ``max_model_len`` in tokens
    (:func:`model_cards` of ``GET /v1/models``, OpenAI's list, which vLLM's API key check guards like every ``/v1``
    path: ``vllm/entrypoints/openai/api_server.py`` ``AuthenticationMiddleware``).

    Raises:
        ConfigError: nothing answers at ``url`` (``run.server_url``); the server refused the key, HTTP 401
            (``run.api_key_env``); any other HTTP error or an answer that is not vLLM's model list.
    """
    request = urllib.request.Request(f"{url}/v1/models",
                                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as resp:
            body = json.loads(resp.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        if exc.code == 401 and key_env:
            raise ConfigError("run.api_key_env", key_env, f"the server at {url} refused the key (HTTP 401); export "
                                                          f"{key_env} with the key the deployment was started with "
                                                          "(its --api-key / VLLM_API_KEY)") from None
        if exc.code == 401:
            raise ConfigError("run.api_key_env", None, f"the server at {url} requires an API key (HTTP 401); set "
                                                       "run.api_key_env=<name of the variable holding it>") from None
        raise ConfigError("run.server_url", url, f"GET /v1/models answered HTTP {exc.code}; give the base URL of a "
                                                 "vLLM OpenAI-compatible server (vllm serve)") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError("run.server_url", url, f"no vLLM server answers there ({reason}); start the deployment "
                                                 "with the plan's launch/node0.sh (or fix the URL)") from None
    try:
        return model_cards(body)
    except (KeyError, TypeError, ValueError):
        raise ConfigError("run.server_url", url, "GET /v1/models did not answer OpenAI's model list; give the base "
                                                 "URL of a vLLM OpenAI-compatible server (vllm serve)") from None


def model_cards(body: Any) -> dict[str, int | None]:
    """``{model id: max_model_len}`` of a ``GET /v1/models`` body: vLLM's ``ModelList`` of ``ModelCard`` s
    (``vllm/entrypoints/serve/engine/protocol.py``, filled by ``vllm/entrypoints/openai/models/serving.py``
    ``show_available_models`` with the engine's ``model_config.max_model_len``, vLLM 0.32.0); ``None`` where a card
    has no ``max_model_len`` (an OpenAI-compatible server that is not vLLM).

    Raises:
        KeyError, TypeError, ValueError: ``body`` is not OpenAI's model list.
    """
    return {str(m["id"]): (None if m.get("max_model_len") is None else int(m["max_model_len"]))
            for m in body["data"]}


def check_max_model_len(url: str, planned: int, served: int | None) -> None:
    """The deployment serves the plan's context length: ``served`` (its model card's ``max_model_len``, tokens;
    ``None``: not reported, nothing to compare) equals ``planned`` (the plan's ``--max-model-len``).

    Raises:
        ConfigError: they differ (``engine.max_model_len``): the measurement would be recorded under another plan.
    """
    if served is not None and served != planned:
        raise ConfigError("engine.max_model_len", planned,
                          f"the server at {url} serves max_model_len {served}; attach to the deployment this plan "
                          f"describes, or set engine.max_model_len={served}")


def check_deployment(plan: Plan, spec: RunSpec, api_key: str | None) -> str:
    """The deployment at ``run.server_url`` answers, accepts the key and serves the plan's model under the plan's
    name (``--served-model-name``: ``model.served_model_name``, else the model's id) with the plan's ``max_model_len``; returns its base URL.

    Raises:
        ConfigError: see :func:`base_url`, :func:`served_models` and :func:`check_max_model_len`; the server serves
            other models (``model.served_model_name``, else ``model.id``).
    """
    url = base_url(spec)
    cards = served_models(url, api_key, spec.run.api_key_env)
    wanted = served_name(plan)
    if wanted not in cards:
        raise ConfigError("model.served_model_name" if spec.model.served_model_name else "model.id", wanted, f"the server at {url} serves {list(cards)}, not the plan's model; attach "
                                              "to the deployment of this plan, or compile the plan for the served "
                                              "model (model=...)")
    check_max_model_len(url, int(plan.engine_args["max_model_len"]), cards[wanted])
    return url


def attached(url: str, api_key: str | None, run_dir: Path) -> Serving:
    """The deployment at ``url`` as a :class:`Serving` with no process of this machine (its death is seen by
    ``/health`` alone, failures point at the client's log ``run_dir/bench.log``)."""
    return Serving(server=None, base_url=url, health_url=f"{url}/health", api_key=api_key, start_s=0.0,
                   port=urllib.parse.urlsplit(url).port, log_path=run_dir / "bench.log")


def benchmark_attached(plan: Plan, spec: RunSpec, run_dir: Path, status: Status, url: str,
                       api_key: str | None) -> dict[str, Any]:
    """Run vLLM's benchmark client once against the deployment at ``url`` with the run's workload, its
    ``/metrics`` scraped before, during and after (:class:`ascendflow.runner.engine_metrics.WindowMetrics`).

    Returns:
        ``{"benchmark": <vLLM result dict>, "engine": {}, "engine_metrics": <window summary>}`` (no engine facts:
        the engine's log is on its nodes).

    Raises:
        EngineDiedError: the deployment's ``/health`` went down during the benchmark.
        EngineStartError: the client failed while the deployment stayed up (see ``bench.log``).
    """
    srv = attached(url, api_key, run_dir)
    args = bench_argv(spec.workload, base_url=url, served_model_name=served_name(plan),
                      tokenizer=tokenizer_for(plan), run_dir=run_dir)
    (run_dir / "bench_command.txt").write_text(bench_command_text(args, sys.executable, spec.run.api_key_env,
                                                                         attached=True))
    window = WindowMetrics(url, api_key)
    status(f"benchmarking the deployment at {url} with vLLM's client")
    benchmark = run_bench_client(args, run_dir, spec, status, None, srv.health_url, api_key, window=window)
    check_alive_after(srv, benchmark)
    return {"benchmark": benchmark, "engine": {}, "engine_metrics": window.finish()}
