// tocha_sim.h: the CUDA built-ins for the CPU simulator.
// The simulator compiles a kernel's own source with the host C++ compiler; this header makes
// the subset tocha's kernels use mean the same on the host. A block's threads run on one host
// thread: one after another when the kernel has no barrier, else as fibers (each with a stack
// of its own) switched at every __syncthreads, so that a barrier means what it means on the
// GPU: no thread passes it before every thread of the block has reached it. __shared__
// variables are per host thread, so the threads of one block share them.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE // its longjmp check refuses the jumps between fibers' stacks
#endif
#include <vector_types.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include <setjmp.h>
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static thread_local

static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;

using std::max;
using std::min;

static inline unsigned int __umulhi(unsigned int a, unsigned int b)
{
    return (unsigned int)(((unsigned long long)a * b) >> 32);
}
template <typename T> static inline T __ldg(const T *p) { return *p; }
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x (x the low four).
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s)
{
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int n = 0; n < 4; ++n) r |= (unsigned int)((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
    return r;
}
// The 64 bits hi:lo shifted right by shift % 32, low word.
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift)
{
    return (unsigned int)((((unsigned long long)hi << 32) | lo) >> (shift & 31u));
}
// The host compiler does not contract a * b + c unless asked to, so these are plain.
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }

namespace tocha_sim {
// The launch's dynamic shared memory in bytes: only a size here, which a kernel reads to know
// what the launch gave it (tocha::dynamic_shared_bytes()).
static thread_local unsigned dynamic_shared;

// A buffer of at least `bytes` for the shared memory of the one warp that runs at a time on
// this host thread (tocha::warp_shared_slots()), 128-byte aligned.
inline void *shared_buffer(size_t bytes)
{
    static thread_local std::vector<uint4> slots;
    const size_t n = bytes / sizeof(uint4) + 8;
    if (slots.size() < n) slots.resize(n);
    return (void *)(((uintptr_t)slots.data() + 127u) & ~(uintptr_t)127u);
}

// ---- a block's threads as fibers ----

constexpr unsigned MAX_THREADS = 1024;
// A fiber's stack: 64 KiB for the thread, and up to 32 KiB more below its start, which moves
// by a cache line from fiber to fiber: stacks that all began 96 KiB apart would put every
// fiber's top frames in the same cache sets, and a barrier visits them all.
constexpr size_t FIBER_STACK = 96 * 1024;
static inline size_t stack_offset(unsigned i) { return (size_t)(i % 512) * 64; }

// The switch between fibers: on x86-64 a few instructions (the callee-saved registers pushed
// on the stack being left, its stack pointer stored, the other's loaded and its registers
// popped); elsewhere _setjmp/_longjmp, with makecontext to start a stack.
#if defined(__x86_64__)
extern "C" void tocha_sim_switch(void **from, void *to);
__asm__(".text\n"
        ".hidden tocha_sim_switch\n"
        ".globl tocha_sim_switch\n"
        ".type tocha_sim_switch, @function\n"
        "tocha_sim_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size tocha_sim_switch, .-tocha_sim_switch\n");
struct context {
    void *sp;
};
static inline void switch_to(context &from, context &to) { tocha_sim_switch(&from.sp, to.sp); }
// A context that starts entry() on the stack [stack, stack + size): six zero registers, then
// entry as the return address, 16-byte aligned as a call leaves it.
static inline void start_context(context &c, void *stack, size_t size, void (*entry)())
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;         // entry's return address: it never returns
    *--sp = (void *)entry;   // where the switch's ret goes
    for (int i = 0; i < 6; ++i) *--sp = nullptr;
    c.sp = sp;
}
#else
struct context {
    jmp_buf jump;
    bool fresh;
    ucontext_t start;
};
static inline void switch_to(context &from, context &to)
{
    if (_setjmp(from.jump)) return;
    if (to.fresh) {
        to.fresh = false;
        setcontext(&to.start);
    }
    _longjmp(to.jump, 1);
}
static inline void start_context(context &c, void *stack, size_t size, void (*entry)())
{
    getcontext(&c.start);
    c.start.uc_stack.ss_sp = stack;
    c.start.uc_stack.ss_size = size;
    c.start.uc_link = nullptr;
    makecontext(&c.start, entry, 0);
    c.fresh = true;
}
#endif

struct fiber {
    context ctx;
    void *stack;
    int state;   // RUNNABLE, AT_BARRIER or RETURNED
    int barrier; // which barrier it waits at (its __LINE__ in the unit)
    int value;   // the predicate it gave a counting barrier
    uint3 index; // its threadIdx in the block running
};
enum { RUNNABLE, AT_BARRIER, RETURNED };

// The fibers of the block running on this host thread. A fiber runs blocks' threads one after
// another in a loop (body, then back to the scheduler), so that its stack is had once per host
// thread; a fiber left in the middle of a thread (a fault, a barrier error) starts afresh.
struct fibers {
    fiber *f = nullptr;
    unsigned ready = 0;  // fibers whose context starts the loop (or is in it, between threads)
    unsigned current = 0;
    unsigned n = 0;      // the block's threads
    bool clean = true;   // false while a block runs
    context scheduler;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    int result = 0;      // what the last counting barrier returns
    ~fibers()
    {
        if (!f) return;
        for (unsigned i = 0; i < MAX_THREADS; ++i)
            if (f[i].stack) munmap(f[i].stack, FIBER_STACK);
        delete[] f;
    }
};
static thread_local fibers team;

// Leaves fiber `from` for the next runnable one of the block, or for the scheduler once every
// thread has run to its barrier or its end: one switch a thread per barrier.
static inline void pass_on(fiber &from)
{
    for (unsigned j = team.current + 1; j < team.n; ++j) {
        fiber &g = team.f[j];
        if (g.state != RUNNABLE) continue;
        threadIdx = g.index;
        team.current = j;
        switch_to(from.ctx, g.ctx);
        return;
    }
    switch_to(from.ctx, team.scheduler);
}

static void fiber_main()
{
    fiber *self = &team.f[team.current];
    for (;;) {
        team.body(team.arg);
        self->state = RETURNED;
        pass_on(*self);
    }
}

// Readies fibers [team.ready, n): false when a stack cannot be had.
static bool ready_fibers(unsigned n)
{
    if (!team.f) team.f = new fiber[MAX_THREADS]();
    for (unsigned i = team.ready; i < n; ++i) {
        fiber &f = team.f[i];
        if (!f.stack) {
            void *p = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) return false;
            f.stack = p;
        }
        start_context(f.ctx, f.stack, FIBER_STACK - stack_offset(i), fiber_main);
        team.ready = i + 1;
    }
    return true;
}

// The barrier: the calling fiber waits at `barrier` until every thread of the block has
// reached it; returns how many gave a true value.
static inline int barrier(int at, int value)
{
    fiber &f = team.f[team.current];
    f.state = AT_BARRIER;
    f.barrier = at;
    f.value = value;
    pass_on(f);
    return team.result;
}

// Runs the block's n threads as fibers; false, with the reason in error, when a barrier cannot
// be passed (threads that returned or wait elsewhere).
template <typename Body>
static bool run_block_fibers(Body &body, const unsigned *block, unsigned n, char *error, size_t size)
{
    if (!team.clean) team.ready = 0; // fibers left mid-thread: start them afresh
    if (team.ready < n && !ready_fibers(n)) {
        snprintf(error, size, "sim: no memory for the stacks of %u threads", n);
        return false;
    }
    team.clean = false;
    team.body = [](void *a) { (*(Body *)a)(); };
    team.arg = &body;
    team.n = n;
    for (unsigned i = 0; i < n; ++i) {
        fiber &f = team.f[i];
        f.state = RUNNABLE;
        f.index.x = i % block[0];
        f.index.y = i / block[0] % block[1];
        f.index.z = i / (block[0] * block[1]);
    }
    for (;;) {
        // Every runnable thread runs to its next barrier or its end, each passing on to the
        // next; then the barrier is checked.
        for (unsigned i = 0; i < n; ++i) {
            fiber &f = team.f[i];
            if (f.state != RUNNABLE) continue;
            threadIdx = f.index;
            team.current = i;
            switch_to(team.scheduler, f.ctx); // back when the last runnable one has passed on
            break;
        }
        unsigned waiting = 0, count = 0, other = 0;
        int at = 0;
        for (unsigned i = 0; i < n; ++i) {
            const fiber &f = team.f[i];
            if (f.state != AT_BARRIER) continue;
            if (waiting++ == 0) at = f.barrier;
            else if (f.barrier != at) other++;
            count += f.value != 0;
        }
        if (waiting == 0) break;
        if (waiting < n || other) {
            if (waiting < n)
                snprintf(error, size, "__syncthreads: %u of the block's %u threads wait at a barrier that the "
                         "other %u returned without reaching (block %u, %u, %u): on a GPU it hangs or goes wrong",
                         waiting, n, n - waiting, blockIdx.x, blockIdx.y, blockIdx.z);
            else
                snprintf(error, size, "__syncthreads: the block's threads wait at different barriers (block %u, %u, "
                         "%u): on a GPU it hangs or goes wrong", blockIdx.x, blockIdx.y, blockIdx.z);
            team.ready = 0; // fibers left mid-thread
            team.clean = true;
            return false;
        }
        team.result = (int)count;
        for (unsigned i = 0; i < n; ++i) team.f[i].state = RUNNABLE;
    }
    team.clean = true;
    return true;
}

// Runs blocks [first, last) of the grid: each thread of a block in turn, or, for a kernel with
// barriers, as fibers. false, with the reason in error (a string of `size` bytes), when a block
// could not finish.
template <bool Barriers, typename Body>
inline bool run(const unsigned *grid, const unsigned *block, unsigned shared_bytes,
                unsigned long long first, unsigned long long last, char *error, size_t size, Body body)
{
    dynamic_shared = shared_bytes;
    gridDim = dim3(grid[0], grid[1], grid[2]);
    blockDim = dim3(block[0], block[1], block[2]);
    const unsigned n = block[0] * block[1] * block[2];
    for (unsigned long long b = first; b < last; ++b) {
        blockIdx.x = (unsigned)(b % grid[0]);
        blockIdx.y = (unsigned)(b / grid[0] % grid[1]);
        blockIdx.z = (unsigned)(b / ((unsigned long long)grid[0] * grid[1]));
        if (Barriers) {
            if (!run_block_fibers(body, block, n, error, size)) return false;
            continue;
        }
        for (unsigned z = 0; z < block[2]; ++z)
            for (unsigned y = 0; y < block[1]; ++y)
                for (unsigned x = 0; x < block[0]; ++x) {
                    threadIdx.x = x;
                    threadIdx.y = y;
                    threadIdx.z = z;
                    body();
                }
    }
    return true;
}
} // namespace tocha_sim

#define __syncthreads() ((void)tocha_sim::barrier(__LINE__, 0))
#define __syncthreads_count(p) tocha_sim::barrier(__LINE__, (p) != 0)
#define __syncthreads_and(p) (tocha_sim::barrier(__LINE__, (p) != 0) == (int)(blockDim.x * blockDim.y * blockDim.z))
#define __syncthreads_or(p) (tocha_sim::barrier(__LINE__, (p) != 0) != 0)
