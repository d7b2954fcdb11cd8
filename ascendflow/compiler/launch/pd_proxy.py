"""The PD proxy's argv (pure): vllm-ascend's load-balance proxy with one host/port per API endpoint of each role.

Source: vllm-ascend v0.25.1rc1 ``examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py``
``parse_args`` (``--host``, ``--port``, ``--prefiller-hosts``, ``--prefiller-ports``, ``--decoder-hosts``,
``--decoder-ports``; hosts and ports must pair up) and ``load_balance_proxy_layerwise_server_example.py`` (same flags).
"""

from __future__ import annotations

from typing import Any

from ascendflow.compiler.plan import ProxyPlan
from ascendflow.schema.pd import ProxySpec

#: Proxy script per kind (``examples/disaggregated_prefill_v1/`` of the plan's vllm-ascend tag; not pip-installed, so
#: the proxy script takes its directory from ``ASCENDFLOW_PD_PROXY_DIR``).
PROXY_SCRIPTS = {"load_balance": "load_balance_proxy_server_example.py",
                 "layerwise": "load_balance_proxy_layerwise_server_example.py"}
PROXY_DIR_REF = "${ASCENDFLOW_PD_PROXY_DIR}"


def proxy_command(proxy: ProxySpec, prefill: list[list[Any]], decode: list[list[Any]], *,
                  default_host: str) -> ProxyPlan:
    """The proxy's argv listing ``prefill`` and ``decode`` endpoints (``[host, port]``) in order."""
    host = proxy.host or default_host
    script = PROXY_SCRIPTS[proxy.kind]
    argv = ["python", f"{PROXY_DIR_REF}/{script}", "--host", host, "--port", str(proxy.port),
            "--prefiller-hosts", *[str(h) for h, _ in prefill], "--prefiller-ports", *[str(p) for _, p in prefill],
            "--decoder-hosts", *[str(h) for h, _ in decode], "--decoder-ports", *[str(p) for _, p in decode]]
    return ProxyPlan(script=script, host=host, port=proxy.port, command=argv)
