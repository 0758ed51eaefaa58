#!/usr/bin/env bash
# Start a dask scheduler and 2 single-threaded workers on 127.0.0.1 in the background and print the
# scheduler address. Stop them with:  kill $(cat "$RUN_DIR"/*.pid)
# Environment: PORT (8786), MEMORY_LIMIT (2GiB), RUN_DIR (/tmp/onmsc-cluster).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DASK_CONFIG="$here"
PORT="${PORT:-8786}"
MEMORY_LIMIT="${MEMORY_LIMIT:-2GiB}"
RUN_DIR="${RUN_DIR:-/tmp/onmsc-cluster}"
mkdir -p "$RUN_DIR/spill"
address="tcp://127.0.0.1:$PORT"
for pidfile in "$RUN_DIR"/*.pid; do  # refuse to orphan a cluster started earlier from the same RUN_DIR
    if [ -e "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "a cluster started from $RUN_DIR is still running; stop it first: kill \$(cat $RUN_DIR/*.pid)" >&2
        exit 1
    fi
done
rm -f "$RUN_DIR"/*.pid
if python -c "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)" "$PORT" \
        2>/dev/null; then  # another scheduler (or anything) listens there: ours would fail to start
    echo "port $PORT on 127.0.0.1 is already in use; stop that process or choose another: PORT=8800 $0" >&2
    exit 1
fi
# on any failure below, stop what this script started
trap 'kill $(cat "$RUN_DIR"/*.pid 2>/dev/null) 2>/dev/null; rm -f "$RUN_DIR"/*.pid' ERR

dask scheduler --host 127.0.0.1 --port "$PORT" --dashboard-address 127.0.0.1:0 --no-show \
    >"$RUN_DIR/scheduler.log" 2>&1 &
echo $! >"$RUN_DIR/scheduler.pid"
for i in 1 2; do
    dask worker "$address" --nworkers 1 --nthreads 1 --memory-limit "$MEMORY_LIMIT" \
        --local-directory "$RUN_DIR/spill" --name "worker-$i" --host 127.0.0.1 \
        --dashboard-address 127.0.0.1:0 >"$RUN_DIR/worker-$i.log" 2>&1 &
    echo $! >"$RUN_DIR/worker-$i.pid"
done
python - "$address" <<'PY'
import sys
from distributed import Client
with Client(sys.argv[1], timeout="60s") as c:
    c.wait_for_workers(2, timeout=120)
PY
for pidfile in "$RUN_DIR"/*.pid; do  # every process this script started must still be running
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        echo "$(basename "$pidfile" .pid) exited; see $RUN_DIR/$(basename "$pidfile" .pid).log" >&2
        false  # runs the ERR trap: stop the others
    fi
done
echo "$address"
