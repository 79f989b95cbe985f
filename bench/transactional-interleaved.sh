#!/usr/bin/env bash
# The interleaved throughput run of docs/transactional-steps.md "What it costs": REPEATS rounds,
# each one drain of N jobs per kind, in turn (job, tx, txw, jobw), at concurrency C, on
# DATABASE_URL (or the embedded PostgreSQL, which runs with fsync off). Prints each drain's
# steps/s and worker CPU, then each round's ratios to the plain job and their medians.
#
#   C=50 REPEATS=3 N=4000 bench/transactional-interleaved.sh
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-50}
REPEATS=${REPEATS:-3}
N=${N:-4000}
KINDS=(job tx txw jobw)
declare -A ratios
for round in $(seq 1 "$REPEATS"); do
  declare -A rate=()
  for kind in "${KINDS[@]}"; do
    line=$(N=$N C=$C KIND=$kind node -r ./test/support/ts-register.cjs bench/profile-drain.ts 2>/dev/null | head -1)
    echo "round $round: $line"
    rate[$kind]=$(sed -E 's/.* ([0-9]+) steps\/s.*/\1/' <<<"$line")
  done
  for kind in tx txw jobw; do
    ratios[$kind]+="$(echo "scale=3; ${rate[$kind]} / ${rate[job]}" | bc) "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for kind in tx txw jobw; do
  echo "C=$C $kind/job per round: ${ratios[$kind]}median $(median "${ratios[$kind]}")"
done
