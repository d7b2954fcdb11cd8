#!/usr/bin/env bash
# Headless Chromium for tests/engine/test_mlflow_ui.py, which renders the real MLflow UI of a sweep. Optional for users:
# installing it needs root (apt-get), so it is tried only as root or with password-less sudo; when it cannot be
# installed this prints one clear note and exits 0, so the set-up never fails for it. CI installs it, and the UI test
# fails (not skips) without it.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  :
elif ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: note: chromium not installed and no apt-get here; install a Chromium browser to run tests/engine/test_mlflow_ui.py (optional)" >&2
else
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO="none"; fi
  if [ "$SUDO" = "none" ]; then
    echo "setup: note: chromium not installed and this user cannot run apt-get (not root, no password-less sudo); skipped. Optional: 'sudo apt-get install chromium' enables tests/engine/test_mlflow_ui.py" >&2
  elif ! ( $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium ) >/tmp/ascendflow-setup-chromium.log 2>&1; then
    echo "setup: note: apt-get could not install chromium (see /tmp/ascendflow-setup-chromium.log); skipped. Optional: it enables tests/engine/test_mlflow_ui.py" >&2
  fi
fi

