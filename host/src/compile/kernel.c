/*
** kernel.c: kernels made from CUDA C source, their generated entry points, and launches.
** A kernel names a __device__ function (template) in its source; tocha writes the extern "C"
** __global__ entry point that binds its template arguments, as teeny-kernels' #[kernel] macro
** does, and checks every launch's arguments against the parameter list before launching.
*/
#include "internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef enum { SCALAR_I32, SCALAR_I64, SCALAR_U32, SCALAR_U64, SCALAR_F32, SCALAR_F64 } scalar_type;

static const struct {
    const char *name, *ctype;
    double lo, hi; /* the integer range, for integer scalars */
} scalars[] = {
    [SCALAR_I32] = {"i32", "int", -2147483648.0, 2147483647.0},
    [SCALAR_I64] = {"i64", "long long", -9223372036854775808.0, 9223372036854775807.0},
    [SCALAR_U32] = {"u32", "unsigned int", 0.0, 4294967295.0},
    [SCALAR_U64] = {"u64", "unsigned long long", 0.0, 18446744073709551615.0},
    [SCALAR_F32] = {"f32", "float", 0, 0},
    [SCALAR_F64] = {"f64", "double", 0, 0},
};

typedef struct {
    bool tensor;
    int type; /* a tocha_dtype for tensors, a scalar_type otherwise */
    char name[32];
} param;

/* The bytes of a launch argument for p: a device address, or the scalar. */
static size_t param_size(const param *p)
{
    if (p->tensor) return sizeof(uint64_t);
    return p->type == SCALAR_I32 || p->type == SCALAR_U32 || p->type == SCALAR_F32 ? 4 : 8;
}

struct tocha_kernel {
    char *entry_name;
    char *entry_source;
    char *source; /* kernel source .. "\n\n" .. entry point */
    char *file;   /* the source's name in compile errors */
    int entry_line; /* the line of source where the entry point begins */
    char *sim_launcher;
    char *params_text; /* the parameter list, normalised */
    char hash[33];
    int nparams;
    param params[TOCHA_MAX_PARAMS];
    tocha_options options;
    int max_threads, min_blocks; /* launch bounds; 0: none */
    tocha_cache_entry *built[TOCHA_MAX_DEVICES];
    void *functions[TOCHA_MAX_DEVICES];
    int64_t static_shared[TOCHA_MAX_DEVICES]; /* as the device reports it; 0 where it cannot */
    uint32_t shared_allowed[TOCHA_MAX_DEVICES]; /* dynamic shared bytes the function may launch with */
    tocha_readout *readouts;
};

static bool valid_identifier(const char *s)
{
    if (!*s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
    return true;
}

/* Parses one "T*" / "T* name" / "T name" item into p; index names it in errors. */
static int parse_param(const char *item, size_t len, int index, param *p)
{
    char buf[96];
    while (len && isspace((unsigned char)*item)) item++, len--;
    while (len && isspace((unsigned char)item[len - 1])) len--;
    if (len == 0 || len >= sizeof buf)
        return tocha_fail(TOCHA_E_ARGUMENT, "params: parameter %d is empty or too long", index + 1);
    memcpy(buf, item, len);
    buf[len] = '\0';
    char *star = strchr(buf, '*');
    char *type = buf, *name = NULL;
    p->tensor = star != NULL;
    if (star) {
        *star = '\0';
        name = star + 1;
    } else {
        name = strpbrk(buf, " \t");
        if (name) *name++ = '\0';
    }
    while (name && isspace((unsigned char)*name)) name++;
    size_t tl = strlen(type);
    while (tl && isspace((unsigned char)type[tl - 1])) type[--tl] = '\0';
    if (name && *name) {
        if (!valid_identifier(name) || strlen(name) >= sizeof p->name)
            return tocha_fail(TOCHA_E_ARGUMENT, "params: parameter %d has an invalid name '%s'",
                              index + 1, name);
        snprintf(p->name, sizeof p->name, "%s", name);
    } else {
        snprintf(p->name, sizeof p->name, "p%d", index);
    }
    if (p->tensor) {
        int dtype;
        if (tocha_dtype_from_name(type, &dtype) != TOCHA_OK)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "params: parameter %d: unknown tensor dtype '%s*' (expected f32*, "
                              "f64*, f16*, bf16*, u8*, i32* or i64*)",
                              index + 1, type);
        p->type = dtype;
        return TOCHA_OK;
    }
    for (int s = 0; s < (int)(sizeof scalars / sizeof scalars[0]); s++)
        if (strcmp(type, scalars[s].name) == 0) {
            p->type = s;
            return TOCHA_OK;
        }
    return tocha_fail(TOCHA_E_ARGUMENT,
                      "params: parameter %d: unknown type '%s' (expected a tensor 'T*' or one of "
                      "i32, i64, u32, u64, f32, f64)",
                      index + 1, type);
}

static int parse_params(const char *params, tocha_kernel *k)
{
    k->nparams = 0;
    const char *p = params;
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) return TOCHA_OK;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (k->nparams == TOCHA_MAX_PARAMS)
            return tocha_fail(TOCHA_E_ARGUMENT, "params: more than %d parameters", TOCHA_MAX_PARAMS);
        int st = parse_param(p, len, k->nparams, &k->params[k->nparams]);
        if (st) return st;
        for (int i = 0; i < k->nparams; i++)
            if (strcmp(k->params[i].name, k->params[k->nparams].name) == 0)
                return tocha_fail(TOCHA_E_ARGUMENT,
                                  "params: parameter %d repeats the name '%s' of parameter %d",
                                  k->nparams + 1, k->params[i].name, i + 1);
        k->nparams++;
        if (!comma) return TOCHA_OK;
        p = comma + 1;
    }
}

static const char *param_ctype(const param *p)
{
    return p->tensor ? tocha_dtype_ctype(p->type) : scalars[p->type].ctype;
}

/* Whether the simulator must run the kernel's threads as fibers: its source names something at
** which a thread waits for others (barriers, warp operations, groups, tensor-core fragments,
** atomics and sleeps, where a thread may spin until another of its block acts), or one of
** tocha.cuh's team functions, which shuffle and wait at barriers, tensor_core.cuh's warp
** matrix functions, whose lanes meet, or mbarrier.cuh's waits.
** Other kernels run each thread to its end in turn, which is several times faster. */
static bool synchronises(const char *source)
{
    static const char *const waits[] = {"__syncthreads", "__syncwarp",   "__shfl",        "__ballot_sync",
                                        "__any_sync",    "__all_sync",   "__uni_sync",    "__activemask",
                                        "__match_",      "__reduce_",    "cooperative_groups", "wmma", "nvcuda",
                                        "__nanosleep",   "team_combine", "team_sum",      "mma_16816",
                                        "ldmatrix",      "mbarrier"};
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        if (strstr(source, waits[i])) return true;
    for (const char *p = strstr(source, "atomic"); p; p = strstr(p + 6, "atomic"))
        if (isupper((unsigned char)p[6])) return true; /* atomicAdd, atomicCAS, ... */
    return false;
}

static void generate(tocha_kernel *k, const char *source, const char *name, const char *targs)
{
    tocha_text t = {0};
    /* A source may give its entry point attributes (launch bounds) that depend on the
       template arguments, by defining the macro TOCHA_ENTRY_BOUNDS(template arguments...). */
    if (strstr(source, "TOCHA_ENTRY_BOUNDS"))
        tocha_text_appendf(&t, "extern \"C\" __global__ void TOCHA_ENTRY_BOUNDS(%s) %s(", targs,
                           k->entry_name);
    else if (k->min_blocks)
        tocha_text_appendf(&t, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", k->max_threads,
                           k->min_blocks, k->entry_name);
    else if (k->max_threads)
        tocha_text_appendf(&t, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", k->max_threads,
                           k->entry_name);
    else
        tocha_text_appendf(&t, "extern \"C\" __global__ void %s(", k->entry_name);
    for (int i = 0; i < k->nparams; i++)
        tocha_text_appendf(&t, "%s%s %s%s", i ? ", " : "", param_ctype(&k->params[i]),
                           k->params[i].tensor ? "*" : "", k->params[i].name);
    tocha_text_appendf(&t, ")\n{\n    %s", name);
    if (*targs) tocha_text_appendf(&t, "<%s>", targs);
    tocha_text_append(&t, "(");
    for (int i = 0; i < k->nparams; i++)
        tocha_text_appendf(&t, "%s%s", i ? ", " : "", k->params[i].name);
    tocha_text_append(&t, ");\n}\n");
    k->entry_source = tocha_text_take(&t);

    tocha_text_appendf(&t, "%s\n\n%s", source, k->entry_source ? k->entry_source : "");
    k->source = tocha_text_take(&t);

    /* A kernel that synchronises runs its blocks' threads as fibers on the simulator. */
    tocha_text_appendf(&t,
                       "extern \"C\" int tocha_sim_launch(void **a, const unsigned *grid, const unsigned "
                       "*block,\n    unsigned shared_bytes, unsigned long long first, unsigned long long "
                       "last, char *error, unsigned long size)\n{\n    return !tocha_sim::run<%s>(grid, "
                       "block, shared_bytes, first, last, error, size, [&] {\n",
                       synchronises(source) ? "true" : "false");
    tocha_text_appendf(&t, "        %s(", k->entry_name);
    for (int i = 0; i < k->nparams; i++)
        tocha_text_appendf(&t, "%s*(%s%s *)a[%d]", i ? ", " : "", param_ctype(&k->params[i]),
                           k->params[i].tensor ? " *" : "", i);
    tocha_text_append(&t, ");\n    });\n}\n");
    k->sim_launcher = tocha_text_take(&t);

    for (int i = 0; i < k->nparams; i++)
        tocha_text_appendf(&t, "%s%s%s %s", i ? ", " : "",
                           k->params[i].tensor ? tocha_dtype_name(k->params[i].type)
                                               : scalars[k->params[i].type].name,
                           k->params[i].tensor ? "*" : "", k->params[i].name);
    k->params_text = tocha_text_take(&t);
}

/* Checks config's launch bounds and options and keeps them (copies of the options) in k. */
static int configure(tocha_kernel *k, const char *source, const tocha_kernel_config *config)
{
    if (!config) return TOCHA_OK;
    if (config->max_threads < 0 || config->max_threads > 1024)
        return tocha_fail(TOCHA_E_ARGUMENT, "launch_bounds: max_threads must be 1 to 1024, got %d",
                          (int)config->max_threads);
    if (config->min_blocks < 0 || config->min_blocks > 32)
        return tocha_fail(TOCHA_E_ARGUMENT, "launch_bounds: min_blocks must be 1 to 32, got %d",
                          (int)config->min_blocks);
    if (config->min_blocks && !config->max_threads)
        return tocha_fail(TOCHA_E_ARGUMENT, "launch_bounds: min_blocks needs max_threads");
    if (config->max_threads && strstr(source, "TOCHA_ENTRY_BOUNDS"))
        return tocha_fail(TOCHA_E_ARGUMENT, "launch_bounds: the source gives its entry point bounds "
                                            "already (TOCHA_ENTRY_BOUNDS)");
    k->max_threads = config->max_threads;
    k->min_blocks = config->min_blocks;
    int st = tocha_options_check(config->options, config->n_options);
    if (st || config->n_options == 0) return st;
    k->options.items = calloc((size_t)config->n_options, sizeof(char *));
    if (!k->options.items) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for options");
    for (int i = 0; i < config->n_options; i++) {
        k->options.items[i] = tocha_strdup(config->options[i]);
        if (!k->options.items[i]) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for options");
        k->options.count = i + 1;
    }
    return TOCHA_OK;
}

/* The name the kernel's source has in compile errors: file, or "<name>.cu". A name that would
** end the #line directive's string, or a line, is refused. */
static int name_file(tocha_kernel *k, const char *name, const char *file)
{
    if (file && (!*file || strlen(file) > 200 || strpbrk(file, "\"\\\n\r")))
        return tocha_fail(TOCHA_E_ARGUMENT, "file: expected a file name of 1 to 200 characters without quotes, "
                                            "backslashes or line breaks");
    size_t n = (file ? strlen(file) : strlen(name) + 3) + 1;
    k->file = malloc(n);
    if (!k->file) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a kernel");
    if (file)
        snprintf(k->file, n, "%s", file);
    else
        snprintf(k->file, n, "%s.cu", name);
    return TOCHA_OK;
}

int tocha_kernel_new(const char *source, const char *name, const char *template_args, const char *params,
                     tocha_kernel **out)
{
    return tocha_kernel_new_config(source, name, template_args, params, NULL, out);
}

int tocha_kernel_new_config(const char *source, const char *name, const char *template_args,
                            const char *params, const tocha_kernel_config *config, tocha_kernel **out)
{
    *out = NULL;
    if (!source || !*source) return tocha_fail(TOCHA_E_ARGUMENT, "source: expected CUDA C text");
    if (!name || !valid_identifier(name))
        return tocha_fail(TOCHA_E_ARGUMENT, "name: expected a C identifier, got '%s'",
                          name ? name : "(null)");
    if (!template_args) template_args = "";
    if (!params) return tocha_fail(TOCHA_E_ARGUMENT, "params: expected a parameter list");
    tocha_kernel *k = calloc(1, sizeof *k);
    if (!k) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a kernel");
    int st = parse_params(params, k);
    if (!st) st = configure(k, source, config);
    if (st) {
        tocha_kernel_destroy(k);
        return st;
    }
    size_t n = strlen(name) + sizeof "_entry_point";
    k->entry_name = malloc(n);
    if (k->entry_name) snprintf(k->entry_name, n, "%s_entry_point", name);
    if (k->entry_name) generate(k, source, name, template_args);
    st = name_file(k, name, config && config->file ? config->file : NULL);
    if (st) {
        tocha_kernel_destroy(k);
        return st;
    }
    k->entry_line = 3;
    for (const char *c = source; *c; c++) k->entry_line += *c == '\n';
    if (!k->entry_name || !k->entry_source || !k->source || !k->sim_launcher || !k->params_text) {
        tocha_kernel_destroy(k);
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a kernel");
    }
    XXH128_canonical_t canon;
    XXH128_canonicalFromHash(&canon, XXH3_128bits(k->source, strlen(k->source)));
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        k->hash[2 * i] = digits[canon.digest[i] >> 4];
        k->hash[2 * i + 1] = digits[canon.digest[i] & 15];
    }
    k->hash[32] = '\0';
    *out = k;
    return TOCHA_OK;
}

void tocha_kernel_destroy(tocha_kernel *k)
{
    if (!k) return;
    free(k->entry_name);
    free(k->entry_source);
    free(k->source);
    free(k->file);
    free(k->sim_launcher);
    free(k->params_text);
    for (int i = 0; i < k->options.count; i++) free(k->options.items[i]);
    free(k->options.items);
    tocha_readouts_free(k->readouts);
    free(k);
}

const char *tocha_kernel_entry_point_source(const tocha_kernel *k) { return k->entry_source; }
const char *tocha_kernel_entry_point_name(const tocha_kernel *k) { return k->entry_name; }
const char *tocha_kernel_source(const tocha_kernel *k) { return k->source; }
const char *tocha_kernel_hash(const tocha_kernel *k) { return k->hash; }
const char *tocha_kernel_params(const tocha_kernel *k) { return k->params_text; }
int tocha_kernel_param_count(const tocha_kernel *k) { return k->nparams; }

static int build_for(tocha_kernel *k, const char *target, tocha_cache_entry **out)
{
    char *unit = tocha_translation_unit(k->source, k->file, k->entry_line, target, k->sim_launcher);
    if (!unit) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for kernel source");
    int st = tocha_cache_build(unit, target, &k->options, out);
    free(unit);
    return st;
}

int tocha_kernel_resolve_target(const char *target, char resolved[32])
{
    if (!target) return tocha_fail(TOCHA_E_ARGUMENT, "target: expected sm_XY or sim");
    if (strcmp(target, "sim") == 0 || strcmp(target, tocha_sim_target()) == 0) {
        snprintf(resolved, 32, "%s", tocha_sim_target());
    } else {
        int major = 0, minor = 0, used = 0;
        if (sscanf(target, "sm_%1d%d%n", &major, &minor, &used) != 2 || target[used] ||
            strlen(target) >= 32)
            return tocha_fail(TOCHA_E_ARGUMENT, "target: expected sm_XY (e.g. sm_90) or sim, got '%s'",
                              target);
        snprintf(resolved, 32, "%s", target);
    }
    return TOCHA_OK;
}

int tocha_kernel_build(tocha_kernel *k, const char *target, uint64_t *binary_size)
{
    char resolved[32];
    int st = tocha_kernel_resolve_target(target, resolved);
    if (st) return st;
    tocha_cache_entry *e;
    if ((st = build_for(k, resolved, &e))) return st;
    if (binary_size) *binary_size = tocha_cache_entry_size(e);
    return TOCHA_OK;
}

int tocha_kernel_binary(tocha_kernel *k, const char *target, const void **data, uint64_t *size)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    char resolved[32];
    int st = tocha_kernel_resolve_target(target, resolved);
    if (st) return st;
    tocha_cache_entry *e;
    if ((st = build_for(k, resolved, &e))) return st;
    *data = tocha_cache_entry_binary(e);
    *size = tocha_cache_entry_size(e);
    return TOCHA_OK;
}

char *tocha_kernel_unit(const tocha_kernel *k, const char *target)
{
    return tocha_translation_unit(k->source, k->file, k->entry_line, target, k->sim_launcher);
}
const tocha_options *tocha_kernel_options(const tocha_kernel *k) { return &k->options; }
int tocha_kernel_max_threads(const tocha_kernel *k) { return k->max_threads; }
tocha_readout **tocha_kernel_readouts(tocha_kernel *k) { return &k->readouts; }

/* The loaded entry function on d, building and loading it on first use (not during a graph
** capture: loading a module is not work a graph can hold). */
int tocha_kernel_function(tocha_kernel *k, tocha_device *d, void **fn)
{
    int i = d->index;
    if (k->functions[i]) {
        *fn = k->functions[i];
        return TOCHA_OK;
    }
    if (d->capturing)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "kernel %s: not loaded on %s before the graph capture began: launch it once "
                          "before capturing",
                          k->entry_name, d->name);
    char *unit = tocha_translation_unit(k->source, k->file, k->entry_line, d->target, k->sim_launcher);
    if (!unit) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for kernel source");
    int st = tocha_cache_build(unit, d->target, &k->options, &k->built[i]);
    if (!st)
        st = tocha_cache_entry_function(k->built[i], d, unit, &k->options, k->entry_name, &k->functions[i]);
    free(unit);
    if (st) return st;
    /* What the device reports of static shared memory, for the check of a launch's dynamic. */
    tocha_kernel_info info;
    if (d->backend->function_info && d->backend->function_info(d, k->functions[i], &info) == TOCHA_OK)
        k->static_shared[i] = info.shared;
    *fn = k->functions[i];
    return TOCHA_OK;
}

int tocha_kernel_allow_shared(tocha_kernel *k, tocha_device *d, void *fn, uint32_t shared_bytes)
{
    /* Above the default 48 KiB a function must be allowed its size first: once per size it grows
       to, not per launch (setting it is not free). */
    if (shared_bytes <= k->shared_allowed[d->index] || shared_bytes <= 48 * 1024 ||
        !d->backend->allow_dynamic_shared)
        return TOCHA_OK;
    int st = d->backend->allow_dynamic_shared(d, fn, shared_bytes);
    if (!st) k->shared_allowed[d->index] = shared_bytes;
    return st;
}

int tocha_kernel_launch_shared(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                               const uint32_t block[3], uint32_t shared_bytes, void **args)
{
    void *fn = NULL;
    int st = tocha_kernel_function(k, d, &fn);
    if (st) return st;
    if ((st = tocha_kernel_allow_shared(k, d, fn, shared_bytes))) return st;
    if (d->stream && d->stream->capture) {
        uint8_t sizes[TOCHA_MAX_PARAMS];
        for (int a = 0; a < k->nparams; a++) sizes[a] = (uint8_t)param_size(&k->params[a]);
        st = tocha_graph_hold_arguments(d, args, sizes, k->nparams);
        if (st) return st;
        if (tocha_graph_recording(d))
            return tocha_graph_record_launch(d, fn, grid, block, shared_bytes, args, sizes, k->nparams);
    }
    st = d->backend->launch(d, fn, grid, block, shared_bytes, args, tocha_device_stream_handle(d));
    if (st == TOCHA_E_DRIVER) {
        /* What the device reports of a launch (an illegal address, a trap) names the kernel. */
        char *what = strdup(tocha_last_error());
        st = tocha_fail(st, "kernel %s: %s", k->entry_name, what ? what : "launch failed");
        free(what);
    }
    return st;
}

int tocha_kernel_launch_raw(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                            const uint32_t block[3], void **args)
{
    return tocha_kernel_launch_shared(k, d, grid, block, 0, args);
}

int tocha_kernel_check_dims(const uint32_t grid[3], const uint32_t block[3])
{
    static const char *axes = "xyz";
    static const uint32_t grid_max[3] = {2147483647u, 65535u, 65535u};
    static const uint32_t block_max[3] = {1024u, 1024u, 64u};
    for (int i = 0; i < 3; i++) {
        if (grid[i] < 1 || grid[i] > grid_max[i])
            return tocha_fail(TOCHA_E_ARGUMENT, "grid.%c: must be 1 to %u, got %u", axes[i], grid_max[i],
                              grid[i]);
        if (block[i] < 1 || block[i] > block_max[i])
            return tocha_fail(TOCHA_E_ARGUMENT, "block.%c: must be 1 to %u, got %u", axes[i],
                              block_max[i], block[i]);
    }
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (threads > 1024)
        return tocha_fail(TOCHA_E_ARGUMENT, "block: %llu threads per block, at most 1024",
                          (unsigned long long)threads);
    return TOCHA_OK;
}

typedef union {
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
} scalar_value;

static const char *arg_kind_name(int kind)
{
    return kind == TOCHA_ARG_TENSOR    ? "a tensor"
           : kind == TOCHA_ARG_INT     ? "an integer"
           : kind == TOCHA_ARG_POINTER ? "a device pointer"
                                       : "a number";
}

/* Checks a scalar argument against its parameter and stores it in v. */
static int check_scalar(const param *p, int i, const tocha_arg *a, scalar_value *v)
{
    const char *type = scalars[p->type].name;
    if (a->kind != TOCHA_ARG_INT && a->kind != TOCHA_ARG_FLOAT)
        return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): expected %s, got %s", i + 1, p->name,
                          type, arg_kind_name(a->kind));
    if (p->type == SCALAR_F32 || p->type == SCALAR_F64) {
        double f = a->kind == TOCHA_ARG_INT ? (double)a->i : a->f;
        if (p->type == SCALAR_F32)
            v->f32 = (float)f;
        else
            v->f64 = f;
        return TOCHA_OK;
    }
    if (a->kind == TOCHA_ARG_FLOAT && (a->f != floor(a->f) || !isfinite(a->f)))
        return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): expected an integer (%s), got %g", i + 1,
                          p->name, type, a->f);
    if (a->kind == TOCHA_ARG_INT) {
        int64_t x = a->i;
        bool ok = p->type == SCALAR_I64 || (p->type == SCALAR_U64 && x >= 0) ||
                  (p->type == SCALAR_I32 && x >= INT32_MIN && x <= INT32_MAX) ||
                  (p->type == SCALAR_U32 && x >= 0 && x <= (int64_t)UINT32_MAX);
        if (!ok)
            return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): %lld is out of %s range", i + 1,
                              p->name, (long long)x, type);
        if (p->type == SCALAR_I32)
            v->i32 = (int32_t)x;
        else if (p->type == SCALAR_U32)
            v->u32 = (uint32_t)x;
        else if (p->type == SCALAR_I64)
            v->i64 = x;
        else
            v->u64 = (uint64_t)x;
        return TOCHA_OK;
    }
    double f = a->f;
    /* hi of the 64-bit types rounds up to 2^63 / 2^64 in double: compare with >=. */
    if (f < scalars[p->type].lo || f >= scalars[p->type].hi + (p->type <= SCALAR_U32 ? 1 : 0))
        return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): %.17g is out of %s range", i + 1, p->name,
                          f, type);
    if (p->type == SCALAR_I32)
        v->i32 = (int32_t)f;
    else if (p->type == SCALAR_U32)
        v->u32 = (uint32_t)f;
    else if (p->type == SCALAR_I64)
        v->i64 = (int64_t)f;
    else
        v->u64 = (uint64_t)f;
    return TOCHA_OK;
}

int tocha_kernel_check_launch(tocha_kernel *k, tocha_device *d, const uint32_t block[3],
                              uint32_t shared_bytes)
{
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (k->max_threads && threads > (uint64_t)k->max_threads)
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "block: %llu threads per block, above the kernel's launch_bounds max_threads %d",
                          (unsigned long long)threads, k->max_threads);
    if (shared_bytes == 0) return TOCHA_OK;
    /* Static shared memory counts where it is known: the device's report of the loaded function
       (loaded now, as the launch would), else a readout of the device's target. */
    void *fn;
    int st = tocha_kernel_function(k, d, &fn);
    if (st) return st;
    int64_t static_shared = k->static_shared[d->index];
    if (!static_shared)
        for (const tocha_readout *r = k->readouts; r; r = r->next)
            if (strcmp(r->info.target, d->kind == TOCHA_DEVICE_SIM ? tocha_arch_default() : d->target) == 0)
                static_shared = r->info.shared;
    if ((uint64_t)shared_bytes + (uint64_t)static_shared > d->shared_per_block) {
        if (static_shared)
            return tocha_fail(TOCHA_E_ARGUMENT,
                              "shared: %u bytes of dynamic shared memory and the kernel's %lld static "
                              "are above the %u bytes a block may use on %s",
                              shared_bytes, (long long)static_shared, d->shared_per_block, d->name);
        return tocha_fail(TOCHA_E_ARGUMENT,
                          "shared: %u bytes of dynamic shared memory are above the %u bytes a block may "
                          "use on %s",
                          shared_bytes, d->shared_per_block, d->name);
    }
    return TOCHA_OK;
}

int tocha_kernel_launch(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                        const uint32_t block[3], uint32_t shared_bytes, const tocha_arg *args, int nargs)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (nargs != k->nparams)
        return tocha_fail(TOCHA_E_ARGUMENT, "expected %d arguments for %s, got %d", k->nparams,
                          k->entry_name, nargs);
    int st = tocha_kernel_check_dims(grid, block);
    if (!st) st = tocha_kernel_check_launch(k, d, block, shared_bytes);
    if (st) return st;
    scalar_value values[TOCHA_MAX_PARAMS];
    void *slots[TOCHA_MAX_PARAMS];
    for (int i = 0; i < nargs; i++) {
        const param *p = &k->params[i];
        const tocha_arg *a = &args[i];
        if (!p->tensor) {
            st = check_scalar(p, i, a, &values[i]);
            if (st) return st;
            slots[i] = &values[i];
            continue;
        }
        if (a->kind != TOCHA_ARG_TENSOR || !a->tensor)
            return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): expected a tensor of %s, got %s",
                              i + 1, p->name, tocha_dtype_name(p->type), arg_kind_name(a->kind));
        const tocha_tensor *t = a->tensor;
        if (t->freed)
            return tocha_fail(TOCHA_E_FREED, "argument %d (%s): tensor was freed", i + 1, p->name);
        if (!t->dense)
            return tocha_fail(
                TOCHA_E_ARGUMENT,
                "argument %d (%s): not contiguous (a view): call :contiguous() on it first", i + 1,
                p->name);
        if (t->elem_type != p->type)
            return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): expected dtype %s, got %s", i + 1,
                              p->name, tocha_dtype_name(p->type), tocha_dtype_name(t->elem_type));
        if (t->dev != d)
            return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): tensor is on %s, the launch is on %s",
                              i + 1, p->name, t->dev->name, d->name);
        slots[i] = (void *)&t->data;
    }
    return tocha_kernel_launch_shared(k, d, grid, block, shared_bytes, slots);
}

static int check_count(const tocha_kernel *k, int count)
{
    if (count == k->nparams) return TOCHA_OK;
    return tocha_fail(TOCHA_E_ARGUMENT, "expected %d arguments for %s, got %d", k->nparams,
                      k->entry_name, count);
}

/* The arguments' bytes, the count already checked. */
static int pack_counted(const tocha_kernel *k, const tocha_arg_list *list,
                        uint64_t values[TOCHA_MAX_PARAMS])
{
    int st;
    for (int i = 0; i < list->count; i++) {
        const param *p = &k->params[i];
        const tocha_arg *a = &list->args[i];
        values[i] = 0;
        if (p->tensor) {
            if (a->kind != TOCHA_ARG_POINTER || a->i == 0)
                return tocha_fail(TOCHA_E_ARGUMENT, "argument %d (%s): expected a device pointer", i + 1,
                                  p->name);
            values[i] = (uint64_t)a->i;
            continue;
        }
        scalar_value v;
        if ((st = check_scalar(p, i, a, &v))) return st;
        memcpy(&values[i], &v, sizeof v); /* the scalar's bytes first, as the launch reads them */
    }
    return TOCHA_OK;
}

int tocha_kernel_pack_values(const tocha_kernel *k, const tocha_arg_list *list,
                             uint64_t values[TOCHA_MAX_PARAMS])
{
    int st = check_count(k, list->count);
    return st ? st : pack_counted(k, list, values);
}

int tocha_kernel_launch_packed(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                               const uint32_t block[3], const tocha_arg_list *list)
{
    return tocha_kernel_launch_packed_shared(k, d, grid, block, 0, list);
}

int tocha_kernel_launch_packed_shared(tocha_kernel *k, tocha_device *d, const uint32_t grid[3],
                                      const uint32_t block[3], uint32_t shared_bytes,
                                      const tocha_arg_list *list)
{
    if (!k) return tocha_fail(TOCHA_E_ARGUMENT, "kernel: expected a kernel, got NULL");
    if (!d) return tocha_fail(TOCHA_E_ARGUMENT, "device: expected a device, got NULL");
    if (!list) return tocha_fail(TOCHA_E_ARGUMENT, "args: expected an argument list, got NULL");
    int st = check_count(k, list->count);
    if (!st) st = tocha_kernel_check_dims(grid, block);
    if (!st) st = tocha_kernel_check_launch(k, d, block, shared_bytes);
    if (st) return st;
    uint64_t values[TOCHA_MAX_PARAMS];
    void *slots[TOCHA_MAX_PARAMS];
    if ((st = pack_counted(k, list, values))) return st;
    for (int i = 0; i < list->count; i++) slots[i] = &values[i];
    return tocha_kernel_launch_shared(k, d, grid, block, shared_bytes, slots);
}
