/*
** upsample_plan.h: how the upsample kernels cut a launch into threads' work, in one place: the
** host compiles it ahead of each upsample kernel's source, and lua/tocha/ops/upsample.lua sizes
** its grids with the same arithmetic (spec/upsample_plan_spec.lua runs these functions on the
** device beside the Lua's, case by case).
**
** Both layouts are rows of pixels. NCHW: B * C * H input rows of W one-element pixels; NHWC:
** B * H input rows of W pixels of C elements. Input row q gives output rows q * scale_h to
** q * scale_h + scale_h - 1, and an output pixel ow copies input pixel ow / scale_w.
** Forward threads write a 16-byte vector of y per step; backward threads write runs of dx (their
** length below), a batch of them per step (below), block threads apart. A grid of blocks *
** block threads covers any count: the kernels loop with a grid stride, so a grid sized here
** only decides how many threads share the work.
*/
#ifndef TOCHA_UPSAMPLE_PLAN_H
#define TOCHA_UPSAMPLE_PLAN_H

#define TOCHA_PLAN static __host__ __device__ __forceinline__
#define TOCHA_PLAN_CONSTANT static constexpr __host__ __device__
/* Launch bounds for an entry point of template arguments (D, scale_h, scale_w, block[, nhwc]):
** NCHW threads per SM for NCHW kernels, NHWC for NHWC ones (2048: at most 32 registers a
** thread, so that every warp slot keeps memory requests in flight; 1024: 64, room for a
** batch of NHWC pixel loads in flight; both kernels are memory-bound). Called with a trailing
** 0, so that the layout is there in both forms. */
#define TOCHA_UPSAMPLE_FIRST(a, ...) a
#define TOCHA_UPSAMPLE_BOUNDS(NCHW, NHWC, D, SCALE_H, SCALE_W, BLOCK, ...) \
    __launch_bounds__(BLOCK, (TOCHA_UPSAMPLE_FIRST(__VA_ARGS__) ? (NHWC) : (NCHW)) / (BLOCK))

/* One launch's rows, in elements (width and in_width fit in 32 bits: the host checks). */
typedef struct tocha_upsample_rows {
    long long in_rows; /* B * C * H (NCHW) or B * H (NHWC) */
    int width;         /* an output row: OW (NCHW) or OW * C (NHWC) */
    int in_width;      /* an input row: W or W * C */
    int pixel;         /* a pixel: 1 or C */
} tocha_upsample_rows;

TOCHA_PLAN tocha_upsample_rows tocha_upsample_rows_of(int nhwc, int B, int C, int H, int W, int OW)
{
    tocha_upsample_rows g;
    g.pixel = nhwc ? C : 1;
    g.in_rows = (long long)B * H * (nhwc ? 1 : C);
    g.width = OW * g.pixel;
    g.in_width = W * g.pixel;
    return g;
}

/* The forward's 16-byte vectors for elements of elem_size bytes, with y `head` elements past
** a 16-byte boundary. Rows of whole vectors with y aligned: the input rows' vectors, each
** stored to its scale_h rows; else the flat output's on y's 16-byte grid. */
TOCHA_PLAN long long tocha_upsample_forward_vectors(tocha_upsample_rows g, int elem_size, int scale_h, int head)
{
    const int v = 16 / elem_size;
    if ((long long)g.width * elem_size % 16 == 0 && head == 0) return g.in_rows * (g.width / v);
    return (g.in_rows * scale_h * g.width + head + v - 1) / v;
}

/* Whether the forward stores each input row's vectors to all its output rows. */
TOCHA_PLAN int tocha_upsample_forward_whole_rows(tocha_upsample_rows g, int elem_size, int head)
{
    return (long long)g.width * elem_size % 16 == 0 && head == 0;
}

/* The backward's run: the dx elements one thread sums and stores together. NHWC: 16 bytes (its
** dy reads are 16 bytes of one pixel each); NCHW: the largest power of two of elements whose
** dy share per row is at most 16 bytes, so that a warp's lanes read consecutive dy bytes.
** (constexpr in CUDA C: the kernel's run length is a template constant.) */
TOCHA_PLAN_CONSTANT int tocha_upsample_backward_run(int elem_size, int scale_w, int nhwc)
{
    const int v = 16 / elem_size;
    int k = 1;
    if (nhwc) return v;
    while (2 * k * scale_w <= v) k *= 2;
    return k;
}

/* The backward's runs, with dx `head` elements past a boundary of a run's bytes. */
TOCHA_PLAN long long tocha_upsample_backward_runs(tocha_upsample_rows g, int run, int head)
{
    return (g.in_rows * g.in_width + head + run - 1) / run;
}

/* The backward's batch: the runs one thread handles per step of its loop. The kernel is bound
** by memory latency, so a thread issues the loads of its whole batch before it stores any.
** NCHW runs at 2048 threads per SM, where a run's SCALE_H loads are enough and a second run
** costs registers: 2 runs where a run is one load (scale_h 1), else 1. NHWC, at 1024, about
** four 16-byte loads in flight per thread, a run having SCALE_H * SCALE_W. */
TOCHA_PLAN_CONSTANT int tocha_upsample_backward_batch(int elem_size, int scale_h, int scale_w, int nhwc)
{
    const int run = tocha_upsample_backward_run(elem_size, scale_w, nhwc);
    const int loads = nhwc ? scale_h * scale_w : scale_h * ((run * scale_w * elem_size + 15) / 16);
    if (!nhwc) return loads == 1 ? 2 : 1;
    return loads >= 4 ? 1 : (4 + loads - 1) / loads;
}

#endif
