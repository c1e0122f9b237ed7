// fibers.h: a block's threads as fibers, for kernels that synchronise (block barriers, warp
// operations). Each thread runs on a stack of its own until it must wait: at a barrier, until
// every thread of the block has reached it; at a warp operation (shuffles, votes, __syncwarp),
// until every lane its mask names has reached one, when the values are exchanged. A thread
// that waits passes on directly to the next runnable one; the scheduler only steps in when no
// thread of the block can run, to release a barrier or to report why none can be released
// (on a GPU that kernel would hang or go wrong).
namespace tocha_sim {

constexpr unsigned MAX_THREADS = 1024;
constexpr unsigned WARP = 32;
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

// The warp operations, as a lane waiting at one records it.
enum warp_op {
    OP_SYNC,       // __syncwarp
    OP_SHUFFLE,    // __shfl*_sync: value from lane j, j from `arg` and `control` as PTX's shfl
    OP_BALLOT,     // __ballot_sync, __any_sync, __all_sync, __uni_sync: value[0] the predicate
    OP_MATCH_ANY,  // __match_any_sync
    OP_MATCH_ALL,  // __match_all_sync
    OP_REDUCE,     // __reduce_*_sync: `arg` the reduce_kind
    OP_ACTIVEMASK, // __activemask: the lanes waiting at the same line once none of the warp can run
};
enum reduce_kind { RED_ADD, RED_MIN, RED_MAX, RED_UMIN, RED_UMAX, RED_AND, RED_OR, RED_XOR };
enum shuffle_mode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };

struct warp_call {
    int op;                      // a warp_op
    const char *name;            // the intrinsic's name, for errors
    int line;                    // its source line
    unsigned mask;               // the lanes it names (those of the block only)
    int mode;                    // shuffles: a shuffle_mode
    unsigned control;            // shuffles: PTX's c operand (segment mask << 8 | clamp)
    int arg;                     // shuffles: the lane, delta or xor mask; reduce: the kind
    unsigned long long value[2]; // what the lane gives (up to 16 bytes, zero-padded)
    unsigned long long result[2];
    int predicate;               // match_all's second result
};

// What a barrier visits of each thread, kept small (two to a cache line): a 1024-thread block
// passes every fiber at every barrier.
struct fiber {
    context ctx;
    int state;   // RUNNABLE, AT_BARRIER, AT_WARP or RETURNED
    int barrier; // which barrier it waits at (its __LINE__ in the unit)
    int value;   // the predicate it gave a counting barrier
    uint3 index; // its threadIdx in the block running
};
enum { RUNNABLE, AT_BARRIER, AT_WARP, RETURNED };

// The fibers of the block running on this host thread. A fiber runs blocks' threads one after
// another in a loop (body, then back to the scheduler), so that its stack is had once per host
// thread; a fiber left in the middle of a thread (a fault, an error) starts afresh. All zero
// to begin with and without a destructor, so that the host compiler gives it no per-access
// initialisation check: the stacks are given back by `stacks_owner` below.
struct fibers {
    fiber *f;
    void **stack;     // each fiber's stack
    warp_call *calls; // each fiber's warp operation, while it waits at one
    unsigned ready;   // fibers whose context starts the loop (or is in it, between threads)
    unsigned current;
    unsigned n;       // the block's threads
    unsigned runnable;
    bool running;     // a block runs (its fibers may be mid-thread)
    bool failed;      // a thread stopped the block (error holds why)
    context scheduler;
    void (*body)(void *);
    void *arg;
    int result;       // what the last counting barrier returns
    unsigned spins;   // atomics the running thread did since it last let others run
    unsigned stalled; // turns given up by spinning threads since a thread last waited or returned
    unsigned arrived[MAX_THREADS / WARP]; // each warp's lanes waiting at a warp operation
    char error[320];
};
static thread_local fibers team;

// Gives a host thread's fiber stacks back when the thread ends.
struct stacks_owner {
    ~stacks_owner()
    {
        if (!team.f) return;
        for (unsigned i = 0; i < MAX_THREADS; ++i)
            if (team.stack[i]) munmap(team.stack[i], FIBER_STACK);
        delete[] team.f;
        delete[] team.stack;
        delete[] team.calls;
        team.f = nullptr;
    }
};

// Leaves fiber `from` for the next runnable one of the block, or for the scheduler once none
// after it can run: one switch a thread per wait.
static inline void pass_on(fiber &from)
{
    team.spins = 0;
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
        team.runnable--;
        team.stalled = 0;
        pass_on(*self);
    }
}

// Stops the block from inside a thread: the launch fails with the message. Never returns.
__attribute__((format(printf, 1, 2), noreturn)) static void stop_block(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vsnprintf(team.error, sizeof team.error, format, ap);
    va_end(ap);
    team.failed = true;
    switch_to(team.f[team.current].ctx, team.scheduler);
    __builtin_unreachable();
}

// A thread of a kernel that runs without fibers stops its launch by a jump back into run().
static thread_local jmp_buf plain_stop;
static thread_local char plain_error[320];

// Stops the block from any thread, with fibers or without: the launch fails with the message,
// as a GPU's launch fails at a trap or a failed assert. Never returns.
__attribute__((format(printf, 1, 2), noreturn)) static void trap(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    char message[320];
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    if (team.running)
        stop_block("%s (block %u, %u, %u, thread %u, %u, %u)", message, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
                   threadIdx.y, threadIdx.z);
    snprintf(plain_error, sizeof plain_error, "%s", message);
    longjmp(plain_stop, 1);
}

// Readies fibers [team.ready, n): false when a stack cannot be had.
static bool ready_fibers(unsigned n)
{
    if (!team.f) {
        static thread_local stacks_owner owner;
        (void)owner;
        team.f = new fiber[MAX_THREADS]();
        team.stack = new void *[MAX_THREADS]();
        team.calls = new warp_call[MAX_THREADS]();
    }
    for (unsigned i = team.ready; i < n; ++i) {
        fiber &f = team.f[i];
        if (!team.stack[i]) {
            void *p = mmap(nullptr, FIBER_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) return false;
            team.stack[i] = p;
        }
        start_context(f.ctx, team.stack[i], FIBER_STACK - stack_offset(i), fiber_main);
        team.ready = i + 1;
    }
    return true;
}

// A wait in a kernel the simulator runs without fibers: its source does not name the wait
// (kernel.c picks fibers by the names in the source; a wait reached through a macro defined
// elsewhere is not seen), so no thread could wait for another. Fails the launch.
__attribute__((noreturn, noinline)) static void not_as_fibers(const char *name)
{
    trap("%s: the simulator runs this kernel's threads one after another, since its source names no "
         "barrier, warp operation, atomic or group (a wait reached through a macro from outside the "
         "source is not seen): name one in the source",
         name);
}

// The barrier: the calling fiber waits at `barrier` until every thread of the block has
// reached it; returns how many gave a true value.
static inline int barrier(int at, int value)
{
    if (!team.running) not_as_fibers("__syncthreads");
    fiber &f = team.f[team.current];
    f.state = AT_BARRIER;
    f.barrier = at;
    f.value = value;
    team.runnable--;
    team.stalled = 0;
    pass_on(f);
    return team.result;
}

// Called at each atomic: a thread that does many atomics without waiting lets the block's other
// threads run, so that a spin lock or a flag that another thread of the block releases makes
// progress, as threads of a block do on a GPU. A block whose threads only spin for millions of
// turns (every other thread waiting or returned) would hang on a GPU: the launch fails.
constexpr unsigned SPINS_PER_TURN = 64, STALLED_TURNS = 1u << 20;
static inline void spin_point()
{
    if (!team.running || ++team.spins < SPINS_PER_TURN) return;
    if (++team.stalled > STALLED_TURNS)
        stop_block("threads of the block spin on atomics while none of its other threads can run (block %u, %u, "
                   "%u): on a GPU it hangs",
                   blockIdx.x, blockIdx.y, blockIdx.z);
    pass_on(team.f[team.current]);
}

// The lanes of warp w that the block has.
static inline unsigned lanes_of(unsigned w)
{
    const unsigned left = team.n - w * WARP;
    return left >= WARP ? 0xffffffffu : (1u << left) - 1u;
}

// Lanes as text: "0-15, 17, 20-31".
static inline const char *lane_list(unsigned mask, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (unsigned l = 0; l < WARP && used < size; ++l) {
        if (!(mask >> l & 1u)) continue;
        unsigned e = l;
        while (e + 1 < WARP && (mask >> (e + 1) & 1u)) ++e;
        int k = e == l ? snprintf(out + used, size - used, "%s%u", used ? ", " : "", l)
                       : snprintf(out + used, size - used, "%s%u-%u", used ? ", " : "", l, e);
        if (k < 0) break;
        used += (size_t)k;
        l = e;
    }
    return out;
}

// The lane a shuffle reads, as PTX's shfl.sync computes it from b and c; the lane's own
// when the source is outside its segment.
static inline unsigned shuffle_source(unsigned lane, int mode, unsigned b, unsigned c)
{
    const int l = (int)lane, bval = (int)(b & 31u), cval = (int)(c & 31u), seg = (int)((c >> 8) & 31u);
    const int max_lane = (l & seg) | (cval & ~seg), min_lane = l & seg;
    int j = l;
    bool ok = false;
    switch (mode) {
    case SHFL_UP: j = l - bval; ok = j >= max_lane; break;
    case SHFL_DOWN: j = l + bval; ok = j <= max_lane; break;
    case SHFL_XOR: j = l ^ bval; ok = j <= max_lane; break;
    default: j = min_lane | (bval & ~seg); ok = j <= max_lane; break;
    }
    return ok ? (unsigned)j : lane;
}

static inline unsigned reduce_step(int kind, unsigned a, unsigned b)
{
    switch (kind) {
    case RED_ADD: return a + b;
    case RED_MIN: return (int)a < (int)b ? a : b;
    case RED_MAX: return (int)a > (int)b ? a : b;
    case RED_UMIN: return a < b ? a : b;
    case RED_UMAX: return a > b ? a : b;
    case RED_AND: return a & b;
    case RED_OR: return a | b;
    default: return a ^ b;
    }
}

// Every lane of `mask` in warp w waits at the operation lead waits at: exchange the values and
// let them run.
static void resolve_warp(unsigned w, const warp_call &lead)
{
    fiber *lane = team.f + w * WARP;
    warp_call *call = team.calls + w * WARP;
    const unsigned mask = lead.mask;
    char list[160];
    for (unsigned l = 0; l < WARP; ++l) {
        if (!(mask >> l & 1u)) continue;
        const warp_call &c = call[l];
        if (c.op != lead.op || c.mask != mask)
            stop_block("%s: lane %u of warp %u waits at %s (line %d, mask 0x%08x) where lanes %s wait at %s (line %d, "
                       "mask 0x%08x) (block %u, %u, %u): on a GPU it hangs or goes wrong",
                       lead.name, l, w, c.name, c.line, c.mask, lane_list(mask & ~(1u << l), list, sizeof list),
                       lead.name, lead.line, mask, blockIdx.x, blockIdx.y, blockIdx.z);
    }
    unsigned ballot = 0;
    if (lead.op == OP_BALLOT)
        for (unsigned l = 0; l < WARP; ++l)
            if ((mask >> l & 1u) && call[l].value[0]) ballot |= 1u << l;
    unsigned reduced = 0;
    bool first = true;
    if (lead.op == OP_REDUCE)
        for (unsigned l = 0; l < WARP; ++l) {
            if (!(mask >> l & 1u)) continue;
            const unsigned v = (unsigned)call[l].value[0];
            reduced = first ? v : reduce_step(lead.arg, reduced, v);
            first = false;
        }
    for (unsigned l = 0; l < WARP; ++l) {
        if (!(mask >> l & 1u)) continue;
        warp_call &c = call[l];
        switch (c.op) {
        case OP_SHUFFLE: {
            const unsigned j = shuffle_source(l, c.mode, (unsigned)c.arg, c.control);
            // A source lane the mask leaves out gives an undefined value on a GPU: the lane's own.
            const warp_call &from = (mask >> j & 1u) ? call[j] : c;
            c.result[0] = from.value[0];
            c.result[1] = from.value[1];
            break;
        }
        case OP_BALLOT: c.result[0] = ballot; break;
        case OP_REDUCE: c.result[0] = reduced; break;
        case OP_MATCH_ANY:
        case OP_MATCH_ALL: {
            unsigned same = 0;
            for (unsigned k = 0; k < WARP; ++k)
                if ((mask >> k & 1u) && call[k].value[0] == c.value[0] && call[k].value[1] == c.value[1])
                    same |= 1u << k;
            c.predicate = same == mask;
            c.result[0] = c.op == OP_MATCH_ANY ? same : same == mask ? mask : 0u;
            break;
        }
        default: break;
        }
        lane[l].state = RUNNABLE;
        team.runnable++;
    }
    team.arrived[w] &= ~mask;
}

// Once no lane of warp w can run, the lanes waiting at __activemask learn which of them wait at
// the same one: those are the lanes a GPU would run together there. True if any did.
static bool resolve_activemask(unsigned w)
{
    fiber *lane = team.f + w * WARP;
    warp_call *call = team.calls + w * WARP;
    const unsigned lanes = lanes_of(w);
    unsigned waiting = 0;
    for (unsigned l = 0; l < WARP; ++l) {
        if (!(lanes >> l & 1u)) continue;
        if (lane[l].state == RUNNABLE) return false;
        if (lane[l].state == AT_WARP && call[l].op == OP_ACTIVEMASK) waiting |= 1u << l;
    }
    for (unsigned l = 0; l < WARP; ++l) {
        if (!(waiting >> l & 1u)) continue;
        unsigned same = 0;
        for (unsigned k = 0; k < WARP; ++k)
            if ((waiting >> k & 1u) && call[k].line == call[l].line) same |= 1u << k;
        call[l].result[0] = same;
    }
    for (unsigned l = 0; l < WARP; ++l)
        if (waiting >> l & 1u) {
            lane[l].state = RUNNABLE;
            team.runnable++;
        }
    team.arrived[w] &= ~waiting;
    return waiting != 0;
}

// The calling lane waits at the warp operation its call describes until every lane of the mask
// has reached one; then call.result holds what it gets.
static inline warp_call &warp_wait(warp_call &call)
{
    if (!team.running) not_as_fibers(call.name);
    fiber &f = team.f[team.current];
    const unsigned w = team.current / WARP, lane = team.current % WARP;
    if (!(call.mask >> lane & 1u))
        stop_block("%s: lane %u of warp %u calls it with a mask (0x%08x) that leaves it out (block %u, %u, %u): "
                   "undefined on a GPU",
                   call.name, lane, w, call.mask, blockIdx.x, blockIdx.y, blockIdx.z);
    call.mask &= lanes_of(w);
    warp_call &mine = team.calls[team.current];
    mine = call;
    f.state = AT_WARP;
    team.runnable--;
    team.stalled = 0;
    team.arrived[w] |= 1u << lane;
    if (call.op == OP_ACTIVEMASK)
        resolve_activemask(w);
    else if ((team.arrived[w] & call.mask) == call.mask)
        resolve_warp(w, mine);
    pass_on(f);
    return mine;
}

// Why no thread can run while some wait at a warp operation: the lanes it waits for, and what
// became of them. False if no thread waits at one.
static bool describe_warp_deadlock(char *error, size_t size)
{
    for (unsigned w = 0; w * WARP < team.n; ++w) {
        if (!team.arrived[w]) continue;
        fiber *lane = team.f + w * WARP;
        unsigned l = 0;
        while (!(team.arrived[w] >> l & 1u)) ++l;
        const warp_call &c = team.calls[w * WARP + l];
        unsigned returned = 0, barred = 0, elsewhere = 0;
        for (unsigned k = 0; k < WARP; ++k) {
            if (!(c.mask >> k & 1u) || (team.arrived[w] >> k & 1u)) continue;
            if (lane[k].state == RETURNED) returned |= 1u << k;
            else if (lane[k].state == AT_BARRIER) barred |= 1u << k;
            else elsewhere |= 1u << k;
        }
        char mine[160], theirs[160];
        lane_list(team.arrived[w] & c.mask, mine, sizeof mine);
        if (returned)
            snprintf(error, size, "%s: lanes %s of warp %u wait for lanes %s, named in the mask 0x%08x, which returned "
                     "without reaching it (block %u, %u, %u): on a GPU it hangs or goes wrong",
                     c.name, mine, w, lane_list(returned, theirs, sizeof theirs), c.mask, blockIdx.x, blockIdx.y,
                     blockIdx.z);
        else if (barred)
            snprintf(error, size, "%s: lanes %s of warp %u wait for lanes %s, named in the mask 0x%08x, which wait at "
                     "__syncthreads (block %u, %u, %u): on a GPU it hangs or goes wrong",
                     c.name, mine, w, lane_list(barred, theirs, sizeof theirs), c.mask, blockIdx.x, blockIdx.y,
                     blockIdx.z);
        else
            snprintf(error, size, "%s: lanes %s of warp %u wait for lanes %s, named in the mask 0x%08x, which wait at "
                     "another warp operation (block %u, %u, %u): on a GPU it hangs or goes wrong",
                     c.name, mine, w, lane_list(elsewhere, theirs, sizeof theirs), c.mask, blockIdx.x, blockIdx.y,
                     blockIdx.z);
        return true;
    }
    return false;
}

// Runs the block's n threads as fibers; false, with the reason in error, when the block cannot
// finish (a barrier or warp operation some threads never reach, an error a thread raised).
template <typename Body>
static bool run_block_fibers(Body &body, const unsigned *block, unsigned n, char *error, size_t size)
{
    if (team.running) team.ready = 0; // fibers left mid-thread: start them afresh
    if (team.ready < n && !ready_fibers(n)) {
        snprintf(error, size, "sim: no memory for the stacks of %u threads", n);
        return false;
    }
    team.running = true;
    team.failed = false;
    team.body = [](void *a) { (*(Body *)a)(); };
    team.arg = &body;
    team.n = n;
    team.runnable = n;
    team.spins = team.stalled = 0;
    for (unsigned w = 0; w * WARP < n; ++w) team.arrived[w] = 0;
    for (unsigned i = 0; i < n; ++i) {
        fiber &f = team.f[i];
        f.state = RUNNABLE;
        f.index.x = i % block[0];
        f.index.y = i / block[0] % block[1];
        f.index.z = i / (block[0] * block[1]);
    }
    for (;;) {
        if (team.runnable) {
            // Runnable threads run to their next wait or their end, each passing on to the next.
            for (unsigned i = 0; i < n; ++i) {
                fiber &f = team.f[i];
                if (f.state != RUNNABLE) continue;
                threadIdx = f.index;
                team.current = i;
                switch_to(team.scheduler, f.ctx); // back when none after the last one can run
                break;
            }
            if (team.failed) {
                snprintf(error, size, "%s", team.error);
                team.ready = 0; // fibers left mid-thread
                team.running = false;
                return false;
            }
            continue;
        }
        bool released = false;
        for (unsigned w = 0; w * WARP < n; ++w)
            if (team.arrived[w]) released |= resolve_activemask(w);
        if (released) continue;
        if (describe_warp_deadlock(error, size)) {
            team.ready = 0;
            team.running = false;
            return false;
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
            team.running = false;
            return false;
        }
        team.result = (int)count;
        for (unsigned i = 0; i < n; ++i) team.f[i].state = RUNNABLE;
        team.runnable = n;
    }
    team.running = false;
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
    if (!open_dynamic_shared(shared_bytes)) {
        snprintf(error, size, "sim: the launch's %u bytes of dynamic shared memory cannot be had (at most %zu)",
                 shared_bytes, DYNAMIC_SHARED_MAX);
        return false;
    }
    gridDim = dim3(grid[0], grid[1], grid[2]);
    blockDim = dim3(block[0], block[1], block[2]);
    const unsigned n = block[0] * block[1] * block[2];
    if (!Barriers && setjmp(plain_stop)) {
        snprintf(error, size, "%s (block %u, %u, %u, thread %u, %u, %u)", plain_error, blockIdx.x, blockIdx.y,
                 blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
        return false;
    }
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

// A failed device assert stops the launch, as on a GPU, instead of aborting the process: the
// module's own __assert_fail, hidden, so that calls within it bind here and not to the C
// library's.
extern "C" __attribute__((visibility("hidden"), noreturn)) void __assert_fail(const char *expr, const char *file, unsigned int line,
                                                                          const char *function) noexcept
{
    tocha_sim::trap("assertion failed: %s (%s:%u, in %s)", expr, file, line, function);
}
static inline void __trap() { tocha_sim::trap("__trap()"); }
static inline void __brkpt() { tocha_sim::trap("__brkpt()"); }
