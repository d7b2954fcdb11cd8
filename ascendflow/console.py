"""Terminal output: progress lines for long steps and the end-of-run summary table (rich)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)
#: Seconds after which a non-terminal prints an unchanged status again (its counter, e.g. the /health wait).
LOG_REPEAT_S = 15.0


@contextmanager
def step(title: str) -> Iterator[Any]:
    """A spinner with ``title`` while the block runs; yields ``update(text)`` for live status lines."""
    if not console.is_terminal:
        console.print(f"[bold]…[/] {escape(title)}")
        last = {"text": "", "printed": "", "at": 0.0}

        def update(text: str) -> None:
            # Non-terminals (CI logs) get each distinct message once, not a spinner, and a counter that keeps
            # running ("waiting for the engine's /health … 30 s") again every LOG_REPEAT_S; a message that has not
            # changed since it was printed is not printed again (issue 25 row 10: "benchmark 1/4 requests" every 15 s)
            now = time.monotonic()
            if text.split("…")[0] != last["text"].split("…")[0] or (now - last["at"] >= LOG_REPEAT_S
                                                                     and text != last["printed"]):
                console.print(f"  {text}", markup=False)
                last["at"], last["printed"] = now, text
            last["text"] = text

        yield update
        return
    with console.status(f"[bold]{escape(title)}[/]") as status:
        yield lambda text: status.update(f"[bold]{escape(title)}[/] — {escape(text)}")
    console.print(f"[green]✓[/] {escape(title)}")


def fail_line(message: str) -> None:
    """Print a one-line error to stderr (the first line of ``message`` in bold red, the rest plain)."""
    first, *rest = message.splitlines() or [""]
    # the message is text, never rich markup: "[a,b]" in a fix was printed as nothing (rich read it as a tag)
    err_console.print(f"[bold red]error:[/] {escape(first)}", soft_wrap=True)
    for line in rest:
        err_console.print(line, soft_wrap=True, markup=False)
    sys.stderr.flush()


def warn_err(message: str) -> None:
    """Print a one-line warning to stderr (something went wrong that the run survived)."""
    err_console.print(f"[yellow]warning:[/] {escape(message)}", soft_wrap=True)
    sys.stderr.flush()


def summary(title: str, rows: Mapping[str, str], footer: list[str]) -> None:
    """A two-column summary table followed by ``footer`` lines (e.g. the ``mlflow ui`` command)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for k, v in rows.items():
        table.add_row(k, v)
    console.print(table)
    for line in footer:
        console.print(line, soft_wrap=True, markup=False)


def memory_waterfall(memory: Mapping[str, int], kv_line: str, width: int = 34,
                     title: str = "memory per device (bottleneck)") -> None:
    """Per-device memory waterfall at the bottleneck device (GiB and a bar per component), then the KV capacity line.

    Args:
        memory: the plan's ``memory`` section (bytes).
        kv_line: "KV capacity: N blocks × B = T tokens, max concurrency C at max_model_len=L".
        width: bar width in characters for the whole device.
        title: what the device is (a PD plan's: the decode role's).
    """
    gib = 1 << 30
    total = memory["device_total_bytes"]
    used = sum(memory[k] for k in ("weights_bytes", "activation_bytes", "non_torch_bytes", "kv_cache_bytes"))
    rows = [("weights", memory["weights_bytes"], "cyan"),
            *([("  of which draft model", memory["draft_weights_bytes"], "cyan")]
              if memory.get("draft_weights_bytes") else []),
            ("activation (peak)", memory["activation_bytes"], "yellow"),
            ("non-torch", memory["non_torch_bytes"], "magenta"),
            ("graph (not reserved)", memory["graph_bytes"], "blue"),
            ("KV cache", memory["kv_cache_bytes"], "green"),
            ("free", max(0, total - used), "white")]
    table = Table(title=f"{title}, {total / gib:.2f} GiB total, requested "
                        f"{memory['requested_bytes'] / gib:.2f} GiB", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_column()
    offset = 0
    for name, size, colour in rows:
        cells = max(0, round(width * size / total)) if total else 0
        start = round(width * offset / total) if total else 0
        bar = " " * start + f"[{colour}]" + "█" * cells + "[/]"
        table.add_row(name, f"{size / gib:8.2f} GiB", bar)
        if name not in ("graph (not reserved)", "  of which draft model"):
            offset += size
    console.print(table)
    console.print(kv_line, soft_wrap=True)


def warn_lines(warnings: list[str]) -> None:
    """Print the plan's warnings, one per line."""
    for w in warnings:
        console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)


def info_lines(lines: list[str]) -> None:
    """Print plain lines (a PD plan's per-role memory and KV lines), one per line."""
    for line in lines:
        console.print(line, soft_wrap=True, markup=False)
