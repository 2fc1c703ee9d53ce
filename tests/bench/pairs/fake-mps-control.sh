#!/bin/sh
# fake-mps-control.sh: stands in for nvidia-cuda-mps-control in the CPU test
# of scripts/bench-pairs (installed on PATH under that name).  `-d` writes
# the pid file the real daemon writes in $CUDA_MPS_PIPE_DIRECTORY and logs
# "start" to $FAKE_MPS_LOG; with no argument it reads commands from stdin and
# on "quit" removes the pid file and logs "quit".  FAKE_MPS_FAIL=1 makes -d
# fail as it does where MPS cannot run.
log=${FAKE_MPS_LOG:-/dev/null}
pipe=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
if [ "$1" = -d ]; then
  if [ "${FAKE_MPS_FAIL:-0}" = 1 ]; then
    echo "An instance of this daemon could not be started here" >&2
    exit 1
  fi
  mkdir -p "$pipe" && echo $$ >"$pipe/nvidia-cuda-mps-control.pid" && echo "start $pipe" >>"$log"
  exit 0
fi
while read -r cmd; do
  if [ "$cmd" = quit ]; then
    rm -f "$pipe/nvidia-cuda-mps-control.pid"
    echo "quit $pipe" >>"$log"
  fi
done
