#!/usr/bin/env bash
# Benchmarks (figures, not assertions), on a throw-away cluster with dionysus preloaded:
#   scripts/bench.sh locomo [PATH] [--json]  retrieval quality on a LoCoMo file (the dev split)
#   scripts/bench.sh recall [N] [Q]     recall latency at N memories (default 10000)
#   scripts/bench.sh driver [N] [M]     the driver's overhead per message at N memories (100000)
#   scripts/bench.sh fortnight [DAYS]   the proactive mind over a simulated fortnight (14)
#   scripts/bench.sh lives [DAYS]       the proactive mind over a fortnight of seven different lives (14)
#   scripts/bench.sh leave [P] [T]      a person leaving (forget_person) among P people of T turns each, and the same unindexed (20, 2500)
#   scripts/bench.sh agents [N] [Q]     chat_context with/without its archetype; recall over MCP vs SQL (10000)
#   scripts/bench.sh reindex [N]        a re-index: vectors/s, the swap, recall during the build (10000)
#   scripts/bench.sh model [URL MODEL [KEY]]  a model against a fixed conversation set (#35): extraction precision/recall,
#                                       invented facts, answers, latency/unusable answers/tokens per task (no URL: the scripted endpoint,
#                                       as a model that follows instructions and as a small base model)
#   scripts/bench.sh embed [R] [T]      the embedding engines side by side: query p50/p95 by length (R calls), T chat turns/s, cosine, memory (200, 2000)
#   scripts/bench.sh decay [N]          a decay pass: nothing due, moving memories, mentions (100000)
#   scripts/bench.sh people [P]         people in a chat context and a turn's people stored, a life of P people (1000)
#   scripts/bench.sh working_memory [N] a turn's working-memory step and procedure match vs its chat_context; recall_all vs recall (10000)
#   scripts/bench.sh context [N]        chat_context under each token budget: tokens, levels, cuts, latency; the fit alone (100000)
#   scripts/bench.sh all                LoCoMo, recall at 10k and 100k, the driver, the fortnight, agents, re-index, decay, people, working memory, context budgets
# One core per backend, as on a 1 vCPU VPS (candle's pool is pinned to one thread).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${DIONYSUS_BENCH_PORT:-31339}"   # below the ephemeral range (see scripts/test.sh)
DATA="${DIONYSUS_BENCH_DATA:-/tmp/dionysus-bench-$PORT}"
# The embedding bench compares the encoder with candle's BERT, which only a build with the
# `candle` feature has (the default build and CI do not compile it).
if [ "${1:-all}" = embed ] || [ "${1:-all}" = all ]; then export DIONYSUS_EXTENSION_FEATURES="candle"; fi
scripts/install.sh
cargo build --release -p dionysus-tests --bin dionysus-bench
cargo build --release -p dionysus-driver
scripts/cluster.sh stop "$DATA"
# DIONYSUS_BENCH_REUSE=1: the cluster and the stores the benches keep (locomo_keep_*, recall_keep_N)
# stay for the next run; otherwise every run starts from an empty cluster.
[ "${DIONYSUS_BENCH_REUSE:-0}" = 1 ] || rm -rf "$DATA"
# DIONYSUS_BENCH_PRECISION=int8: every store the run makes holds the local model's int8 form.
scripts/cluster.sh start "$DATA" "$PORT" "shared_buffers = 512MB" "maintenance_work_mem = 512MB" "dionysus.worker_interval = 3600" \
  "dionysus.embedding_precision = '${DIONYSUS_BENCH_PRECISION:-f32}'"
trap 'scripts/cluster.sh stop "$DATA"' EXIT
export DIONYSUS_TEST_CONNINFO="host=127.0.0.1 port=$PORT user=postgres"
bench=target/release/dionysus-bench
dev_split=../shared/bench/locomo/locomo10-dev.json
case "${1:-all}" in
  locomo)   # a PATH, --json, both or neither (the dev split)
    if [[ "${2:-}" == "" || "${2:-}" == --* ]]; then $bench locomo "$dev_split" "${@:2}"; else $bench locomo "${@:2}"; fi ;;
  reindex) $bench reindex "${2:-10000}" ;;
  embed) $bench embed "${2:-200}" "${3:-2000}" ;;
  model) $bench model "${@:2}" ;;
  decay) $bench decay "${2:-100000}" ;;
  people) $bench people "${2:-1000}" ;;
  working_memory) $bench working_memory "${2:-10000}" ;;
  context) $bench context "${2:-100000}" ;;
  recall) $bench recall "${2:-10000}" "${3:-200}" ;;
  driver) $bench driver "${2:-100000}" "${3:-200}" ;;
  fortnight) $bench fortnight "${2:-14}" ;;
  lives) $bench lives "${2:-14}" ;;
  leave) $bench leave "${2:-20}" "${3:-2500}" ;;
  agents) $bench agents "${2:-10000}" "${3:-200}" ;;
  all)
    $bench locomo "$dev_split"
    $bench recall 10000 200
    $bench recall 100000 200
    $bench driver 100000 200
    $bench fortnight 14
    $bench agents 10000 200
    $bench reindex 10000
    $bench decay 100000
    $bench people 1000
    $bench leave 20 2500
    $bench working_memory 10000
    $bench context 100000 ;;
  *) echo "usage: scripts/bench.sh locomo [PATH] [--json] | recall [N] [Q] | driver [N] [M] | fortnight [DAYS] | lives [DAYS] | leave [P] [T] | agents [N] [Q] | reindex [N] | embed [R] [T] | model [URL MODEL [KEY]] | decay [N] | people [P] | working_memory [N] | context [N] | all" >&2; exit 2 ;;
esac
