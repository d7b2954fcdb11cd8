"""scripts/install_browser.sh (called by scripts/setup.sh) never fails the set-up: a user who cannot run apt-get gets
one clear note and exit 0. Runs the real script as a real non-root user (``nobody`` when the tests run as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_browser.sh"


def test_a_non_root_user_without_chromium_gets_a_note_and_exit_0():
    # The tools the script uses, without chromium or sudo on PATH, in a folder the other user can read.
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        bin_dir = Path(folder)
        bin_dir.chmod(0o755)
        for tool in ("bash", "id", "apt-get", "env"):
            (bin_dir / tool).symlink_to(shutil.which(tool))
        proc = _run(bin_dir)
    assert proc.returncode == 0
    assert proc.stderr == ("setup: note: chromium not installed and this user cannot run apt-get (not root, no "
                           "password-less sudo); skipped. Optional: 'sudo apt-get install chromium' enables "
                           "tests/engine/test_mlflow_ui.py\n")


def _run(bin_dir: Path) -> subprocess.CompletedProcess:
    run_as = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*run_as, "env", f"PATH={bin_dir}", "bash", str(SCRIPT)], capture_output=True, text=True,
                          timeout=60)
