"""Performance model: per-op timing tables (measured in ``measure``), a roofline fallback and a model of vLLM v1
scheduling that predicts TTFT, TPOT, throughput and capacity at an SLO before launch (docs/performance_model.md)."""
