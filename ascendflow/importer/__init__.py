"""Bring an existing vLLM deployment to ascendflow (and to Ascend): ``python -m ascendflow.import``.

- :mod:`~ascendflow.importer.command`: read ``vllm serve`` commands (a command, a file of one command per node, a
  vllm-ascend single-node CI config) with the installed vLLM's own parser;
- :mod:`~ascendflow.importer.recipe`: map every option to its ascendflow key (the rest to ``engine.extra_args``,
  or named with the reason it is not carried) and write the recipe;
- :mod:`~ascendflow.importer.roundtrip`: plan the recipe and read its argv back (the round trip);
- :mod:`~ascendflow.importer.migrate`: plan it on other hardware and release, side by side;
- :mod:`~ascendflow.importer.baseline`: the source's measured figures against the first Ascend measurement.

This package imports vLLM (for its parser); the compiler never does.
"""
