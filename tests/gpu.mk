# tests/gpu.mk: GPU end-to-end programs (make check-gpu).
