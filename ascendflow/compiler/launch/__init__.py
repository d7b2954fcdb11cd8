"""How the engine is started: its arguments (:mod:`.engine_args`) and environment (:mod:`.environment`), one module
per launcher (:mod:`.multinode_dp`: whole DP ranks per node; :mod:`.nnodes`: vLLM's ``--nnodes``; :mod:`.ray_cluster`:
Ray; :mod:`.lws`: a LeaderWorkerSet manifest), what they share (:mod:`.common`) and the scripts that run them
(:mod:`.scripts`). Launcher modules import :mod:`.common`, never each other."""
