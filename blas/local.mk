# blas/local.mk: libtally-blas.so, the interposed cuBLAS/cuBLASLt GEMM entry
# points (preloaded into best-effort tenants by tally-run), installed next to
# the guest library in $(pkglibdir).  Built only where configure found
# cublasLt.h.  It links neither cuBLAS nor the driver: both are found at run
# time (blas/README.md).
EXTRA_DIST += blas/README.md
if HAVE_CUBLAS
tallylib_PROGRAMS += blas/libtally-blas.so
blas_libtally_blas_so_SOURCES = blas/tblas.h blas/core.c blas/cublas.c blas/lt.c
blas_libtally_blas_so_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
blas_libtally_blas_so_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
blas_libtally_blas_so_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-soname,libtally-blas.so \
	$(SHLIB_NO_UNDEFINED)
blas_libtally_blas_so_LDADD = guestlib/libgemmplan.a -lpthread -ldl
endif
