# forward-bench-table.awk: forward-bench's table from its runs' figures.
#
# Input, one figure a line: CONFIG KEY VALUE ROUND (CONFIG native, shm, tcp, reply: shared
# memory with the completion word off, queued: shared memory through a tallyd whose loop
# queues the requests for the worker, or queued-tcp: TCP through that tallyd; KEY as
# forward-bench-bin prints it; only the rounds that completed).  -v transports="shm tcp reply
# queued queued-tcp" names the Tally columns, in that order.  Prints the Markdown table (per
# config the median over rounds, the ratio to native, the target for tally-shm and whether it
# is met), the open-loop request targets, the chain's target over TCP, each round's
# tally/native ratio for the rows with a target when there are several rounds, and whether
# every run's results were correct.  Tested on made-up figures by
# tests/bench/test-forward-bench-table.sh.
{
  v[$1 " " $2] = v[$1 " " $2] " " $3
  if (NF >= 4) {
    per[$1 " " $2 " " $4] = $3
    if ($4 + 0 > nr) nr = $4 + 0
  }
}
function median(s,   a, n, i, j, t) {
  n = split(s, a, " ")
  if (n == 0) return ""
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(c, k,   m) { m = median(v[c " " k]); return m == "" ? (c == "native" && k == "tallyd_idle_cpu_pct" ? "-" : "failed") : m }
function ratio(c, k,   a, b) {
  a = median(v[c " " k]); b = median(v["native " k])
  if (a == "" || b == "" || b + 0 == 0) return "-"
  return sprintf("%.2fx", a / b)
}
# target: "le R" (tally/native <= R) or "ge R" (tally/native >= R) for column c
function verdict(c, k, t,   a, b, op, r) {
  if (t == "") return "-"
  split(t, op, " ")
  a = median(v[c " " k]); b = median(v["native " k])
  if (a == "" || b == "" || b + 0 == 0) return "n/a"
  r = a / b
  return ((op[1] == "le" && r <= op[2]) || (op[1] == "ge" && r >= op[2])) ? "yes" : "NO"
}
END {
  nk = split("launch_ns_p50 launch_ns_p99 launch_sync_us_p50 launch_sync_us_p99 h2d_gbps d2h_gbps chain_ms_p50 req_us_p50 req_us_p99 req_first_us_p50 req_issue_us_p50 guest_idle_cpu_pct tallyd_idle_cpu_pct tcp_rtt_us_p50", keys, " ")
  split("kernel launch p50 (ns)|kernel launch p99 (ns)|launch + sync p50 (us)|launch + sync p99 (us)|H2D 64 MiB pinned (GB/s)|D2H 64 MiB pinned (GB/s)|1000-kernel chain (ms)|open-loop request p50 (us)|open-loop request p99 (us)|open-loop: first launch call p50 (us)|open-loop: all 8 launch calls p50 (us)|guest CPU while idle (% of a core)|tallyd CPU while idle (% of a core)|TCP loopback round trip p50 (us)", labels, "|")
  # target for tally-shm / native ("le R": at most R, "ge R": at least R; "" none)
  targets[1] = "le 1.00"; targets[2] = ""; targets[3] = "le 1.20"; targets[4] = ""
  targets[5] = "ge 0.80"; targets[6] = "ge 0.80"; targets[7] = "le 1.05"
  targets[8] = ""; targets[9] = "le 1.10"; targets[10] = ""; targets[11] = ""; targets[12] = ""
  for (i = 1; i <= nk; i++) {
    split(targets[i], tt, " ")
    ttext[i] = targets[i] == "" ? "" : (tt[1] == "le" ? "<= " : ">= ") tt[2] "x"
  }
  nt = split(transports, ts, " ")
  head["shm"] = "tally-shm"; head["tcp"] = "tally-tcp"; head["reply"] = "shm, reply"
  head["queued"] = "shm, queued"; head["queued-tcp"] = "tcp, queued"
  hs = index(" " transports " ", " shm ") > 0
  printf "| metric | native |"
  for (j = 1; j <= nt; j++) printf " %s |", head[ts[j]]
  for (j = 1; j <= nt; j++) printf " %s/native |", ts[j]
  printf " target (shm) | shm meets |\n|---|---|"
  for (j = 1; j <= 2 * nt; j++) printf "---|"
  printf "---|---|\n"
  for (i = 1; i <= nk; i++) {
    k = keys[i]
    printf "| %s | %s |", labels[i], cell("native", k)
    for (j = 1; j <= nt; j++) printf " %s |", cell(ts[j], k)
    for (j = 1; j <= nt; j++) printf " %s |", ratio(ts[j], k)
    printf " %s | %s |\n", ttext[i] == "" ? "-" : ttext[i], hs ? verdict("shm", k, targets[i]) : "-"
  }
  # Absolute targets of the latency-critical path (open-loop requests).
  n50 = median(v["native req_us_p50"]); rtt = median(v["native tcp_rtt_us_p50"])
  if (hs && n50 != "" && median(v["shm req_us_p50"]) != "")
    printf "\nopen-loop p50 over shm: %s us vs native %s + 10 us: %s\n", median(v["shm req_us_p50"]), n50, (median(v["shm req_us_p50"]) <= n50 + 10) ? "meets" : "NO"
  over["reply"] = "shm with tallyd's reply (no completion word)"
  over["queued"] = "shm with the loop queueing for the worker (--lc-direct no)"
  for (j = 1; j <= nt; j++) {
    c = ts[j]
    if (!(c in over) || n50 == "" || median(v[c " req_us_p50"]) == "") continue
    printf "open-loop p50 over %s: %s us vs native %s + 10 us: %s\n", over[c], median(v[c " req_us_p50"]), n50, (median(v[c " req_us_p50"]) <= n50 + 10) ? "meets" : "NO"
  }
  tover["tcp"] = "TCP"
  tover["queued-tcp"] = "TCP with the loop queueing for the worker (--lc-direct no)"
  for (j = 1; j <= nt; j++) {
    c = ts[j]; p = median(v[c " req_us_p50"])
    if (!(c in tover) || n50 == "" || rtt == "" || p == "") continue
    printf "open-loop p50 over %s: %s us vs native %s + one TCP round trip %s us: %s\n", tover[c], p, n50, rtt, (p <= n50 + rtt) ? "meets" : "NO"
  }
  # The chain's target holds over TCP too; three decimals show a ratio at the line as it is.
  nc = median(v["native chain_ms_p50"])
  for (j = 1; j <= nt; j++) {
    c = ts[j]; p = median(v[c " chain_ms_p50"])
    if (!(c in tover) || nc == "" || nc + 0 == 0 || p == "") continue
    printf "1000-kernel chain over %s: %s ms vs native %s ms, %.3fx (target %s): %s\n", tover[c], p, nc, p / nc, ttext[7], verdict(c, "chain_ms_p50", targets[7]) == "yes" ? "meets" : "NO"
  }
  # Each round ran native, then every transport, one after the other: a round's ratio is
  # measured side by side, and their spread is the host's own variation.
  if (nr > 1) {
    printf "\nper round, tally/native (rounds 1-%d; the table has the medians):\n", nr
    for (i = 1; i <= nk; i++) {
      if (targets[i] == "") continue
      k = keys[i]
      for (j = 1; j <= nt; j++) {
        line = ""
        for (r = 1; r <= nr; r++) {
          a = per[ts[j] " " k " " r]; b = per["native " k " " r]
          line = line " " ((a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2fx", a / b))
        }
        printf "  %s, %s:%s\n", labels[i], ts[j], line
      }
    }
  }
  printf "\nresults correct (chain and copies): "
  bad = 0
  split("native " transports, cfgs, " ")
  for (j in cfgs) {
    c = cfgs[j]
    if (median(v[c " chain_ok"]) != 1 || median(v[c " copy_ok"]) != 1) { printf "%s NO; ", c; bad = 1 }
  }
  print bad ? "" : "yes, every configuration"
}
