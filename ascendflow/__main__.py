"""``python -m ascendflow``: the Hydra task. Composes the config and hands it to :func:`ascendflow.app.run_job`.

Around Hydra: secret override values are masked in every log line (Hydra's launchers echo each job's overrides,
:mod:`ascendflow.secret_logging`), SIGTERM unwinds like Ctrl-C from the first instruction on (never lost inside an MLflow store call,
``ascendflow.tracking.store.Terminated``), and a sweep interrupted or failing between jobs ends its parent MLflow run
(KILLED on Ctrl-C/SIGTERM, exit 130; FAILED when the sweep itself raises, exit 1).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from ascendflow.tracking.cluster import register_resolvers

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")

register_resolvers()  # ${ascendflow_ray_remote:...} in conf/hydra/launcher/ray_*.yaml


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Run one job; returns the sweep objective (output tokens/s) or ``None`` for a plan-only run."""
    from ascendflow.app import run_job

    return run_job(cfg)


def _interrupted() -> None:
    """End the sweep's parent run KILLED (if this process opened one), say so on one line, exit 130."""
    from ascendflow.tracking.mlflow_run import end_open_runs
    from ascendflow.tracking.sweep import end_open_parent

    end_open_runs("KILLED")  # a job's run the signal reached before its own handler could end it
    if end_open_parent("KILLED"):
        print("interrupted: the sweep's parent MLflow run ended KILLED", file=sys.stderr)
    else:
        print("interrupted", file=sys.stderr)
    sys.exit(130)


def refuse_bad_overrides(argv: list[str]) -> None:
    """A single run's command-line overrides must compose: a key that is not in the config (``engine.max_num_seq=8``)
    or a group option that does not exist (``+recipe=nope``, ``model=smolm2``) is one line, exit 2, before anything
    starts — Hydra itself prints several lines and exits 1. Sweeps (``-m``) are checked by the sweep callback
    (:func:`ascendflow.sweeps.checks.refuse_bad_search_space`); ``HYDRA_FULL_ERROR=1``, ``--cfg``, ``--help``,
    ``--info`` and shell completion are left to Hydra. Composing the config once more costs about 0.3 s.

    Raises:
        ConfigError: the first override that does not compose, with the key, the value, the rule and the fix.
    """
    import os
    import re

    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(argv)
    if os.environ.get("HYDRA_FULL_ERROR") != "1":
        _refuse_unparsable(args.overrides or [])
    if (os.environ.get("HYDRA_FULL_ERROR") == "1" or not args.overrides or args.multirun or args.help
            or args.hydra_help or args.cfg or args.info or args.shell_completion or args.config_dir
            or args.config_path or args.config_name or args.experimental_rerun):
        return
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException

    from ascendflow.schema import ConfigError

    given = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[-1] for o in args.overrides}
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="ascendflow"):
            compose(config_name="config", overrides=args.overrides)
    except MissingConfigException as exc:
        missing = re.search(r"Could not find '([^']+)'", str(exc))
        group, _, option = (missing.group(1) if missing else "?/?").rpartition("/")
        options = ", ".join(sorted(exc.options or [])) or "none"
        raise ConfigError(group, option, f"is not an option of the '{group}' group; pick one of: {options}") from None
    except ConfigCompositionException as exc:
        bad = re.search(r"Could not override '([^']+)'", str(exc))
        present = re.search(r"An item is already at '([^']+)'", str(exc))
        if bad is None and present is not None:  # +key=value for a key the config already has
            key = present.group(1)
            from ascendflow.schema.secrets import MASK, is_secret

            value = MASK if is_secret(key.split(".")[-1]) else given.get(key, "?")
            raise ConfigError(key, value, f"is already a config key, so it takes no +: {key}={value} sets it "
                                          f"(++{key}=... sets or adds)") from None
        if bad is None:
            raise ConfigError("overrides", " ".join(args.overrides),
                              f"do not compose ({str(exc).splitlines()[0]}); HYDRA_FULL_ERROR=1 shows why") from None
        key = bad.group(1)
        from ascendflow.schema.secrets import MASK, is_secret

        value = MASK if is_secret(key.split(".")[-1]) else given.get(key, "?")
        fix = _key_fix(key, args.overrides)
        hint = "" if fix.startswith(f"{key} is a config group") else " (`python -m ascendflow --cfg job` lists the keys)"
        raise ConfigError(key, value, f"is not a config key; {fix}{hint}") from None


def _refuse_unparsable(overrides: list[str]) -> None:
    """Each override must parse on its own (single runs and sweeps alike): the first that does not is named alone,
    with Hydra's reason, its value masked when it is a credential (Hydra's own message repeats every override).

    Raises:
        ConfigError: ``key`` and the override's text, the parser's first line, and the fix.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from ascendflow.schema import ConfigError
    from ascendflow.schema.secrets import MASK, is_secret
    from ascendflow.secret_logging import mask, remember

    parser = OverridesParser.create()
    for text in overrides:
        try:
            parser.parse_override(text)
        except (HydraException, ValueError) as exc:
            key, _, value = text.partition("=")
            if is_secret(key.split(".")[-1]):
                remember([value, value.strip("'\"")])  # Hydra's reason quotes the text it could not read
            shown = MASK if is_secret(key.split(".")[-1]) else mask(value)
            reason = mask(str(exc).splitlines()[0])
            raise ConfigError(key.lstrip("+~") or "override", shown,
                              f"cannot be parsed ({reason}); quote the value (key='value') or close its brackets")


#: Config maps that take any key (``+ascend.env.NAME=...``); elsewhere the schema refuses unknown keys.
OPEN_MAPS = ("ascend.env", "ascend.additional_config.other", "model.architecture")


def _key_fix(key: str, overrides: list[str]) -> str:
    """The fix for an override naming a key that is not in the config: ``+recipe=NAME`` for a config group the
    defaults do not select (``recipe``, ``sweep``), the closest existing key (``did you mean
    engine.max_num_seqs?``), ``+KEY=...`` where the map takes new keys (:data:`OPEN_MAPS`), else check the spelling."""
    import difflib

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hydra.core.global_hydra import GlobalHydra

    rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key]
    options: list[str] = []
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="ascendflow"):
            if "." not in key:  # a group the defaults do not select (recipe, sweep) is added with +
                options = list(GlobalHydra.instance().config_loader().get_group_options(key))
            cfg = OmegaConf.to_container(compose(config_name="config", overrides=rest), resolve=False)
    except Exception:  # noqa: BLE001 - another override is bad too: no suggestion then
        cfg = {}
    if options:
        value = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key and "=" in o), "NAME")
        return f"{key} is a config group the defaults do not select: add it with +{key}={value}"
    keys: list[str] = []

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        keys.append(prefix)

    walk(cfg, "")
    close = difflib.get_close_matches(key, [k for k in keys if k], n=1, cutoff=0.8)
    if close:
        return f"did you mean {close[0]}?"
    if any(key.startswith(m + ".") for m in OPEN_MAPS):
        return f"+{key}=... adds it"
    return "check the spelling"


def cli() -> None:
    """Run :func:`main` with SIGTERM handled and a sweep's parent run always ended."""
    from ascendflow.interrupts import Terminated, install_sigterm, stopping
    from ascendflow.schema import ConfigError
    from ascendflow.secret_logging import mask_log_records, mask_streams, process_secrets
    from ascendflow.tracking.outputs import OutputsError, refuse_unusable_outputs
    from ascendflow.tracking.sweep import end_open_parent

    install_sigterm()
    # Credentials in any line printed or logged (Hydra's launchers log each job's overrides), from the first one on.
    secrets = process_secrets(sys.argv[1:])
    mask_log_records(secrets)
    mask_streams(secrets)
    try:
        refuse_bad_overrides(sys.argv[1:])
        refuse_unusable_outputs(sys.argv[1:])
    except (ConfigError, OutputsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        main()
    except (KeyboardInterrupt, Terminated):
        _interrupted()
    except SystemExit as exc:
        if exc.code not in (0, None, 130) and stopping():  # a signal that surfaced as another error (see interrupts)
            _interrupted()
        if exc.code not in (0, None) and end_open_parent("FAILED"):
            print("error: the sweep stopped; its parent MLflow run ended FAILED", file=sys.stderr)
        raise
    except BaseException:
        end_open_parent("FAILED")
        raise
    # Hydra returned normally but a sweeper may have skipped on_multirun_end (it raised inside): end the parent.
    end_open_parent("FAILED")


def exit_now(code: int) -> None:
    """Exit with ``code`` once everything is written, without the interpreter's module teardown: ``atexit`` handlers
    run and the standard streams are flushed, then ``os._exit``. Tearing down the ~2,800 modules a run imports
    (MLflow, SQLAlchemy, SciPy, Hydra) took 0.8 s here (measured: last ``atexit`` handler to process exit). Only when
    no other thread is alive; otherwise a normal exit waits for them."""
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        cli()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            exit_now(exc.code or 0)
        raise
    exit_now(0)
