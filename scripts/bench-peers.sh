#!/usr/bin/env bash
# Measures collapser side by side with the alternatives a user has: no proxy
# (direct), nginx's grpc_pass and a plain grpc-go proxy (test/benchpeers/plainproxy),
# on loopback, in interleaved rounds; and collapser's misses alone and with 3 peers.
# Not part of CI: the numbers depend on the machine and on what else runs on it (check
# `uptime` first).
#
# Installs what it needs: nginx from Debian's nginx-light (run in the foreground with
# its own prefix and configuration, never the system service), ghz GHZ_VERSION
# (Makefile) into bin/ through scripts/tools.sh. Builds the harness and the plain proxy
# from test/ into BIN_DIR; make bench-peers builds collapser and hello-backend first.
# Prints one Markdown table and writes every run to BENCH_OUT as JSON.
#
# Environment (defaults in brackets):
#   BIN_DIR [bin]  BENCH_OUT [$BIN_DIR/bench-peers.json]
#   BENCH_ROUNDS [5]  BENCH_DURATION [5s]: rounds per scenario, length of a steady run
#   BENCH_SCENARIOS [all]: comma list of passthrough, passthrough-unpinned, miss, miss-peers,
#     hit-0ms, hit-50ms, burst
#   BENCH_REVISION [this checkout's commit]: names the collapser build in BIN_DIR in the report
#   BENCH_CLIENT_CPUS [0]  BENCH_SERVER_CPUS [1]: taskset lists for ghz and for the backend
#     and proxies; set both empty to pin nothing (on a 1-CPU machine nothing is pinned)
#   GOGC [Go's default]: reaches every Go process of the run (ghz, the backend, collapser,
#     the plain proxy) and is named in the report; the chart sets collapser.gogc
set -o errexit -o nounset -o pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin="$(realpath -m "${BIN_DIR:-bin}")"
out="${BENCH_OUT:-$bin/bench-peers.json}"
if [[ "$(nproc)" -ge 2 ]]; then
  client_cpus="${BENCH_CLIENT_CPUS-0}" server_cpus="${BENCH_SERVER_CPUS-1}"
else
  client_cpus="" server_cpus=""
fi

for b in collapser hello-backend; do
  [[ -x "$bin/$b" ]] || { echo "bench-peers: $bin/$b missing: run make bench-peers (it builds first)" >&2; exit 1; }
done
"$root/scripts/apt-install.sh" nginx-light
nginx="$(command -v nginx || true)"
[[ -n "$nginx" ]] || { echo "bench-peers: nginx not found after installing nginx-light" >&2; exit 1; }
command -v taskset >/dev/null || { echo "bench-peers: taskset (util-linux) not found" >&2; exit 1; }
command -v getconf >/dev/null || { echo "bench-peers: getconf (libc-bin) not found" >&2; exit 1; }

"$root/scripts/tools.sh" ghz
echo "==> build the harness and the plain proxy (test/benchpeers)"
(cd test && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bin/" ./benchpeers ./benchpeers/plainproxy)

if [[ -n "${BENCH_REVISION:-}" ]]; then
  revision="$BENCH_REVISION"
else
  revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git diff --quiet HEAD -- src 2>/dev/null || revision+="+changes"
fi

workdir="$(mktemp -d)"
# cleanup removes the workdir on success. On failure it keeps it for the logs and
# kills any process group the harness started and left behind (the harness stops
# them itself unless it was killed; nginx's workers outlive a killed master).
cleanup() {
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    rm -rf "$workdir"
    return
  fi
  if [[ -f "$workdir/pgids" ]]; then
    while read -r pgid; do
      if kill -0 -- "-$pgid" 2>/dev/null; then kill -KILL -- "-$pgid" 2>/dev/null || true; fi
    done <"$workdir/pgids"
  fi
  echo "bench-peers: failed; logs kept in $workdir" >&2
}
trap cleanup EXIT

echo "==> load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin/benchpeers" --bin "$bin" --ghz "$root/bin/ghz" --nginx "$nginx" \
  --proto "$root/src/api/hello/v1/hello.proto" --workdir "$workdir" --out "$out" \
  --revision "$revision" --rounds "${BENCH_ROUNDS:-5}" --duration "${BENCH_DURATION:-5s}" \
  --scenarios "${BENCH_SCENARIOS:-}" --client-cpus "$client_cpus" --server-cpus "$server_cpus"
