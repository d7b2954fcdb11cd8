"""The compiler's passes, in the order :func:`ascendflow.compiler.compile.compile_colocated` runs them. Each is a
function that returns its value and its warnings (never appends to a shared list) and refuses through
:mod:`ascendflow.compiler.checks`:

1. :mod:`.placement` — parallel sizes against model and hardware, ranks to nodes, the launcher;
2. :mod:`.inputs` — model path, dtypes, device memory, scheduler limits and block size, ``additional_config``;
3. :mod:`.graph` — sequence parallelism and graph capture (:func:`ascendflow.compiler.graph.capture.graph_plan`);
4. :mod:`.memory` — per PP stage: weights, activation, graph and non-torch memory, the KV budget;
5. :mod:`.kv` — per PP stage: the KV cache (with the release's multi-group scaling), the bottleneck stage;
6. checks — :func:`ascendflow.compiler.checks.memory.check_kv_fits` (the KV cache against one request);
7. :mod:`.launch` — engine arguments, environment and every node's command (the plan's launcher).

This package sits on the compiler's top floor with ``compile.py`` (it wires the passes' sub-packages and the
launchers). Adding a pass: a module here with one ``*_pass`` function, one line in ``compile_colocated``.
"""
