# record-daemon.sh: shell functions for the TAP scripts that run tenants
# against one tallyd-record (the recording device, no GPU) on a UNIX socket.
# Sourced by tests/test-lc-path.sh and tests/test-hostd-log.sh, with B (the
# build tree) and tmp (a private temp directory) set; `daemon` holds the
# running daemon's pid.

# start_daemon ARGS...: tallyd-record on $tmp/sock, logging to $tmp/daemon.log
# at info unless ARGS say otherwise (the last --log-level wins); true once it
# serves (bounded: 10 s)
start_daemon() {
  rm -f "$tmp/sock" "$tmp/daemon.log"
  "$B/hostd/tallyd-record" --listen-unix "$tmp/sock" --state-dir "$tmp/state" \
    --log-level info "$@" 2>"$tmp/daemon.log" &
  daemon=$!
  i=0
  while ! grep -qs serving "$tmp/daemon.log" && [ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done
  grep -qs serving "$tmp/daemon.log"
}

stop_daemon() {
  kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  daemon=
}
