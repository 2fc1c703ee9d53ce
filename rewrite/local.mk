# rewrite/local.mk: fatbin reader, PTX parser/printer, transformations.
noinst_LIBRARIES += rewrite/libtallyrw.a
rewrite_libtallyrw_a_SOURCES = rewrite/rw.h rewrite/diag.c
REWRITE_LIBS = rewrite/libtallyrw.a $(ZSTD_LIBS) $(XXHASH_LIBS)
EXTRA_DIST += rewrite/README.md
