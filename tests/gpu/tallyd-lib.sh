# tallyd-lib.sh: shell functions shared by the GPU scripts that run tenants through one tallyd
# (tests/gpu/e2e-run, tests/bench/forward-bench, tests/gpu/tenant-churn, tests/gpu/variants-run).
#
# Sourced (bash) with TALLY_BUILDDIR set, once the caller has found this file (in TALLY_SRCDIR,
# the source tree `make` named, or the build tree or its parent); it sets TALLY_SRCDIR to the
# tree it lies in and exports both.  The caller then makes TL_WORK, a private temp directory
# (tl_workdir makes it and cleans up on exit).  The functions start one tallyd listening on a
# UNIX socket inside TL_WORK and on a free TCP loopback port, run commands natively or as Tally
# tenants over either transport, and stop tallyd again.  Every wait has a deadline, so a hang
# becomes a failure, never a block.
#
# TALLYD_ARGS (word-split) adds flags to tallyd's command line, e.g.
#   TALLYD_ARGS='--worker-spin-us 0 --spin-us 0' tests/bench/forward-bench
# TL_TAG, when set at tl_start, names that tallyd's socket and state directory apart
# (tallyd$TL_TAG.sock, state$TL_TAG), so a caller can run a second one beside the first.
# Transports, as the callers name them:
#   native  the command as is (the real driver)
#   shm     through tally-run --host unix:SOCKET (the guest upgrades to shared memory)
#   tcp     through tally-run --host tcp://127.0.0.1:PORT
# When guestlib/tally-run is not built yet, tl_run does what tally-run does: it puts the
# guest library first on LD_LIBRARY_PATH and sets TALLY_HOST, TALLY_PRIORITY and TALLY_NAME.

TALLY_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export TALLY_BUILDDIR TALLY_SRCDIR
TL_BUILDDIR=$TALLY_BUILDDIR
TL_SRCDIR=$TALLY_SRCDIR
TL_TALLYD=${TALLYD:-$TL_BUILDDIR/hostd/tallyd}
TL_TALLY_RUN=${TALLY_RUN:-$TL_BUILDDIR/guestlib/tally-run}
TL_GUESTDIR=$TL_BUILDDIR/guestlib
TL_PID=
TL_SOCK=
TL_PORT=
TL_LOG=
TL_STARTS=0

# tl_workdir NAME LOGS: makes TL_WORK, a fresh private directory ($TMPDIR or /tmp, named
# tally-NAME.XXXXXX), and LOGS, emptied; on exit tallyd is stopped, its logs (tallyd.N.log)
# are copied into LOGS and TL_WORK is removed; SIGINT, SIGTERM and SIGHUP print
# "NAME: interrupted" and exit 1 (through that cleanup).  Exits 1 when mktemp fails.
tl_workdir() {
  TL_NAME=$1
  TL_LOGS=$2
  TL_WORK=$(mktemp -d "${TMPDIR:-/tmp}/tally-$1.XXXXXX") || {
    echo "$1: cannot make a temp directory"
    exit 1
  }
  trap tl_cleanup EXIT
  trap 'echo "$TL_NAME: interrupted"; exit 1' INT TERM HUP
  rm -rf "$TL_LOGS"
  mkdir -p "$TL_LOGS"
}

# tl_workdir's exit trap.
tl_cleanup() {
  tl_stop >/dev/null 2>&1
  cp -f "$TL_WORK"/tallyd.*.log "$TL_LOGS"/ 2>/dev/null
  rm -rf "$TL_WORK"
}

# True when nvidia-smi lists at least one GPU.
tl_have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'
}

# Prints a TCP port that was free a moment ago on 127.0.0.1.
tl_free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
  else
    # 20000-29999: below the usual ephemeral range, so rarely taken
    echo $((20000 + $$ % 10000))
  fi
}

# True when something listens on 127.0.0.1:$1.  Uses ss when present, so that the probe does
# not open a tenant connection to tallyd.
tl_tcp_listening() {
  if command -v ss >/dev/null 2>&1; then
    ss -ltnH "sport = :$1" 2>/dev/null | grep -q .
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# Starts tallyd; waits up to TL_START_TIMEOUT seconds (default 20) for both listeners.
# Returns 0, or 1 with the reason in TL_ERR.
tl_start() {
  TL_ERR=
  if [ ! -x "$TL_TALLYD" ]; then
    TL_ERR="tallyd not built at $TL_TALLYD"
    return 1
  fi
  TL_STARTS=$((TL_STARTS + 1))
  TL_SOCK=$TL_WORK/tallyd${TL_TAG:-}.sock
  TL_PORT=$(tl_free_port)
  TL_LOG=$TL_WORK/tallyd.$TL_STARTS.log
  rm -f "$TL_SOCK"
  mkdir -p "$TL_WORK/state${TL_TAG:-}"
  "$TL_TALLYD" --listen-unix "$TL_SOCK" --listen-tcp "127.0.0.1:$TL_PORT" \
    --state-dir "$TL_WORK/state${TL_TAG:-}" --log-level "${TALLY_LOG_LEVEL:-info}" ${TALLYD_ARGS:-} \
    </dev/null >"$TL_LOG" 2>&1 &
  TL_PID=$!
  local deadline=$((SECONDS + ${TL_START_TIMEOUT:-20}))
  while [ $SECONDS -lt $deadline ]; do
    if ! kill -0 "$TL_PID" 2>/dev/null; then
      wait "$TL_PID" 2>/dev/null
      TL_ERR="tallyd exited (status $?) at start: $(tail -n 1 "$TL_LOG")"
      TL_PID=
      return 1
    fi
    if [ -S "$TL_SOCK" ] && tl_tcp_listening "$TL_PORT"; then
      return 0
    fi
    sleep 0.1
  done
  TL_ERR="tallyd did not listen on $TL_SOCK and 127.0.0.1:$TL_PORT within ${TL_START_TIMEOUT:-20} s"
  tl_stop >/dev/null
  return 1
}

# True while the tallyd we started runs.  A zombie (exited, not yet reaped by this shell)
# does not count: kill -0 alone would still succeed on it.
tl_alive() {
  [ -n "$TL_PID" ] && kill -0 "$TL_PID" 2>/dev/null || return 1
  if [ -r "/proc/$TL_PID/stat" ]; then
    # field 3 of /proc/PID/stat is the state; the name in field 2 may contain spaces
    case $(sed 's/^.*) //' "/proc/$TL_PID/stat" 2>/dev/null | cut -c1) in
      Z | X | '') return 1 ;;
    esac
  fi
  return 0
}

# Stops tallyd with SIGTERM, then SIGKILL after 10 s.  Sets TL_EXIT to its exit status
# ("killed" when it needed SIGKILL, "gone" when it had already exited).
tl_stop() {
  TL_EXIT=gone
  [ -n "$TL_PID" ] || return 0
  if kill -0 "$TL_PID" 2>/dev/null; then
    kill -TERM "$TL_PID" 2>/dev/null
    local deadline=$((SECONDS + 10))
    while kill -0 "$TL_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
      sleep 0.1
    done
    if kill -0 "$TL_PID" 2>/dev/null; then
      kill -KILL "$TL_PID" 2>/dev/null
      wait "$TL_PID" 2>/dev/null
      TL_EXIT=killed
    else
      wait "$TL_PID" 2>/dev/null
      TL_EXIT=$?
    fi
  else
    wait "$TL_PID" 2>/dev/null
    TL_EXIT="gone (status $?)"
  fi
  TL_PID=
}

# tl_run TRANSPORT TIMEOUT_S PRIORITY NAME -- CMD...: runs CMD natively or as a tenant, with
# a timeout (exit 124 when it ran out, 137 when it had to be killed).  PRIORITY is "" or
# latency-critical / best-effort.  stdout and stderr are the caller's.
tl_run() {
  local transport=$1 limit=$2 prio=$3 name=$4
  shift 5
  local host
  case $transport in
    native)
      timeout -k 5 "$limit" "$@"
      return
      ;;
    shm) host=unix:$TL_SOCK ;;
    tcp) host=tcp://127.0.0.1:$TL_PORT ;;
    *)
      echo "tl_run: unknown transport $transport" >&2
      return 2
      ;;
  esac
  if [ -x "$TL_TALLY_RUN" ]; then
    local args=(--host "$host")
    [ -n "$prio" ] && args+=(--priority "$prio")
    [ -n "$name" ] && args+=(--name "$name")
    timeout -k 5 "$limit" "$TL_TALLY_RUN" "${args[@]}" -- "$@"
  else
    timeout -k 5 "$limit" env LD_LIBRARY_PATH="$TL_GUESTDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      TALLY_HOST="$host" ${prio:+TALLY_PRIORITY=$prio} ${name:+TALLY_NAME=$name} "$@"
  fi
}

# Prints how tenants are started (tally-run or the fallback), for the log.
tl_describe() {
  if [ -x "$TL_TALLY_RUN" ]; then
    echo "tenants start through $TL_TALLY_RUN"
  else
    echo "tenants start with LD_LIBRARY_PATH=$TL_GUESTDIR (tally-run not built at $TL_TALLY_RUN)"
  fi
}
