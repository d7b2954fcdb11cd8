"""How the engine is started: its arguments (:mod:`.engine_args`) and environment (:mod:`.environment`), one class per
launcher behind :class:`.base.Launcher` and the registry of their names (:mod:`.registry`): :mod:`.multinode_dp`
(``single``, ``mp-dp``: whole DP ranks per node), :mod:`.nnodes` (``mp-nnodes``: vLLM's ``--nnodes``),
:mod:`.ray_cluster` (``ray``), :mod:`.pd_workers` (``pd-<connector>``); the LeaderWorkerSet manifest any multi-node
NPU plan gets (:mod:`.lws`, no launcher), what they share (:mod:`.common`) and the scripts that run them
(:mod:`.scripts`, :mod:`.pd_scripts`). Launcher modules import :mod:`.base` and :mod:`.common`, never each other."""
