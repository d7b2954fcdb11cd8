"""Offline generation with ``vllm.LLM`` in a child process, so its engine log is captured like the server's.

``python -m ascendflow.runner.offline_worker PLAN_JSON REQUESTS_JSON OUT_JSON``: builds ``vllm.LLM`` from the plan's
``engine_args``, generates every request (chat prompts through the tokenizer's chat template, or random token ids),
and writes throughput figures to ``OUT_JSON``.
"""

from __future__ import annotations

import json
import sys
import time


def main(plan_path: str, requests_path: str, out_path: str) -> None:
    """Generate the requests and write ``{completed, failed, duration_s, total_input_tokens, total_output_tokens,
    request_throughput (req/s), output_throughput and total_token_throughput (tokens/s)}``."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    plan = json.load(open(plan_path))
    spec = json.load(open(requests_path))
    llm = LLM(**plan["engine_args"])
    tokenizer = llm.get_tokenizer()
    prompts, params = [], []
    for req in spec["requests"]:
        if "prompt" in req:
            text = tokenizer.apply_chat_template([{"role": "user", "content": req["prompt"]}],
                                                 add_generation_prompt=True, tokenize=False)
            prompts.append(TokensPrompt(prompt_token_ids=tokenizer(text).input_ids))
        else:
            prompts.append(TokensPrompt(prompt_token_ids=req["prompt_token_ids"]))
        params.append(SamplingParams(max_tokens=req["output_tokens"], temperature=0.0,
                                     ignore_eos=spec.get("ignore_eos", False)))
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    duration = time.perf_counter() - start
    n_in = sum(len(o.prompt_token_ids) for o in outputs)
    n_out = sum(len(o.outputs[0].token_ids) for o in outputs)
    completed = sum(1 for o in outputs if o.finished)
    result = {
        "completed": completed, "failed": len(prompts) - completed, "duration": duration,
        "total_input_tokens": n_in, "total_output_tokens": n_out,
        "request_throughput": completed / duration, "output_throughput": n_out / duration,
        "total_token_throughput": (n_in + n_out) / duration,
        "sample_output": outputs[0].outputs[0].text if outputs else "",
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main(*sys.argv[1:4])
