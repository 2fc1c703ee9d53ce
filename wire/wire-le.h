/* wire-le.h: little-endian integers in byte buffers (prefix wire_le_).
 *
 * Every byte format of Tally is little-endian: wire's frames, policy's
 * profile file, rewrite's compile-cache records, fatbins and cubins.  These
 * six functions are the one set all of them use.  Header-only and libc-free
 * (only <stdint.h>): a module that includes this file links nothing of wire/
 * and gains no dependency beyond the header, which is why policy/ (libc and
 * libm only) and rewrite/ (no other Tally module) may include it.
 * Byte by byte, so any alignment and any host byte order work.
 */
#ifndef TALLY_WIRE_LE_H
#define TALLY_WIRE_LE_H

#include <stdint.h>

static inline uint16_t wire_le_rd16(const void *src) {
  const uint8_t *p = src;
  return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t wire_le_rd32(const void *src) {
  const uint8_t *p = src;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t wire_le_rd64(const void *src) {
  const uint8_t *p = src;
  return (uint64_t)wire_le_rd32(p) | (uint64_t)wire_le_rd32(p + 4) << 32;
}
static inline void wire_le_wr16(void *dst, uint16_t v) {
  uint8_t *p = dst;
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void wire_le_wr32(void *dst, uint32_t v) {
  uint8_t *p = dst;
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static inline void wire_le_wr64(void *dst, uint64_t v) {
  uint8_t *p = dst;
  wire_le_wr32(p, (uint32_t)v);
  wire_le_wr32(p + 4, (uint32_t)(v >> 32));
}

#endif
