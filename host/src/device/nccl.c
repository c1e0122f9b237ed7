/*
** nccl.c: collectives over tensors of several cuda devices through NCCL.
** libnccl is opened with dlopen (TOCHA_NCCL_LIBRARY, else libnccl.so.2 on the loader's path or
** in the CUDA toolkit's lib folders), so that tocha builds and runs where it is absent; the Lua
** side then takes its staged path.
** A communicator is made with ncclCommInitAll for each ordered list of devices a collective is
** asked over, and kept for the process. Each rank's call goes on its device's current stream,
** all of them inside one ncclGroupStart/End, as one thread driving several GPUs must.
*/
#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NCCL's ABI, as nccl.h (2.x) declares it: its enums' values are fixed across versions. */
typedef struct nccl_comm *nccl_comm_t;
typedef int nccl_result_t; /* ncclSuccess is 0 */
enum { NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_INT64 = 4, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7,
       NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9 };

static struct {
    nccl_result_t (*get_version)(int *);
    const char *(*get_error_string)(nccl_result_t);
    nccl_result_t (*comm_init_all)(nccl_comm_t *, int, const int *);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    nccl_result_t (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
    nccl_result_t (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
    nccl_result_t (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, void *);
    nccl_result_t (*reduce_scatter)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
} nc;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *load_error;
static int version;

static void load(void)
{
    static char message[1200];
    const char *forced = getenv("TOCHA_NCCL_LIBRARY");
    const char *name = forced && *forced ? forced : "libnccl.so.2";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    /* Not on the loader's path: where a CUDA toolkit keeps it. */
    const char *root = getenv("CUDA_HOME");
    const char *folders[] = {root, "/usr/local/cuda"};
    for (size_t i = 0; !lib && !(forced && *forced) && i < sizeof folders / sizeof folders[0]; i++)
        for (int lib64 = 0; !lib && folders[i] && lib64 < 2; lib64++) {
            char path[1024];
            int len = snprintf(path, sizeof path, "%s/%s/libnccl.so.2", folders[i], lib64 ? "lib64" : "lib");
            if (len > 0 && (size_t)len < sizeof path) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    if (!lib) {
        snprintf(message, sizeof message,
                 forced && *forced ? "NCCL is missing: TOCHA_NCCL_LIBRARY=%.1000s could not be loaded"
                                   : "NCCL is missing: %.1000s was not found (install NCCL or name it "
                                     "with TOCHA_NCCL_LIBRARY)",
                 name);
        load_error = message;
        return;
    }
    void **slots[] = {(void **)&nc.get_version, (void **)&nc.get_error_string, (void **)&nc.comm_init_all,
                      (void **)&nc.group_start, (void **)&nc.group_end,        (void **)&nc.all_reduce,
                      (void **)&nc.broadcast,   (void **)&nc.all_gather,       (void **)&nc.reduce_scatter};
    const char *symbols[] = {"ncclGetVersion", "ncclGetErrorString", "ncclCommInitAll",
                             "ncclGroupStart", "ncclGroupEnd",       "ncclAllReduce",
                             "ncclBroadcast",  "ncclAllGather",      "ncclReduceScatter"};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        *slots[i] = dlsym(lib, symbols[i]);
        if (!*slots[i]) {
            snprintf(message, sizeof message, "NCCL is unusable: %.900s lacks %s", name, symbols[i]);
            load_error = message;
            return;
        }
    }
    nc.get_version(&version);
}

int tocha_nccl_available(const char **why, int *version_out)
{
    pthread_once(&once, load);
    if (load_error) {
        if (why) *why = load_error;
        return 0;
    }
    if (version_out) *version_out = version;
    return 1;
}

static int nccl_fail(nccl_result_t r, const char *what)
{
    return tocha_fail(TOCHA_E_DRIVER, "%s failed: %s (NCCL %d)", what, nc.get_error_string(r), r);
}

/* The communicators made so far, by their ordered device lists. */
typedef struct {
    int n;
    int ordinals[TOCHA_MAX_DEVICES];
    nccl_comm_t comms[TOCHA_MAX_DEVICES];
} communicator;
static communicator *made;
static int n_made, cap_made;

/* The communicator over devs (in rank order), made on first use; the lock is held. */
static int communicator_for(tocha_device *const *devs, int n, communicator **out)
{
    for (int i = 0; i < n_made; i++) {
        bool same = made[i].n == n;
        for (int r = 0; same && r < n; r++) same = made[i].ordinals[r] == devs[r]->ordinal;
        if (same) {
            *out = &made[i];
            return TOCHA_OK;
        }
    }
    if (n_made == cap_made) {
        int cap = cap_made ? 2 * cap_made : 4;
        communicator *grown = realloc(made, (size_t)cap * sizeof *grown);
        if (!grown) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an NCCL communicator");
        made = grown;
        cap_made = cap;
    }
    communicator *c = &made[n_made];
    c->n = n;
    for (int r = 0; r < n; r++) c->ordinals[r] = devs[r]->ordinal;
    nccl_result_t res = nc.comm_init_all(c->comms, n, c->ordinals);
    if (res) return nccl_fail(res, "ncclCommInitAll");
    n_made++;
    *out = c;
    return TOCHA_OK;
}

static int nccl_dtype(int dtype)
{
    switch (dtype) {
    case TOCHA_F32: return NCCL_FLOAT32;
    case TOCHA_F64: return NCCL_FLOAT64;
    case TOCHA_F16: return NCCL_FLOAT16;
    case TOCHA_BF16: return NCCL_BFLOAT16;
    case TOCHA_U8: return NCCL_UINT8;
    case TOCHA_I32: return NCCL_INT32;
    case TOCHA_I64: return NCCL_INT64;
    default: return -1;
    }
}

/* Checks rank r's tensor t (what: "inputs" or "outputs"): live, dense, on a cuda device. */
static int check_rank(const tocha_tensor *t, const char *what, int r)
{
    char name[32];
    snprintf(name, sizeof name, "%s[%d]", what, r + 1);
    int st = tocha_tensor_check_live(t, name);
    if (st) return st;
    if (!t->dense) return tocha_fail(TOCHA_E_ARGUMENT, "%s: expected a contiguous tensor", name);
    if (t->dev->kind != TOCHA_DEVICE_CUDA)
        return tocha_fail(TOCHA_E_ARGUMENT, "%s: on %s: NCCL runs on cuda devices only", name, t->dev->name);
    return TOCHA_OK;
}

int tocha_nccl_collective(int kind, int op, int root, int n, tocha_tensor *const *inputs,
                          tocha_tensor *const *outputs)
{
    const char *why = NULL;
    if (!tocha_nccl_available(&why, NULL)) return tocha_fail(TOCHA_E_UNAVAILABLE, "%s", why);
    if (n < 1 || n > TOCHA_MAX_DEVICES)
        return tocha_fail(TOCHA_E_ARGUMENT, "n: expected 1 to %d ranks, got %d", TOCHA_MAX_DEVICES, n);
    if (kind < TOCHA_ALL_REDUCE || kind > TOCHA_REDUCE_SCATTER)
        return tocha_fail(TOCHA_E_ARGUMENT, "kind: unknown collective %d", kind);
    if (op < TOCHA_REDUCE_SUM || op > TOCHA_REDUCE_AVG)
        return tocha_fail(TOCHA_E_ARGUMENT, "op: unknown reduction %d", op);
    if (kind == TOCHA_BROADCAST && (root < 0 || root >= n))
        return tocha_fail(TOCHA_E_ARGUMENT, "root: expected a rank from 0 to %d, got %d", n - 1, root);
    if (!inputs || !outputs) return tocha_fail(TOCHA_E_ARGUMENT, "inputs, outputs: expected arrays of n tensors");
    tocha_device *devs[TOCHA_MAX_DEVICES];
    int dtype = -1;
    int64_t count = 0;
    for (int r = 0; r < n; r++) {
        int st = check_rank(inputs[r], "inputs", r);
        if (!st) st = check_rank(outputs[r], "outputs", r);
        if (st) return st;
        if (outputs[r]->dev != inputs[r]->dev)
            return tocha_fail(TOCHA_E_ARGUMENT, "outputs[%d]: on %s, but inputs[%d] is on %s", r + 1,
                              outputs[r]->dev->name, r + 1, inputs[r]->dev->name);
        for (int q = 0; q < r; q++)
            if (devs[q] == inputs[r]->dev)
                return tocha_fail(TOCHA_E_ARGUMENT, "inputs[%d]: on %s, as inputs[%d] is: each rank needs a "
                                  "device of its own", r + 1, inputs[r]->dev->name, q + 1);
        devs[r] = inputs[r]->dev;
        if (r == 0) dtype = inputs[0]->elem_type, count = inputs[0]->count;
        if (inputs[r]->elem_type != dtype || outputs[r]->elem_type != dtype)
            return tocha_fail(TOCHA_E_ARGUMENT, "inputs[%d], outputs[%d]: expected dtype %s", r + 1, r + 1,
                              tocha_dtype_name(dtype));
        int64_t in_count = inputs[r]->count, out_count = outputs[r]->count;
        bool fits = kind == TOCHA_ALL_GATHER       ? in_count == count && out_count == count * n
                    : kind == TOCHA_REDUCE_SCATTER ? in_count == count && out_count * n == count
                                                   : in_count == count && out_count == count;
        if (!fits)
            return tocha_fail(TOCHA_E_ARGUMENT, "inputs[%d], outputs[%d]: %lld and %lld elements do not fit "
                              "the collective over %d ranks", r + 1, r + 1, (long long)in_count,
                              (long long)out_count, n);
    }
    /* A graph capture holds a collective only where every rank's device captures (tocha.graph
    ** on each): the part NCCL queues on an uncaptured device would run now, and the captured
    ** part wait for it at every replay. */
    int captured = -1, plain = -1; /* the first rank whose device captures, and does not */
    for (int r = 0; r < n; r++) {
        if (devs[r]->capturing > 0 && captured < 0) captured = r;
        if (devs[r]->capturing == 0 && plain < 0) plain = r;
    }
    if (captured >= 0 && plain >= 0)
        return tocha_fail(TOCHA_E_ARGUMENT, "inputs[%d]: %s is not capturing a graph, but %s (inputs[%d]'s) is: a "
                          "collective is captured only with every rank's device capturing, else run it outside "
                          "the capture", plain + 1, devs[plain]->name, devs[captured]->name, captured + 1);
    int nd = nccl_dtype(dtype);
    if (nd < 0) return tocha_fail(TOCHA_E_ARGUMENT, "inputs: NCCL has no dtype %s", tocha_dtype_name(dtype));
    /* ncclAvg and ncclBfloat16 came with NCCL 2.10 (version code 21000). */
    bool reduces = kind == TOCHA_ALL_REDUCE || kind == TOCHA_REDUCE_SCATTER;
    if (version < 21000 && ((reduces && op == TOCHA_REDUCE_AVG) || dtype == TOCHA_BF16))
        return tocha_fail(TOCHA_E_UNAVAILABLE, "%s: this NCCL (version code %d) has no %s; 2.10 or later has",
                          dtype == TOCHA_BF16 ? "inputs" : "op", version,
                          dtype == TOCHA_BF16 ? "bfloat16" : "average");
    if (count == 0) return TOCHA_OK;
    pthread_mutex_lock(&lock);
    communicator *c = NULL;
    int st = communicator_for(devs, n, &c);
    for (int r = 0; r < n && !st; r++) {
        st = tocha_graph_hold_address(devs[r], inputs[r]->data);
        if (!st) st = tocha_graph_hold_address(devs[r], outputs[r]->data);
    }
    if (st) {
        pthread_mutex_unlock(&lock);
        return st;
    }
    nccl_result_t res = nc.group_start();
    if (res) {
        pthread_mutex_unlock(&lock);
        return nccl_fail(res, "ncclGroupStart");
    }
    const char *what = "";
    for (int r = 0; r < n && !res; r++) {
        const void *src = (const void *)(uintptr_t)inputs[r]->data;
        void *dst = (void *)(uintptr_t)outputs[r]->data;
        void *stream = tocha_device_stream_handle(devs[r]);
        switch (kind) {
        case TOCHA_ALL_REDUCE:
            what = "ncclAllReduce";
            res = nc.all_reduce(src, dst, (size_t)count, nd, op, c->comms[r], stream);
            break;
        case TOCHA_BROADCAST:
            what = "ncclBroadcast";
            res = nc.broadcast(src, dst, (size_t)count, nd, root, c->comms[r], stream);
            break;
        case TOCHA_ALL_GATHER:
            what = "ncclAllGather";
            res = nc.all_gather(src, dst, (size_t)count, nd, c->comms[r], stream);
            break;
        default:
            what = "ncclReduceScatter";
            res = nc.reduce_scatter(src, dst, (size_t)(count / n), nd, op, c->comms[r], stream);
            break;
        }
    }
    nccl_result_t ended = nc.group_end();
    pthread_mutex_unlock(&lock);
    if (res) return nccl_fail(res, what);
    if (ended) return nccl_fail(ended, "ncclGroupEnd");
    return TOCHA_OK;
}
