# tap.sh: the TAP helper that shell tests source; the test sets $tmp (a scratch folder).
#
# check NAME COMMAND...: runs COMMAND with its output in $tmp/out.N, then prints
# "ok N - NAME" and the output's "note: " lines as TAP comments, or "not ok N - NAME" and
# the output's last ${TAP_TAIL:-40} lines as comments.  $n counts the checks.
n=0
check() {
  n=$((n + 1)); name=$1; shift
  if "$@" >"$tmp/out.$n" 2>&1; then
    echo "ok $n - $name"; sed -n 's/^note: /# /p' "$tmp/out.$n"
  else
    echo "not ok $n - $name"; sed 's/^/# /' "$tmp/out.$n" | tail -n "${TAP_TAIL:-40}"
  fi
}
