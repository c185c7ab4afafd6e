#!/usr/bin/env bash
# Runs the demo on this machine without a cluster: the hello backend and the
# collapser sidecar as background processes on loopback, then the demo client's
# bursts through the sidecar, then the sidecar's request and backend-call counters.
# Expects the binaries in BIN_DIR (make local-demo builds them first).
#
# Environment (defaults in brackets):
#   BIN_DIR [bin]  BACKEND_PORT [50051]  SIDECAR_PORT [50052]
#   SIDECAR_METRICS_PORT [2112]  BACKEND_METRICS_PORT [2113]
#   DEMO_WAIT_SECONDS [30]: how long to wait for both processes to get ready
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(realpath "${BIN_DIR:-$root/bin}")"
backend="127.0.0.1:${BACKEND_PORT:-50051}"
sidecar="127.0.0.1:${SIDECAR_PORT:-50052}"
sidecar_metrics="127.0.0.1:${SIDECAR_METRICS_PORT:-2112}"
backend_metrics="127.0.0.1:${BACKEND_METRICS_PORT:-2113}"
wait_seconds="${DEMO_WAIT_SECONDS:-30}"

"$root/scripts/apt-install.sh" curl
logs="$(mktemp -d)"
pids=()

# stop ends both processes whatever happened; on failure it prints their logs.
stop() {
  local rc=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ $rc -ne 0 ]]; then
    for f in "$logs"/*.log; do echo "---- $f"; cat "$f"; done >&2
    echo "local-demo: failed; logs kept in $logs" >&2
  else
    rm -rf "$logs"
  fi
}
trap stop EXIT

# wait_ready polls a metrics endpoint and a gRPC port until both answer, failing
# early if the process died and after wait_seconds at the latest.
wait_ready() {
  local name=$1 pid=$2 metrics=$3 grpc=$4 deadline=$((SECONDS + wait_seconds))
  until curl -fsS -o /dev/null "http://$metrics/metrics" 2>/dev/null &&
    (exec 3<>"/dev/tcp/${grpc%:*}/${grpc##*:}") 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "local-demo: $name exited early" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "local-demo: $name not ready after ${wait_seconds}s" >&2; return 1; }
    sleep 0.2
  done
  echo "local-demo: $name ready (gRPC $grpc, metrics http://$metrics/metrics)"
}

"$bin/hello-backend" --listen "$backend" --metrics-listen "$backend_metrics" >"$logs/hello-backend.log" 2>&1 &
pids+=($!)
wait_ready hello-backend "${pids[-1]}" "$backend_metrics" "$backend"

"$bin/collapser" --listen "$sidecar" --backend "$backend" --metrics-listen "$sidecar_metrics" \
  >"$logs/collapser.log" 2>&1 &
pids+=($!)
wait_ready collapser "${pids[-1]}" "$sidecar_metrics" "$sidecar"

echo "==> democlient: a 10000-request burst as alice, then one as bob"
"$bin/democlient" --target "$sidecar" --backend "$backend" \
  --authorization "Bearer alice" --second-authorization "Bearer bob"

echo "==> sidecar metrics (http://$sidecar_metrics/metrics)"
curl -fsS "http://$sidecar_metrics/metrics" | grep -E '^collapser_(requests|backend_calls)_total'
