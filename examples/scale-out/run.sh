#!/usr/bin/env bash
# Three `polygateway serve` processes on one machine sharing limiter and breaker state through
# Redis, in front of the mock upstream — the scale-out shape of README "Scale-out".
#
#   bash examples/scale-out/run.sh            # start everything; Ctrl-C stops it
#
# Then spread requests over http://127.0.0.1:8081, :8082 and :8083: the scope's RPM of 60
# and its concurrency of 8 hold across all three, and a source that dies behind one process
# is skipped by the other two. Needs Redis on 127.0.0.1:6379 (PGW_REDIS_URL to change it).
set -euo pipefail
cd "$(dirname "$0")/../.."
# PGW_BIN: an already built binary (skips the release build).
bin="${PGW_BIN:-}"
if [ -z "$bin" ]; then
  cargo build --release -p polygateway
  bin="${CARGO_TARGET_DIR:-target}/release/polygateway"
fi
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM

"$bin" mock-upstream --listen 127.0.0.1:9099 &
pids+=($!)

for port in 8081 8082 8083; do
  env -i PATH="$PATH" HOME="$HOME" \
    PGW_LISTEN="127.0.0.1:$port" \
    PGW_LIMITER_BACKEND=redis PGW_BREAKER_BACKEND=redis \
    PGW_REDIS_URL="${PGW_REDIS_URL:-redis://127.0.0.1:6379}" \
    PGW_REDIS_PREFIX="pgw-demo:" \
    PGW_TELEMETRY_BACKEND=none \
    LLM__OPENAI__1__BASE_URL=http://127.0.0.1:9099/sc/primary/v1 \
    LLM__OPENAI__1__MODEL=gpt-4o-mini \
    LLM__OPENAI__1__API_KEY=sk-demo \
    LLM__OPENAI__2__BASE_URL=http://127.0.0.1:9099/sc/secondary/v1 \
    LLM__OPENAI__2__MODEL=gpt-4o-mini \
    LLM__OPENAI__2__API_KEY=sk-demo \
    LLM__GLOBAL__RPM=60 \
    LLM__GLOBAL__MAX_CONCURRENCY=8 \
    "$bin" serve &
  pids+=($!)
done

echo "gateways on :8081 :8082 :8083, mock upstream on :9099 (Ctrl-C to stop)"
wait
