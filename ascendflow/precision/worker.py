"""One engine of the precision report, run in its own process: ``python -m ascendflow.precision.worker JOB OUT``.

Reads the job JSON (``llm``: vLLM ``LLM`` keyword arguments; ``prompts``: token ids; ``max_tokens``; ``teacher``:
token-id sequences to score, or null to score the prompts followed by this engine's own greedy outputs; ``texts``:
token ids of the perplexity text) and writes the result JSON: greedy output token ids, and for every teacher and
text sequence the log-probability of each token given the ones before it, the engine's top-1 token there and the
gap between its two most likely tokens (vLLM ``SamplingParams(prompt_logprobs=2)``: the actual token's logprob plus
the two most likely tokens; position 0 has none). One engine per process, freed when the process exits (the
machine is shared: DESIGN.md).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def _scored(outputs) -> tuple[list[list[float | None]], list[list[int | None]], list[list[float | None]]]:
    """Per sequence: logprob of each actual token, the top-1 token id, and the gap in nats between the top-1 and
    top-2 logprobs at each position (None at position 0)."""
    logprobs, top1, margins = [], [], []
    for out in outputs:
        seq = list(out.prompt_token_ids)
        lps: list[float | None] = [None]
        tops: list[int | None] = [None]
        gaps: list[float | None] = [None]
        for pos, entry in enumerate(out.prompt_logprobs[1:], start=1):
            lps.append(float(entry[seq[pos]].logprob))
            ranked = {lp.rank: (t, lp.logprob) for t, lp in entry.items()}
            tops.append(ranked[1][0])
            gaps.append(float(ranked[1][1] - ranked[2][1]) if 2 in ranked else None)
        logprobs.append(lps)
        top1.append(tops)
        margins.append(gaps)
    return logprobs, top1, margins


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Run the job on one vLLM engine and return the result dict (see the module docstring).

    Raises:
        Exception: whatever vLLM raises while starting the engine or generating.
    """
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.monotonic()
    llm = LLM(**job["llm"])
    loaded = time.monotonic()
    greedy_params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], seed=0)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in job["prompts"]], greedy_params, use_tqdm=False)
    greedy = [list(o.outputs[0].token_ids) for o in outs]
    teacher = job.get("teacher") or [p + g for p, g in zip(job["prompts"], greedy)]
    score = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=2)
    t_lp, t_top, t_gap = _scored(llm.generate([TokensPrompt(prompt_token_ids=s) for s in teacher], score,
                                              use_tqdm=False))
    x_lp, _, _ = _scored(llm.generate([TokensPrompt(prompt_token_ids=s) for s in job["texts"]], score,
                                      use_tqdm=False))
    return {"greedy": greedy, "teacher": teacher, "teacher_logprobs": t_lp, "teacher_top1": t_top,
            "teacher_top1_margin": t_gap, "text_logprobs": x_lp, "load_seconds": round(loaded - started, 1),
            "run_seconds": round(time.monotonic() - loaded, 1)}


def main() -> None:
    """Entry point: ``worker.py JOB_JSON OUT_JSON``."""
    job_path, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    result = run(json.loads(job_path.read_text()))
    out_path.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
