"""``engine.extra_args`` against the pinned vLLM's own server parser: every flag must be one ``vllm serve`` knows, and
a short alias of a flag the plan sets (``-tp 2``) is refused with its key, as the compiler refuses the long form
(:mod:`ascendflow.compiler.checks.extra_args`).

The compiler never imports vLLM, and the vLLM of a plan's row is seldom the one installed here, so the flags of
each vLLM version are data: ``data/vllm_serve_flags.json``, ``{vllm version: {option string: dest}}``, generated
from ``vllm.entrypoints.launchers.cli_args.make_arg_parser`` by ``scripts/serve_flags.py`` (run it where a row's
vLLM is installed to add that version; ``tests/runner/test_serve_flags.py`` checks the installed version's entry
against its parser).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ascendflow.compiler.checks.extra_args import KEY, flag_tokens, planned_key
from ascendflow.compiler.plan import Plan
from ascendflow.compiler.rules.software import version_at_least
from ascendflow.schema.errors import ConfigError

DATA = "data/vllm_serve_flags.json"


@lru_cache(maxsize=1)
def flag_table() -> dict[str, dict[str, str]]:
    """``{vllm version: {option string: argparse dest}}`` from :data:`DATA`."""
    return json.loads(resources.files("ascendflow.runner").joinpath(DATA).read_text())


def flags_for(vllm: str) -> tuple[str, dict[str, str]]:
    """The table of vLLM ``vllm``, else of the newest known version at or below it (else the oldest known):
    ``(version used, {option string: dest})``."""
    table = flag_table()
    if vllm in table:
        return vllm, table[vllm]
    known = sorted(table, key=lambda v: [int(p) for p in v.split(".")])
    older = [v for v in known if version_at_least(vllm, v)]
    used = older[-1] if older else known[0]
    return used, table[used]


def parser_flags() -> dict[str, str]:
    """``{option string: dest}`` of the installed vLLM's server parser (imports vLLM)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    return {option: action.dest for action in parser._actions for option in action.option_strings
            if option not in ("-h", "--help")}


def check_plan_extra_args(plan: Plan) -> list[str]:
    """Check ``plan.extra_args`` against the flag table of the plan's vLLM (:func:`flags_for`).

    Returns:
        A warning when the table is another version's (the row's vLLM has none yet); else ``[]``.

    Raises:
        ConfigError: ``engine.extra_args`` naming a flag the parser does not know (one line), or a short alias of a
            flag the plan sets, with its key.
    """
    if not plan.extra_args:
        return []
    vllm = str(plan.target.engine["vllm"])
    used, flags = flags_for(vllm)
    for flag in flag_tokens(plan.extra_args):
        name = flag.split(".", 1)[0] if flag.startswith("--") else flag  # --compilation-config.mode: JSON dot syntax
        dest = flags.get(name) or flags.get(name.replace("_", "-"))  # FlexibleArgumentParser takes either
        if dest is None:
            raise ConfigError(KEY, flag, f"is not a flag of vLLM {used}'s vllm serve (its parser, "
                                         f"ascendflow/runner/{DATA}); check the spelling against vllm serve --help")
        key = planned_key(dest, plan.engine_args)
        if key is not None:
            raise ConfigError(KEY, flag, f"is planned by ascendflow (vLLM's {dest}); set {key} instead")
    if used != vllm:
        return [f"engine.extra_args checked against vLLM {used}'s flags, not vLLM {vllm}'s (the row's; none stored): "
                f"run scripts/serve_flags.py where vLLM {vllm} is installed to add them"]
    return []
