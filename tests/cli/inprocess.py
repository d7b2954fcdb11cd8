"""``python -m ascendflow ARGS`` in this process: Hydra composes the config and the job function runs, as in
lightning-hydra-template's tests (``initialize_config_dir`` + ``compose`` + the task function).

What :func:`ascendflow.__main__.cli` does before Hydra (:func:`~ascendflow.__main__.refuse_bad_overrides`,
:func:`~ascendflow.tracking.outputs.refuse_unusable_outputs`: one line, exit 2), then what Hydra's ``run_job`` does for
a single run (``hydra.mode`` RUN, ``hydra.runtime.output_dir`` = the absolute ``hydra.run.dir``, created), then
:func:`ascendflow.app.run_job`. Left out, so still covered by the real subprocess cases of each test file: the
process-wide masking of credentials in every printed line (``cli`` wraps the streams), Hydra's logging set-up and
its ``.hydra/`` copies, signal handling, and the exit code the interpreter really returns. Single runs only: sweeps
(``-m``) are real subprocesses.

A run costs the composition and the compile (well under a second, once the modules are imported), against 3-6 s
of interpreter start and imports for a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import open_dict, read_write


def run_in_process(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m ascendflow ARGS`` (a single run) in-process with ``cwd`` as the working directory and ``env``
    added to the environment (both restored afterwards); stdout and stderr are captured.

    Returns:
        A :class:`subprocess.CompletedProcess` as :func:`tests.conftest.run_ascendflow` returns it: ``returncode``
        is the job's exit code (0 when it returned).
    """
    assert "-m" not in args and "--multirun" not in args, "sweeps run as real subprocesses"
    from ascendflow.__main__ import CONF_DIR, refuse_bad_overrides
    from ascendflow.app import run_job
    from ascendflow.schema import ConfigError
    from ascendflow.tracking.outputs import OutputsError, refuse_unusable_outputs

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_hydra = dict(os.environ), os.getcwd(), HydraConfig.instance().cfg
    os.environ.pop("HYDRA_FULL_ERROR", None)
    os.environ.update(env or {})
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                refuse_bad_overrides(args)
                refuse_unusable_outputs(args)
            except (ConfigError, OutputsError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                code = 2
            else:
                code = _run(args, CONF_DIR, run_job)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        HydraConfig.instance().cfg = saved_hydra
    return subprocess.CompletedProcess(["python", "-m", "ascendflow", *args], code, out.getvalue(), err.getvalue())


def _run(args: list[str], conf_dir: str, run_job) -> int:
    """Compose with the Hydra config and run the job as Hydra's ``run_job`` does for a single run; the exit code."""
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3", job_name="ascendflow"):
        cfg = compose(config_name="config", overrides=args, return_hydra_config=True)
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.mode = RunMode.RUN
        cfg.hydra.runtime.output_dir = os.path.abspath(str(cfg.hydra.run.dir))
    HydraConfig.instance().set_config(cfg)
    Path(cfg.hydra.runtime.output_dir).mkdir(parents=True, exist_ok=True)
    task = cfg.copy()
    with read_write(task), open_dict(task):
        del task["hydra"]
    try:
        run_job(task)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
