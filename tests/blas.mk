# tests/blas.mk: libtally-blas.so over a fake cuBLAS/cuBLASLt/driver.
# The fake is a shared object linked after the interposer (both by soname,
# found through the rpath), so the interposer's dlsym(RTLD_NEXT) reaches it.
if HAVE_CUBLAS
if HAVE_CMOCKA
check_PROGRAMS += tests/libtblas-fake.so tests/test-blas-split
TESTS += tests/test-blas-split
tests_libtblas_fake_so_SOURCES = tests/tblas-fake.c tests/tblas-fake.h
tests_libtblas_fake_so_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_libtblas_fake_so_LDFLAGS = $(AM_LDFLAGS) -shared -Wl,-soname,libtblas-fake.so
tests_test_blas_split_SOURCES = tests/test-blas-split.c
tests_test_blas_split_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_test_blas_split_CFLAGS = $(TEST_CFLAGS)
tests_test_blas_split_LDADD = blas/libtally-blas.so tests/libtblas-fake.so $(TEST_LIBS)
tests_test_blas_split_LDFLAGS = $(AM_LDFLAGS) \
	-Wl,--disable-new-dtags,-rpath,$(abs_top_builddir)/blas:$(abs_top_builddir)/tests
endif
endif
