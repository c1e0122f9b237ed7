/*
** sim.c: the sim device kind, a CPU simulator of the CUDA execution model.
** A kernel's source is compiled by the host C++ compiler with a shim header for the CUDA
** built-ins (kernels/sim/tocha_sim.h), loaded from memory with dlopen, and its grid runs with
** blocks spread over the cores; a block's threads run one after another, or as fibers switched
** at each barrier for a kernel that has them (kernels/sim/tocha_sim.h).
*/
#include "internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A module's launcher (kernel.c writes it): runs blocks [first, last); non-zero, with the reason
** in error, when a block could not finish (a barrier some threads never reach). */
typedef int (*sim_launcher)(void **args, const unsigned *grid, const unsigned *block, unsigned shared_bytes,
                            unsigned long long first, unsigned long long last, char *error, unsigned long size);

#if defined(__x86_64__)
#define SIM_TARGET "sim-x86_64"
#elif defined(__aarch64__)
#define SIM_TARGET "sim-aarch64"
#else
#define SIM_TARGET "sim"
#endif

const char *tocha_sim_target(void) { return SIM_TARGET; }

/* ---- memory ---- */

/* TOCHA_SIM_MEMORY_LIMIT (bytes) caps each sim device's memory, so that running out of
** device memory can be tried on any machine. Allocations are whole 256-byte blocks of mapped
** pages before a guard page (sim_guard.c), which keeps their size. sim_in_use[ordinal] counts
** what each sim device has mapped. */
static atomic_ullong sim_in_use[TOCHA_MAX_SIM_DEVICES];
static pthread_once_t limit_once = PTHREAD_ONCE_INIT;
static unsigned long long sim_limit;

static char limit_error[160];

/* The whole number that text starts with: decimal digits only (no sign, no spaces), its end
   in *rest. False when text does not start with a digit or the number overflows. The
   environment readers below parse with it, so that they take and refuse the same things. */
static bool leading_count(const char *text, unsigned long long *value, char **rest)
{
    if (*text < '0' || *text > '9') return false;
    errno = 0;
    *value = strtoull(text, rest, 10);
    return errno == 0;
}

int tocha_sim_device_count(char *error, size_t size)
{
    const char *env = getenv("TOCHA_SIM_DEVICES");
    if (!env || !*env) return 2;
    unsigned long long n = 0;
    char *end = NULL;
    if (!leading_count(env, &n, &end) || *end || n < 1 || n > TOCHA_MAX_SIM_DEVICES) {
        snprintf(error, size, "TOCHA_SIM_DEVICES: expected a whole number from 1 to %d, got '%.40s'",
                 TOCHA_MAX_SIM_DEVICES, env);
        return 1;
    }
    return (int)n;
}

/* TOCHA_SIM_MEMORY_LIMIT: bytes, optionally with a K, M or G suffix (powers of 1024). A value
   that is not one is an error on every allocation, never silently no limit. */
static void read_limit(void)
{
    const char *env = getenv("TOCHA_SIM_MEMORY_LIMIT");
    sim_limit = 0;
    if (!env || !*env) return;
    unsigned long long v = 0;
    char *end = NULL;
    unsigned shift = 0;
    bool ok = leading_count(env, &v, &end);
    if (ok && (*end == 'K' || *end == 'k'))
        shift = 10, end++;
    else if (ok && (*end == 'M' || *end == 'm'))
        shift = 20, end++;
    else if (ok && (*end == 'G' || *end == 'g'))
        shift = 30, end++;
    if (!ok || *end || v == 0 || v > (~0ull >> shift)) {
        snprintf(limit_error, sizeof limit_error,
                 "TOCHA_SIM_MEMORY_LIMIT: expected a positive number of bytes (with K, M or G "
                 "allowed), got '%.60s'",
                 env);
        return;
    }
    sim_limit = v << shift;
}

/* Maps a new block of rounded bytes within the limit, counted in sim_in_use; NULL if it
** cannot. */
static char *map_counted(atomic_ullong *in_use, uint64_t rounded)
{
    unsigned long long now = atomic_fetch_add(in_use, rounded) + rounded;
    char *data = sim_limit == 0 || now <= sim_limit ? tocha_sim_map(rounded) : NULL;
    if (!data) atomic_fetch_sub(in_use, rounded);
    return data;
}

/* A cached block of the same mapped size, else a new mapping; when that fails (the limit, the
** process's mappings), the cache is given back and the mapping tried once more. sim_in_use
** counts every mapped block, cached ones included: what a device would call reserved. */
static int sim_alloc(tocha_device *d, uint64_t nbytes, uint64_t *out, bool *cached)
{
    pthread_once(&limit_once, read_limit);
    if (limit_error[0]) return tocha_fail(TOCHA_E_ARGUMENT, "%s", limit_error);
    uint64_t rounded = (nbytes + 255) & ~(uint64_t)255;
    atomic_ullong *in_use = &sim_in_use[d->ordinal];
    char *data = NULL;
    if (rounded >= nbytes) {
        data = tocha_sim_blocks_take(d->ordinal, rounded);
        *cached = data != NULL;
        if (!data) data = map_counted(in_use, rounded);
        if (!data && tocha_sim_blocks_cached(d->ordinal)) {
            atomic_fetch_sub(in_use, tocha_sim_blocks_empty(d->ordinal));
            data = map_counted(in_use, rounded);
        }
        /* Without a limit the host itself ran out: the other sim devices' cached blocks are
        ** host memory too. */
        if (!data && sim_limit == 0) {
            for (int i = 0; i < TOCHA_MAX_SIM_DEVICES; i++)
                if (i != d->ordinal) atomic_fetch_sub(&sim_in_use[i], tocha_sim_blocks_empty(i));
            data = map_counted(in_use, rounded);
        }
    }
    if (!data)
        return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of memory on %s allocating %llu bytes", d->name,
                          (unsigned long long)nbytes);
    *out = (uint64_t)(uintptr_t)data;
    return TOCHA_OK;
}

static void sim_release(tocha_device *d, uint64_t ptr, uint64_t nbytes)
{
    (void)nbytes;
    void *data = (void *)(uintptr_t)ptr;
    if (tocha_sim_blocks_put(d->ordinal, data)) return;
    atomic_fetch_sub(&sim_in_use[d->ordinal], tocha_sim_mapped_bytes(data));
    tocha_sim_unmap(data);
}

static void sim_reserved(tocha_device *d, uint64_t *reserved, uint64_t *cached)
{
    *reserved = atomic_load(&sim_in_use[d->ordinal]);
    *cached = tocha_sim_blocks_cached(d->ordinal);
}

static void sim_empty_cache(tocha_device *d)
{
    atomic_fetch_sub(&sim_in_use[d->ordinal], tocha_sim_blocks_empty(d->ordinal));
}

static int sim_write(tocha_device *d, uint64_t dst, const void *src, uint64_t n)
{
    (void)d;
    memcpy((void *)(uintptr_t)dst, src, n);
    return TOCHA_OK;
}

static int sim_read(tocha_device *d, void *dst, uint64_t src, uint64_t n)
{
    (void)d;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return TOCHA_OK;
}

static int sim_copy(tocha_device *d, uint64_t dst, uint64_t src, uint64_t n, void *stream)
{
    (void)d, (void)stream;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return TOCHA_OK;
}

static int sim_memory(tocha_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
    pthread_once(&limit_once, read_limit);
    if (sim_limit) {
        unsigned long long used = atomic_load(&sim_in_use[d->ordinal]);
        *total_bytes = sim_limit;
        *free_bytes = used < sim_limit ? sim_limit - used : 0;
        return TOCHA_OK;
    }
    struct sysinfo si;
    if (sysinfo(&si) != 0) return tocha_fail(TOCHA_E_IO, "sysinfo: %s", strerror(errno));
    *free_bytes = (uint64_t)si.freeram * si.mem_unit;
    *total_bytes = (uint64_t)si.totalram * si.mem_unit;
    return TOCHA_OK;
}

/* ---- modules ---- */

/* $TMPDIR, else /tmp. */
/* Removes what a killed process left in the temporary folder: names "tocha-sim-<pid>-..." and
** "tocha-cxx-<pid>-..." (the folders of builds, the modules being loaded) of this user whose
** process is gone. A folder holds only files. */
static void sweep_stale(const char *tmp)
{
    DIR *dir = opendir(tmp);
    if (!dir) return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (strncmp(de->d_name, "tocha-sim-", 10) != 0 && strncmp(de->d_name, "tocha-cxx-", 10) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(de->d_name + 10, &end, 10);
        if (pid <= 0 || *end != '-' || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", tmp, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || st.st_uid != geteuid()) continue;
        if (S_ISDIR(st.st_mode)) {
            DIR *inner = opendir(path);
            struct dirent *f;
            while (inner && (f = readdir(inner))) {
                if (strcmp(f->d_name, ".") == 0 || strcmp(f->d_name, "..") == 0) continue;
                char file[4700];
                snprintf(file, sizeof file, "%s/%s", path, f->d_name);
                unlink(file);
            }
            if (inner) closedir(inner);
            rmdir(path);
        } else if (S_ISREG(st.st_mode)) {
            unlink(path);
        }
    }
    closedir(dir);
}

/* The temporary folder: TMPDIR where it names a folder this process can write, else /tmp
** (as mkstemp's callers do: a TMPDIR that cannot be used must not break a warm cache). Its
** leftovers from killed processes are removed on first use. */
static pthread_once_t temp_once = PTHREAD_ONCE_INIT;
static char temp_path[4000];

static void find_temp(void)
{
    const char *dir = getenv("TMPDIR");
    struct stat st;
    bool usable = dir && *dir && strlen(dir) < sizeof temp_path && stat(dir, &st) == 0 &&
                  S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
    snprintf(temp_path, sizeof temp_path, "%s", usable ? dir : "/tmp");
    sweep_stale(temp_path);
}

static const char *temp_dir(void)
{
    pthread_once(&temp_once, find_temp);
    return temp_path;
}

static int sim_load(tocha_device *d, const void *binary, uint64_t size, const char *entry, void **module,
                    void **function)
{
    (void)d;
    /* dlopen needs a file, and one with a name of its own: glibc hands back an already
    ** loaded object for a path it has seen, so a reused /proc/self/fd/N would alias. */
    char path[4200];
    snprintf(path, sizeof path, "%s/tocha-sim-%ld-XXXXXX.so", temp_dir(), (long)getpid());
    int fd = mkstemps(path, 3);
    if (fd < 0) return tocha_fail(TOCHA_E_IO, "creating %s: %s", path, strerror(errno));
    const char *p = binary;
    uint64_t left = size;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n <= 0) {
            close(fd);
            unlink(path);
            return tocha_fail(TOCHA_E_IO, "writing a simulator module: %s", strerror(errno));
        }
        p += n;
        left -= (uint64_t)n;
    }
    close(fd);
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    unlink(path);
    if (!handle) return tocha_fail(TOCHA_E_DRIVER, "loading a simulator module: %s", dlerror());
    void *launcher = dlsym(handle, "tocha_sim_launch");
    if (!launcher || !dlsym(handle, entry)) {
        dlclose(handle);
        return tocha_fail(TOCHA_E_DRIVER, "simulator module lacks %s", entry);
    }
    *module = handle;
    *function = launcher;
    return TOCHA_OK;
}

/* ---- launches ---- */

/* A launch: its blocks are taken in chunks by the workers. A worker whose kernel faults (an
** access outside every allocation: sim_guard.c) records the address and takes the remaining
** blocks away, so that the launch stops as a GPU's does. */
typedef struct {
    sim_launcher run;
    void **args;
    unsigned grid[3], block[3], shared_bytes;
    unsigned long long blocks, chunk;
    atomic_ullong next;
    atomic_bool faulted;
    uintptr_t fault; /* the first faulting address, written by the worker that set faulted */
    atomic_bool failed;
    char error[320]; /* why a block could not finish, written by the worker that set failed */
} sim_job;

static void run_chunks(void *arg)
{
    sim_job *job = arg;
    for (;;) {
        unsigned long long first = atomic_fetch_add(&job->next, job->chunk);
        if (first >= job->blocks) break;
        unsigned long long last = first + job->chunk;
        if (last > job->blocks) last = job->blocks;
        char error[320];
        if (job->run(job->args, job->grid, job->block, job->shared_bytes, first, last, error, sizeof error)) {
            if (!atomic_exchange(&job->failed, true)) snprintf(job->error, sizeof job->error, "%s", error);
            atomic_store(&job->next, job->blocks);
            break;
        }
    }
}

static void *sim_worker(void *arg)
{
    sim_job *job = arg;
    uintptr_t address = 0;
    if (tocha_sim_guarded(run_chunks, job, &address)) {
        if (!atomic_exchange(&job->faulted, true)) job->fault = address;
        atomic_store(&job->next, job->blocks);
    }
    return NULL;
}

/* Worker threads for a launch: TOCHA_SIM_THREADS (1 to 256), else one per online CPU (at most
   256). Read once, like the memory limit; a value outside that range is an error on every
   launch (the device's figures then show the CPU count). */
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int sim_thread_count;
static char threads_error[160];

static void read_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    sim_thread_count = n < 1 ? 1 : n > 256 ? 256 : (int)n;
    const char *env = getenv("TOCHA_SIM_THREADS");
    if (!env || !*env) return;
    unsigned long long v = 0;
    char *end = NULL;
    if (!leading_count(env, &v, &end) || *end || v < 1 || v > 256)
        snprintf(threads_error, sizeof threads_error,
                 "TOCHA_SIM_THREADS: expected an integer from 1 to 256, got '%.60s'", env);
    else
        sim_thread_count = (int)v;
}

static int sim_threads(void)
{
    pthread_once(&threads_once, read_threads);
    return sim_thread_count;
}

static int sim_launch(tocha_device *d, void *function, const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared_bytes, void **args, void *stream)
{
    (void)d, (void)stream; /* work runs when it is queued, so every stream's order holds */
    /* The launch's dynamic shared memory is only its size here (dynamic_shared_bytes() in a
    ** kernel): a kernel that uses it has a path of its own for the simulator. */
    sim_job job = {.run = (sim_launcher)function, .args = args, .shared_bytes = shared_bytes};
    for (int i = 0; i < 3; i++) {
        job.grid[i] = grid[i];
        job.block[i] = block[i];
    }
    job.blocks = (unsigned long long)grid[0] * grid[1] * grid[2];
    unsigned long long threads_per_block = (unsigned long long)block[0] * block[1] * block[2];
    int workers = sim_threads();
    if (threads_error[0]) return tocha_fail(TOCHA_E_ARGUMENT, "%s", threads_error);
    atomic_init(&job.next, 0);
    atomic_init(&job.faulted, false);
    atomic_init(&job.failed, false);
    /* Small grids run on the calling thread: starting threads would cost more than the work. */
    if (workers == 1 || job.blocks * threads_per_block < 16384) {
        job.chunk = job.blocks;
        sim_worker(&job);
    } else {
        if ((unsigned long long)workers > job.blocks) workers = (int)job.blocks;
        job.chunk = job.blocks / ((unsigned long long)workers * 8);
        if (job.chunk == 0) job.chunk = 1;
        pthread_t threads[256];
        int started = 0;
        for (int i = 1; i < workers; i++)
            if (pthread_create(&threads[started], NULL, sim_worker, &job) == 0) started++;
        sim_worker(&job);
        for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    }
    if (atomic_load(&job.faulted))
        return tocha_fail(TOCHA_E_DRIVER,
                          "sim: illegal memory access at 0x%llx (outside every allocation): the launch "
                          "stopped there, and what it wrote before stays",
                          (unsigned long long)job.fault); /* read after the workers joined */
    if (atomic_load(&job.failed)) return tocha_fail(TOCHA_E_DRIVER, "%s", job.error);
    return TOCHA_OK;
}

static int sim_synchronize(tocha_device *d)
{
    (void)d; /* launches are synchronous */
    return TOCHA_OK;
}

/* ---- events: the host clock, since the simulator runs in the caller's time ---- */

static int sim_event_new(tocha_device *d, void **out)
{
    (void)d;
    double *t = calloc(1, sizeof *t);
    if (!t) return tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for an event");
    *out = t;
    return TOCHA_OK;
}

static void sim_event_destroy(tocha_device *d, void *e)
{
    (void)d;
    free(e);
}

static int sim_event_record(tocha_device *d, void *e, void *stream)
{
    (void)d, (void)stream;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *(double *)e = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    return TOCHA_OK;
}

static int sim_event_elapsed(tocha_device *d, void *start, void *end, double *ms)
{
    (void)d;
    *ms = *(double *)end - *(double *)start;
    return TOCHA_OK;
}

/* ---- streams: work runs when it is queued, so a stream is only its identity ---- */

static int sim_stream_new(tocha_device *d, void **out)
{
    (void)d;
    *out = malloc(1);
    return *out ? TOCHA_OK : tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for a stream");
}

static void sim_stream_destroy(tocha_device *d, void *stream)
{
    (void)d;
    free(stream);
}

static int sim_stream_synchronize(tocha_device *d, void *stream)
{
    (void)d, (void)stream;
    return TOCHA_OK;
}

static int sim_stream_wait_event(tocha_device *d, void *stream, void *event)
{
    (void)d, (void)stream, (void)event; /* the event's work is done already */
    return TOCHA_OK;
}

static const tocha_backend sim_backend = {
    .alloc = sim_alloc,
    .release = sim_release,
    .reserved = sim_reserved,
    .empty_cache = sim_empty_cache,
    .write = sim_write,
    .read = sim_read,
    .copy = sim_copy,
    .load = sim_load,
    .launch = sim_launch,
    .synchronize = sim_synchronize,
    .memory = sim_memory,
    .event_new = sim_event_new,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .event_elapsed = sim_event_elapsed,
    .stream_new = sim_stream_new,
    .stream_destroy = sim_stream_destroy,
    .stream_synchronize = sim_stream_synchronize,
    .stream_wait_event = sim_stream_wait_event,
};

void tocha_sim_init(tocha_device *d, int index, int ordinal, int first_sim_index)
{
    memset(d, 0, sizeof *d);
    d->index = index;
    d->load_slot = first_sim_index;
    d->ordinal = ordinal;
    d->kind = TOCHA_DEVICE_SIM;
    d->backend = &sim_backend;
    d->multiprocessors = sim_threads();
    if (ordinal == 0)
        snprintf(d->name, sizeof d->name, "sim");
    else
        snprintf(d->name, sizeof d->name, "sim:%d", ordinal);
    snprintf(d->product, sizeof d->product, "CPU simulator, %d threads", d->multiprocessors);
    snprintf(d->target, sizeof d->target, "%s", SIM_TARGET);
    /* A kernel's shared memory is held to the compile target's limit, so that what runs here
    ** launches on that GPU too (sm_90's where tocha has no table for the target). */
    const tocha_arch *arch = tocha_arch_find(tocha_arch_default());
    if (!arch) arch = tocha_arch_find("sm_90");
    d->shared_per_block = arch->shared_per_block;
    d->threads_per_sm = arch->threads_per_sm;
}

/* ---- the host compiler ---- */

/* The simulator's compile options: used to compile and hashed into cache keys. */
static const char *const sim_flags[] = {"-std=c++17", "-O2",      "-fPIC",         "-shared",
                                        "-pthread",   "-DTOCHA_SIM=1", "-fno-diagnostics-show-caret"};
#define SIM_FLAG_COUNT (sizeof sim_flags / sizeof sim_flags[0])

const char *tocha_sim_options(void)
{
    static char joined[128];
    if (!joined[0]) tocha_join_words(sim_flags, SIM_FLAG_COUNT, joined, sizeof joined);
    return joined;
}

static const char *sim_cxx(void)
{
    const char *env = getenv("TOCHA_SIM_CXX");
    return env && *env ? env : "c++";
}

/* Runs argv with stdout and stderr sent to log_path; returns the exit status or -1. */
static int run_command(char *const argv[], const char *log_path)
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return -1;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads a whole file into a malloc'd buffer (NUL-terminated); NULL on failure. */
static char *read_file(const char *path, uint64_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *grown = realloc(data, cap);
            if (!grown) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = grown;
        }
        size_t n = fread(data + len, 1, 65536, f);
        len += n;
        if (n < 65536) break;
    }
    fclose(f);
    data[len] = '\0';
    if (size) *size = len;
    return data;
}

static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static char identity[512];
static char identity_error[4200]; /* why the identity could not be asked for, when not the compiler */

static void find_identity(void)
{
    char dir[4100];
    snprintf(dir, sizeof dir, "%s/tocha-cxx-%ld-XXXXXX", temp_dir(), (long)getpid());
    if (!mkdtemp(dir)) {
        snprintf(
            identity_error, sizeof identity_error,
            "the simulator cannot make a temporary folder in %s: %s (set TMPDIR to a writable folder)",
            temp_dir(), strerror(errno));
        return;
    }
    char log[4200];
    snprintf(log, sizeof log, "%s/version", dir);
    char *argv[] = {(char *)sim_cxx(), "--version", NULL};
    if (run_command(argv, log) == 0) {
        char *text = read_file(log, NULL);
        if (text) {
            text[strcspn(text, "\n")] = '\0';
            snprintf(identity, sizeof identity, "%s: %s", sim_cxx(), text);
            free(text);
        }
    }
    unlink(log);
    rmdir(dir);
}

int tocha_sim_compiler_identity(const char **out)
{
    pthread_once(&identity_once, find_identity);
    if (identity_error[0]) return tocha_fail(TOCHA_E_IO, "%s", identity_error);
    if (!identity[0])
        return tocha_fail(TOCHA_E_UNAVAILABLE,
                          "the simulator's C++ compiler '%s' could not be run (install g++ or "
                          "set TOCHA_SIM_CXX)",
                          sim_cxx());
    *out = identity;
    return TOCHA_OK;
}

/* The host compiler's spelling of a macro option: -D and -U as they are, the long forms as -D
** and -U (malloc'd). */
static char *macro_flag(const char *opt)
{
    const char *def = "--define-macro=", *undef = "--undefine-macro=";
    tocha_text t = {0};
    if (strncmp(opt, def, strlen(def)) == 0)
        tocha_text_appendf(&t, "-D%s", opt + strlen(def));
    else if (strncmp(opt, undef, strlen(undef)) == 0)
        tocha_text_appendf(&t, "-U%s", opt + strlen(undef));
    else
        tocha_text_append(&t, opt);
    return tocha_text_take(&t);
}

int tocha_sim_compile(const char *source, const tocha_options *options, void **binary, uint64_t *size)
{
    const char *ident;
    int st = tocha_sim_compiler_identity(&ident);
    if (st) return st;
    const char *include = tocha_cuda_include_dir();
    if (!include)
        return tocha_fail(TOCHA_E_UNAVAILABLE, "the CUDA toolkit headers (cuda_fp16.h) were not "
                                               "found: set CUDA_HOME");
    char dir[4100];
    snprintf(dir, sizeof dir, "%s/tocha-sim-%ld-XXXXXX", temp_dir(), (long)getpid());
    if (!mkdtemp(dir)) return tocha_fail(TOCHA_E_IO, "mkdtemp %s: %s", dir, strerror(errno));
    char src_path[4200], so_path[4200], log_path[4200], include_opt[1100];
    snprintf(src_path, sizeof src_path, "%s/kernel.cpp", dir);
    snprintf(so_path, sizeof so_path, "%s/kernel.so", dir);
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    snprintf(include_opt, sizeof include_opt, "-I%s", include);
    st = TOCHA_OK;
    FILE *f = fopen(src_path, "w");
    if (!f || fputs(source, f) < 0 || fclose(f) != 0) {
        st = tocha_fail(TOCHA_E_IO, "writing %s: %s", src_path, strerror(errno));
        goto done;
    }
    char *argv[SIM_FLAG_COUNT + TOCHA_MAX_OPTIONS + 6];
    char *macros[TOCHA_MAX_OPTIONS];
    int n_macros = 0, rc = -1;
    size_t argc = 0;
    argv[argc++] = (char *)sim_cxx();
    for (size_t i = 0; i < SIM_FLAG_COUNT; i++) argv[argc++] = (char *)sim_flags[i];
    argv[argc++] = include_opt;
    /* After tocha's own, in the order given: a -U then undoes a -D before it, as with nvcc. */
    for (int i = 0; options && i < options->count; i++) {
        if (!tocha_option_is_macro(options->items[i])) continue;
        char *flag = macro_flag(options->items[i]);
        if (!flag) {
            st = tocha_fail(TOCHA_E_OUT_OF_MEMORY, "out of host memory for compile options");
            goto macros_done;
        }
        macros[n_macros++] = flag;
        argv[argc++] = flag;
    }
    argv[argc++] = "-o";
    argv[argc++] = so_path;
    argv[argc++] = src_path;
    argv[argc] = NULL;
    rc = run_command(argv, log_path);
macros_done:
    for (int i = 0; i < n_macros; i++) free(macros[i]);
    if (st) goto done;
    if (rc != 0) {
        char *log = read_file(log_path, NULL);
        char header[300];
        snprintf(header, sizeof header, "the simulator's compiler (%.200s) failed to compile:", sim_cxx());
        char *text = tocha_compile_diagnostic(header, "sim", log, source, false);
        free(log);
        st = tocha_fail(TOCHA_E_COMPILE, "%s", text ? text : "the simulator's compiler failed");
        free(text);
        goto done;
    }
    *binary = read_file(so_path, size);
    if (!*binary) st = tocha_fail(TOCHA_E_IO, "reading %s: %s", so_path, strerror(errno));
done:
    unlink(src_path);
    unlink(so_path);
    unlink(log_path);
    rmdir(dir);
    return st;
}
