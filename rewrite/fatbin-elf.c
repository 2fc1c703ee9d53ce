/* fatbin-elf.c: just enough ELF64 to find a host binary's .nv_fatbin and to
 * describe a cubin.
 *
 * Host executables, shared objects and relocatable objects built by nvcc
 * carry their device code in a section named ".nv_fatbin"; cubins are ELF
 * files with e_machine EM_CUDA (190).  This file reads the ELF header, the
 * section header table and the section-name string table, checking every
 * offset and size against the bytes present before use; it never follows a
 * pointer stored in the file.  It does not read program headers except to
 * size an in-process image, and handles only 64-bit little-endian ELF (every
 * CUDA host and device target since CUDA 12 is).
 *
 * ELF64 header fields used (System V gABI):
 *   OFFSET SIZE DESCRIPTION
 *        0    4 "\x7fELF"        4 1 class (2 = 64-bit)   5 1 data (1 = LE)
 *       18    2 e_machine (62 x86-64, 183 aarch64, 190 CUDA)
 *       32    8 e_phoff           40 8 e_shoff             48 4 e_flags
 *       54    2 e_phentsize       56 2 e_phnum
 *       58    2 e_shentsize       60 2 e_shnum             62 2 e_shstrndx
 * Section header (64 bytes): 0 4 sh_name, 4 4 sh_type, 24 8 sh_offset,
 *       32 8 sh_size.  Type 8 (SHT_NOBITS) occupies no file bytes.
 */
#include "rewrite/rw.h"
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <string.h>

#define ELF64_EHDR_SIZE 64u
#define ELF64_SHDR_SIZE 64u
#define SHT_NOBITS      8u
#define SHN_XINDEX      0xffffu /* e_shstrndx escape: real index in shdr[0].sh_link */

int rw__elf_is_elf64(const unsigned char *image, size_t len) {
  return len >= ELF64_EHDR_SIZE &&
         memcmp(image,
                "\x7f"
                "ELF",
                4) == 0 &&
         image[4] == 2 && image[5] == 1;
}

unsigned rw__elf_machine(const unsigned char *image) {
  return wire_le_rd16(image + 18);
}

unsigned rw__elf_cubin_arch(const unsigned char *image, size_t len) {
  if (!rw__elf_is_elf64(image, len))
    return 0;
  return (wire_le_rd32(image + 48) >> 8) & 0xffu;
}

/* True when [off, off+n) lies inside [0, len), without overflow. */
static int span_ok(uint64_t off, uint64_t n, size_t len) {
  return off <= len && n <= len - off;
}

int rw__elf_section(const unsigned char *image, size_t len, const char *name, size_t *off,
                    size_t *sec_len, rw_diag_t *diag) {
  uint64_t shoff, stroff, strsize;
  unsigned shentsize, shnum, shstrndx, i;
  size_t name_len = strlen(name);
  const unsigned char *sh;

  if (!rw__elf_is_elf64(image, len))
    return rw_diag_set(diag, -EPROTO, 0, 0, "not a 64-bit little-endian ELF");
  shoff = wire_le_rd64(image + 40);
  shentsize = wire_le_rd16(image + 58);
  shnum = wire_le_rd16(image + 60);
  shstrndx = wire_le_rd16(image + 62);
  if (shoff == 0 || shnum == 0)
    return rw_diag_set(diag, -ENOENT, 0, 0, "ELF has no section headers");
  if (shentsize < ELF64_SHDR_SIZE)
    return rw_diag_set(diag, -EPROTO, 0, 0, "ELF section header size %u < 64", shentsize);
  if (!span_ok(shoff, (uint64_t)shentsize * shnum, len))
    return rw_diag_set(diag, -EPROTO, 0, 0, "ELF section table at %llu runs past %zu bytes",
                       (unsigned long long)shoff, len);
  if (shstrndx == SHN_XINDEX)
    shstrndx = wire_le_rd32(image + shoff + 40);
  if (shstrndx >= shnum)
    return rw_diag_set(diag, -EPROTO, 0, 0, "ELF e_shstrndx %u out of %u sections", shstrndx,
                       shnum);
  sh = image + shoff + (uint64_t)shentsize * shstrndx;
  stroff = wire_le_rd64(sh + 24);
  strsize = wire_le_rd64(sh + 32);
  if (!span_ok(stroff, strsize, len))
    return rw_diag_set(diag, -EPROTO, 0, 0, "ELF section name table runs past the file");

  for (i = 0; i < shnum; i++) {
    uint32_t nm;
    uint64_t so, ss;

    sh = image + shoff + (uint64_t)shentsize * i;
    nm = wire_le_rd32(sh);
    /* The name must fit, NUL included, inside the string table. */
    if (nm >= strsize || strsize - nm < name_len + 1)
      continue;
    if (memcmp(image + stroff + nm, name, name_len + 1) != 0)
      continue;
    if (wire_le_rd32(sh + 4) == SHT_NOBITS)
      return rw_diag_set(diag, -ENOENT, 0, 0, "section %s occupies no file bytes", name);
    so = wire_le_rd64(sh + 24);
    ss = wire_le_rd64(sh + 32);
    if (!span_ok(so, ss, len))
      return rw_diag_set(diag, -EPROTO, 0, 0, "section %s (%llu bytes at %llu) runs past %zu bytes",
                         name, (unsigned long long)ss, (unsigned long long)so, len);
    *off = (size_t)so;
    *sec_len = (size_t)ss;
    return 0;
  }
  return rw_diag_set(diag, -ENOENT, 0, 0, "ELF has no %s section", name);
}

int rw__elf_image_size(const unsigned char *image, size_t *size) {
  uint64_t end = ELF64_EHDR_SIZE, shoff, phoff, e;
  unsigned shentsize, shnum, phentsize, phnum, i;

  shoff = wire_le_rd64(image + 40);
  phoff = wire_le_rd64(image + 32);
  shentsize = wire_le_rd16(image + 58);
  shnum = wire_le_rd16(image + 60);
  phentsize = wire_le_rd16(image + 54);
  phnum = wire_le_rd16(image + 56);
  /* In-process images come from our own tenant's address space; still, keep
   * the arithmetic from wrapping so a corrupt header yields an error. */
  if (shoff > (1ull << 40) || phoff > (1ull << 40))
    return -EPROTO;
  e = phoff + (uint64_t)phentsize * phnum;
  if (e > end)
    end = e;
  e = shoff + (uint64_t)shentsize * shnum;
  if (e > end)
    end = e;
  if (shentsize >= ELF64_SHDR_SIZE) {
    for (i = 0; i < shnum; i++) {
      const unsigned char *sh = image + shoff + (uint64_t)shentsize * i;
      uint64_t so = wire_le_rd64(sh + 24), ss = wire_le_rd64(sh + 32);
      if (wire_le_rd32(sh + 4) == SHT_NOBITS)
        continue;
      if (so > (1ull << 40) || ss > (1ull << 40))
        return -EPROTO;
      if (so + ss > end)
        end = so + ss;
    }
  }
  *size = (size_t)end;
  return 0;
}
