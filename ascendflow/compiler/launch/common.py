"""What every launcher shares (pure): the server entry point, engine arguments as CLI flags, the shell quoting
and launch-time reference guard of the generated scripts, and a command as argument units (for diffs). Each launcher module (:mod:`.multinode_dp`, :mod:`.nnodes`,
:mod:`.ray_cluster`, :mod:`.lws`) and :mod:`.scripts` import from here; this module imports none of them.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ascendflow.platforms import platform_for


def serve_prefix(kind: str, multinode: bool) -> list[str]:
    """Entry point of the server argv: the platform's (``Platform.serve_prefix``), or ``vllm serve`` on several
    nodes. A multi-node CPU plan (rehearsals, ``ascendflow.rehearsal``) needs ``vllm serve``: its nodes k > 0 need
    ``--headless``, which only the ``vllm serve`` CLI handles
    (``vllm/entrypoints/cli/serve.py`` ``ServeSubcommand.cmd``; the API-server module always serves HTTP), and the
    rehearsal puts a working ``vllm`` on ``PATH`` (``ascendflow/rehearsal/vllm_cli.py``)."""
    return ["vllm", "serve"] if multinode else list(platform_for(kind).serve_prefix)


#: Launch-time references: ``${ASCENDFLOW_*}`` values the config did not give, and ``${NAME}`` secrets.
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What each launch-time reference stands for, in config terms.
_REF_HINTS = {
    "ASCENDFLOW_NODE": "or give parallel.node_addresses in the config",
    "ASCENDFLOW_NIC": "or give parallel.nic_name in the config",
    "ASCENDFLOW_MODEL_PATH": "the msModelSlim checkpoint directory, or give model.path in the config",
    "ASCENDFLOW_PD_PROXY_DIR": "vllm-ascend's examples/disaggregated_prefill_v1 directory at the plan's tag",
}


#: Key of :func:`serve_args`' result holding ``engine.extra_args`` tokens (no ``EngineArgs`` name has brackets).
EXTRA_ARGV = "<extra_args>"


def serve_args(engine_args: dict[str, Any], defaults: list[str], extra: list[str]) -> dict[str, Any]:
    """What the launchers write: ``engine_args`` without the names vLLM defaults itself (``Plan.engine_defaults``),
    with ``engine.extra_args`` tokens (``Plan.extra_args``) under :data:`EXTRA_ARGV`, written last."""
    args = {k: v for k, v in engine_args.items() if k not in defaults}
    return {**args, EXTRA_ARGV: list(extra)} if extra else args


def engine_args_to_argv(engine_args: dict[str, Any]) -> list[str]:
    """Render ``EngineArgs`` names as vLLM CLI flags (``model`` excluded; it is positional for ``vllm serve``).

    ``True`` → ``--flag``; ``False`` → ``--no-flag`` (vLLM's ``BooleanOptionalAction``); dicts → JSON; the
    :data:`EXTRA_ARGV` tokens (:func:`serve_args`) as given, after every planned flag.
    """
    argv: list[str] = []
    for key, value in engine_args.items():
        if key in ("model", EXTRA_ARGV) or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            argv += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [flag, str(value)]
    return argv + list(engine_args.get(EXTRA_ARGV, []))


def data_parallel_flags(*, address: str, rpc_port: int, rank: int | None = None, local: int | None = None,
                        start: int | None = None, headless: bool = False,
                        start_after_headless: bool = False) -> list[str]:
    """vLLM's data-parallel flags of one ``vllm serve``, the one place they are written.

    External DP (``rank`` given: one process per DP rank, vllm-ascend ``examples/external_online_dp/
    launch_online_dp.py``): ``--data-parallel-rank r``. Internal DP: ``--data-parallel-size-local l`` and, when
    ``start`` is given, ``--data-parallel-start-rank s``; ``--headless`` on a node that serves no API. Both end with
    ``--data-parallel-address`` / ``--data-parallel-rpc-port`` (before ``--headless``). ``start_after_headless``:
    the start rank after ``--headless`` instead of after the local size (``shared/reference/vllm_ascend.md`` §7,
    the co-located multi-node DP launch: ``--headless --data-parallel-start-rank k·d``); vLLM's parser takes either.
    """
    head = ["--data-parallel-rank", str(rank)] if rank is not None else ["--data-parallel-size-local", str(local)]
    start_flags = ["--data-parallel-start-rank", str(start)] if start is not None else []
    argv = [*head, *([] if start_after_headless else start_flags), "--data-parallel-address", address,
            "--data-parallel-rpc-port", str(rpc_port)]
    return argv + (["--headless"] if headless else []) + (start_flags if start_after_headless else [])


def shell_value(value: str) -> str:
    """Quote for bash; ``${ASCENDFLOW_*}`` references stay expandable (double quotes)."""
    if _REF.search(value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'
    return shlex.quote(value)


def required_refs(texts: list[str]) -> list[str]:
    return sorted({m for t in texts for m in _REF.findall(t)})


def _ref_hint(ref: str) -> str:
    key = "ASCENDFLOW_NODE" if re.fullmatch(r"ASCENDFLOW_NODE\d+_IP", ref) else ref
    if not key.startswith("ASCENDFLOW_"):
        return "a secret or API key: export it on the node; ascendflow never writes its value"
    return _REF_HINTS.get(key, "see the plan's warnings")


def ref_guard(refs: list[str]) -> list[str]:
    if not refs:
        return []
    lines = ["# Values the config did not give: set them before launching (the script stops if one is missing)."]
    lines += [f': "${{{r}:?set {r} ({_ref_hint(r)})}}"' for r in refs]
    return lines + [""]


def argument_units(argv: list[str]) -> list[str]:
    """A launch command as units: ``--flag value...`` joined by a space, positional words alone
    (``["vllm", "serve", "/m", "--max-model-len 16384", "--enforce-eager"]``)."""
    units: list[str] = []
    for word in argv:
        if word.startswith("--") or not units or not units[-1].startswith("--"):
            units.append(word)
        else:
            units[-1] += f" {word}"
    return units
