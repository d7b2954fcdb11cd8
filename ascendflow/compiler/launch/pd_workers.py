"""PD role launcher (pure): :class:`PDLauncher`, the ``pd-<connector>`` launcher of a PD-disaggregated plan, and the
``vllm serve`` of each of its engine processes.

Launch conventions (vllm-ascend v0.25.1rc1): ``examples/external_online_dp/launch_online_dp.py`` (external DP: one
process per DP rank, ``--data-parallel-rank``, its own devices and port) and the multi-node PD tutorial (internal DP:
``--data-parallel-size-local`` per node, ``--headless`` on an instance's nodes > 0; ``--kv-transfer-config`` per
instance). The per-node scripts of a PD plan are :mod:`.pd_scripts`; the roles' wiring is
:mod:`ascendflow.compiler.deployment`.
"""

from __future__ import annotations

import json
from typing import Any

from ascendflow.compiler.launch.base import Launcher
from ascendflow.compiler.launch.common import data_parallel_flags, engine_args_to_argv, serve_prefix
from ascendflow.compiler.plan import PD_PREFIX, WorkerPlan
from ascendflow.schema.spec import RunSpec
from ascendflow.platforms import platform_for


class PDLauncher(Launcher):
    """``pd-<connector>``: every engine process of both roles started by its node's script (no Ray, no executor
    backend); rehearsed as a PD rehearsal (:mod:`ascendflow.rehearsal.pd_scale`)."""

    name = PD_PREFIX

    @staticmethod
    def name_for(connector: str) -> str:
        """The plan's launcher name for KV connector ``connector`` (``pd-MooncakeConnectorV1``)."""
        return PD_PREFIX + connector

    def worker(self, spec: RunSpec, engine_args: dict[str, Any], node: int, dp_rank: int, devices: list[int],
               port: int, common: dict[str, Any], *, external: bool, headless: bool = False) -> WorkerPlan:
        """One ``vllm serve`` of a role: external DP (``--data-parallel-rank``) or internal DP
        (``--data-parallel-size-local``), then its ``--kv-transfer-config`` (``common["config"]``), host and port.

        Args:
            engine_args: the role's engine arguments (``model`` first).
            node, dp_rank, devices, port: where it runs, its (first) DP rank, its devices and API port.
            common: ``host`` (this node's address), ``head`` (the instance's first node: the DP address) and
                ``config`` (the instance's ``--kv-transfer-config``).
            external, headless: external DP; a node of an internal-DP instance that serves no API.
        """
        argv = [*serve_prefix(spec.hardware.kind, False), str(engine_args["model"]), *engine_args_to_argv(engine_args)]
        if engine_args["data_parallel_size"] > 1:
            rpc_port = spec.parallel.data_parallel_rpc_port
            argv += (data_parallel_flags(address=common["head"], rpc_port=rpc_port, rank=dp_rank) if external else
                     data_parallel_flags(address=common["head"], rpc_port=rpc_port, start=dp_rank, headless=headless,
                                         local=len(devices) // engine_args["tensor_parallel_size"]))
        argv += ["--kv-transfer-config", json.dumps(common["config"], separators=(",", ":")), "--host", "0.0.0.0",
                 "--port", str(port)]
        hw = spec.hardware
        env = {hw.visible_devices_env: ",".join(map(str, devices))} if hw.visible_devices_env else {}
        if platform_for(hw.kind).hccl_env and not spec.pd.single_node:
            env["HCCL_IF_IP"] = common["host"]
        return WorkerPlan(node_rank=node, dp_rank=dp_rank, devices=devices, env=env, command=argv)
