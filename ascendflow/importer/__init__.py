"""Bring an existing vLLM deployment to ascendflow (and to Ascend): ``python -m ascendflow.import``.

- :mod:`~ascendflow.importer.command`: read ``vllm serve`` commands with the installed vLLM's own parser;
- :mod:`~ascendflow.importer.sources`: where they come from (a command, a file of one command per node, a
  vllm-ascend CI config), :mod:`~ascendflow.importer.ci`: CI configs rendered as vllm-ascend's harness renders them
  (single node, multi-node internal DP, PD roles);
- :mod:`~ascendflow.importer.recipe`: map every option to its ascendflow key (the rest to ``engine.extra_args``,
  or named with the reason it is not carried) and write the recipe;
- :mod:`~ascendflow.importer.roundtrip`: plan the recipe and read its argv back (the round trip);
- :mod:`~ascendflow.importer.pd` / :mod:`~ascendflow.importer.pd_roundtrip`: a CI PD config as a ``pd`` recipe, and
  the round trip of every process, per node and DP rank;
- :mod:`~ascendflow.importer.migrate`: plan it on other hardware and release, side by side;
- :mod:`~ascendflow.importer.baseline`: the source's measured figures (carried by the migrated plan as
  ``run.baseline``; ``python -m ascendflow.compare`` sets them beside its run's).

This package imports vLLM (for its parser); the compiler never does.
"""
