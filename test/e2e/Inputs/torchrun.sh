#!/usr/bin/env bash
# torchrun.sh N [--ranks R1,R2,...] CMD ARGS...: starts CMD once per rank
# as torchrun does, with RANK, WORLD_SIZE=N, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR=127.0.0.1 and MASTER_PORT a free port, and no MPI launcher;
# --ranks starts only those ranks (a job whose other ranks never come).
# Prints each rank's output prefixed by "[rank R] " in rank order, then
# "[rank R] exit C", and exits 0.
set -uo pipefail
world=$1
shift
ranks=$(seq -s, 0 $((world - 1)))
if [ "$1" = "--ranks" ]; then
  ranks=$2
  shift 2
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mktemp -d)
for rank in ${ranks//,/ }; do
  env RANK="$rank" WORLD_SIZE="$world" LOCAL_RANK="$rank" \
    LOCAL_WORLD_SIZE="$world" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    "$@" > "$out/$rank" 2>&1 &
  echo $! > "$out/$rank.pid"
done
for rank in ${ranks//,/ }; do
  wait "$(cat "$out/$rank.pid")"
  code=$?
  sed "s/^/[rank $rank] /" "$out/$rank"
  echo "[rank $rank] exit $code"
done
rm -rf "$out"
