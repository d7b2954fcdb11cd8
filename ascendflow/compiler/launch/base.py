"""What a launcher is (pure): :class:`Launcher`, the interface every launcher module implements, one class per way of
starting a plan's nodes. The registry that maps ``Plan.launcher`` names to the classes is :mod:`.registry`; the names
themselves are in :mod:`ascendflow.compiler.plan` (the placement pass, below this floor, picks them).

A launcher says what it is called, the ``--distributed-executor-backend`` it needs, the environment every node adds
and the argv of node ``k``, the lines its ``node<k>.sh`` runs before ``exec`` and the extra files it writes, and
whether a rehearsal (``run.mode=rehearse``, :mod:`ascendflow.rehearsal`) can run it and needs Ray for it.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from ascendflow.compiler.plan import NodePlacement, Plan
from ascendflow.schema.spec import RunSpec


class Launcher:
    """One launcher; subclasses set the class attributes and implement :meth:`argv`.

    Attributes:
        name: the ``Plan.launcher`` value (``single``, ``mp-dp``, ``mp-nnodes``, ``ray``; ``pd-<connector>``).
        executor_backend: vLLM ``--distributed-executor-backend`` the engine arguments carry (``None``: not set,
            vLLM's default).
        multinode: the launcher starts more than one node (``single`` does not: nothing to rehearse).
        spans_nodes: one DP rank spans nodes (the script header names worker ranks, not DP ranks).
        rehearsable: a rehearsal can run its scripts on this machine's CPU engine.
        needs_ray: it starts a Ray cluster (a rehearsal then needs ``ray`` and its own Ray session per run).
    """

    name: ClassVar[str]
    executor_backend: ClassVar[str | None] = None
    multinode: ClassVar[bool] = True
    spans_nodes: ClassVar[bool] = False
    rehearsable: ClassVar[bool] = True
    needs_ray: ClassVar[bool] = False

    def engine_args(self, engine_args: dict[str, Any]) -> dict[str, Any]:
        """``engine_args`` with :attr:`executor_backend` appended (last flag of the engine arguments)."""
        if self.executor_backend is None:
            return engine_args
        return {**engine_args, "distributed_executor_backend": self.executor_backend}

    def env(self, kind: str) -> dict[str, str]:
        """Variables every node exports for this launcher on hardware ``kind`` (after the common environment)."""
        return {}

    def argv(self, spec: RunSpec, engine_args: dict[str, Any], node: NodePlacement) -> list[str]:
        """The command node ``node.node_rank`` runs (``exec`` of ``node<k>.sh``)."""
        raise NotImplementedError(f"launcher {self.name} builds no per-node argv")

    def head_lines(self, plan: Plan, node: int, quote: Callable[[str], str]) -> list[str]:
        """Lines of ``node<k>.sh`` before its ``exec`` (``quote``: the scripts' shell quoting)."""
        return []

    def ranks_line(self, plan: Plan, node: int) -> str:
        """The script header's words for what node ``node`` runs: its first DP rank, or (a DP rank spanning nodes)
        its worker ranks and PP stages."""
        if self.spans_nodes and plan.placement:
            where = plan.placement[node]
            return (f"{plan.launcher}: worker ranks {where.ranks[0]}-{where.ranks[-1]} (PP stages {where.pp_stages}) "
                    f"of one DP rank")
        return f"DP ranks from {plan.workers[node].dp_rank}"

    def scripts(self, plan: Plan) -> dict[str, str]:
        """Launch files of this launcher besides ``node<k>.sh``, ``preflight.sh`` and ``lws.yaml``."""
        return {}
