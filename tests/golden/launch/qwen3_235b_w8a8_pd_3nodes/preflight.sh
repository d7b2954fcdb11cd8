#!/usr/bin/env bash
# ascendflow preflight for plan da3632ddee55eece (atlas_800i_a3; vllm-ascend-0.23.0, CANN 9.1.0).
# Run on every node before launch/node<k>.sh. Exits non-zero at the first failed check.
set -euo pipefail
fail() { echo "preflight: $*" >&2; exit 1; }

# 1. CANN toolkit and NNAL (libatb.so) environments are sourced.
[ -n "${ASCEND_TOOLKIT_HOME:-}" ] || fail "CANN not sourced: source /usr/local/Ascend/ascend-toolkit/set_env.sh"
[ -n "${ATB_HOME_PATH:-}" ] || fail "NNAL not sourced (libatb.so: cannot open shared object file): source /usr/local/Ascend/nnal/atb/set_env.sh"
grep -q "9.1.0" "$ASCEND_TOOLKIT_HOME"/*/ascend_toolkit_install.info 2>/dev/null || grep -rqs "9.1.0" "$ASCEND_TOOLKIT_HOME/version.cfg" || echo "preflight: warning: CANN 9.1.0 not found in $ASCEND_TOOLKIT_HOME" >&2

# 2. At least 16 devices visible: the devices the runtime numbers (ASCEND_RT_VISIBLE_DEVICES 0-15 in launch/node<k>.sh),
#    counted by torch_npu (torch.npu.device_count(), CANN aclrtGetDeviceCount). Not npu-smi's NPU IDs, which
#    may count packages: an Atlas A3's 16 devices are 8 910C packages of two dies (its docs write 128G x 8).
command -v npu-smi >/dev/null || fail "npu-smi not found: install the Ascend driver"
found=$(python3 -c 'import torch, torch_npu; print(torch.npu.device_count())' 2>/dev/null || echo 0)
[ "$found" -ge 16 ] || fail "$found devices visible to torch_npu (0 also when torch_npu does not import: see check 3), the plan needs 16 per node (devices 0-15)"

# 3. Installed versions equal the plan's row.
python3 - <<'PY' || exit 1
import sys
from importlib import metadata
want = {"vllm": "0.23.0", "vllm-ascend": "0.23.0.post1", "torch": "2.10.0", "torch-npu": "2.10.0.post4"}
bad = []
for dist, version in want.items():
    try:
        have = metadata.version(dist)
    except metadata.PackageNotFoundError:
        have = None
    if have is None or have.split('+')[0] != version:
        bad.append(f'{dist} {have} (plan: {version})')
if bad:
    sys.exit('preflight: version mismatch: ' + ', '.join(bad) + '. Fix: pip install vllm==0.23.0 && pip install vllm-ascend==0.23.0.post1')
PY

# 4. Multi-node: every device's RoCE link is up and healthy.
for i in $(seq 0 15); do
  hccn_tool -i "$i" -link -g | grep -qi "up" || fail "device $i: link down (hccn_tool -i $i -link -g)"
  hccn_tool -i "$i" -net_health -g | grep -qi "success" || fail "device $i: net_health failed (hccn_tool -i $i -net_health -g)"
done

# 5. PD: Mooncake importable (vllm-ascend mooncake_connector.py: from mooncake.engine import TransferEngine).
python3 -c "from mooncake.engine import TransferEngine" 2>/dev/null || fail "mooncake not importable: build Mooncake with -DUSE_ASCEND_DIRECT=ON and add its site-packages dir to LD_LIBRARY_PATH (PD tutorial, Install Mooncake)"

# 6. PD: handshake and API ports free (first/last of each range and every API port): [8000, 36000, 36015, 36100, 36115, 36116, 36131]
for p in 8000 36000 36015 36100 36115 36116 36131; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then fail "port $p in use (kv_port / --port of the plan)"; fi
done

echo "preflight: OK"
