"""Evidence that a PD rehearsal moved KV from prefill to decode: the engines' ``/metrics`` and the connector's log.

Read after the benchmark, before the engines stop:

- prefill: ``vllm:request_success_total`` and ``vllm:generation_tokens_total`` (``vllm/v1/metrics/loggers.py``
  ``PrometheusStatLogger``): the proxy's prefill-only requests (one token each, ``max_tokens=1``);
- decode: ``vllm:external_prefix_cache_hits_total`` (prompt tokens the KV connector supplied, same file) and
  ``vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}``;
- the decode engine's log: ``ExampleConnector``'s own lines ``External Cache Hit!`` (scheduler,
  ``get_num_new_matched_tokens``) and ``Inject KV cache of N tokens to the paged memory`` (worker, ``start_load_kv``;
  ``vllm/distributed/kv_transfer/kv_connector/v1/example_connector.py``, vLLM 0.32.0).
"""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$")
_INJECT = re.compile(r"Inject KV cache of (\d+) tokens to the paged memory")
_HIT = "External Cache Hit!"
_PID = re.compile(r"^\(\w+ pid=(\d+)\)")


def consumer_lines(log: str) -> str:
    """The lines of a node's log written by KV-consumer processes: those whose ``(<Process> pid=N)`` prefix names a
    process that logged its ``KVTransferConfig`` with ``kv_role='kv_consumer'`` (``ExampleConnector.__init__`` logs
    it in the scheduler and in the worker). One node may run both roles (single-node PD)."""
    lines = log.splitlines()
    pids = {m[1] for line in lines if "kv_role='kv_consumer'" in line and (m := _PID.match(line))}
    return "\n".join(line for line in lines if (m := _PID.match(line)) and m[1] in pids)


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of every sample of ``name`` in Prometheus exposition ``text`` whose labels include ``labels``; 0.0 when
    there is none."""
    total = 0.0
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or m["name"] != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m["labels"] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m["value"])
    return total


def prefill_evidence(metrics: str) -> dict[str, float]:
    """``pd.prefill_requests`` (requests finished on the prefill instances) and ``pd.prefill_generation_tokens``."""
    return {"pd.prefill_requests": metric_sum(metrics, "vllm:request_success_total"),
            "pd.prefill_generation_tokens": metric_sum(metrics, "vllm:generation_tokens_total")}


def decode_evidence(metrics: str, log: str) -> dict[str, float]:
    """From the decode instance's ``/metrics``: ``pd.decode_requests``, ``pd.decode_external_kv_hit_tokens``,
    ``pd.decode_kv_transfer_tokens`` (prompt tokens by source ``external_kv_transfer``); from its KV-consumer log
    lines (:func:`consumer_lines`): ``pd.decode_connector_hits`` and ``pd.decode_connector_injected_tokens``."""
    return {"pd.decode_requests": metric_sum(metrics, "vllm:request_success_total"),
            "pd.decode_external_kv_hit_tokens": metric_sum(metrics, "vllm:external_prefix_cache_hits_total"),
            "pd.decode_kv_transfer_tokens": metric_sum(metrics, "vllm:prompt_tokens_by_source_total",
                                                       source="external_kv_transfer"),
            "pd.decode_connector_hits": float(log.count(_HIT)),
            "pd.decode_connector_injected_tokens": float(sum(int(n) for n in _INJECT.findall(log)))}
