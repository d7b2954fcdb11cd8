"""``parallel.node_addresses`` and ``parallel.nic_name`` rules (issue 20 row 12e); the one-line CLI errors are in
``tests/cli/test_bad_inputs.py``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ascendflow.schema.parallel import ParallelSpec


def test_ips_pass_and_are_normalised_loopback_may_repeat_for_a_rehearsal():
    assert ParallelSpec(nodes=2, node_addresses=["10.0.0.1", " fe80::0:1 "]).node_addresses == ("10.0.0.1", "fe80::1")
    assert ParallelSpec(nodes=2, node_addresses=["127.0.0.1"] * 2).node_addresses == ("127.0.0.1", "127.0.0.1")
    assert ParallelSpec(nic_name="enp189s0f0").nic_name == "enp189s0f0"
    assert ParallelSpec(nic_name="bond0.100").nic_name == "bond0.100"


@pytest.mark.parametrize("field,value", [
    ("node_addresses", ["node-a", "node-b"]), ("node_addresses", ["10.0.0.1", "10.0.0.1"]),
    ("node_addresses", ["10.0.0.1; rm -rf /"]), ("nic_name", "eth0;x"), ("nic_name", "eth0,eth1"),
    ("nic_name", "a" * 16), ("nic_name", "^eth"), ("nic_name", "eth 0"), ("nic_name", "")])
def test_what_hccl_cannot_take_is_refused(field, value):
    with pytest.raises(ValidationError):
        ParallelSpec(nodes=2, **{field: value})
