"""Benchmark: time to compile each recipe's plan (target: under 50 ms per plan on a 2-core machine).

    python scripts/bench_compile.py [--repeat 50] [--out outputs/bench/compile_times.json]

Composition (Hydra) and model resolution are done once per recipe outside the timing; the timed call is
``compile_plan`` (the pure compiler: topology, weights, memory, KV, graph, launch). Results: median and p95 in ms.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ascendflow.compiler import compile_plan
from ascendflow.models.resolve import resolve_model
from ascendflow.platforms import HostFacts
from ascendflow.schema import load_spec

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    """Time ``compile_plan`` for every recipe and write the results as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "compile_times.json")
    args = parser.parse_args()
    results = {}
    for recipe in sorted(p.stem for p in (REPO / "recipes" / "recipe").glob("*.yaml")):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            raw = OmegaConf.to_container(compose(config_name="config", overrides=[f"+recipe={recipe}"]), resolve=True)
        raw.pop("hydra", None)
        spec = load_spec(raw)
        model = resolve_model(spec.model, need_weights=False)
        path = model.path or spec.model.id
        compile_plan(spec, model.architecture, model_path=path, host=HostFacts(cpu_memory_bytes=16 << 30),
                         checkpoint=model.checkpoint)  # warm caches
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            compile_plan(spec, model.architecture, model_path=path, host=HostFacts(cpu_memory_bytes=16 << 30),
                         checkpoint=model.checkpoint)
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        results[recipe] = {"median_ms": round(statistics.median(times), 3),
                           "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3), "repeat": args.repeat}
        print(f"{recipe:24s} median {results[recipe]['median_ms']:7.3f} ms   p95 {results[recipe]['p95_ms']:7.3f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                                    "target_ms": 50, "recipes": results}, indent=2) + "\n")
    worst = max(r["p95_ms"] for r in results.values())
    print(f"worst p95 {worst:.3f} ms (target < 50 ms); results in {args.out}")


if __name__ == "__main__":
    main()
