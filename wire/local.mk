# wire/local.mk: the wire protocol library.
noinst_LIBRARIES += wire/libtallywire.a
wire_libtallywire_a_SOURCES = wire/wire.h wire/error.c
wire_libtallywire_a_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS)
WIRE_LIBS = wire/libtallywire.a $(UV_LIBS) $(ZSTD_LIBS) $(XXHASH_LIBS)
EXTRA_DIST += wire/README.md
