/* metrics.c: the operator's view as text: `tallyctl status` (a table, one
 * tenant a line) and the Prometheus text exposition (format 0.0.4) that
 * `tallyctl metrics` prints and GET /metrics serves.
 *
 * Pure formatting of a hostd_view_t snapshot (server.c fills it): no locks,
 * no I/O.  Peer-chosen strings (tenant names) are escaped: with
 * hostd__escape in the table, and as Prometheus label values (backslash,
 * quote and newline escaped, other control bytes as \xHH via
 * hostd__escape).  A value not measured prints "-" in the table and is
 * left out of the exposition: GPU time and weight when the scheduler does
 * not run (--policy none), the latency-critical tenant's request latency
 * when it finished no request in the last minute (hostd/latency.c says
 * what a request is), the scheduler's series under --policy none, and the
 * preemption turnaround before a preemption was timed.
 */
#include "hostd/guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *class_name(int prio) {
  return prio == 0 ? "latency-critical" : "best-effort";
}

static void opt_num(char *out, size_t cap, int64_t v, const char *unit) {
  if (v < 0)
    snprintf(out, cap, "-");
  else
    snprintf(out, cap, "%lld%s", (long long)v, unit);
}

static void row_line(FILE *f, const hostd_row_t *r) {
  char name[300], peer[200], since[32], gpu[32], p50[32], p99[32], weight[16], cpu[16];
  struct tm tm;
  time_t t = (time_t)r->since;
  gmtime_r(&t, &tm);
  strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
  opt_num(gpu, sizeof(gpu), r->gpu_ns < 0 ? -1 : r->gpu_ns / 1000000, "ms");
  opt_num(weight, sizeof(weight), r->weight ? (int64_t)r->weight : -1, "");
  opt_num(p50, sizeof(p50), r->prio == 0 ? r->p50_us : -1, "us");
  opt_num(p99, sizeof(p99), r->prio == 0 ? r->p99_us : -1, "us");
  opt_num(cpu, sizeof(cpu), r->cpu, "");
  fprintf(f, "%-4u %-20s %-24s %-16s %-6s %-9s %-20s %12llu %9llu %8s %5llu %8s %8s %8llu %8llu "
          "%4s\n",
          r->id, hostd__escape(name, sizeof(name), r->name),
          hostd__escape(peer, sizeof(peer), r->peer), class_name(r->prio), weight, r->transport,
          since, (unsigned long long)r->mem, (unsigned long long)r->kernels, gpu,
          (unsigned long long)r->queue, p50, p99, (unsigned long long)r->sliced,
          (unsigned long long)r->ptb, cpu);
}

/* "scheduler: ..." under the first line, when the scheduler runs. */
static void sched_line(FILE *f, const hostd_view_sched_t *s) {
  if (!s->on)
    return;
  fprintf(f, "scheduler: %llu sliced and %llu PTB launches, %llu preemptions",
          (unsigned long long)s->sliced, (unsigned long long)s->ptb,
          (unsigned long long)s->preempts);
  if (s->early_raises)
    fprintf(f, " (%llu flags raised by an LC's worker)", (unsigned long long)s->early_raises);
  if (s->turnarounds)
    fprintf(f, ", turnaround p50 %.1f us p99 %.1f us (%llu timed)", (double)s->turn_p50_ns / 1e3,
            (double)s->turn_p99_ns / 1e3, (unsigned long long)s->turnarounds);
  if (s->flush)
    fprintf(f, "; %llu FLUSH launches, %llu blocks given up", (unsigned long long)s->flush,
            (unsigned long long)s->given_up);
  if (s->whole)
    fprintf(f, "; %llu best-effort launches ran on the whole GPU (the partition cannot host "
               "them)", (unsigned long long)s->whole);
  if (s->whole_forms)
    fprintf(f, "; %llu sliced, PTB or FLUSH launches ran on the whole GPU beside the partition",
            (unsigned long long)s->whole_forms);
  fputc('\n', f);
}

char *hostd__view_status(const hostd_view_t *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  fprintf(f, "tenants: %zu   module cache: %llu images, %llu bytes in memory, %llu on disk   "
          "refusals: %lu\n", v->n, (unsigned long long)v->mc.images,
          (unsigned long long)v->mc.mem_bytes, (unsigned long long)v->mc.disk_bytes,
          v->refusals);
  sched_line(f, &v->sched);
  fprintf(f, "%-4s %-20s %-24s %-16s %-6s %-9s %-20s %12s %9s %8s %5s %8s %8s %8s %8s %4s\n",
          "ID", "NAME", "PID/PEER", "CLASS", "WEIGHT", "TRANSPORT", "SINCE", "DEVMEM", "KERNELS",
          "GPUTIME", "QUEUE", "LC_P50", "LC_P99", "SLICED", "PTB", "CPU");
  for (size_t i = 0; i < v->n; i++)
    row_line(f, &v->rows[i]);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

/* A Prometheus label value: backslash, quote and newline escaped as the
 * format says; other control bytes as hostd__escape writes them. */
static const char *label(char *out, size_t cap, const char *s) {
  return hostd__escape(out, cap, s);
}

static void tenant_series(FILE *f, const hostd_view_t *v, const char *metric,
                          uint64_t (*get)(const hostd_row_t *)) {
  for (size_t i = 0; i < v->n; i++) {
    char name[300];
    const hostd_row_t *r = &v->rows[i];
    fprintf(f, "%s{tenant=\"%s\",id=\"%u\",class=\"%s\",transport=\"%s\"} %llu\n", metric,
            label(name, sizeof(name), r->name), r->id, class_name(r->prio), r->transport,
            (unsigned long long)get(r));
  }
}

static uint64_t get_mem(const hostd_row_t *r) { return r->mem; }
static uint64_t get_kernels(const hostd_row_t *r) { return r->kernels; }
static uint64_t get_queue(const hostd_row_t *r) { return r->queue; }
static uint64_t get_upload(const hostd_row_t *r) { return r->upload; }
static uint64_t get_since(const hostd_row_t *r) { return (uint64_t)r->since; }

static void header(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The scheduler's daemon-wide series: variant launches, preemptions and
 * their turnaround (flag write -> the preempted launch's end). */
static void sched_series(FILE *f, const hostd_view_sched_t *s) {
  if (!s->on)
    return;
  header(f, "tally_sched_variant_launches_total", "counter",
         "Launches of sliced, PTB and FLUSH variants of best-effort PTX kernels.");
  fprintf(f, "tally_sched_variant_launches_total{form=\"sliced\"} %llu\n",
          (unsigned long long)s->sliced);
  fprintf(f, "tally_sched_variant_launches_total{form=\"ptb\"} %llu\n", (unsigned long long)s->ptb);
  fprintf(f, "tally_sched_variant_launches_total{form=\"flush\"} %llu\n",
          (unsigned long long)s->flush);
  header(f, "tally_sched_blocks_given_up_total", "counter",
         "Blocks of FLUSH launches that gave up at the flag (each ran again).");
  fprintf(f, "tally_sched_blocks_given_up_total %llu\n", (unsigned long long)s->given_up);
  header(f, "tally_sched_whole_gpu_launches_total", "counter",
         "Best-effort launches the --be-sms partition could not host (a cluster it cannot "
         "co-schedule, a cooperative grid too large for it), run on the whole GPU instead.");
  fprintf(f, "tally_sched_whole_gpu_launches_total %llu\n", (unsigned long long)s->whole);
  header(f, "tally_sched_whole_gpu_form_launches_total", "counter",
         "Best-effort launches in a sliced, PTB or FLUSH form run on the whole GPU beside the "
         "--be-sms partition (the form bounds the latency-critical tenant's wait).");
  fprintf(f, "tally_sched_whole_gpu_form_launches_total %llu\n",
          (unsigned long long)s->whole_forms);
  header(f, "tally_sched_preemptions_total", "counter",
         "PTB and FLUSH launches whose preemption flag was raised.");
  fprintf(f, "tally_sched_preemptions_total %llu\n", (unsigned long long)s->preempts);
  header(f, "tally_sched_early_raises_total", "counter",
         "Preemption flags a latency-critical tenant's worker raised at the start of its burst, "
         "before its launch and before the policy asked.");
  fprintf(f, "tally_sched_early_raises_total %llu\n", (unsigned long long)s->early_raises);
  header(f, "tally_sched_fence_waits_total", "counter",
         "Fences that made a tenant's worker wait until the scheduler issued the stream's "
         "held launches (the worker executes nothing else meanwhile).");
  fprintf(f, "tally_sched_fence_waits_total %llu\n", (unsigned long long)s->fences_blocked);
  header(f, "tally_sched_fence_wait_seconds_total", "counter",
         "Time tenants' workers spent in those waits.");
  fprintf(f, "tally_sched_fence_wait_seconds_total %.6f\n", (double)s->fence_block_ns / 1e9);
  if (!s->turnarounds)
    return;
  header(f, "tally_sched_preempt_turnaround_microseconds", "gauge",
         "Preemption turnaround, flag write to the preempted launch's end, since start.");
  fprintf(f, "tally_sched_preempt_turnaround_microseconds{quantile=\"0.5\"} %.1f\n",
          (double)s->turn_p50_ns / 1e3);
  fprintf(f, "tally_sched_preempt_turnaround_microseconds{quantile=\"0.99\"} %.1f\n",
          (double)s->turn_p99_ns / 1e3);
  fprintf(f, "tally_sched_preempt_turnaround_microseconds_count %llu\n",
          (unsigned long long)s->turnarounds);
}

/* The series of tenants the scheduler runs (GPU time, weight, variant launches). */
static void scheduled_series(FILE *f, const hostd_view_t *v) {
  header(f, "tally_tenant_gpu_seconds_total", "counter",
         "Device time of a tenant's kernels (best-effort: timed by events; latency-critical: "
         "issue or previous completion to completion).");
  for (size_t i = 0; i < v->n; i++) {
    char name[300];
    const hostd_row_t *r = &v->rows[i];
    if (r->gpu_ns >= 0)
      fprintf(f, "tally_tenant_gpu_seconds_total{tenant=\"%s\",id=\"%u\",class=\"%s\"} %.6f\n",
              label(name, sizeof(name), r->name), r->id, class_name(r->prio),
              (double)r->gpu_ns / 1e9);
  }
  header(f, "tally_tenant_weight", "gauge",
         "A tenant's weight in the scheduler (--tenant-weight).");
  for (size_t i = 0; i < v->n; i++) {
    char name[300];
    const hostd_row_t *r = &v->rows[i];
    if (r->weight)
      fprintf(f, "tally_tenant_weight{tenant=\"%s\",id=\"%u\",class=\"%s\"} %u\n",
              label(name, sizeof(name), r->name), r->id, class_name(r->prio), r->weight);
  }
  header(f, "tally_tenant_variant_launches_total", "counter",
         "Launches of a tenant's kernels as sliced, PTB or FLUSH variants.");
  for (size_t i = 0; i < v->n; i++) {
    char name[300];
    const hostd_row_t *r = &v->rows[i];
    if (!r->weight)
      continue;
    label(name, sizeof(name), r->name);
    fprintf(f,
            "tally_tenant_variant_launches_total{tenant=\"%s\",id=\"%u\",form=\"sliced\"} %llu\n",
            name, r->id, (unsigned long long)r->sliced);
    fprintf(f, "tally_tenant_variant_launches_total{tenant=\"%s\",id=\"%u\",form=\"ptb\"} %llu\n",
            name, r->id, (unsigned long long)r->ptb);
    fprintf(f,
            "tally_tenant_variant_launches_total{tenant=\"%s\",id=\"%u\",form=\"flush\"} %llu\n",
            name, r->id, (unsigned long long)r->flush);
  }
}

char *hostd__view_metrics(const hostd_view_t *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    return NULL;
  header(f, "tally_tenants", "gauge", "Tenants connected.");
  fprintf(f, "tally_tenants %zu\n", v->n);
  header(f, "tally_start_time_seconds", "gauge", "When tallyd started (epoch seconds).");
  fprintf(f, "tally_start_time_seconds %lld\n", (long long)v->started);
  header(f, "tally_calls_total", "counter", "Synchronous requests answered.");
  fprintf(f, "tally_calls_total %lu\n", v->calls);
  header(f, "tally_request_bytes_total", "counter", "Payload bytes of every request received.");
  fprintf(f, "tally_request_bytes_total %lu\n", v->rx_bytes);
  header(f, "tally_refusals_total", "counter", "Connections refused or shed before a handshake.");
  fprintf(f, "tally_refusals_total %lu\n", v->refusals);
  header(f, "tally_module_cache_bytes", "gauge", "Module image bytes cached, by place.");
  fprintf(f, "tally_module_cache_bytes{place=\"memory\"} %llu\n",
          (unsigned long long)v->mc.mem_bytes);
  fprintf(f, "tally_module_cache_bytes{place=\"disk\"} %llu\n",
          (unsigned long long)v->mc.disk_bytes);
  header(f, "tally_module_cache_evictions_total", "counter", "Module images evicted, by place.");
  fprintf(f, "tally_module_cache_evictions_total{place=\"memory\"} %llu\n",
          (unsigned long long)v->mc.evicted_mem);
  fprintf(f, "tally_module_cache_evictions_total{place=\"disk\"} %llu\n",
          (unsigned long long)v->mc.evicted_disk);
  header(f, "tally_tenant_device_memory_bytes", "gauge", "Device memory a tenant holds.");
  tenant_series(f, v, "tally_tenant_device_memory_bytes", get_mem);
  header(f, "tally_tenant_kernels_total", "counter", "Kernels a tenant launched.");
  tenant_series(f, v, "tally_tenant_kernels_total", get_kernels);
  header(f, "tally_tenant_queue_depth", "gauge", "Requests queued for a tenant's worker.");
  tenant_series(f, v, "tally_tenant_queue_depth", get_queue);
  header(f, "tally_tenant_upload_bytes_total", "counter", "Module bytes a tenant sent.");
  tenant_series(f, v, "tally_tenant_upload_bytes_total", get_upload);
  header(f, "tally_tenant_connected_time_seconds", "gauge", "When a tenant connected.");
  tenant_series(f, v, "tally_tenant_connected_time_seconds", get_since);
  scheduled_series(f, v);
  sched_series(f, &v->sched);
  header(f, "tally_lc_request_latency_microseconds", "gauge",
         "The latency-critical tenant's requests, first launch received to the reply of the "
         "synchronising call, last minute.");
  for (size_t i = 0; i < v->n; i++) {
    char name[300];
    const hostd_row_t *r = &v->rows[i];
    if (r->prio != 0 || r->p50_us < 0)
      continue;
    label(name, sizeof(name), r->name);
    fprintf(f, "tally_lc_request_latency_microseconds{tenant=\"%s\",quantile=\"0.5\"} %lld\n",
            name, (long long)r->p50_us);
    fprintf(f, "tally_lc_request_latency_microseconds{tenant=\"%s\",quantile=\"0.99\"} %lld\n",
            name, (long long)r->p99_us);
  }
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}
