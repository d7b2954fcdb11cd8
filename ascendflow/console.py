"""Terminal output: progress lines for long steps and the end-of-run summary table (rich)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from rich.console import Console
from rich.table import Table

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


@contextmanager
def step(title: str) -> Iterator[Any]:
    """A spinner with ``title`` while the block runs; yields ``update(text)`` for live status lines."""
    if not console.is_terminal:
        console.print(f"[bold]…[/] {title}")
        last = {"text": ""}

        def update(text: str) -> None:
            # Non-terminals (CI logs) get each distinct message once, not a spinner.
            if text.split("…")[0] != last["text"].split("…")[0]:
                console.print(f"  {text}")
            last["text"] = text

        yield update
        return
    with console.status(f"[bold]{title}[/]") as status:
        yield lambda text: status.update(f"[bold]{title}[/] — {text}")
    console.print(f"[green]✓[/] {title}")


def fail_line(message: str) -> None:
    """Print a one-line error to stderr (the first line of ``message`` in bold red, the rest plain)."""
    first, *rest = message.splitlines() or [""]
    err_console.print(f"[bold red]error:[/] {first}", soft_wrap=True)
    for line in rest:
        err_console.print(line, soft_wrap=True, markup=False)
    sys.stderr.flush()


def summary(title: str, rows: Mapping[str, str], footer: list[str]) -> None:
    """A two-column summary table followed by ``footer`` lines (e.g. the ``mlflow ui`` command)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows.items():
        table.add_row(k, v)
    console.print(table)
    for line in footer:
        console.print(line, soft_wrap=True, markup=False)
