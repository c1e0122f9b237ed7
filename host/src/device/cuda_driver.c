/*
** cuda_driver.c: the cuda device kind, through the CUDA driver API.
** libcuda is opened with dlopen and its entry points found with cuGetProcAddress (a plain
** dlsym of e.g. cuMemAlloc gets the legacy ABI), so that tocha starts where no driver is.
*/
#include "internal.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The driver ABI we ask cuGetProcAddress for: CUDA 12.0 semantics of every entry point. */
#define ABI_VERSION 12000

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

static struct {
    CUresult (*init)(unsigned);
    CUresult (*driver_get_version)(int *);
    CUresult (*get_error_name)(CUresult, const char **);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_name)(char *, int, CUdevice);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_synchronize)(void);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*mem_pool_create)(CUmemoryPool *, const CUmemPoolProps *);
    CUresult (*mem_pool_set_attribute)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*mem_pool_get_attribute)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*mem_pool_trim_to)(CUmemoryPool, size_t);
    CUresult (*mem_alloc_from_pool_async)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*mem_free_async)(CUdeviceptr, CUstream);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memcpy_peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
    CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*stream_create)(CUstream *, unsigned int);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int);
    CUresult (*stream_begin_capture)(CUstream, CUstreamCaptureMode);
    CUresult (*stream_end_capture)(CUstream, CUgraph *);
    CUresult (*graph_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*graph_destroy)(CUgraph);
    CUresult (*graph_launch)(CUgraphExec, CUstream);
    CUresult (*graph_exec_destroy)(CUgraphExec);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*func_get_attribute)(int *, CUfunction_attribute, CUfunction);
    CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int);
    CUresult (*occupancy_max_active_blocks)(int *, CUfunction, int, size_t);
    CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_destroy)(CUevent);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_synchronize)(CUevent);
    CUresult (*event_elapsed_time)(float *, CUevent, CUevent);
} cu;

static int driver_version;
static _Thread_local CUcontext current;

/* Turns a driver result into a tocha status with the driver's own words. */
static int driver_fail(CUresult r, const char *what)
{
    const char *name = "?", *text = "?";
    if (cu.get_error_name) cu.get_error_name(r, &name);
    if (cu.get_error_string) cu.get_error_string(r, &text);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "%s: out of device memory (%s)", what, name);
    return tocha_fail(TOCHA_E_DRIVER, "%s failed: %s (%s, %d)", what, text, name, (int)r);
}

static int use_context(tocha_device *d)
{
    if (current == d->context) return TOCHA_OK;
    CUresult r = cu.ctx_set_current((CUcontext)d->context);
    if (r != CUDA_SUCCESS) return driver_fail(r, "cuCtxSetCurrent");
    current = d->context;
    return TOCHA_OK;
}

#define CHECK(call, what)                                                                               \
    do {                                                                                                \
        CUresult r_ = (call);                                                                           \
        if (r_ != CUDA_SUCCESS) return driver_fail(r_, what);                                           \
    } while (0)

/* ---- device memory ----
** Tensors' blocks come from a memory pool of tocha's own per device (the driver's stream-ordered
** allocator), whose release threshold keeps freed memory for reuse instead of handing it back
** to the device at each synchronisation; empty_cache trims it. A block is taken in order on
** the current stream and given back on the legacy default stream, which comes after the work
** queued on every tocha stream (they are blocking streams), so that no kernel still reading or
** writing a freed block can meet its next owner. Devices without pool support get blocks
** straight from cuMemAlloc/cuMemFree. */

/* The device's pool, made on first use; NULL where the device has none (then cuMemAlloc). */
static CUmemoryPool device_pool(tocha_device *d)
{
    if (d->pool || d->pool_unsupported) return (CUmemoryPool)d->pool;
    int supported = 0;
    CUdevice dev;
    if (cu.device_get(&dev, d->ordinal) == CUDA_SUCCESS)
        cu.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = d->ordinal;
    CUmemoryPool pool = NULL;
    if (!supported || cu.mem_pool_create(&pool, &props) != CUDA_SUCCESS) {
        d->pool_unsupported = true;
        return NULL;
    }
    cuuint64_t keep_all = UINT64_MAX;
    cu.mem_pool_set_attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all);
    d->pool = pool;
    return pool;
}

/* A stream of tocha's own for allocations made while one of the device's streams is captured:
** taken there, an allocation would become a node of the graph. Non-blocking, so that it never
** waits for (or is waited on by) the capturing stream. */
static CUstream capture_side_stream(tocha_device *d)
{
    if (!d->side_stream) {
        CUstream s = NULL;
        if (cu.stream_create(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) d->side_stream = s;
    }
    return (CUstream)d->side_stream;
}

static uint64_t pool_bytes(CUmemoryPool pool, CUmemPool_attribute which)
{
    cuuint64_t v = 0;
    cu.mem_pool_get_attribute(pool, which, &v);
    return v;
}

static int cuda_alloc(tocha_device *d, uint64_t nbytes, uint64_t *out, bool *cached)
{
    *cached = false;
    int st = use_context(d);
    if (st) return st;
    /* Whole 16-byte chunks: kernels may read the aligned chunk around an element they need
    ** (tocha::load_unaligned16), which must then lie inside the allocation, for
    ** compute-sanitizer as for the hardware. The bytes past nbytes are zeroed once, so that
    ** such a read never reads memory that nothing wrote (initcheck). */
    uint64_t padded = (nbytes + 15) & ~(uint64_t)15;
    if (padded < nbytes)
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of memory on %s allocating %llu bytes", d->name,
                          (unsigned long long)nbytes);
    CUmemoryPool pool = device_pool(d);
    CUstream stream = (CUstream)tocha_device_stream_handle(d);
    bool aside = d->capturing > 0;
    if (aside && !(stream = capture_side_stream(d)))
        return tocha_fail(TOCHA_E_DRIVER, "cuStreamCreate failed making %s's allocation stream",
                          d->name);
    CUdeviceptr p = 0;
    CUresult r;
    if (pool) {
        uint64_t before = pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
        r = cu.mem_alloc_from_pool_async(&p, padded, pool, stream);
        *cached = r == CUDA_SUCCESS && pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == before;
    } else {
        r = cu.mem_alloc(&p, padded);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of memory on %s allocating %llu bytes", d->name,
                          (unsigned long long)nbytes);
    if (r != CUDA_SUCCESS) return driver_fail(r, pool ? "cuMemAllocFromPoolAsync" : "cuMemAlloc");
    const char *step = "cuMemsetD8Async";
    if (padded > nbytes) r = cu.memset_d8_async(p + nbytes, 0, padded - nbytes, stream);
    /* An allocation made aside is complete before the capture's work can use it. */
    if (r == CUDA_SUCCESS && aside) step = "cuStreamSynchronize", r = cu.stream_synchronize(stream);
    if (r != CUDA_SUCCESS) {
        if (pool)
            cu.mem_free_async(p, aside ? stream : NULL);
        else
            cu.mem_free(p);
        return driver_fail(r, step);
    }
    if (!pool) atomic_fetch_add(&d->memory.held, padded);
    *out = (uint64_t)p;
    return TOCHA_OK;
}

static void cuda_release(tocha_device *d, uint64_t ptr, uint64_t nbytes)
{
    if (use_context(d) != TOCHA_OK) return;
    if (d->pool) {
        cu.mem_free_async((CUdeviceptr)ptr, NULL);
        return;
    }
    atomic_fetch_sub(&d->memory.held, (nbytes + 15) & ~(uint64_t)15);
    cu.mem_free((CUdeviceptr)ptr);
}

/* The pool's own figures: what it holds from the device, and of it what no block uses. */
static void cuda_reserved(tocha_device *d, uint64_t *reserved, uint64_t *cached)
{
    if (!d->pool || use_context(d) != TOCHA_OK) {
        *reserved = atomic_load(&d->memory.held);
        *cached = 0;
        return;
    }
    uint64_t held = pool_bytes((CUmemoryPool)d->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
    uint64_t used = pool_bytes((CUmemoryPool)d->pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    *reserved = held;
    *cached = held > used ? held - used : 0;
}

/* Waits for the blocks given back in stream order to be free, then hands the pool's unused
** memory back to the device. */
static void cuda_empty_cache(tocha_device *d)
{
    if (!d->pool || use_context(d) != TOCHA_OK) return;
    cu.ctx_synchronize();
    cu.mem_pool_trim_to((CUmemoryPool)d->pool, 0);
}

static int cuda_write(tocha_device *d, uint64_t dst, const void *src, uint64_t n)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.memcpy_htod((CUdeviceptr)dst, src, n), "cuMemcpyHtoD");
    return TOCHA_OK;
}

static int cuda_read(tocha_device *d, void *dst, uint64_t src, uint64_t n)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.memcpy_dtoh(dst, (CUdeviceptr)src, n), "cuMemcpyDtoH");
    return TOCHA_OK;
}

static int cuda_copy(tocha_device *d, uint64_t dst, uint64_t src, uint64_t n, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.memcpy_dtod_async((CUdeviceptr)dst, (CUdeviceptr)src, n, (CUstream)stream),
          "cuMemcpyDtoDAsync");
    return TOCHA_OK;
}

/* Between two GPUs: the driver copies over NVLink or PCIe peer access where the pair has it and
** through host memory where not. cuMemcpyPeer is ordered after the work already queued on
** either device and before work queued later (the legacy default streams of both contexts,
** which tocha's blocking streams wait for). */
static int cuda_copy_peer(tocha_device *dst_dev, uint64_t dst, tocha_device *src_dev, uint64_t src,
                          uint64_t n)
{
    int st = use_context(dst_dev);
    if (st) return st;
    CHECK(cu.memcpy_peer((CUdeviceptr)dst, (CUcontext)dst_dev->context, (CUdeviceptr)src,
                         (CUcontext)src_dev->context, n),
          "cuMemcpyPeer");
    return TOCHA_OK;
}

static int cuda_load(tocha_device *d, const void *binary, uint64_t size, const char *entry,
                     void **module, void **function)
{
    (void)size;
    int st = use_context(d);
    if (st) return st;
    CUmodule m;
    CHECK(cu.module_load_data(&m, binary), "cuModuleLoadData");
    CUfunction f;
    CUresult r = cu.module_get_function(&f, m, entry);
    if (r != CUDA_SUCCESS) return driver_fail(r, "cuModuleGetFunction");
    *module = m;
    *function = f;
    return TOCHA_OK;
}

static int cuda_launch(tocha_device *d, void *function, const uint32_t grid[3], const uint32_t block[3],
                       uint32_t shared_bytes, void **args, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.launch_kernel((CUfunction)function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                           shared_bytes, (CUstream)stream, args, NULL),
          "cuLaunchKernel");
    return TOCHA_OK;
}

static int cuda_function_info(tocha_device *d, void *function, tocha_kernel_info *out)
{
    int st = use_context(d);
    if (st) return st;
    static const CUfunction_attribute which[] = {
        CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES};
    int v[5];
    for (int i = 0; i < 5; i++)
        CHECK(cu.func_get_attribute(&v[i], which[i], (CUfunction)function), "cuFuncGetAttribute");
    out->registers = v[0];
    out->max_threads = v[1];
    out->shared = v[2];
    out->local = v[3];
    out->constant = v[4];
    return TOCHA_OK;
}

static int cuda_allow_dynamic_shared(tocha_device *d, void *function, uint32_t bytes)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.func_set_attribute((CUfunction)function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                (int)bytes),
          "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    return TOCHA_OK;
}

static int cuda_occupancy(tocha_device *d, void *function, uint32_t threads, uint32_t shared_bytes,
                          int *blocks)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.occupancy_max_active_blocks(blocks, (CUfunction)function, (int)threads, shared_bytes),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return TOCHA_OK;
}

static int cuda_synchronize(tocha_device *d)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.ctx_synchronize(), "cuCtxSynchronize (a kernel may have faulted)");
    return TOCHA_OK;
}

static int cuda_memory(tocha_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    int st = use_context(d);
    if (st) return st;
    size_t f = 0, t = 0;
    CHECK(cu.mem_get_info(&f, &t), "cuMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return TOCHA_OK;
}

static int cuda_event_new(tocha_device *d, void **out)
{
    int st = use_context(d);
    if (st) return st;
    CUevent e;
    CHECK(cu.event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    *out = e;
    return TOCHA_OK;
}

static void cuda_event_destroy(tocha_device *d, void *e)
{
    if (use_context(d) == TOCHA_OK) cu.event_destroy((CUevent)e);
}

static int cuda_event_record(tocha_device *d, void *e, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.event_record((CUevent)e, (CUstream)stream), "cuEventRecord");
    return TOCHA_OK;
}

/* Blocking streams (flags 0): they wait for the legacy default stream and it for them, so
** that tocha's synchronous transfers and allocations stay ordered with their work. */
static int cuda_stream_new(tocha_device *d, void **out)
{
    int st = use_context(d);
    if (st) return st;
    CUstream s = NULL;
    CHECK(cu.stream_create(&s, 0), "cuStreamCreate");
    *out = s;
    return TOCHA_OK;
}

static void cuda_stream_destroy(tocha_device *d, void *stream)
{
    if (use_context(d) == TOCHA_OK) cu.stream_destroy((CUstream)stream);
}

static int cuda_stream_synchronize(tocha_device *d, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.stream_synchronize((CUstream)stream), "cuStreamSynchronize (a kernel may have faulted)");
    return TOCHA_OK;
}

static int cuda_stream_wait_event(tocha_device *d, void *stream, void *event)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.stream_wait_event((CUstream)stream, (CUevent)event, 0), "cuStreamWaitEvent");
    return TOCHA_OK;
}

static int cuda_event_elapsed(tocha_device *d, void *start, void *end, double *ms)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.event_synchronize((CUevent)end), "cuEventSynchronize");
    float f = 0;
    CHECK(cu.event_elapsed_time(&f, (CUevent)start, (CUevent)end), "cuEventElapsedTime");
    *ms = f;
    return TOCHA_OK;
}

/* Relaxed capture: tocha itself refuses, during a capture, what would wait for the device or
** read it (tocha_refuse_during_capture), and allocating device memory stays allowed. */
static int cuda_capture_begin(tocha_device *d, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.stream_begin_capture((CUstream)stream, CU_STREAM_CAPTURE_MODE_RELAXED),
          "cuStreamBeginCapture");
    return TOCHA_OK;
}

static int cuda_capture_end(tocha_device *d, void *stream, void **exec)
{
    int st = use_context(d);
    if (st) return st;
    CUgraph graph = NULL;
    CHECK(cu.stream_end_capture((CUstream)stream, &graph), "cuStreamEndCapture");
    CUgraphExec e = NULL;
    CUresult r = cu.graph_instantiate(&e, graph, 0);
    cu.graph_destroy(graph);
    if (r != CUDA_SUCCESS) return driver_fail(r, "cuGraphInstantiateWithFlags");
    *exec = e;
    return TOCHA_OK;
}

static int cuda_graph_launch(tocha_device *d, void *exec, void *stream)
{
    int st = use_context(d);
    if (st) return st;
    CHECK(cu.graph_launch((CUgraphExec)exec, (CUstream)stream), "cuGraphLaunch");
    return TOCHA_OK;
}

static void cuda_graph_destroy(tocha_device *d, void *exec)
{
    if (use_context(d) == TOCHA_OK) cu.graph_exec_destroy((CUgraphExec)exec);
}

static const tocha_backend cuda_backend = {
    .alloc = cuda_alloc,
    .release = cuda_release,
    .reserved = cuda_reserved,
    .empty_cache = cuda_empty_cache,
    .write = cuda_write,
    .read = cuda_read,
    .copy = cuda_copy,
    .copy_peer = cuda_copy_peer,
    .load = cuda_load,
    .launch = cuda_launch,
    .function_info = cuda_function_info,
    .allow_dynamic_shared = cuda_allow_dynamic_shared,
    .occupancy = cuda_occupancy,
    .synchronize = cuda_synchronize,
    .memory = cuda_memory,
    .event_new = cuda_event_new,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_elapsed = cuda_event_elapsed,
    .stream_new = cuda_stream_new,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_wait_event = cuda_stream_wait_event,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_destroy = cuda_graph_destroy,
};

/* Resolves every entry point; false (with *why) if one is missing. */
static bool resolve(get_proc_fn get_proc, const char **why)
{
    static const struct {
        const char *symbol;
        size_t offset;
    } table[] = {
#define ENTRY(sym, field) {sym, offsetof(__typeof__(cu), field)}
        ENTRY("cuInit", init),
        ENTRY("cuDriverGetVersion", driver_get_version),
        ENTRY("cuGetErrorName", get_error_name),
        ENTRY("cuGetErrorString", get_error_string),
        ENTRY("cuDeviceGetCount", device_get_count),
        ENTRY("cuDeviceGet", device_get),
        ENTRY("cuDeviceGetName", device_get_name),
        ENTRY("cuDeviceGetAttribute", device_get_attribute),
        ENTRY("cuDevicePrimaryCtxRetain", primary_ctx_retain),
        ENTRY("cuCtxSetCurrent", ctx_set_current),
        ENTRY("cuCtxSynchronize", ctx_synchronize),
        ENTRY("cuMemAlloc", mem_alloc),
        ENTRY("cuMemFree", mem_free),
        ENTRY("cuMemGetInfo", mem_get_info),
        ENTRY("cuMemPoolCreate", mem_pool_create),
        ENTRY("cuMemPoolSetAttribute", mem_pool_set_attribute),
        ENTRY("cuMemPoolGetAttribute", mem_pool_get_attribute),
        ENTRY("cuMemPoolTrimTo", mem_pool_trim_to),
        ENTRY("cuMemAllocFromPoolAsync", mem_alloc_from_pool_async),
        ENTRY("cuMemFreeAsync", mem_free_async),
        ENTRY("cuMemcpyHtoD", memcpy_htod),
        ENTRY("cuMemcpyDtoH", memcpy_dtoh),
        ENTRY("cuMemcpyDtoDAsync", memcpy_dtod_async),
        ENTRY("cuMemcpyPeer", memcpy_peer),
        ENTRY("cuMemsetD8Async", memset_d8_async),
        ENTRY("cuStreamCreate", stream_create),
        ENTRY("cuStreamDestroy", stream_destroy),
        ENTRY("cuStreamSynchronize", stream_synchronize),
        ENTRY("cuStreamWaitEvent", stream_wait_event),
        ENTRY("cuStreamBeginCapture", stream_begin_capture),
        ENTRY("cuStreamEndCapture", stream_end_capture),
        ENTRY("cuGraphInstantiateWithFlags", graph_instantiate),
        ENTRY("cuGraphDestroy", graph_destroy),
        ENTRY("cuGraphLaunch", graph_launch),
        ENTRY("cuGraphExecDestroy", graph_exec_destroy),
        ENTRY("cuModuleLoadData", module_load_data),
        ENTRY("cuModuleGetFunction", module_get_function),
        ENTRY("cuFuncGetAttribute", func_get_attribute),
        ENTRY("cuFuncSetAttribute", func_set_attribute),
        ENTRY("cuOccupancyMaxActiveBlocksPerMultiprocessor", occupancy_max_active_blocks),
        ENTRY("cuLaunchKernel", launch_kernel),
        ENTRY("cuEventCreate", event_create),
        ENTRY("cuEventDestroy", event_destroy),
        ENTRY("cuEventRecord", event_record),
        ENTRY("cuEventSynchronize", event_synchronize),
        ENTRY("cuEventElapsedTime", event_elapsed_time),
#undef ENTRY
    };
    static char message[160];
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (get_proc(table[i].symbol, &fn, ABI_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
                CUDA_SUCCESS ||
            !fn) {
            snprintf(message, sizeof message,
                     "the CUDA driver is too old: it lacks %s (CUDA 12.0 or newer is needed)",
                     table[i].symbol);
            *why = message;
            return false;
        }
        memcpy((char *)&cu + table[i].offset, &fn, sizeof fn);
    }
    return true;
}

int tocha_cuda_driver_version(void) { return driver_version; }

int tocha_cuda_discover(tocha_device *devs, int cap, int first_index, const char **why)
{
    static char message[400];
    /* TOCHA_CUDA_LIBRARY names another driver library (a test double, or a driver kept
    ** outside the loader's path). */
    const char *forced = getenv("TOCHA_CUDA_LIBRARY");
    const char *library = forced && *forced ? forced : "libcuda.so.1";
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        /* Missing, or there but not a loadable library: say which (the loader's words). */
        if (strchr(library, '/') && access(library, F_OK) == 0)
            snprintf(message, sizeof message, "no NVIDIA driver: %.120s could not be loaded (%.100s)",
                     library, dlerror());
        else
            snprintf(message, sizeof message, "no NVIDIA driver: %.200s was not found", library);
        *why = message;
        return 0;
    }
    get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        *why = "the CUDA driver is too old: it lacks cuGetProcAddress_v2 (CUDA 12.0 or newer "
               "is needed)";
        return 0;
    }
    if (!resolve(get_proc, why)) return 0;
    CUresult r = cu.init(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        *why = "no CUDA device: the driver is installed but sees no GPU";
        return 0;
    }
    if (r != CUDA_SUCCESS) {
        const char *name = "?";
        cu.get_error_name(r, &name);
        snprintf(message, sizeof message, "the CUDA driver failed to start: cuInit returned %s", name);
        *why = message;
        return 0;
    }
    cu.driver_get_version(&driver_version);
    const char *nvrtc_why = NULL;
    if (!tocha_nvrtc_available(&nvrtc_why)) {
        *why = nvrtc_why;
        return 0;
    }
    int major = 0, minor = 0;
    tocha_nvrtc_version(&major, &minor);
    if (driver_version / 1000 < major) {
        snprintf(message, sizeof message,
                 "the CUDA driver is too old: it supports CUDA %d.%d, NVRTC is %d.%d",
                 driver_version / 1000, driver_version % 1000 / 10, major, minor);
        *why = message;
        return 0;
    }
    int count = 0;
    if (cu.device_get_count(&count) != CUDA_SUCCESS || count == 0) {
        *why = "no CUDA device: the driver is installed but sees no GPU";
        return 0;
    }
    if (count > cap) count = cap;
    for (int i = 0; i < count; i++) {
        tocha_device *d = &devs[i];
        CUdevice dev;
        CUcontext ctx;
        if (cu.device_get(&dev, i) != CUDA_SUCCESS || cu.primary_ctx_retain(&ctx, dev) != CUDA_SUCCESS) {
            snprintf(message, sizeof message, "cuda:%d could not be opened", i);
            *why = message;
            return i;
        }
        memset(d, 0, sizeof *d);
        d->index = d->load_slot = first_index + i;
        d->kind = TOCHA_DEVICE_CUDA;
        d->ordinal = i;
        d->context = ctx;
        d->backend = &cuda_backend;
        snprintf(d->name, sizeof d->name, "cuda:%d", i);
        cu.device_get_name(d->product, sizeof d->product, dev);
        cu.device_get_attribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu.device_get_attribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        cu.device_get_attribute(&d->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        int shared = 0;
        cu.device_get_attribute(&shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
        d->shared_per_block = (uint32_t)shared;
        cu.device_get_attribute(&d->threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev);
        snprintf(d->target, sizeof d->target, "sm_%d%d", d->cc_major, d->cc_minor);
    }
    return count;
}
