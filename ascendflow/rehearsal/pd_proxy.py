"""A small PD proxy for rehearsals, with the flags and request protocol of vllm-ascend's load-balance proxy.

vllm-ascend's ``examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py`` is not installable here (it
imports vllm-ascend's runtime), so a rehearsal runs the plan's own ``proxy.sh`` with ``ASCENDFLOW_PD_PROXY_DIR``
pointing at a directory whose ``load_balance_proxy_server_example.py`` runs :func:`main`. Same flags (``--host``,
``--port``, ``--prefiller-hosts``, ``--prefiller-ports``, ``--decoder-hosts``, ``--decoder-ports``; ``parse_args``
there) and the same two steps per request (v0.25.1rc1 ``build_prefill_request`` and ``_handle_completions``):

1. the request to a prefill instance (round robin) with ``kv_transfer_params`` ``{"do_remote_decode": true,
   "do_remote_prefill": false, ...}``, ``stream`` false, ``max_tokens`` = ``min_tokens`` = 1 (and
   ``max_completion_tokens`` 1 when given), ``stream_options`` dropped; awaited;
2. the original request to a decode instance (round robin), with the prefill response's ``kv_transfer_params`` when
   it has any; the decode response is streamed back as it comes.

Not reproduced: load scores, retries, instance add/remove. ``GET /health`` answers 200 once every instance answers
its own ``/health``.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import aiohttp
from aiohttp import web

#: ``kv_transfer_params`` of the prefill request (vllm-ascend v0.25.1rc1 ``build_prefill_request``).
PREFILL_KV_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                     "remote_block_ids": None, "remote_host": None, "remote_port": None}


def prefill_request(body: dict[str, Any]) -> dict[str, Any]:
    """The prefill-only copy of an OpenAI request ``body`` (one token, not streamed)."""
    out = {**body, "kv_transfer_params": dict(PREFILL_KV_PARAMS), "stream": False, "max_tokens": 1, "min_tokens": 1}
    if "max_completion_tokens" in out:
        out["max_completion_tokens"] = 1
    out.pop("stream_options", None)
    return out


def decode_request(body: dict[str, Any], prefill_response: dict[str, Any]) -> dict[str, Any]:
    """``body`` for the decode instance: with the prefill response's ``kv_transfer_params`` when it has any."""
    params = prefill_response.get("kv_transfer_params")
    return {**body, "kv_transfer_params": params} if params else dict(body)


def _urls(hosts: list[str], ports: list[int], flag: str) -> list[str]:
    if len(hosts) != len(ports):
        raise SystemExit(f"{flag}: {len(hosts)} host(s) and {len(ports)} port(s); give one host per port")
    return [f"http://{h}:{p}" for h, p in zip(hosts, ports)]


def make_app(prefill: list[str], decode: list[str]) -> web.Application:
    """The proxy's aiohttp application over ``prefill`` and ``decode`` base URLs."""
    next_prefill, next_decode = itertools.cycle(prefill), itertools.cycle(decode)
    app = web.Application()

    async def session(app_: web.Application):
        app_["session"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        yield
        await app_["session"].close()

    app.cleanup_ctx.append(session)

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        http: aiohttp.ClientSession = request.app["session"]
        async with http.post(next(next_prefill) + request.path, json=prefill_request(body)) as r:
            if r.status != 200:
                return web.Response(status=r.status, body=await r.read(), content_type="application/json")
            first = await r.json()
        async with http.post(next(next_decode) + request.path, json=decode_request(body, first)) as r:
            out = web.StreamResponse(status=r.status, headers={"Content-Type": r.headers.get(
                "Content-Type", "application/json")})
            await out.prepare(request)
            async for chunk in r.content.iter_any():
                await out.write(chunk)
            await out.write_eof()
            return out

    async def health(request: web.Request) -> web.Response:
        http: aiohttp.ClientSession = request.app["session"]
        for url in [*prefill, *decode]:
            try:
                async with http.get(url + "/health", timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status != 200:
                        return web.Response(status=503, text=f"{url} answered {r.status}")
            except aiohttp.ClientError as exc:
                return web.Response(status=503, text=f"{url}: {exc}")
        return web.Response(text="ok")

    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/health", health)
    app.router.add_get("/healthcheck", health)
    return app


def main(argv: list[str] | None = None) -> None:
    """Parse vllm-ascend's proxy flags and serve until stopped."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--host", default="localhost")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--prefiller-hosts", nargs="+", default=["localhost"])
    p.add_argument("--prefiller-ports", nargs="+", type=int, default=[8001])
    p.add_argument("--decoder-hosts", nargs="+", default=["localhost"])
    p.add_argument("--decoder-ports", nargs="+", type=int, default=[8002])
    args, _ = p.parse_known_args(argv)  # vllm-ascend's tuning flags (--max-retries ...) are accepted and unused
    app = make_app(_urls(args.prefiller_hosts, args.prefiller_ports, "--prefiller-hosts"),
                   _urls(args.decoder_hosts, args.decoder_ports, "--decoder-hosts"))
    web.run_app(app, host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
