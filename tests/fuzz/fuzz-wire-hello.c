/* fuzz-wire-hello.c: libFuzzer target for the handshake: what an
 * unauthenticated peer can send the daemon, and what a daemon can send back.
 *
 * Input: byte 0 selects (mod 4): 0 HELLO body -> decode and the daemon's
 * version/token decision; 1 WELCOME body -> decode; 2 REFUSE/BYE body ->
 * decode; 3 a raw pre-handshake stream -> the assembler configured as the
 * daemon configures it before the handshake (HELLO only, 4 KiB limit), each
 * delivered HELLO decoded and checked.  Seeds: tests/fuzz/corpus/wire-hello/.
 */
#include "wire/wire-int.h"

#include <string.h>

static int on_hello(void *ctx, const wire__msg *m) {
  wire__hello h;
  char why[256];
  uint16_t v;
  (void)ctx;
  if (wire__hello_decode(m->data, m->len, &h, why, sizeof(why)) == 0)
    wire__hello_check(&h, "token", true, &v, why, sizeof(why));
  return 0;
}

int wire_fuzz_hello_one(const uint8_t *data, size_t size);

int wire_fuzz_hello_one(const uint8_t *data, size_t size) {
  char why[256];
  if (size < 1)
    return 0;
  switch (data[0] % 4) {
  case 0: {
    wire__hello h;
    uint16_t v;
    if (wire__hello_decode(data + 1, size - 1, &h, why, sizeof(why)) == 0) {
      wire__hello_check(&h, "token", true, &v, why, sizeof(why));
      wire__hello_check(&h, NULL, false, &v, why, sizeof(why));
    }
    break;
  }
  case 1: {
    wire__welcome w;
    wire__welcome_decode(data + 1, size - 1, &w, why, sizeof(why));
    break;
  }
  case 2: {
    int32_t st;
    wire__status_decode(data + 1, size - 1, &st, why, sizeof(why));
    break;
  }
  default: {
    wire__rx rx;
    size_t used;
    wire__rx_init(&rx, WIRE__HELLO_MAX, 1u << WIRE__K_HELLO, on_hello, NULL);
    rx.frame_max = WIRE__HELLO_MAX;
    wire__rx_feed(&rx, data + 1, size - 1, &used);
    wire__rx_close(&rx);
    break;
  }
  }
  return 0;
}

#ifndef WIRE_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return wire_fuzz_hello_one(data, size);
}
#endif
