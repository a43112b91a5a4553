#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test (also under ASan+UBSan), fuzz.
# The steps are those of `make test`, run one by one so that the log ends with where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."
timings=""
timed() {
  local started
  started=$(date +%s)
  "$@"
  timings+="$(printf '  %-22s %5d s' "$*" $(($(date +%s) - started)))"$'\n'
}
started_all=$(date +%s)
timed scripts/install-deps.sh
for step in unit-test asan-test tsan-test arm-check fuzz; do
  timed make --no-print-directory "$step"
done
printf '== test.sh: every step passed in %d s\n%s' $(($(date +%s) - started_all)) "$timings"
