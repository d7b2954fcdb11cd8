"""Device memory, term by term: weights of every kind (:mod:`.weights` and its family modules,
:mod:`.checkpoint_weights` for a checkpoint on disk, :mod:`.quant_bytes` and :mod:`.dtypes` for bytes per element),
the KV cache (:mod:`.kv_specs` per layer, :mod:`.kv_layout` as vLLM's manager groups it, :mod:`.kv_budget` for the
blocks that fit), the activation, graph and non-torch overheads (:mod:`.overheads`) and which figures are estimates
(:mod:`.estimates`)."""
