#!/usr/bin/env bash
# Benchmarks (figures, not assertions), on a throw-away cluster with dionysus preloaded:
#   scripts/bench.sh locomo [PATH]      retrieval quality on the LoCoMo dev split
#   scripts/bench.sh recall [N] [Q]     recall latency at N memories (default 10000)
#   scripts/bench.sh driver [N] [M]     the driver's overhead per message at N memories (100000)
#   scripts/bench.sh fortnight [DAYS]   the proactive mind over a simulated fortnight (14)
#   scripts/bench.sh agents [N] [Q]     chat_context with/without its archetype; recall over MCP vs SQL (10000)
#   scripts/bench.sh all                LoCoMo, recall at 10k and 100k, the driver, the fortnight, agents
# One core per backend, as on a 1 vCPU VPS (candle's pool is pinned to one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${DIONYSUS_BENCH_PORT:-31339}"   # below the ephemeral range (see scripts/test.sh)
DATA="${DIONYSUS_BENCH_DATA:-/tmp/dionysus-bench-$PORT}"
scripts/install.sh
cargo build --release -p dionysus-tests --bin dionysus-bench
cargo build --release -p dionysus-driver
scripts/cluster.sh stop "$DATA"; rm -rf "$DATA"
scripts/cluster.sh start "$DATA" "$PORT" "shared_buffers = 512MB" "maintenance_work_mem = 512MB" "dionysus.worker_interval = 3600"
trap 'scripts/cluster.sh stop "$DATA"' EXIT
export DIONYSUS_TEST_CONNINFO="host=127.0.0.1 port=$PORT user=postgres"
bench=target/release/dionysus-bench
locomo_path="${2:-../shared/bench/locomo/locomo10-dev.json}"
case "${1:-all}" in
  locomo) $bench locomo "$locomo_path" ;;
  recall) $bench recall "${2:-10000}" "${3:-200}" ;;
  driver) $bench driver "${2:-100000}" "${3:-200}" ;;
  fortnight) $bench fortnight "${2:-14}" ;;
  agents) $bench agents "${2:-10000}" "${3:-200}" ;;
  all)
    $bench locomo "../shared/bench/locomo/locomo10-dev.json"
    $bench recall 10000 200
    $bench recall 100000 200
    $bench driver 100000 200
    $bench fortnight 14
    $bench agents 10000 200 ;;
  *) echo "usage: scripts/bench.sh locomo [PATH] | recall [N] [Q] | driver [N] [M] | fortnight [DAYS] | agents [N] [Q] | all" >&2; exit 2 ;;
esac
