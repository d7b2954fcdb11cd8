"""Rules per engine release, as data with typed loaders: :mod:`.engine_rules` (``data/engine_rules.yaml``: what each
release does), :mod:`.software` (``data/version_matrix.yaml``: the software rows) and :mod:`.additional_config` (the
vllm-ascend ``additional_config`` keys each release reads). A new release is a row here plus its tests."""
