# guestlib/local.mk: the guest library, installed as $(pkglibdir)/libcuda.so.1
# (never into $(libdir), where it would shadow the real driver).
tallylib_PROGRAMS += guestlib/libcuda.so.1
guestlib_libcuda_so_1_SOURCES = guestlib/guest.h guestlib/entry.c
guestlib_libcuda_so_1_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
guestlib_libcuda_so_1_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
guestlib_libcuda_so_1_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-soname,libcuda.so.1 $(SHLIB_NO_UNDEFINED)
guestlib_libcuda_so_1_LDADD = $(WIRE_LIBS) -lpthread -ldl
EXTRA_DIST += guestlib/README.md
