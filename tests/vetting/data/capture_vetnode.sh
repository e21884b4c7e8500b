#!/usr/bin/env bash
# Runs a real vetnode release on this machine as a small Slurm job would (no Slurm, no GPU) and writes
# what lands in the job output. Usage: capture_vetnode.sh <venv with vetnode installed> <out file> [--verbose]
# Two "nodes" (nid001234, nid001235: one UTS and mount namespace per process, so socket.gethostname()
# and /etc/hosts are the node's), two ranks per node, SLURM_* set per rank, a stub `scontrol show
# hostnames`. No nvidia-smi here, so GPUEval raises on every rank. Internet-Access connects to
# "gateway": a listener on nid001234, a refused connection on nid001235 (its /etc/hosts points elsewhere).
# 0.0.x diagnose runs once per node (its srun has one task per node); 0.1.x and 0.0.13 need every rank.
# Needs root (unshare). Each rank's stdout+stderr is written one after another, as srun does in one file.
set -euo pipefail
VENV=$1; OUT=$2; shift 2
W=$(mktemp -d)
trap 'kill $LISTENER 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/bin"
printf '#!/bin/sh\necho nid001234\necho nid001235\n' > "$W/bin/scontrol"; chmod +x "$W/bin/scontrol"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c "
import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $PORT)); s.listen(64)
while True: s.accept()[0].close()" &
LISTENER=$!
for node in nid001234 nid001235; do
  gw=$([ $node = nid001234 ] && echo 127.0.0.1 || echo 127.0.0.2)
  printf '127.0.0.1 localhost\n127.0.0.1 nid001234\n127.0.0.1 nid001235\n%s gateway\n' "$gw" > "$W/hosts-$node"
done
cat > "$W/config.yaml" <<YAML
name: Belvedere capture
evals:
  - name: Check GPU
    type: vetnode.evaluations.gpu_eval.GPUEval
    max_temp: 90
    max_used_memory: 0.2
  - name: Internet-Access
    type: vetnode.evaluations.internet_access.InternetAccessEval
    host: gateway
    port: $PORT
    timeout: 3
YAML
VERSION=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vetnode"))')
case $VERSION in 0.0.[0-9]|0.0.1[0-2]) PER_NODE=1;; *) PER_NODE=2;; esac
[ "$VERSION" = 0.0.8 ] && sed -i '/^  - name: Check GPU/i\  - name: CUDA\n    type: vetnode.evaluations.cuda_eval.CUDAEval\n    cuda_home: /usr/local/cuda/lib64' "$W/config.yaml"
NTASKS=$((2 * PER_NODE)); pids=()
for rank in $(seq 0 $((NTASKS - 1))); do
  node=$([ $rank -lt $PER_NODE ] && echo nid001234 || echo nid001235)
  env PATH="$W/bin:$PATH" SLURM_PROCID=$rank SLURM_LOCALID=$((rank % PER_NODE)) SLURM_NTASKS=$NTASKS SLURM_JOB_NUM_NODES=2 \
      SLURM_NODEID=$((rank / PER_NODE)) SLURM_JOB_NODELIST='nid[001234-001235]' \
    unshare --uts --mount sh -c "mount --bind $W/hosts-$node /etc/hosts && hostname $node && cd $W && exec $VENV/bin/vetnode diagnose $* config.yaml" \
    > "$W/rank-$rank.out" 2>&1 &
  pids+=($!)
  [ $rank = 0 ] && sleep 1
done
for rank in "${!pids[@]}"; do rc=0; wait "${pids[$rank]}" || rc=$?; echo "rank $rank exit $rc" >&2; done
for rank in $(seq 0 $((NTASKS - 1))); do cat "$W/rank-$rank.out"; done > "$OUT"
echo "vetnode $VERSION: $NTASKS ranks, $(wc -l < "$OUT") lines in $OUT" >&2
