/* test-wire-direct.c: a latency-critical tenant's ring or socket read by its
 * executor (wire.h, wire_tenant_direct; wire/direct.c, the rules in
 * wire/shm.h).
 *
 * A harness server with lc_poll, lc_direct and lc_direct_tcp; the tenant
 * "keep" (the harness holds a ref on it) connects as latency-critical, over
 * shared memory and again over TCP (each behaviour runs on both: the "tcp"
 * state), and a reader thread plays its executor: it reads the ring with
 * wire_direct_read and checks and answers what it reads as the harness's
 * on_msg does for what the loop reads (posts' per-thread order, calls
 * echoed).  What each behaviour shows: every request arrives exactly once
 * and in order whichever side read it; the reader refuses a message and
 * the loop gets it, in order; a burst's long batch is the loop's; frames the
 * reader does not take (descriptors; over TCP a call longer than
 * WIRE_DIRECT_MAX) go to the loop and reading comes back to the reader; a reader busy past
 * dead_after does not make the tenant dead, and a frame only the loop reads
 * does not wait for a busy reader; a tenant that closes while the
 * reader polls goes cleanly (the sanitizers watch the memory).
 */
#include "tests/test-wire-harness.h"

#include <errno.h>
#include <sys/mman.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

typedef struct reader {
  harness *h;
  pthread_t th;
  _Atomic bool stop;
  _Atomic int posts, calls, ran;
  _Atomic int refuse_every; /* refuse the posts whose seq is a multiple (0 = none) */
  _Atomic int busy_ms;      /* sleep this long inside each call "B..." ("busy executor") */
  _Atomic int jitter;       /* ok() sleeps up to this many us at random (take-backs race) */
  wire_direct_t *d;
} reader;

static bool r_ok(void *ctx, const wire_msg_t *m) {
  reader *r = ctx;
  int every = atomic_load(&r->refuse_every);
  uint32_t seq;
  /* Between the reader's copy of a frame and its claim on it: the loop may
   * take the ring back, consume the frame and hand the ring over again. */
  if (atomic_load(&r->jitter) && rand() % 2 == 0)
    usleep((useconds_t)(rand() % atomic_load(&r->jitter)));
  if (every && m->kind == WIRE_MSG_POST && m->len >= 9 && m->data[0] == 'S') {
    memcpy(&seq, m->data + 5, 4);
    return seq % (uint32_t)every != 0;
  }
  return true;
}

static void r_run(void *ctx, const wire_msg_t *m) {
  reader *r = ctx;
  atomic_fetch_add(&r->ran, 1);
  if (m->kind == WIRE_MSG_POST) {
    harness_check_seq(r->h, m);
    atomic_fetch_add(&r->posts, 1);
    return;
  }
  atomic_fetch_add(&r->calls, 1);
  if (m->len > 0 && m->data[0] == 'B' && atomic_load(&r->busy_ms))
    usleep((useconds_t)atomic_load(&r->busy_ms) * 1000u);
  wire_tenant_reply_mt_copy(r->h->kept, m->id, m->data, m->len);
}

static void *r_main(void *arg) {
  reader *r = arg;
  while (!atomic_load(&r->stop)) {
    if (!r->d) {
      wire_tenant_t *t = r->h->kept; /* set by on_connect on the loop thread */
      if (t && (r->d = wire_tenant_direct(t)) == NULL)
        usleep(100);
      continue;
    }
    if (wire_direct_read(r->d, r_ok, r_run, r) == 0)
      sched_yield();
  }
  return NULL;
}

typedef struct fixture {
  harness h;
  reader r;
  wire_conn_t *c;
} fixture;

/* The transport a test runs on: its cmocka state, NULL for shared memory. */
static const char tcp[] = "tcp";

static bool on_tcp(void **state) {
  return state != NULL && *state == tcp;
}

/* Starts the server, the reader and the tenant "keep" (latency-critical,
 * shared memory, or TCP when the state says so).  heartbeat / dead_after in
 * ms (0: the defaults).  The loop takes the ring back from a reader only
 * after bytes waited STUCK_US: long enough that a reader the test machine's
 * load keeps off the CPU a while still reads (the default's behaviour is the
 * same, sooner). */
#define STUCK_US 100000u

static void fx_start_stuck(fixture *f, void **state, uint32_t heartbeat_ms,
                           uint32_t dead_after_ms, uint32_t stuck_us) {
  wire_server_opts_t o = {.lc_poll = true,
                          .lc_direct = true,
                          .lc_direct_tcp = true,
                          .lc_direct_stuck_us = stuck_us,
                          .heartbeat_ms = heartbeat_ms,
                          .dead_after_ms = dead_after_ms};
  wire_hello_t hello = {.tenant = "keep", .prio = WIRE_PRIO_LATENCY_CRITICAL};
  char err[256] = "";
  memset(f, 0, sizeof(*f));
  assert_int_equal(harness_start(&f->h, &o), 0);
  f->r.h = &f->h;
  assert_int_equal(pthread_create(&f->r.th, NULL, r_main, &f->r), 0);
  assert_int_equal(wire_conn_open(&f->c, on_tcp(state) ? f->h.url_tcp : f->h.url_shm, &hello,
                                  NULL, err, sizeof(err)),
                   0);
  /* The reader exists before the first drain ends: the loop hands over. */
  for (int i = 0; i < 20000 && !f->r.d; i++)
    usleep(100);
  assert_non_null(f->r.d);
}

static void fx_start(fixture *f, void **state, uint32_t heartbeat_ms, uint32_t dead_after_ms) {
  fx_start_stuck(f, state, heartbeat_ms, dead_after_ms, STUCK_US);
}

static void fx_stop(fixture *f) {
  if (f->c)
    wire_conn_close(f->c);
  for (int i = 0; i < 20000 && atomic_load(&f->h.closes) == 0; i++)
    usleep(100);
  atomic_store(&f->r.stop, true);
  pthread_join(f->r.th, NULL);
  wire_direct_release(f->r.d);
  wire_tenant_unref(f->h.kept);
  f->h.kept = NULL;
  harness_stop(&f->h);
}

/* One echo call of n bytes (a pattern) starting with first; asserts the
 * echo.  'B': a call the reader sits in (busy_ms). */
static void echo_as(wire_conn_t *c, uint8_t first, size_t n, uint8_t salt) {
  uint8_t q[256], a[256];
  struct iovec qv = {q, n}, av = {a, sizeof(a)};
  size_t got = 0;
  for (size_t i = 0; i < n; i++)
    q[i] = (uint8_t)('a' + (i + salt) % 26); /* never 'S', 'W', 'C', 'Z', 'N', 'X', 'E' first */
  q[0] = first;
  assert_int_equal(wire_conn_call(c, &qv, 1, &av, 1, &got), 0);
  assert_int_equal(got, n);
  assert_memory_equal(a, q, n);
}

static void echo(wire_conn_t *c, size_t n, uint8_t salt) {
  echo_as(c, 'q', n, salt);
}

/* Posts in batches and calls between them, 2000 posts: each arrives once, in
 * order, and most frames are the reader's. */
static void requests_arrive_once_and_in_order(void **state) {
  fixture f;
  uint64_t read = 0, given = 0;
  fx_start(&f, state, 0, 0);
  for (uint32_t i = 0; i < 2000; i++) {
    assert_int_equal(harness_post_seq(f.c, 0, i), 0);
    if (i % 50 == 49)
      echo(f.c, 40 + i % 100, (uint8_t)i);
  }
  echo(f.c, 8, 1);
  assert_int_equal(atomic_load(&f.h.posts) + atomic_load(&f.r.posts), 2000);
  assert_int_equal(atomic_load(&f.h.calls) + atomic_load(&f.r.calls), 41);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  wire_direct_counts(f.r.d, &read, &given);
  print_message("reader: %llu frames read, %llu given back; %d of 41 calls\n",
                (unsigned long long)read, (unsigned long long)given, atomic_load(&f.r.calls));
  assert_true(read > 0);
  assert_true(atomic_load(&f.r.calls) > 0);
  fx_stop(&f);
}

/* A message the reader refuses (ok() false) goes to the loop with the rest
 * of its frame, unconsumed: the loop's on_msg gets it, in order, and the
 * reader gets the ring back afterwards. */
static void a_refused_message_goes_to_the_loop_in_order(void **state) {
  fixture f;
  uint64_t read = 0, given = 0;
  fx_start(&f, state, 0, 0);
  atomic_store(&f.r.refuse_every, 7);
  for (uint32_t i = 1; i <= 1400; i++) {
    assert_int_equal(harness_post_seq(f.c, 3, i - 1), 0);
    if (i % 20 == 0)
      echo(f.c, 16, (uint8_t)i);
  }
  echo(f.c, 16, 0);
  assert_int_equal(atomic_load(&f.h.posts) + atomic_load(&f.r.posts), 1400);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  assert_true(atomic_load(&f.h.posts) >= 200); /* every 7th at least */
  /* How many frames each side read depends on who ran when (the loop also
   * takes the ring back from a reader that lets bytes wait): not asserted. */
  wire_direct_counts(f.r.d, &read, &given);
  print_message("reader: %llu frames read, %llu given back\n", (unsigned long long)read,
                (unsigned long long)given);
  fx_stop(&f);
}

/* A burst's BATCH frame (500 posts, 6.5 KB) is longer than the reader takes
 * (WIRE__DR_BURST_BYTES): it gives the frame back once (not again and
 * again: the loop reads what it was given back before it hands over again)
 * and the loop reads every post of it, in order; a request's few posts stay
 * the reader's. */
static void a_burst_goes_to_the_loop(void **state) {
  fixture f;
  int loop_before, reader_before;
  uint64_t read = 0, given = 0, given_before = 0;
  fx_start(&f, state, 0, 0);
  echo(f.c, 8, 4);
  loop_before = atomic_load(&f.h.posts);
  reader_before = atomic_load(&f.r.posts);
  wire_direct_counts(f.r.d, &read, &given_before);
  for (uint32_t i = 0; i < 500; i++) /* one batch: the call below sends it */
    assert_int_equal(harness_post_seq(f.c, 2, i), 0);
  echo(f.c, 8, 5);
  assert_int_equal(atomic_load(&f.h.posts) - loop_before, 500);
  assert_int_equal(atomic_load(&f.r.posts), reader_before);
  wire_direct_counts(f.r.d, &read, &given);
  print_message("the burst: given back %llu times\n", (unsigned long long)(given - given_before));
  assert_true(given - given_before <= 2); /* the burst's frame, at most the call behind it */
  for (uint32_t i = 500; i < 1500; i++) {
    assert_int_equal(harness_post_seq(f.c, 2, i), 0);
    if (i % 10 == 9)
      echo(f.c, 8, (uint8_t)i);
  }
  assert_int_equal(atomic_load(&f.h.posts) + atomic_load(&f.r.posts), 1500);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  assert_true(atomic_load(&f.r.posts) > reader_before);
  fx_stop(&f);
}

/* A frame only the loop reads: over shared memory a descriptor (an FD frame,
 * tagged tag: the harness writes "tag N" into the file), over TCP a call
 * longer than WIRE_DIRECT_MAX (answered by the loop with one byte).  Returns
 * once the loop has it; fd: the file for the descriptor. */
static void loop_frame(fixture *f, void **state, int fd, int tag) {
  if (on_tcp(state)) {
    size_t n = WIRE_DIRECT_MAX + 4096;
    uint8_t *q = calloc(1, n), a[8];
    struct iovec qv = {q, n}, av = {a, sizeof(a)};
    size_t got = 0;
    int calls = atomic_load(&f->h.calls);
    assert_non_null(q);
    q[0] = 'E';
    assert_int_equal(wire_conn_call(f->c, &qv, 1, &av, 1, &got), 0);
    assert_int_equal(got, 1);
    assert_int_equal(atomic_load(&f->h.calls), calls + 1);
    free(q);
    return;
  }
  assert_int_equal(wire_conn_send_fd(f->c, fd, (uint64_t)tag), 7);
}

/* A descriptor (an FD frame), or over TCP a long call, is the loop's: it
 * gets it after every post sent before it, and the reader reads the posts
 * after it. */
static void frames_it_does_not_take_go_to_the_loop(void **state) {
  fixture f;
  char path[] = "/tmp/tally-direct-fd-XXXXXX", b[32] = "";
  int fd = mkstemp(path), posts_before;
  assert_true(fd >= 0);
  unlink(path);
  fx_start(&f, state, 0, 0);
  for (uint32_t i = 0; i < 100; i++)
    assert_int_equal(harness_post_seq(f.c, 1, i), 0);
  echo(f.c, 8, 2);
  posts_before = atomic_load(&f.h.posts) + atomic_load(&f.r.posts);
  assert_int_equal(posts_before, 100);
  loop_frame(&f, state, fd, 42);
  assert_int_equal(atomic_load(&f.h.fds), on_tcp(state) ? 0 : 1);
  for (uint32_t i = 100; i < 300; i++)
    assert_int_equal(harness_post_seq(f.c, 1, i), 0);
  echo(f.c, 8, 3);
  assert_int_equal(atomic_load(&f.h.posts) + atomic_load(&f.r.posts), 300);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  if (!on_tcp(state)) {
    assert_true(pread(fd, b, sizeof(b) - 1, 0) > 0);
    assert_string_equal(b, "tag 42");
  }
  close(fd);
  fx_stop(&f);
}

/* The reader sits 600 ms in one call while dead_after is 200 ms: the
 * guest's heartbeats wait unread in the ring, which is not silence. */
static void a_busy_reader_is_not_a_dead_tenant(void **state) {
  fixture f;
  fx_start(&f, state, 40, 200);
  echo(f.c, 8, 4); /* the reader has the ring */
  atomic_store(&f.r.busy_ms, 600);
  echo_as(f.c, 'B', 8, 5);
  atomic_store(&f.r.busy_ms, 0);
  usleep(400000); /* idle: heartbeats go to the loop */
  echo(f.c, 8, 6);
  assert_int_equal(atomic_load(&f.h.closes), 0);
  fx_stop(&f);
  assert_int_not_equal(atomic_load(&f.h.last_close_status), WIRE_EPEERDEAD);
}

/* The reader stamps each frame it reads with its own clock, and the loop's
 * timer may have read its clock just before: a stamp later than the timer's
 * "now" is recent, not 2^64 ns of silence.  Calls back to back for a second
 * with the timer firing every 2 ms; the tenant stays. */
static void a_stamp_after_the_timers_clock_is_not_silence(void **state) {
  fixture f;
  uint64_t t0 = harness_now_ns();
  fx_start(&f, state, 3, 1000);
  for (int i = 0; harness_now_ns() - t0 < 1000000000u; i++)
    echo(f.c, 8, (uint8_t)i);
  assert_int_equal(atomic_load(&f.h.closes), 0);
  fx_stop(&f);
  assert_int_not_equal(atomic_load(&f.h.last_close_status), WIRE_EPEERDEAD);
}

typedef struct busy_call {
  wire_conn_t *c;
  _Atomic bool done;
} busy_call;

static void *busy_call_main(void *arg) {
  busy_call *b = arg;
  echo_as(b->c, 'B', 8, 9);
  atomic_store(&b->done, true);
  return NULL;
}

/* The reader sits in a request (2 s) while another guest thread sends a
 * frame only the loop reads (loop_frame, as a host function's wait would
 * be): the loop takes the ring back and answers it while the request still
 * runs, so a request waiting for such a frame cannot wait for ever. */
static void the_loop_frames_do_not_wait_for_a_busy_reader(void **state) {
  fixture f;
  busy_call b = {0};
  pthread_t th;
  int calls;
  char path[] = "/tmp/tally-direct-busy-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  fx_start(&f, state, 0, 0);
  b.c = f.c;
  atomic_store(&f.r.busy_ms, 2000);
  /* The busy call must be the reader's: on a machine too loaded for the
   * reader to run within STUCK_US the loop answers it; then again. */
  for (int tries = 0;; tries++) {
    assert_true(tries < 100);
    echo(f.c, 8, 8); /* the ring is the reader's: empty after an answer */
    calls = atomic_load(&f.r.calls);
    atomic_store(&b.done, false);
    assert_int_equal(pthread_create(&th, NULL, busy_call_main, &b), 0);
    while (atomic_load(&f.r.calls) == calls && !atomic_load(&b.done))
      usleep(1000);
    if (atomic_load(&f.r.calls) != calls)
      break; /* the reader runs it, for 2 s */
    assert_int_equal(pthread_join(th, NULL), 0);
  }
  loop_frame(&f, state, fd, 43);
  assert_false(atomic_load(&b.done));
  atomic_store(&f.r.busy_ms, 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_true(atomic_load(&b.done));
  close(fd);
  fx_stop(&f);
}

/* The loop takes the ring back whenever bytes wait 10 us and the reader
 * pauses between copying a frame and claiming it: take-backs and
 * hand-overs race with the reader's reads all the time, and still every
 * request arrives once, in order, and the tenant stays open (a reader that
 * consumed at a position the loop had moved on from would make the ring's
 * indices impossible). */
static void take_backs_racing_reads_lose_and_repeat_nothing(void **state) {
  fixture f;
  uint64_t read = 0, given = 0;
  fx_start_stuck(&f, state, 0, 0, 10);
  atomic_store(&f.r.jitter, 200);
  for (uint32_t i = 0; i < 6000; i++) {
    assert_int_equal(harness_post_seq(f.c, 4, i), 0);
    if (i % 3 == 2)
      assert_int_equal(wire_conn_flush(f.c), 0); /* small frames: many reads */
    if (i % 100 == 99)
      echo(f.c, 24, (uint8_t)i);
  }
  echo(f.c, 8, 1);
  assert_int_equal(atomic_load(&f.h.posts) + atomic_load(&f.r.posts), 6000);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  assert_int_equal(atomic_load(&f.h.closes), 0);
  wire_direct_counts(f.r.d, &read, &given);
  print_message("reader: %llu frames read, %llu given or taken back\n", (unsigned long long)read,
                (unsigned long long)given);
  atomic_store(&f.r.jitter, 0);
  fx_stop(&f);
}

/* The guest goes while the reader polls: the reader stops reading (0) and
 * releases its reference later; nothing is read from unmapped memory.  The
 * posts right before the close may go unread (a reader slower than the
 * loop's short wait for it: the tenant is then closed as lost, not in
 * order), never out of order. */
static void a_tenant_that_goes_while_read_leaves_cleanly(void **state) {
  fixture f;
  int n;
  fx_start(&f, state, 0, 0);
  for (uint32_t i = 0; i < 500; i++)
    assert_int_equal(harness_post_seq(f.c, 2, i), 0);
  echo(f.c, 8, 7); /* read, with the posts before it */
  for (uint32_t i = 500; i < 1000; i++)
    assert_int_equal(harness_post_seq(f.c, 2, i), 0);
  wire_conn_close(f.c); /* its posts are flushed first */
  f.c = NULL;
  for (int i = 0; i < 20000 && atomic_load(&f.h.closes) == 0; i++)
    usleep(100);
  assert_int_equal(atomic_load(&f.h.closes), 1);
  usleep(20000); /* the reader keeps polling a closed tenant */
  assert_int_equal(wire_direct_read(f.r.d, r_ok, r_run, &f.r), 0);
  n = atomic_load(&f.h.posts) + atomic_load(&f.r.posts);
  assert_true(n >= 500 && n <= 1000);
  assert_int_equal(atomic_load(&f.h.order_errors), 0);
  fx_stop(&f);
}

/* Without lc_direct (or for a best-effort tenant) there is no reader; over
 * TCP, none without lc_direct_tcp either. */
static void no_reader_unless_asked(void **state) {
  harness h;
  wire_server_opts_t o = {.lc_poll = true, .lc_direct = on_tcp(state)};
  wire_hello_t hello = {.tenant = "keep", .prio = WIRE_PRIO_LATENCY_CRITICAL};
  wire_conn_t *c = NULL;
  assert_int_equal(harness_start(&h, &o), 0);
  assert_int_equal(wire_conn_open(&c, on_tcp(state) ? h.url_tcp : h.url_shm, &hello, NULL, NULL, 0),
                   0);
  assert_int_equal(wire_conn_call(c, NULL, 0, NULL, 0, NULL), 0);
  assert_null(wire_tenant_direct(h.kept));
  wire_conn_close(c);
  wire_tenant_unref(h.kept);
  h.kept = NULL;
  harness_stop(&h);
}

/* A behaviour again over TCP, named so in the report. */
#define OVER_TCP(f) {"tcp_" #f, f, NULL, NULL, (void *)tcp}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_arrive_once_and_in_order),
      cmocka_unit_test(a_refused_message_goes_to_the_loop_in_order),
      cmocka_unit_test(a_burst_goes_to_the_loop),
      cmocka_unit_test(frames_it_does_not_take_go_to_the_loop),
      cmocka_unit_test(a_busy_reader_is_not_a_dead_tenant),
      cmocka_unit_test(a_stamp_after_the_timers_clock_is_not_silence),
      cmocka_unit_test(the_loop_frames_do_not_wait_for_a_busy_reader),
      cmocka_unit_test(take_backs_racing_reads_lose_and_repeat_nothing),
      cmocka_unit_test(a_tenant_that_goes_while_read_leaves_cleanly),
      cmocka_unit_test(no_reader_unless_asked),
      OVER_TCP(requests_arrive_once_and_in_order),
      OVER_TCP(a_refused_message_goes_to_the_loop_in_order),
      OVER_TCP(a_burst_goes_to_the_loop),
      OVER_TCP(frames_it_does_not_take_go_to_the_loop),
      OVER_TCP(a_busy_reader_is_not_a_dead_tenant),
      OVER_TCP(a_stamp_after_the_timers_clock_is_not_silence),
      OVER_TCP(the_loop_frames_do_not_wait_for_a_busy_reader),
      OVER_TCP(take_backs_racing_reads_lose_and_repeat_nothing),
      OVER_TCP(a_tenant_that_goes_while_read_leaves_cleanly),
      OVER_TCP(no_reader_unless_asked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
