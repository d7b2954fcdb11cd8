"""Profiling of a served run (``run.profile=true``): vLLM's own torch profiler around the benchmark window, and the
top operators by self time read back from its trace."""

from .ops import find_traces, format_table, top_ops
from .summary import summarize_profile
from .switches import PROFILE_DIR, profiler_config_arg

__all__ = ["PROFILE_DIR", "find_traces", "format_table", "profiler_config_arg", "summarize_profile", "top_ops"]
