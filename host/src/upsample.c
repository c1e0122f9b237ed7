/*
** upsample.c: the seed's kernels, UpsampleNearest2dForward and UpsampleNearest2dBackward:
** construction from compile-time constants, the checked forward and backward launches, and
** the forward kernel's RuntimeOp. The kernels themselves are kernels/upsample_nearest2d_*.cu.
**
** Launch mapping (both directions): one warp per work item, a work item being one segment of
** an input row (b, c, ih) (forward: of its scale_h output rows; backward: of its dx row; see
** the kernels' headers for the segment length), but with scale_h 1, where both kernels take
** the whole tensor as one row and items are its segments; `block` threads are block / 32
** warps; grid.x = ceil(items / warps), capped at the grid's limit, with a grid-stride loop
** beyond.
*/
#include "internal.h"
#include "embedded.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const files[2] = {"upsample_nearest2d_forward.cu", "upsample_nearest2d_backward.cu"};
static const char *const names[2] = {"upsample_nearest2d_forward", "upsample_nearest2d_backward"};
static const char *const block_names[2] = {"block_ow", "block_iw"};
static const tocha_runtime_op_vtable forward_vtable;

static int check_constants(int direction, int scale_h, int scale_w, int block)
{
    if (scale_h < 1 || scale_h > TOCHA_UPSAMPLE_MAX_SCALE)
        return tocha_fail(TOCHA_E_ARGUMENT, "scale_h: expected an integer from 1 to %d, got %d",
                          TOCHA_UPSAMPLE_MAX_SCALE, scale_h);
    if (scale_w < 1 || scale_w > TOCHA_UPSAMPLE_MAX_SCALE)
        return tocha_fail(TOCHA_E_ARGUMENT, "scale_w: expected an integer from 1 to %d, got %d",
                          TOCHA_UPSAMPLE_MAX_SCALE, scale_w);
    if (block < 32 || block > 1024 || block % 32 != 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a multiple of 32 from 32 to 1024, got %d",
                          block_names[direction], block);
    return TOCHA_OK;
}

static int make(int direction, int dtype, int scale_h, int scale_w, int block, tocha_upsample **out)
{
    tocha_upsample *up = calloc(1, sizeof *up);
    if (!up) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a kernel");
    up->op.vtable = direction == TOCHA_UPSAMPLE_FORWARD ? &forward_vtable : NULL;
    up->direction = direction;
    up->dtype = dtype;
    up->scale_h = scale_h;
    up->scale_w = scale_w;
    up->block = block;
    snprintf(up->name, sizeof up->name, "%s", names[direction]);
    snprintf(up->id, sizeof up->id, "%s__%s__%d__%d__%d", names[direction], tocha_dtype_name(dtype),
             scale_h, scale_w, block);
    char targs[96], params[160];
    snprintf(targs, sizeof targs, "%s, %d, %d, %d", tocha_dtype_ctype(dtype), scale_h, scale_w, block);
    const char *d = tocha_dtype_name(dtype);
    if (direction == TOCHA_UPSAMPLE_FORWARD)
        snprintf(params, sizeof params, "%s* x, %s* y, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW", d, d);
    else
        snprintf(params, sizeof params, "%s* dy, %s* dx, i32 B, i32 C, i32 H, i32 W, i32 OH, i32 OW", d, d);
    const char *source = tocha_embedded_find(files[direction]);
    int st = source ? tocha_kernel_new(source, names[direction], targs, params, &up->kernel)
                    : tocha_fail(TOCHA_E_INTERNAL, "kernel source %s is not embedded", files[direction]);
    if (st) {
        free(up);
        return st;
    }
    *out = up;
    return TOCHA_OK;
}

int tocha_upsample_new(int direction, int dtype, int scale_h, int scale_w, int block,
                       int backward_block, tocha_upsample **out)
{
    *out = NULL;
    if (direction != TOCHA_UPSAMPLE_FORWARD && direction != TOCHA_UPSAMPLE_BACKWARD)
        return tocha_fail(TOCHA_E_ARGUMENT, "direction: expected forward or backward, got %d", direction);
    if (!tocha_dtype_valid(dtype)) return tocha_fail(TOCHA_E_ARGUMENT, "dtype: invalid dtype %d", dtype);
    int st = check_constants(direction, scale_h, scale_w, block);
    if (st) return st;
    if (direction == TOCHA_UPSAMPLE_FORWARD && backward_block != 0 &&
        (st = check_constants(TOCHA_UPSAMPLE_BACKWARD, scale_h, scale_w, backward_block)))
        return st;
    st = make(direction, dtype, scale_h, scale_w, block, out);
    if (st || direction == TOCHA_UPSAMPLE_BACKWARD) return st;
    st = make(TOCHA_UPSAMPLE_BACKWARD, dtype, scale_h, scale_w, backward_block ? backward_block : block,
              &(*out)->backward);
    if (st) {
        tocha_upsample_destroy(*out);
        *out = NULL;
    }
    return st;
}

void tocha_upsample_destroy(tocha_upsample *up)
{
    if (!up) return;
    tocha_upsample_destroy(up->backward);
    tocha_kernel_destroy(up->kernel);
    free(up);
}

const char *tocha_upsample_kernel_source(const tocha_upsample *up)
{
    return tocha_embedded_find(files[up->direction]);
}

/* ---- shapes and grids ---- */

/* Per lane in one work item: 16-byte vectors (forward) or runs of K dx elements (backward),
** SEGMENT, or SEGMENT_SHORT where the kernels take the short item: TOCHA_UPSAMPLE_SEGMENT(_SHORT)
** and the rule in kernels/tocha.cuh (spec/upsample_spec.lua checks that the three agree). */
#define SEGMENT 4
#define SEGMENT_SHORT 2

/* Warp steps per work item of several forward output rows alike against lines: the kernel's
** forward_plan alike_steps (kernels/upsample_nearest2d_forward.cu), one step for four or more
** rows and for u8 but 2x2, else SEGMENT_SHORT. */
static int64_t alike_steps(int dtype, int scale_h, int scale_w)
{
    bool one = scale_h >= 4 || (tocha_dtype_size(dtype) == 1 && !(scale_h == 2 && scale_w == 2));
    return one ? 1 : SEGMENT_SHORT;
}

/* The backward's K: dx elements a lane takes per step, so that its run of each dy row is 16
** bytes where scale_w allows (kernels/upsample_nearest2d_backward.cu, backward_plan). */
static int64_t run_elements(int dtype, int scale_w)
{
    int64_t per16 = 16 / tocha_dtype_size(dtype);
    return per16 / scale_w > 0 ? per16 / scale_w : 1;
}

/* Work items per row of `cols` elements (forward: output columns; backward: dx columns) for
** scale_h > 1 (kernel_grid counts scale_h 1 itself): the kernels' segments (see their headers).
** shared: the forward launch gives shared memory, whose paths (bulk copies, row images) take
** the short item. */
static int64_t segments(int direction, int dtype, int scale_h, int scale_w, int64_t cols, bool shared)
{
    int64_t size = tocha_dtype_size(dtype), per16 = 16 / size;
    int64_t per_item;
    if (direction == TOCHA_UPSAMPLE_FORWARD) {
        /* Several output rows: alike against 128-byte lines, alike_steps; with shared memory,
        ** the short item. */
        bool lines = cols * size % 128 == 0;
        int64_t steps = lines ? alike_steps(dtype, scale_h, scale_w) : shared ? SEGMENT_SHORT : SEGMENT;
        per_item = 32 * steps; /* vectors */
        cols /= per16;
    } else {
        /* Several dy rows, each lane's share of a row one whole 16-byte load: the short item. */
        int64_t k = run_elements(dtype, scale_w);
        bool whole16 = k * scale_w * size == 16;
        per_item = 32 * k * (whole16 ? SEGMENT_SHORT : SEGMENT); /* dx elements */
    }
    int64_t segs = (cols + per_item - 1) / per_item;
    return segs > 0 ? segs : 1;
}

/* k's grid for `rows` rows of `cols` columns (forward: input rows, output columns; backward:
** dx rows and columns): one warp per work item, block / 32 warps per CTA, capped at the grid's
** limit (the kernels loop over what it does not cover). shared: as segments(). */
static void kernel_grid(const tocha_upsample *k, int64_t rows, int64_t cols, bool shared, uint32_t grid[3])
{
    int64_t items;
    if (k->scale_h == 1) {
        /* One output row per input row: the kernels take the whole tensor as one row, in items
        ** of SEGMENT warp steps (forward: of the output's 16-byte slots, upsample_flat; backward:
        ** of runs of K dx elements), counted here for tensors on 128-byte boundaries (one item
        ** more or less elsewhere: the grid-stride loop covers it). */
        bool forward = k->direction == TOCHA_UPSAMPLE_FORWARD;
        int64_t units = forward ? rows * cols / (16 / tocha_dtype_size(k->dtype)) : rows * cols;
        int64_t per_item = 32 * SEGMENT * (forward ? 1 : run_elements(k->dtype, k->scale_w));
        items = units > per_item ? (units + per_item - 1) / per_item : 1;
    } else {
        items = rows * segments(k->direction, k->dtype, k->scale_h, k->scale_w, cols, shared);
    }
    int64_t warps = k->block / 32;
    int64_t blocks = (items + warps - 1) / warps;
    grid[0] = (uint32_t)(blocks < INT32_MAX ? blocks : INT32_MAX);
    grid[1] = grid[2] = 1;
}

/* Checks an input shape [B, C, H, W] and derives the output shape; names the argument. */
static int output_shape(const tocha_upsample *up, const tocha_shape *in, const char *what,
                        tocha_shape *out)
{
    if (in->ndim != 4)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a 4-D tensor [B, C, H, W], got %d-D",
                          what, in->ndim);
    for (int i = 0; i < 4; i++)
        if (in->dims[i] < 1 || in->dims[i] > INT32_MAX)
            return tocha_fail(TOCHA_E_ARGUMENT, "%s: size %lld of dimension %d is outside 1..2147483647",
                              what, (long long)in->dims[i], i + 1);
    int64_t oh = in->dims[2] * up->scale_h, ow = in->dims[3] * up->scale_w;
    if (oh > INT32_MAX || ow > INT32_MAX)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "%s: the output [%lld, %lld, %lld, %lld] has a dimension past 2147483647",
                          what, (long long)in->dims[0], (long long)in->dims[1], (long long)oh,
                          (long long)ow);
    *out = *in;
    out->dims[2] = oh;
    out->dims[3] = ow;
    return TOCHA_OK;
}

static tocha_shape shape_of(const tocha_tensor *t)
{
    tocha_shape s = {.ndim = t->ndim};
    memcpy(s.dims, t->dims, sizeof s.dims);
    return s;
}

static int check_tensor(const tocha_upsample *up, const tocha_tensor *t, const char *what)
{
    int st = tocha_tensor_check(t, what);
    if (st) return st;
    if (t->elem_type != up->dtype)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected dtype %s (the kernel's), got %s", what,
                          tocha_dtype_name(up->dtype), tocha_dtype_name(t->elem_type));
    return TOCHA_OK;
}

static int check_shape_is(const tocha_tensor *t, const tocha_shape *want, const char *what,
                          const char *why)
{
    tocha_shape got = shape_of(t);
    bool same = got.ndim == want->ndim;
    for (int i = 0; same && i < got.ndim; i++) same = got.dims[i] == want->dims[i];
    if (same) return TOCHA_OK;
    char a[200], b[200];
    tocha_format_dims(want->dims, want->ndim, ", ", a, sizeof a);
    tocha_format_dims(got.dims, got.ndim, ", ", b, sizeof b);
    return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected shape [%s] (%s), got [%s]", what, a, why, b);
}

/* ---- launches ---- */

/* TOCHA_BULK_COPIES: on (the default) or off, read once. Off keeps every forward on its
** per-row stores: compute-sanitizer's initcheck does not see the TMA's writes, and it is an
** A/B switch. Any other value is an error on every forward launch. */
static pthread_once_t bulk_once = PTHREAD_ONCE_INIT;
static bool bulk_off;
static char bulk_error[160];

static void read_bulk_copies(void)
{
    const char *env = getenv("TOCHA_BULK_COPIES");
    if (!env || !*env || strcmp(env, "on") == 0) return;
    if (strcmp(env, "off") == 0)
        bulk_off = true;
    else
        snprintf(bulk_error, sizeof bulk_error, "TOCHA_BULK_COPIES: expected on or off, got '%.60s'", env);
}

/* Dynamic shared memory for a launch: the forward's per-warp buffer, two images of a short
** segment (plus 16 vectors) per warp, on devices with bulk copies (sm_90 on, and the simulator,
** which runs the same paths), for several output rows that are not whole 128-byte lines and
** where the kernel's shared-memory paths measured faster (docs/performance.md, "Bulk copies"
** and "Row images"): rows of whole 16-byte vectors with y aligned (bulk copies), and four or
** more rows of any width (a row image); else 0. The kernel checks again what each path needs,
** so that this rule decides speed only. */
static uint32_t launch_shared_bytes(const tocha_upsample *k, const tocha_tensor *y, const tocha_shape *out)
{
    int64_t row_bytes = out->dims[3] * tocha_dtype_size(k->dtype);
    uint32_t bytes = (uint32_t)(k->block / 32) * 2u * (32u * SEGMENT_SHORT + 16u) * 16u;
    bool device = y->dev->kind == TOCHA_DEVICE_SIM || y->dev->cc_major >= 9;
    bool bulk = row_bytes % 16 == 0 && (uintptr_t)y->data % 16 == 0, image = k->scale_h >= 4;
    bool shared = k->direction == TOCHA_UPSAMPLE_FORWARD && k->scale_h > 1 && device && row_bytes >= 16 &&
                  row_bytes % 128 != 0 && bytes <= 48u * 1024u && (bulk || image);
    return shared ? bytes : 0;
}

static int launch(tocha_upsample *k, const tocha_tensor *src, tocha_tensor *dst,
                  const tocha_shape *in, const tocha_shape *out)
{
    int32_t dims[6] = {(int32_t)in->dims[0], (int32_t)in->dims[1], (int32_t)in->dims[2],
                       (int32_t)in->dims[3], (int32_t)out->dims[2], (int32_t)out->dims[3]};
    bool forward = k->direction == TOCHA_UPSAMPLE_FORWARD;
    pthread_once(&bulk_once, read_bulk_copies);
    if (forward && bulk_error[0]) return tocha_fail(TOCHA_E_ARGUMENT, "%s", bulk_error);
    uint32_t grid[3], block[3] = {(uint32_t)k->block, 1, 1};
    uint32_t shared_bytes = bulk_off ? 0 : launch_shared_bytes(k, dst, out);
    kernel_grid(k, in->dims[0] * in->dims[1] * in->dims[2], forward ? out->dims[3] : in->dims[3], shared_bytes > 0, grid);
    void *args[8] = {(void *)&src->data, &dst->data, &dims[0], &dims[1], &dims[2], &dims[3], &dims[4], &dims[5]};
    return tocha_kernel_launch_shared(k->kernel, dst->dev, grid, block, shared_bytes, args);
}

int tocha_upsample_forward(tocha_upsample *up, const tocha_tensor *x, tocha_tensor *y)
{
    if (!up) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (up->direction != TOCHA_UPSAMPLE_FORWARD)
        return tocha_fail(TOCHA_E_ARGUMENT, "kernel: %s is a backward kernel", up->id);
    int st = check_tensor(up, x, "x");
    if (!st) st = check_tensor(up, y, "y");
    if (st) return st;
    tocha_shape in = shape_of(x), out;
    if ((st = output_shape(up, &in, "x", &out))) return st;
    if ((st = check_shape_is(y, &out, "y", "the forward's output"))) return st;
    if (x->dev != y->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "y: tensor is on %s, x on %s", y->dev->name, x->dev->name);
    return launch(up, x, y, &in, &out);
}

int tocha_upsample_backward(tocha_upsample *up, const tocha_tensor *dy, tocha_tensor *dx)
{
    if (!up) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    tocha_upsample *k = up->direction == TOCHA_UPSAMPLE_FORWARD ? up->backward : up;
    int st = check_tensor(k, dy, "dy");
    if (!st) st = check_tensor(k, dx, "dx");
    if (st) return st;
    tocha_shape in = shape_of(dx), out;
    if ((st = output_shape(k, &in, "dx", &out))) return st;
    if ((st = check_shape_is(dy, &out, "dy", "the forward's output for dx"))) return st;
    if (dy->dev != dx->dev)
        return tocha_fail(TOCHA_E_ARGUMENT, "dx: tensor is on %s, dy on %s", dx->dev->name, dy->dev->name);
    return launch(k, dy, dx, &in, &out);
}

/* ---- the forward kernel's RuntimeOp ---- */

static const tocha_upsample *self(const tocha_runtime_op *op) { return (const tocha_upsample *)op; }

static int op_n_activation_inputs(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

static int one_input(const tocha_shape *inputs, int n_inputs)
{
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input shape, got %d", n_inputs);
    return TOCHA_OK;
}

static int op_output_shape(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                           tocha_shape *out)
{
    int st = one_input(inputs, n_inputs);
    return st ? st : output_shape(self(op), &inputs[0], "inputs[1]", out);
}

static int check_output(const tocha_shape *output)
{
    if (output->ndim != 4)
        return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: expected 4-D, got %d-D", output->ndim);
    for (int i = 0; i < 4; i++)
        if (output->dims[i] < 1 || output->dims[i] > INT32_MAX)
            return tocha_fail(TOCHA_E_ARGUMENT, "output_shape: size %lld of dimension %d is outside 1..2147483647",
                              (long long)output->dims[i], i + 1);
    return TOCHA_OK;
}

static int op_grid(const tocha_runtime_op *op, const tocha_shape *output, uint32_t grid[3])
{
    int st = check_output(output);
    const tocha_upsample *up = self(op);
    if (!st && output->dims[2] % up->scale_h != 0)
        st = tocha_fail(TOCHA_E_ARGUMENT, "output_shape: height %lld is not a multiple of scale_h %d",
                        (long long)output->dims[2], up->scale_h);
    if (st) return st;
    kernel_grid(up, output->dims[0] * output->dims[1] * (output->dims[2] / up->scale_h), output->dims[3], false, grid);
    return TOCHA_OK;
}

static void op_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)self(op)->block;
    block[1] = block[2] = 1;
}

/* Appends the kernel's Args: two pointers, then B, C, H, W, OH, OW. */
static int pack(const tocha_shape *in, const tocha_shape *out, uint64_t src, uint64_t dst,
                tocha_arg_list *visitor)
{
    if (!visitor) return tocha_fail(TOCHA_E_ARGUMENT, "visitor: expected an argument list, got NULL");
    int st = check_output(out);
    if (st) return st;
    if (in->ndim != 4) return tocha_fail(TOCHA_E_ARGUMENT, "inputs[1]: expected 4-D, got %d-D", in->ndim);
    if (visitor->count < 0 || visitor->count > TOCHA_MAX_PARAMS - 8)
        return tocha_fail(TOCHA_E_ARGUMENT, "visitor: no room for 8 more arguments");
    tocha_arg *a = &visitor->args[visitor->count];
    uint64_t ptrs[2] = {src, dst};
    int64_t ints[6] = {in->dims[0], in->dims[1], in->dims[2], in->dims[3], out->dims[2], out->dims[3]};
    for (int i = 0; i < 2; i++) a[i] = (tocha_arg){.kind = TOCHA_ARG_POINTER, .i = (int64_t)ptrs[i]};
    for (int i = 0; i < 6; i++) a[2 + i] = (tocha_arg){.kind = TOCHA_ARG_INT, .i = ints[i]};
    visitor->count += 8;
    return TOCHA_OK;
}

static int op_pack_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                        const uint64_t *params, int n_params, uint64_t output,
                        const tocha_shape *output_shape, int32_t output_row_stride,
                        tocha_arg_list *visitor)
{
    (void)op, (void)params, (void)n_params, (void)output_row_stride;
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    return pack(&inputs[0].shape, output_shape, inputs[0].data, output, visitor);
}

static int op_has_backward(const tocha_runtime_op *op)
{
    (void)op;
    return 1;
}

static int op_backward_grid(const tocha_runtime_op *op, const tocha_shape *inputs, int n_inputs,
                            const tocha_shape *output, uint32_t grid[3])
{
    (void)output;
    int st = one_input(inputs, n_inputs);
    if (st) return st;
    const tocha_shape *in = &inputs[0];
    if (in->ndim != 4) return tocha_fail(TOCHA_E_ARGUMENT, "inputs[1]: expected 4-D, got %d-D", in->ndim);
    kernel_grid(self(op)->backward, in->dims[0] * in->dims[1] * in->dims[2], in->dims[3], false, grid);
    return TOCHA_OK;
}

static void op_backward_block(const tocha_runtime_op *op, uint32_t block[3])
{
    block[0] = (uint32_t)self(op)->backward->block;
    block[1] = block[2] = 1;
}

static int op_pack_backward_args(const tocha_runtime_op *op, const tocha_buffer *inputs, int n_inputs,
                                 const uint64_t *params, int n_params, uint64_t output,
                                 const tocha_shape *output_shape, uint64_t grad_output,
                                 int32_t grad_output_row_stride, const uint64_t *grad_inputs,
                                 int n_grad_inputs, const uint64_t *grad_params, int n_grad_params,
                                 tocha_arg_list *visitor)
{
    (void)op, (void)params, (void)n_params, (void)output, (void)grad_output_row_stride;
    (void)grad_params, (void)n_grad_params;
    if (n_inputs != 1 || !inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs: expected 1 input, got %d", n_inputs);
    if (n_grad_inputs != 1 || !grad_inputs)
        return tocha_fail(TOCHA_E_ARGUMENT, "grad_inputs: expected 1, got %d", n_grad_inputs);
    return pack(&inputs[0].shape, output_shape, grad_output, grad_inputs[0], visitor);
}

/* Parameters, row strides and launch counts keep the seed's defaults (NULL slots). */
static const tocha_runtime_op_vtable forward_vtable = {
    .n_activation_inputs = op_n_activation_inputs,
    .compute_concrete_output_shape = op_output_shape,
    .grid = op_grid,
    .block = op_block,
    .pack_args = op_pack_args,
    .has_backward = op_has_backward,
    .backward_grid = op_backward_grid,
    .backward_block = op_backward_block,
    .pack_backward_args = op_pack_backward_args,
};
