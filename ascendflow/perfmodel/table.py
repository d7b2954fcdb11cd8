"""Per-op timing tables: file name, version matching, loading (the caller's I/O) and interpolation (pure).

A table is JSON written by :mod:`ascendflow.perfmodel.measure`: ``version`` (:data:`TABLE_VERSION`),
``hardware``, ``software`` (version-matrix row), ``torch``, ``dtype``, ``threads``, ``machine``, ``date``,
``shape_key`` (:meth:`LayerShapes.key`), and ``ops``: ``{op: {point: µs}}`` where a point is a token count
(GEMMs, ``lm_head``, ``elementwise``), a prompt length (``attn_prefill``) or ``"batch,context"`` (``attn_decode``).
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import Any, Mapping

from ascendflow.perfmodel.shapes import LayerShapes

#: Format version of the table files; a table of another version is not used (re-measure it).
TABLE_VERSION = 1
TABLES_DIR = Path(__file__).parent / "tables"


def table_name(hardware: str, shapes: LayerShapes, torch_version: str, software: str) -> str:
    """``<hardware>-<model_type>-<shape key>-tp<N>-torch<ver>-<software>.json`` (``+cpu`` style local tags dropped)."""
    return f"{hardware}-{shapes.name}-{shapes.key()}-tp{shapes.tp}-torch{torch_version.split('+')[0]}-{software}.json"


def find_table(hardware: str, software: str, shapes: LayerShapes, tables_dir: Path = TABLES_DIR,
               ) -> dict[str, Any] | None:
    """The newest table for this hardware, software row and per-rank shapes (any torch), ``None`` when none matches.

    I/O: called by the app (the caller), never by the compiler or the pure predictor.
    """
    matches = []
    for path in sorted(tables_dir.glob(f"{hardware}-{shapes.name}-{shapes.key()}-tp{shapes.tp}-*.json")):
        table = json.loads(path.read_text())
        if table_matches(table, hardware, software, shapes):
            matches.append({**table, "file": path.name})
    return max(matches, key=lambda t: t["date"]) if matches else None


def table_matches(table: Mapping[str, Any], hardware: str, software: str, shapes: LayerShapes) -> bool:
    """A table applies when its format version, hardware, software row and shape key all match."""
    return (table.get("version") == TABLE_VERSION and table.get("hardware") == hardware
            and table.get("software") == software and table.get("shape_key") == shapes.key())


def _interp(xs: list[float], ys: list[float], x: float) -> float:
    """Piecewise-linear in ``x``; beyond the grid, the line through the two nearest points (at least 0)."""
    if len(xs) == 1:
        return ys[0]
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return max(y0 + (y1 - y0) * (x - x0) / (x1 - x0), 0.0)


class OpTimes:
    """Op times from a table, in seconds, at any token count (interpolated). Pure."""

    def __init__(self, table: Mapping[str, Any]):
        ops = table["ops"]
        self._curve = {op: self._sorted(points) for op, points in ops.items() if op != "attn_decode"}
        decode = {tuple(int(v) for v in p.split(",")): us for p, us in ops["attn_decode"].items()}
        # decode attention per layer: a + b × (sum of context tokens), least squares over the grid (the kernel
        # reads every cached token once); grid points: DECODE_BATCH × DECODE_CONTEXT of measure.py.
        xs = [b * c for b, c in decode]
        ys = list(decode.values())
        n, mx, my = len(xs), sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        self.decode_fixed_us, self.decode_per_token_us = max(my - slope * mx, 0.0), slope

    @staticmethod
    def _sorted(points: Mapping[str, float]) -> tuple[list[float], list[float]]:
        pairs = sorted((float(k), float(v)) for k, v in points.items())
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def op_s(self, op: str, tokens: float) -> float:
        """One call of ``op`` (one layer) on ``tokens`` rows, seconds."""
        return _interp(*self._curve[op], tokens) * 1e-6 if tokens > 0 else 0.0

    def decode_attn_s(self, seqs: int, context_tokens: int) -> float:
        """Decode attention of one layer for ``seqs`` sequences holding ``context_tokens`` cached tokens, seconds."""
        return (self.decode_fixed_us + self.decode_per_token_us * context_tokens) * 1e-6 if seqs else 0.0
