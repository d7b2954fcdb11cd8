"""Refusals before launch: configs the engine accepts but fails with at start-up (:mod:`.startup`) and the scheduler
limits and KV block size with the release's defaults applied and checked (:mod:`.limits`)."""
