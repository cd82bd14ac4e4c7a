#!/usr/bin/env bash
# Bounded fuzz run of every target on the stable toolchain.
#   bash fuzz/run.sh [SECONDS_PER_TARGET]   (default 60)
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo-fuzz asks for nightly
# compiler flags (sanitizers); RUSTC_BOOTSTRAP=1 lets the stable compiler
# accept them. New corpus entries go to fuzz/corpus/ (ignored by git); the
# committed seeds in fuzz/seeds/ are real lines and known-bad ones.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
for target in tick_parser resp_parser line_reader order_parser; do
  mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
  echo "== $target ($secs s)"
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
    -max_total_time="$secs" -max_len=4096 2>&1 | grep -E "^Done|ERROR|panicked|SUMMARY" || true
  if ls "fuzz/artifacts/$target"/crash-* >/dev/null 2>&1; then
    echo "crash found: fuzz/artifacts/$target"; exit 1
  fi
done
