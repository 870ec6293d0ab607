#!/usr/bin/env bash
# A small local dais cluster on loopback: etcd, 3 `dais node` (1 declared A100 each; zones a, a,
# b), 2 `dais scheduler`; applies deploy/examples/*.yaml, waits until every instance is READY and
# prints `dais ctl get nodes`, `get deployments`, `get instances` and `get events`. Everything it started is
# stopped (by PID) when it exits, unless --keep is given (then it waits for Ctrl-C).
#
# usage: scripts/local_cluster.sh [--repository DIR] [--build DIR] [--keep]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=examples/model_repository
build=build/release
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repository) repo="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
dais="$build/src/cmd/dais"
[[ -x "$dais" ]] || { echo "no $dais: build first (scripts/build.sh)" >&2; exit 2; }
if [[ ! -f "$repo/mlp_small/1/model.pt" ]]; then
  /usr/bin/python3 scripts/gen_models.py "$repo"
fi
work=$(mktemp -d /tmp/dais-local-cluster.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
client=$(port); peer=$(port)
etcd_ep="127.0.0.1:$client"
etcd --name m0 --data-dir "$work/etcd" --listen-client-urls "http://$etcd_ep" \
  --advertise-client-urls "http://$etcd_ep" --listen-peer-urls "http://127.0.0.1:$peer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "m0=http://127.0.0.1:$peer" >"$work/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints "$etcd_ep" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
echo "etcd: $etcd_ep (logs in $work)"
zones=(a a b)
for i in 1 2 3; do
  "$dais" node --etcd "$etcd_ep" --node-id "n$i" --model-repository "$repo" --http-port 0 \
    --grpc-port 0 --gpus 1xA100:80GiB --labels "zone=${zones[$((i - 1))]}" \
    --lease-ttl-secs 3 >"$work/node-n$i.log" 2>&1 &
  pids+=($!)
done
for s in s1 s2; do
  "$dais" scheduler --etcd "$etcd_ep" --id "$s" --lease-ttl-secs 3 >"$work/scheduler-$s.log" 2>&1 &
  pids+=($!)
done
for spec in deploy/examples/*.yaml; do
  for _ in $(seq 50); do "$dais" ctl --etcd "$etcd_ep" apply -f "$spec" && break; sleep 0.2; done
done
want=$(cat deploy/examples/*.yaml | awk '/^replicas:/ {n += $2} END {print n}')
for _ in $(seq 150); do
  ready=$("$dais" ctl --etcd "$etcd_ep" get instances | grep -c " READY " || true)
  [[ "$ready" -ge "$want" ]] && break
  sleep 0.2
done
echo
"$dais" ctl --etcd "$etcd_ep" get nodes
echo
"$dais" ctl --etcd "$etcd_ep" get deployments
echo
"$dais" ctl --etcd "$etcd_ep" get instances
echo
"$dais" ctl --etcd "$etcd_ep" get events
echo
echo "$ready of $want instances READY"
[[ "$ready" -ge "$want" ]] || exit 1
if [[ "$keep" == 1 ]]; then
  echo "running; Ctrl-C stops everything"
  wait
fi
