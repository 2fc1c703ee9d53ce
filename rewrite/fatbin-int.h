/* fatbin-int.h: byte formats read by rewrite/fatbin*.c, and the helpers those
 * files share.  Nothing here is public; callers use rewrite/rw.h.
 *
 * The layouts below were established on CUDA 13.0 (nvcc V13.0.88) by
 * building fatbins with every --compress-mode and reading them back (see
 * tests/test-rw-fatbin.c, which checks the code against these tables); they
 * agree with cudart's fatbinary_section.h for the wrapper.  All integers are
 * little-endian and are read with rw__le*() from possibly unaligned bytes.
 *
 * Wrapper cudart registers (__fatBinC_Wrapper_t, section .nvFatBinSegment):
 *   OFFSET SIZE DESCRIPTION
 *        0    4 magic 0x466243B1 (FATBINC_MAGIC)
 *        4    4 version: 1 (offline fatbin) or 2 (prelinked, -rdc)
 *        8    8 pointer to the fatbin header (in-process address)
 *       16    8 version 1: filename or NULL; version 2: prelinked fatbins
 *
 * Fatbin header (section .nv_fatbin; several may follow each other, each
 * starting 8-byte aligned, the gaps zero-filled):
 *   OFFSET SIZE DESCRIPTION
 *        0    4 magic 0xBA55ED50
 *        4    2 version (1)
 *        6    2 header size H (16)
 *        8    8 fat size F: bytes of entries after the header
 *   Entries fill [H, H+F).
 *
 * Entry header (H_e bytes, then the payload):
 *   OFFSET SIZE DESCRIPTION
 *        0    2 kind: 1 PTX, 2 ELF (cubin)
 *        2    2 unknown (0x0101)
 *        4    4 entry header size H_e (64 for ELF, 80 for PTX)
 *        8    8 payload size P (stored bytes, padded to 8)
 *       16    4 compressed size C (0 when not compressed; C <= P)
 *       20    4 options offset (PTX: 64) -- not interpreted
 *       24    2 minor version (ELF 8, PTX ISA 0 for 9.0)
 *       26    2 major version (ELF 1, PTX ISA 9)
 *       28    4 architecture: 90 for sm_90 / compute_90
 *       32    4 object name offset -- not interpreted
 *       36    4 object name length -- not interpreted
 *       40    8 flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host,
 *                      0x2000 LZ4 block compressed, 0x8000 ZSTD frame
 *       48    8 zero
 *       56    8 uncompressed size U (when compressed; PTX U excludes padding)
 *       64  H_e-64 options (PTX), not interpreted
 *
 * Measured with nvcc 13.0 (2 kernels, compute_90 PTX + sm_90 + sm_80 SASS):
 * none stores everything plain; default and balance ZSTD-compress PTX;
 * size ZSTD-compresses PTX and ELF; speed LZ4-compresses PTX.
 */
#ifndef TALLY_RW_FATBIN_INT_H
#define TALLY_RW_FATBIN_INT_H

#include "rewrite/rw.h"

#include "wire/wire-le.h"

#include <stddef.h>
#include <stdint.h>

#define RW__FATBINC_MAGIC    0x466243B1u
#define RW__FATBIN_MAGIC     0xBA55ED50u
#define RW__FATBIN_HDR_MIN   16u /* fatbin header bytes we read */
#define RW__FATBIN_ENTRY_MIN 64u /* entry header bytes we read */
/* Largest entry header we accept: the biggest seen is 80; a few KiB leaves
 * room for options strings without letting a header claim the whole file. */
#define RW__FATBIN_ENTRY_MAX 4096u

/* `tally-ptx fatbin FILE [--extract DIR]`: lists an image's entries and
 * optionally writes each, decompressed, into DIR.  argv[0] is the
 * subcommand name ("fatbin").  Returns the process exit status: 0 (listed,
 * including "no PTX: not transformable"), 1 (unreadable or malformed image),
 * 2 (usage). (cmd-fatbin.c) */
int rw__cmd_fatbin(int argc, char **argv);

/* The image an open cursor reads, and its length. (fatbin.c) */
const unsigned char *rw__fatbin_bytes(const rw_fatbin_t *fb, size_t *len);

/* ELF constants (System V gABI) used to find .nv_fatbin and read cubins. */
#define RW__EM_CUDA 190 /* e_machine of a cubin */

/* Decodes one raw LZ4 block (no frame) from src[0, src_len) into exactly
 * dst_len bytes of dst, with liblz4's bounds-checked decoder.  Returns 0, or
 * -EPROTO when the block is malformed, would read past src or write past
 * dst, or produces fewer than dst_len bytes. (fatbin-extract.c) */
int rw__lz4_block_decode(const unsigned char *src, size_t src_len, unsigned char *dst,
                         size_t dst_len);

/* Finds section `name` of a 64-bit little-endian ELF image.  On success sets
 * *off and *len to its file bytes (checked to lie inside image).  Returns 0,
 * -ENOENT when the ELF has no such section, -EPROTO when the ELF headers are
 * malformed. (fatbin-elf.c) */
int rw__elf_section(const unsigned char *image, size_t len, const char *name, size_t *off,
                    size_t *sec_len, rw_diag_t *diag);

/* True when image starts like a 64-bit little-endian ELF. */
int rw__elf_is_elf64(const unsigned char *image, size_t len);

/* e_machine of an ELF64 image (caller checked rw__elf_is_elf64). */
unsigned rw__elf_machine(const unsigned char *image);

/* sm number of a cubin from its e_flags (CUDA ELF: bits 8..15 hold the SM
 * for ABI version 7+, as in cuobjdump's output), 0 if unknown. */
unsigned rw__elf_cubin_arch(const unsigned char *image, size_t len);

/* Size in bytes of an ELF64 image from its headers alone (the furthest end
 * of the header, section table, program table and every section), for
 * in-process images whose length the driver API does not give. */
int rw__elf_image_size(const unsigned char *image, size_t *size);

#endif /* TALLY_RW_FATBIN_INT_H */
