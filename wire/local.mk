# wire/local.mk: the wire protocol library.
# Guest-side objects (guest*.c) never reference libuv, so the guest library
# pulls no libuv symbol out of this archive; server*.c are daemon-only.
# The RDMA transport is a sibling pair chosen here: the real one when
# configure found rdma-core, otherwise a refusal (no #ifdef in the code).
noinst_LIBRARIES += wire/libtallywire.a
wire_libtallywire_a_SOURCES = wire/wire.h wire/wire-le.h wire/wire-int.h wire/proto.h wire/shm.h \
	wire/call.h wire/call.def wire/call.c wire/u64map.h wire/u64map.c \
	wire/error.c wire/buf.c wire/frame.c wire/hello.c wire/txplan.c wire/shm.c wire/rbulk.c \
	wire/guest.c wire/hops.c wire/guest-io.c wire/guest-tcp.c wire/guest-shm.c \
	wire/server.c wire/server-tcp.c wire/server-shm.c wire/direct.c
wire_libtallywire_a_CFLAGS = $(AM_CFLAGS) $(UV_CFLAGS) $(ZSTD_CFLAGS) $(XXHASH_CFLAGS)
WIRE_LIBS = wire/libtallywire.a $(UV_LIBS) $(ZSTD_LIBS) $(XXHASH_LIBS) -lpthread
# What a guest-only program (the guest library) links: no libuv.
WIRE_GUEST_LIBS = wire/libtallywire.a $(ZSTD_LIBS) -lpthread
if HAVE_RDMA
wire_libtallywire_a_SOURCES += wire/rdma.h wire/rdma.c wire/guest-rdma.c wire/server-rdma.c
wire_libtallywire_a_CFLAGS += $(RDMA_CFLAGS)
WIRE_LIBS += $(RDMA_LIBS)
WIRE_GUEST_LIBS += $(RDMA_LIBS)
else
wire_libtallywire_a_SOURCES += wire/guest-rdma-none.c wire/server-rdma-none.c
endif
EXTRA_DIST += wire/README.md wire/PROTOCOL.md wire/rdma.h wire/rdma.c wire/guest-rdma.c \
	wire/server-rdma.c wire/guest-rdma-none.c wire/server-rdma-none.c
