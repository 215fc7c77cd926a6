#!/usr/bin/env bash
# Runs a parameter-server job and, mid-run, does to it what $1 says:
#   kill-worker: kill -9 worker 1;   join: start one more worker;
#   kill-server: kill -9 server 1 (the job restarts it from its checkpoint);
#   stop-worker, stop-server: kill -STOP worker 1 or server 1 (the job ends
#   a process stopped for --ps-timeout; should it not, the script lets the
#   process go on after a minute, so that nothing is left stopped).
# ps_faults.sh ACTION TESSERA-RUN PLAN DIR STEPS -- TESSERA-RUN-OPTIONS...
set -u
action=$1 run=$2 plan=$3 dir=$4 steps=$5
shift 6
rm -rf "$dir"
"$run" "$plan" --steps "$steps" --ps-dir "$dir" "$@" &
job=$!
# Until training is under way: pushes in server 0's log.
for _ in $(seq 600); do
  [ "$(grep -c '^push' "$dir/server0.log" 2>/dev/null)" -ge 6 ] 2>/dev/null && break
  sleep 0.05
done
case $action in
  kill-worker) kill -9 "$(cat "$dir/worker1.pid")" ;;
  join) "$run" "$plan" --steps "$steps" --ps-join "$dir" || exit 1 ;;
  kill-server) pkill -9 -f -- "--ps-role server --ps-index 1 --ps-dir $dir" ;;
  stop-worker) stopped=$(cat "$dir/worker1.pid") ;;
  stop-server)
    stopped=$(pgrep -f -- "--ps-role server --ps-index 1 --ps-dir $dir" | head -1) ;;
esac
if [ -n "${stopped:-}" ]; then
  kill -STOP "$stopped"
  for _ in $(seq 1200); do
    kill -0 "$job" 2>/dev/null || break
    sleep 0.05
  done
  kill -CONT "$stopped" 2>/dev/null
fi
wait $job
