# rewrite/local.mk: fatbin reader, PTX parser/printer, transformations.
noinst_LIBRARIES += rewrite/libtallyrw.a
rewrite_libtallyrw_a_SOURCES = rewrite/rw.h rewrite/rw-int.h rewrite/diag.c \
	rewrite/ptx-lex.c rewrite/ptx-parse.c rewrite/ptx-print.c rewrite/ptx-ir.c \
	rewrite/ptx-opcodes.c rewrite/ptx-ptxas.c \
	rewrite/xform-check.c rewrite/xform-flow.c rewrite/xform-apply.c rewrite/xform-report.c \
	rewrite/ptb-host.c rewrite/cache.c
# fatbin reader
rewrite_libtallyrw_a_SOURCES += rewrite/fatbin-int.h rewrite/fatbin.c rewrite/fatbin-elf.c \
	rewrite/fatbin-extract.c \
	rewrite/cmd-fatbin.c
rewrite_libtallyrw_a_CFLAGS = $(AM_CFLAGS) $(ZSTD_CFLAGS) $(LZ4_CFLAGS) $(XXHASH_CFLAGS)
REWRITE_LIBS = rewrite/libtallyrw.a $(ZSTD_LIBS) $(LZ4_LIBS) $(XXHASH_LIBS)
EXTRA_DIST += rewrite/README.md

# tally-ptx: check / transform / corpus / fatbin (rw__cmd_fatbin, cmd-fatbin.c).
bin_PROGRAMS += rewrite/tally-ptx
rewrite_tally_ptx_SOURCES = rewrite/tally-ptx.c
rewrite_tally_ptx_CFLAGS = $(AM_CFLAGS) -DTALLY_PTXAS='"$(PTXAS)"'
rewrite_tally_ptx_LDADD = $(REWRITE_LIBS)
