/* graph.c: graphs, work captured once on a stream and replayed. A device that captures by
** itself (cuda: the driver's stream capture, its backend's capture_* hooks) queues the work
** into its own graph; for one that does not (sim) the launches and copies queued on the
** capturing stream are recorded here, with a copy of each launch's argument values, and a
** replay queues them again in order. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct graph_op {
    bool is_copy;
    void *function;
    uint32_t grid[3], block[3], shared_bytes;
    int nargs;
    uint64_t values[TOCHA_MAX_PARAMS]; /* each argument's bytes, at the start of its slot */
    uint64_t dst, src, bytes;
} graph_op;

struct tocha_graph {
    tocha_device *device;
    void *exec; /* the backend's executable graph (cuda), or NULL */
    graph_op *ops;
    int n, cap;
    /* The blocks its work reads and writes, held until it is destroyed: a tensor freed after
    ** the capture leaves its block to the graph, never to the next tensor allocated. */
    tocha_storage **held;
    int n_held, cap_held;
};

int tocha_refuse_during_capture(const tocha_device *d, const char *what)
{
    if (!d || !d->capturing) return TOCHA_OK;
    return tocha_fail(TOCHA_E_ARGUMENT,
                      "cannot %s while a graph is being captured on %s (it would wait for the device "
                      "or reach it from the host)",
                      what, d->name);
}

bool tocha_graph_recording(const tocha_device *d)
{
    return d->stream && d->stream->capture && !d->backend->capture_begin;
}

static graph_op *next_op(tocha_device *d)
{
    tocha_graph *g = d->stream->capture;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        graph_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
        if (!ops) return NULL;
        g->ops = ops;
        g->cap = cap;
    }
    graph_op *op = &g->ops[g->n++];
    memset(op, 0, sizeof *op);
    return op;
}

int tocha_graph_record_launch(tocha_device *d, void *function, const uint32_t grid[3],
                              const uint32_t block[3], uint32_t shared_bytes, void **args,
                              const uint8_t *sizes, int nargs)
{
    graph_op *op = next_op(d);
    if (!op) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a graph");
    op->function = function;
    memcpy(op->grid, grid, sizeof op->grid);
    memcpy(op->block, block, sizeof op->block);
    op->shared_bytes = shared_bytes;
    op->nargs = nargs;
    for (int i = 0; i < nargs; i++) memcpy(&op->values[i], args[i], sizes[i]);
    return TOCHA_OK;
}

int tocha_graph_record_copy(tocha_device *d, uint64_t dst, uint64_t src, uint64_t nbytes)
{
    graph_op *op = next_op(d);
    if (!op) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a graph");
    op->is_copy = true;
    op->dst = dst;
    op->src = src;
    op->bytes = nbytes;
    return TOCHA_OK;
}

int tocha_graph_hold_address(tocha_device *d, uint64_t address)
{
    tocha_graph *g = d->stream ? d->stream->capture : NULL;
    if (!g || !address) return TOCHA_OK;
    tocha_storage *s = tocha_storage_find(d, address);
    if (!s) return TOCHA_OK;
    for (int i = 0; i < g->n_held; i++)
        if (g->held[i] == s) return TOCHA_OK;
    if (g->n_held == g->cap_held) {
        int cap = g->cap_held ? 2 * g->cap_held : 16;
        tocha_storage **grown = realloc(g->held, (size_t)cap * sizeof *grown);
        if (!grown) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a graph");
        g->held = grown;
        g->cap_held = cap;
    }
    g->held[g->n_held++] = s;
    s->holders++;
    return TOCHA_OK;
}

int tocha_graph_hold_arguments(tocha_device *d, void **args, const uint8_t *sizes, int nargs)
{
    if (!d->stream || !d->stream->capture) return TOCHA_OK;
    for (int i = 0; i < nargs; i++) {
        if (sizes[i] != 8) continue;
        uint64_t address;
        memcpy(&address, args[i], sizeof address);
        int st = tocha_graph_hold_address(d, address);
        if (st) return st;
    }
    return TOCHA_OK;
}

int tocha_graph_capture_begin(tocha_stream *s)
{
    if (!s) return tocha_fail(TOCHA_E_ARGUMENT, "stream: expected a stream, got NULL");
    tocha_device *d = s->device;
    if (d->capturing)
        return tocha_fail(TOCHA_E_ARGUMENT, "stream: a capture is already under way on %s", d->name);
    tocha_graph *g = calloc(1, sizeof *g);
    if (!g) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a graph");
    g->device = d;
    if (d->backend->capture_begin) {
        int st = d->backend->capture_begin(d, s->handle);
        if (st) {
            free(g);
            return st;
        }
    }
    s->capture = g;
    d->capturing++;
    return TOCHA_OK;
}

int tocha_graph_capture_end(tocha_stream *s, tocha_graph **out)
{
    if (!s) return tocha_fail(TOCHA_E_ARGUMENT, "stream: expected a stream, got NULL");
    if (!s->capture) return tocha_fail(TOCHA_E_ARGUMENT, "stream: no capture is under way on it");
    tocha_device *d = s->device;
    tocha_graph *g = s->capture;
    s->capture = NULL;
    d->capturing--;
    int st = d->backend->capture_end ? d->backend->capture_end(d, s->handle, &g->exec) : TOCHA_OK;
    if (!d->capturing) tocha_memory_release_deferred(d);
    if (st) {
        tocha_graph_destroy(g);
        return st;
    }
    *out = g;
    return TOCHA_OK;
}

void tocha_graph_capture_abandon(tocha_stream *s)
{
    tocha_graph *g = NULL;
    if (tocha_graph_capture_end(s, &g) == TOCHA_OK) tocha_graph_destroy(g);
}

int tocha_graph_replay(tocha_graph *g)
{
    if (!g) return tocha_fail(TOCHA_E_ARGUMENT, "graph: expected a graph, got NULL");
    tocha_device *d = g->device;
    if (tocha_graph_recording(d))
        return tocha_fail(TOCHA_E_ARGUMENT, "graph: a replay cannot itself be captured here");
    void *stream = tocha_device_stream_handle(d);
    if (g->exec) return d->backend->graph_launch(d, g->exec, stream);
    for (int i = 0; i < g->n; i++) {
        graph_op *op = &g->ops[i];
        int st;
        if (op->is_copy) {
            st = d->backend->copy(d, op->dst, op->src, op->bytes, stream);
        } else {
            void *slots[TOCHA_MAX_PARAMS];
            for (int a = 0; a < op->nargs; a++) slots[a] = &op->values[a];
            st = d->backend->launch(d, op->function, op->grid, op->block, op->shared_bytes, slots,
                                    stream);
        }
        if (st) return st;
    }
    return TOCHA_OK;
}

void tocha_graph_destroy(tocha_graph *g)
{
    if (!g) return;
    if (g->exec) g->device->backend->graph_destroy(g->device, g->exec);
    for (int i = 0; i < g->n_held; i++) tocha_storage_release(g->held[i]);
    free(g->held);
    free(g->ops);
    free(g);
}
