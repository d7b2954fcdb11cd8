"""Real SIGINT/SIGTERM delivered to this process: raised at once, or held back until an MLflow store call returns."""

from __future__ import annotations

import os
import signal

import pytest

from ascendflow import interrupts
from ascendflow.interrupts import Terminated, install_sigterm, restore_handlers, stopping, store_call


@pytest.fixture
def handlers():
    previous = install_sigterm()
    yield
    restore_handlers(previous)
    interrupts._STATE.update(signal=None, depth=0, pending=None)


def test_sigterm_outside_a_store_call_raises_at_once(handlers):
    with pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000_000):  # the handler runs between two bytecodes, long before this ends
            pass
    assert stopping()


@pytest.mark.parametrize("signum, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_a_signal_during_a_store_call_is_raised_when_it_returns(handlers, tmp_path, signum, raised):
    from mlflow.tracking import MlflowClient

    from ascendflow.tracking.store import GuardedClient

    client = GuardedClient(MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"))
    done = []
    with pytest.raises(raised):
        with store_call():
            os.kill(os.getpid(), signum)
            done.append(client.create_experiment("held"))  # a write that must not be cut in half
    assert done and stopping()
    # The store is not left locked: the next write from this process goes through.
    assert client.get_experiment_by_name("held").experiment_id == done[0]
    client.create_experiment("after")
