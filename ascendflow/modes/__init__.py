"""One handler per ``run.mode`` behind one interface (:class:`ascendflow.modes.base.Mode`), and the registry the job
picks it from. Adding a mode: one module with a :class:`Mode` subclass, one entry in :data:`MODES` (and its name in
``RunOptions.mode``).

Layer: entry points (with :mod:`ascendflow.app`): the handlers use the runner and tracking; nothing below imports
this package.
"""

from __future__ import annotations

from ascendflow.modes.attach import AttachMode
from ascendflow.modes.base import Job, Mode, Outcome
from ascendflow.modes.capacity import CapacityMode
from ascendflow.modes.offline import OfflineMode
from ascendflow.modes.plan import PlanMode
from ascendflow.modes.rehearse import RehearseMode
from ascendflow.modes.search import SearchMode
from ascendflow.modes.serve import ServeMode
from ascendflow.runner.detect import hardware_present
from ascendflow.schema import ConfigError, RunSpec

#: ``run.mode`` value -> its handler.
MODES: dict[str, type[Mode]] = {m.name: m for m in (PlanMode, ServeMode, OfflineMode, CapacityMode, RehearseMode,
                                                    AttachMode, SearchMode)}


def mode_for(spec: RunSpec) -> Mode:
    """The handler of the run's mode: ``auto`` serves when the plan's hardware is on this machine, else plans.

    Raises:
        ConfigError: a mode that runs on the plan's hardware (``needs_hardware``) while that hardware is not on this
            machine.
    """
    present = hardware_present(spec.hardware)
    mode = MODES[("serve" if present else "plan") if spec.run.mode == "auto" else spec.run.mode]()
    if mode.needs_hardware and not present:
        raise ConfigError("run.mode", spec.run.mode, f"hardware={spec.hardware.name} ({spec.hardware.kind}) is not "
                                                     "on this machine; use run.mode=plan (or auto) to write the plan "
                                                     "and launch scripts for it")
    return mode


__all__ = ["MODES", "Job", "Mode", "Outcome", "mode_for"]
