#!/usr/bin/env bash
# Run every fuzz target for a few seconds from its seeds (a smoke run, not a campaign):
#   bash smoke.sh [seconds per target, default 10] [target ...]
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). Prints each target's executions.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-10}
targets=(sse_framer chat_request embeddings_request settings retry_after sdk_stream sdk_response)
if [ $# -gt 1 ]; then targets=("${@:2}"); fi
cargo fuzz build --sanitizer none
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log=$(cargo fuzz run "$t" --sanitizer none "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 2>&1) || { echo "$log" | tail -40; echo "FAIL $t"; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' <<<"$log" | grep -o '[0-9]*$' || echo '?')
  echo "ok $t: $runs executions in ${seconds} s"
done
