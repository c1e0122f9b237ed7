/*
** nvrtc.c: CUDA C to cubin through NVRTC, loaded with dlopen.
** NVRTC has no built-in cuda_fp16.h / cuda_bf16.h, so the toolkit's include folder is passed
** with -I; it is found from CUDA_HOME, CUDA_PATH, /usr/local/cuda, or beside libnvrtc.
*/
#include "internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static struct {
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    const char *(*error_string)(nvrtcResult);
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error;
static int nv_major, nv_minor;
static char identity[64];
static char include_dir[1024];

static bool has_fp16_header(const char *dir)
{
    char path[1100];
    struct stat st;
    snprintf(path, sizeof path, "%s/cuda_fp16.h", dir);
    return stat(path, &st) == 0;
}

static void find_include_dir(void *lib)
{
    const char *envs[] = {"CUDA_HOME", "CUDA_PATH"};
    for (int i = 0; i < 2; i++) {
        const char *root = getenv(envs[i]);
        if (!root || !*root) continue;
        int n = snprintf(include_dir, sizeof include_dir, "%s/include", root);
        if (n > 0 && (size_t)n < sizeof include_dir && has_fp16_header(include_dir)) return;
    }
    snprintf(include_dir, sizeof include_dir, "/usr/local/cuda/include");
    if (has_fp16_header(include_dir)) return;
    /* Beside the library that was loaded: <root>/lib64/libnvrtc.so -> <root>/include. */
    Dl_info info;
    void *sym = lib ? dlsym(lib, "nvrtcVersion") : NULL;
    if (sym && dladdr(sym, &info) && info.dli_fname) {
        char path[900];
        snprintf(path, sizeof path, "%s", info.dli_fname);
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(path, '/');
            if (!slash) break;
            *slash = '\0';
        }
        snprintf(include_dir, sizeof include_dir, "%s/include", path);
        if (has_fp16_header(include_dir)) return;
    }
    include_dir[0] = '\0';
}

static void load(void)
{
    static const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    static char message[1200];
    void *lib = NULL;
    const char *forced = getenv("TOCHA_NVRTC_LIBRARY");
    if (forced && *forced) {
        lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        find_include_dir(lib);
        if (!lib) {
            snprintf(message, sizeof message,
                     "NVRTC is missing: TOCHA_NVRTC_LIBRARY=%.1000s could not be loaded", forced);
            load_error = message;
            return;
        }
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *root = getenv("CUDA_HOME");
        if (root) {
            char path[1024];
            int n = snprintf(path, sizeof path, "%s/lib64/libnvrtc.so", root);
            if (n > 0 && (size_t)n < sizeof path) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    find_include_dir(lib);
    if (!lib) {
        load_error = "NVRTC is missing: libnvrtc.so.13 was not found (install the CUDA "
                     "toolkit's NVRTC or add its lib folder to LD_LIBRARY_PATH)";
        return;
    }
    void **slots[] = {(void **)&nv.version,  (void **)&nv.create,  (void **)&nv.compile,
                      (void **)&nv.log_size, (void **)&nv.log,     (void **)&nv.cubin_size,
                      (void **)&nv.cubin,    (void **)&nv.destroy, (void **)&nv.error_string,
                      (void **)&nv.ptx_size, (void **)&nv.ptx};
    const char *symbols[] = {"nvrtcVersion",           "nvrtcCreateProgram",  "nvrtcCompileProgram",
                             "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",  "nvrtcGetCUBINSize",
                             "nvrtcGetCUBIN",          "nvrtcDestroyProgram", "nvrtcGetErrorString",
                             "nvrtcGetPTXSize",        "nvrtcGetPTX"};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        *slots[i] = dlsym(lib, symbols[i]);
        if (!*slots[i]) {
            load_error = "NVRTC is too old: it lacks nvrtcGetCUBIN";
            return;
        }
    }
    nv.version(&nv_major, &nv_minor);
    snprintf(identity, sizeof identity, "nvrtc %d.%d", nv_major, nv_minor);
}

bool tocha_nvrtc_available(const char **why)
{
    pthread_once(&once, load);
    if (load_error && why) *why = load_error;
    return load_error == NULL;
}

int tocha_nvrtc_version(int *major, int *minor)
{
    pthread_once(&once, load);
    *major = load_error ? 0 : nv_major;
    *minor = load_error ? 0 : nv_minor;
    return TOCHA_OK;
}

const char *tocha_nvrtc_identity(void)
{
    pthread_once(&once, load);
    return identity;
}

const char *tocha_cuda_include_dir(void)
{
    pthread_once(&once, load);
    return include_dir[0] ? include_dir : NULL;
}

/* With TOCHA_DUMP_DIR set, each compiled unit and its cubin are written there (named by the
** source's hash), for reading the SASS with cuobjdump. Best effort. */
static void dump(const char *source, const char *arch, const void *cubin, size_t size)
{
    char path[4200];
    tocha_dump_file(source, arch, "cu", source, strlen(source), path, sizeof path);
    tocha_dump_file(source, arch, "cubin", cubin, size, path, sizeof path);
}

/* NVRTC's fixed compile options (besides the target and the include folder, which are part of
** the key already): used to compile and hashed into cache keys, so that changing one rebuilds.
** A kernel's own options follow them (and are in its key too). */
static const char *const nvrtc_flags[] = {"--std=c++17", "-DTOCHA_CUDA=1"};
#define NVRTC_FLAG_COUNT (sizeof nvrtc_flags / sizeof nvrtc_flags[0])

const char *tocha_nvrtc_options(void)
{
    static char joined[128];
    if (!joined[0]) {
        tocha_join_words(nvrtc_flags, NVRTC_FLAG_COUNT, joined, sizeof joined);
        size_t used = strlen(joined);
        snprintf(joined + used, sizeof joined - used, " (sm_90 as sm_90a)");
    }
    return joined;
}

/* Whether arch builds as its arch-specific variant (sm_90 as sm_90a): the instructions of that
** chip alone, wgmma among them (warpgroup.cuh), are then available; the code runs on that
** compute capability only, which is the device tocha compiles for. Part of the options text, so
** that cache keys change with it. */
static bool arch_specific(const char *arch) { return strcmp(arch, "sm_90") == 0; }

/* Compiles source for arch with tocha's flags, the kernel's options and extra (NULL or one more
** flag) into *prog; a failure's log, with the numbered source, becomes the error. */
static int compile_program(const char *source, const char *arch, const tocha_options *options,
                           const char *extra, nvrtcProgram *prog)
{
    const char *why = NULL;
    if (!tocha_nvrtc_available(&why)) return tocha_fail(TOCHA_E_UNAVAILABLE, "%s", why);
    if (!include_dir[0])
        return tocha_fail(TOCHA_E_UNAVAILABLE, "the CUDA toolkit headers (cuda_fp16.h) were not "
                                               "found: set CUDA_HOME");
    char arch_opt[64], include_opt[1100], cccl_opt[1100];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s%s", arch, arch_specific(arch) ? "a" : "");
    snprintf(include_opt, sizeof include_opt, "-I%s", include_dir);
    /* The toolkit's C++ library (cuda/std/...), which cooperative_groups.h includes, sits in
       include/cccl since CUDA 13. */
    snprintf(cccl_opt, sizeof cccl_opt, "-I%s/cccl", include_dir);
    const char *opts[4 + NVRTC_FLAG_COUNT + TOCHA_MAX_OPTIONS];
    int n = 0;
    opts[n++] = arch_opt;
    opts[n++] = include_opt;
    opts[n++] = cccl_opt;
    for (size_t i = 0; i < NVRTC_FLAG_COUNT; i++) opts[n++] = nvrtc_flags[i];
    for (int i = 0; options && i < options->count && i < TOCHA_MAX_OPTIONS; i++)
        opts[n++] = options->items[i];
    if (extra) opts[n++] = extra;
    nvrtcResult r = nv.create(prog, source, "tocha_kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS)
        return tocha_fail(TOCHA_E_COMPILE, "nvrtcCreateProgram: %s", nv.error_string(r));
    r = nv.compile(*prog, n, opts);
    if (r == NVRTC_SUCCESS) return TOCHA_OK;
    size_t size = 0;
    nv.log_size(*prog, &size);
    char *log = malloc(size + 1);
    if (log) {
        nv.log(*prog, log);
        log[size] = '\0';
    }
    char header[96];
    snprintf(header, sizeof header, "NVRTC failed to compile for %s:", arch);
    char *text = tocha_compile_diagnostic(header, arch, log, source, true);
    free(log);
    nv.destroy(prog);
    int st = tocha_fail(TOCHA_E_COMPILE, "%s", text ? text : "NVRTC failed to compile");
    free(text);
    return st;
}

/* The cubin of a compiled program (malloc'd). */
static int take_cubin(nvrtcProgram prog, void **binary, uint64_t *size)
{
    size_t n = 0;
    nv.cubin_size(prog, &n);
    void *out = malloc(n ? n : 1);
    if (!out) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a cubin");
    nv.cubin(prog, out);
    *binary = out;
    *size = n;
    return TOCHA_OK;
}

int tocha_nvrtc_compile(const char *source, const char *arch, const tocha_options *options, void **binary,
                        uint64_t *size)
{
    nvrtcProgram prog;
    int st = compile_program(source, arch, options, NULL, &prog);
    if (st) return st;
    st = take_cubin(prog, binary, size);
    nv.destroy(&prog);
    if (!st) dump(source, arch, *binary, *size);
    return st;
}

/* A program's text of one kind (log or PTX), malloc'd and NUL-terminated, or NULL. */
static char *take_text(nvrtcProgram prog, nvrtcResult (*size_of)(nvrtcProgram, size_t *),
                       nvrtcResult (*get)(nvrtcProgram, char *))
{
    size_t n = 0;
    if (size_of(prog, &n) != NVRTC_SUCCESS) return NULL;
    char *text = malloc(n + 1);
    if (!text) return NULL;
    if (get(prog, text) != NVRTC_SUCCESS) n = 0;
    text[n] = '\0';
    return text;
}

int tocha_nvrtc_report(const char *source, const char *arch, const tocha_options *options, char **log,
                       char **ptx, void **cubin, uint64_t *cubin_size)
{
    nvrtcProgram prog;
    *log = *ptx = NULL;
    *cubin = NULL;
    int st = compile_program(source, arch, options, "--ptxas-options=-v", &prog);
    if (st) return st;
    *log = take_text(prog, nv.log_size, nv.log);
    *ptx = take_text(prog, nv.ptx_size, nv.ptx);
    st = take_cubin(prog, cubin, cubin_size);
    nv.destroy(&prog);
    if (!st && (!*log || !*ptx)) st = tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a report");
    if (st) {
        free(*log);
        free(*ptx);
        free(*cubin);
        *log = *ptx = NULL;
        *cubin = NULL;
    }
    return st;
}
