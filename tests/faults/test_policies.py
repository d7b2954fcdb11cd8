"""Policies without an engine: failed benchmark requests (fail above run.max_failed_fraction, warn and tag below it,
objective scaled by the completed share), secret names and masks, ${NAME} resolution at launch, engine-death causes
read from vLLM's own log lines."""

from __future__ import annotations

import logging

import pytest

from ascendflow.app import RunFailedError, _check_requests
from ascendflow.runner.engine_log import failure_cause
from ascendflow.schema.errors import ConfigError
from ascendflow.schema.run import RunOptions
from ascendflow.schema.secrets import is_secret, mask_env_config, mask_text
from ascendflow.secret_logging import mask_log_records, override_secrets
from ascendflow.schema.tracking import TrackingSpec
from ascendflow.tracking import TrackedRun
from ascendflow.tracking.objective import objective
from tests.helpers import mlflow_runs

SEVEN_OF_EIGHT = {"benchmark": {"completed": 7, "failed": 1, "output_throughput": 80.0}}


def _tracked(tmp_path, uri: str) -> TrackedRun:
    return TrackedRun(TrackingSpec(tracking_uri=uri), tmp_path / "outputs", "policies", "run", {}, run_dir=tmp_path)


def test_seven_of_eight_fails_by_default_and_is_tagged(tmp_path, mlflow_uri):
    tracked = _tracked(tmp_path, mlflow_uri)
    with pytest.raises(RunFailedError) as err:
        _check_requests(SEVEN_OF_EIGHT, RunOptions(), tracked)
    assert str(err.value) == ("1 of 8 benchmark requests failed (above run.max_failed_fraction=0); see bench.log / "
                              "engine.log in the run directory (requests longer than max_model_len are rejected); "
                              "raise run.max_failed_fraction to accept it")
    (run,) = mlflow_runs(mlflow_uri)
    assert run.data.tags["failed_requests"] == "1/8"


def test_tolerated_failures_warn_and_scale_the_objective(tmp_path, mlflow_uri, capsys):
    tracked = _tracked(tmp_path, mlflow_uri)
    _check_requests(SEVEN_OF_EIGHT, RunOptions(max_failed_fraction=0.2), tracked)
    assert "warning: 1 of 8 benchmark requests failed (within run.max_failed_fraction=0.2)" in capsys.readouterr().out
    (run,) = mlflow_runs(mlflow_uri)
    assert run.data.tags["failed_requests"] == "1/8"
    assert objective(RunOptions(max_failed_fraction=0.2), SEVEN_OF_EIGHT["benchmark"]) == 70.0
    assert objective(RunOptions(), {"completed": 8, "failed": 0, "output_throughput": 80.0}) == 80.0


def test_secret_names_and_masks():
    secret = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
              "GOOGLE_APPLICATION_CREDENTIALS", "my_token", "OPENAI_APIKEY"]
    plain = ["HCCL_BUFFSIZE", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "KEYBOARD", "MONKEY", "PWD", "PATH"]
    assert [n for n in secret if not is_secret(n)] == []
    assert [n for n in plain if is_secret(n)] == []
    assert is_secret("MY_SETTING", ["MY_SETTING"])
    assert mask_text("a=hf_abcdef b=hf_abcdef c=xyz", ["hf_abcdef", "xyz"]) == "a=*** b=*** c=xyz"
    config = {"ascend": {"env": {"HF_TOKEN": "hf_x", "X": "1", "M": "v"}}, "run": {}}
    assert mask_env_config(config, ["M"]) == {"ascend": {"env": {"HF_TOKEN": "***", "X": "1", "M": "***"}},
                                              "run": {}}


def test_secret_overrides_are_found_and_masked_in_log_records():
    overrides = ["+ascend.env.HF_TOKEN=hf_one1,hf_two2", "+ascend.env={DB_PASSWORD: pw_dict9, A: plain_val}",
                 "ascend.secret_env=[MY_SETTING]", "+ascend.env.MY_SETTING='marked value'", "engine.seed=0,1",
                 "+ascend.env.VISIBLE=visible_val", "model=smollm2_135m"]
    assert override_secrets(overrides) == ["hf_one1,hf_two2", "hf_one1", "hf_two2", "pw_dict9", "'marked value'",
                                           "marked value"]
    assert override_secrets(["+ascend.env.HF_TOKEN=choice(", "-m"]) == []  # unparsable: Hydra refuses it itself
    previous = logging.getLogRecordFactory()
    try:
        mask_log_records(override_secrets(overrides))
        logger = logging.getLogger("tests.secret_logging")
        records: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = records.append
        logger.addHandler(handler)
        logger.warning("\t#%d : %s", 0, " ".join(overrides))
        logger.warning("no secret here: %s", "visible_val")
        logger.removeHandler(handler)
        assert [r.getMessage() for r in records] == [
            "\t#0 : +ascend.env.HF_TOKEN=*** +ascend.env={DB_PASSWORD: ***, A: plain_val} ascend.secret_env=[MY_SETTING] "
            "+ascend.env.MY_SETTING=*** engine.seed=0,1 +ascend.env.VISIBLE=visible_val model=smollm2_135m",
            "no secret here: visible_val"]
    finally:
        logging.setLogRecordFactory(previous)


def test_launch_references_resolve_from_secrets_or_refuse(monkeypatch):
    from ascendflow.runner.server import resolve_refs

    monkeypatch.delenv("AF_UNSET_SECRET", raising=False)
    assert resolve_refs("${HF_TOKEN}", {"HF_TOKEN": "hf_1"}) == "hf_1"
    with pytest.raises(ConfigError) as err:
        resolve_refs("${AF_UNSET_SECRET}", {})
    assert str(err.value) == ("env.AF_UNSET_SECRET=None: the plan references ${AF_UNSET_SECRET} and it is not set; "
                              "export AF_UNSET_SECRET before the run (ascendflow never writes its value)")


def test_engine_death_causes_from_vllm_log_lines():
    started = ("WARNING [system_utils.py:255] Found ulimit of 20000 and failed to automatically increase with error "
               "current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too "
               "many open files`. Consider increasing with ulimit -n\n"
               "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    assert failure_cause(started) == ('the engine core process died during start-up without reporting an error '
                                      '(vLLM: "Failed core proc(s): {}"; killed, or out of memory)')
    killed = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): " \
             "{'EngineCore_DP0': -9}\n"
    assert failure_cause(killed) == ("engine core process EngineCore_DP0 was killed by SIGKILL (out-of-memory killer, "
                                     "or a person)")
    running = ("(APIServer pid=1) WARNING [core_client.py:817] [shutdown] MPClient: engine core exited unexpectedly; "
               "starting cleanup\nvllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
               "stack trace (above) for the root cause.\n")
    assert failure_cause(running) == ('the engine core process exited unexpectedly (vLLM: "engine core exited '
                                      'unexpectedly"; killed, or out of memory)')
