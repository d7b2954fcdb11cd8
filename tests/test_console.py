"""Progress lines in a non-terminal (CI logs, pipes): each new status once, and a running counter again every
``LOG_REPEAT_S`` (found by a new-user trial: the /health wait stayed at "… 0 s" in a log)."""

from __future__ import annotations

import time

from ascendflow import console


def test_a_non_terminal_repeats_a_running_counter(capsys, monkeypatch):
    monkeypatch.setattr(console, "LOG_REPEAT_S", 0.3)
    with console.step("engine") as update:
        update("model weights … 1 s")
        for second in range(6):
            update(f"waiting for the engine's /health … {second} s")
            time.sleep(0.2 if second < 5 else 0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["… engine", "  model weights … 1 s", "  waiting for the engine's /health … 0 s"]
    repeated = lines[3:]  # one update in two at the least (0.2 s apart, 0.3 s between prints), each one at most
    assert 2 <= len(repeated) <= 5 and all(line.startswith("  waiting for the engine's /health … ") for line in repeated)
    assert lines[-1] != lines[2]  # the counter moved on


def test_a_message_that_did_not_change_is_not_printed_again(capsys, monkeypatch):
    # Issue 25 row 10: a rehearsal's log held the same "benchmark 1/4 requests" line every LOG_REPEAT_S.
    monkeypatch.setattr(console, "LOG_REPEAT_S", 0.1)
    with console.step("benchmark") as update:
        for text in ("benchmark starting", "benchmark 1/4 requests", "benchmark 1/4 requests", "benchmark 1/4 requests",
                     "benchmark 2/4 requests"):
            update(text)
            time.sleep(0.15)
    assert capsys.readouterr().out.splitlines() == [
        "… benchmark", "  benchmark starting", "  benchmark 1/4 requests", "  benchmark 2/4 requests"]
