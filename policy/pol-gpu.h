/* pol-gpu.h: the GPU that policy's defaults and sim's model describe.
 *
 * One NVIDIA H200 (Hopper, compute capability 9.0), measured with driver
 * 580.159 and CUDA 13.0 (docs/h200.md has the measurements and how they were
 * taken).  policy/config.c builds its defaults from these and sim/gpu.c its
 * model, so the two cannot drift apart.  Plain constants: no CUDA header.
 */
#ifndef TALLY_POL_GPU_H
#define TALLY_POL_GPU_H

/* Per-SM limits: CUDA Programming Guide, technical specifications for
 * compute capability 9.0.  132 SMs on the H200. */
#define POL_GPU_SM_COUNT       132
#define POL_GPU_SM_THREADS     2048
#define POL_GPU_SM_REGS        65536
#define POL_GPU_SM_SHMEM_BYTES (228 * 1024)
#define POL_GPU_SM_BLOCKS      32

/* Launch + stream synchronisation of an empty kernel, 9.3 us p50. */
#define POL_GPU_LAUNCH_SYNC_NS 9300
/* Preemption flag in device memory set by an async copy on a high-priority
 * stream: signal -> kernel done 27.7 us p50. */
#define POL_GPU_FLAG_NS 27700
/* A FLUSH block (rewrite/'s NAME__tally_flush) reads the flag every 64th
 * backward branch: ASSUMED, not measured, 64 loop iterations of ~30 ns, so
 * flag raised -> blocks given up is about POL_GPU_FLAG_NS plus this. */
#define POL_GPU_FLUSH_POLL_NS 2000
/* Cross-process time-slicing: ~2 ms slices; a kernel waiting behind another
 * process's kernel waited 0.19-2.3 ms. */
#define POL_GPU_TIMESLICE_NS      2000000
#define POL_GPU_TIMESLICE_WAIT_NS 190000

#endif
