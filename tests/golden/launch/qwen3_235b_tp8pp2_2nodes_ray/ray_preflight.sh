#!/usr/bin/env bash
# ascendflow Ray preflight for plan 95fab7f6525fe27b: wait until the cluster shows 16 NPU on 2 nodes.
# node0.sh runs it after `ray start --head`; run it by hand on node 0 to check a cluster.
set -euo pipefail
wait_s="${ASCENDFLOW_RAY_WAIT_S:-600}"
python3 - "$wait_s" <<'PY' || { ray status >&2 || true; exit 1; }
import sys, time
import ray
need, resource, nodes = 16, 'NPU', 2
deadline = time.monotonic() + float(sys.argv[1])
ray.init(address='auto', logging_level='ERROR')
while True:
    have = int(ray.cluster_resources().get(resource, 0))
    alive = sum(1 for n in ray.nodes() if n.get('Alive'))
    if have >= need and alive >= nodes:
        print(f'ray preflight: {alive} nodes, {have} {resource}: OK')
        break
    if time.monotonic() > deadline:
        sys.exit(f'ray preflight: {alive}/{nodes} nodes, {have}/{need} {resource} after {sys.argv[1]} s: start '
                 'launch/node<k>.sh on every node; check HCCL_IF_IP/GLOO_SOCKET_IFNAME and '
                 'RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES were exported before ray start')
    time.sleep(5)
PY
