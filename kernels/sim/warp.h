// warp.h: CUDA's warp operations on the simulator: __syncwarp, the shuffles, the votes, match,
// the warp reductions and __activemask. Each is a wait in fibers.h: the lanes of its mask meet,
// the values are exchanged as PTX defines, and they go on. A lane of the mask that never
// arrives (it returned, or waits at __syncthreads) fails the launch, naming the operation.
namespace tocha_sim {

template <typename T> static inline warp_call warp_call_of(int op, const char *name, int line, unsigned mask, T value)
{
    static_assert(sizeof(T) <= 16, "a warp operation exchanges at most 16 bytes");
    warp_call c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.name = name;
    c.line = line;
    c.mask = mask;
    memcpy(c.value, &value, sizeof(T));
    return c;
}

template <typename T> static inline T shuffle(const char *name, unsigned mask, T value, int mode, int b, int width)
{
    if (width < 1 || width > 32 || (width & (width - 1)))
        trap("%s: width %d is not a power of two from 1 to 32", name, width);
    warp_call c = warp_call_of(OP_SHUFFLE, name, 0, mask, value);
    c.mode = mode;
    c.arg = b;
    c.control = ((32u - (unsigned)width) << 8) | (mode == SHFL_UP ? 0u : 31u);
    const warp_call &r = warp_wait(c);
    T out;
    memcpy(&out, r.result, sizeof(T));
    return out;
}

static inline unsigned vote(const char *name, unsigned mask, int predicate)
{
    warp_call c = warp_call_of(OP_BALLOT, name, 0, mask, (unsigned long long)(predicate != 0));
    return (unsigned)warp_wait(c).result[0];
}

template <typename T> static inline unsigned match(const char *name, int op, unsigned mask, T value, int *pred)
{
    warp_call c = warp_call_of(op, name, 0, mask, value);
    const warp_call &r = warp_wait(c);
    if (pred) *pred = r.predicate;
    return (unsigned)r.result[0];
}

static inline unsigned reduce(const char *name, unsigned mask, unsigned value, int kind)
{
    warp_call c = warp_call_of(OP_REDUCE, name, 0, mask, value);
    c.arg = kind;
    return (unsigned)warp_wait(c).result[0];
}

static inline unsigned activemask(int line)
{
    warp_call c = warp_call_of(OP_ACTIVEMASK, "__activemask", line, 0xffffffffu, 0u);
    return (unsigned)warp_wait(c).result[0];
}
} // namespace tocha_sim

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    tocha_sim::warp_call c = tocha_sim::warp_call_of(tocha_sim::OP_SYNC, "__syncwarp", 0, mask, 0u);
    tocha_sim::warp_wait(c);
}

// The shuffles for the types CUDA gives them, so that overloads resolve as they do there.
#define TOCHA_SIM_SHUFFLES(T)                                                                                    \
    static inline T __shfl_sync(unsigned mask, T var, int src, int width = 32)                                   \
    {                                                                                                            \
        return tocha_sim::shuffle("__shfl_sync", mask, var, tocha_sim::SHFL_IDX, src, width);                    \
    }                                                                                                            \
    static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32)                         \
    {                                                                                                            \
        return tocha_sim::shuffle("__shfl_up_sync", mask, var, tocha_sim::SHFL_UP, (int)delta, width);           \
    }                                                                                                            \
    static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32)                       \
    {                                                                                                            \
        return tocha_sim::shuffle("__shfl_down_sync", mask, var, tocha_sim::SHFL_DOWN, (int)delta, width);       \
    }                                                                                                            \
    static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32)                         \
    {                                                                                                            \
        return tocha_sim::shuffle("__shfl_xor_sync", mask, var, tocha_sim::SHFL_XOR, lane_mask, width);          \
    }
TOCHA_SIM_SHUFFLES(int)
TOCHA_SIM_SHUFFLES(unsigned int)
TOCHA_SIM_SHUFFLES(long)
TOCHA_SIM_SHUFFLES(unsigned long)
TOCHA_SIM_SHUFFLES(long long)
TOCHA_SIM_SHUFFLES(unsigned long long)
TOCHA_SIM_SHUFFLES(float)
TOCHA_SIM_SHUFFLES(double)
TOCHA_SIM_SHUFFLES(__half)
TOCHA_SIM_SHUFFLES(__half2)
TOCHA_SIM_SHUFFLES(__nv_bfloat16)
TOCHA_SIM_SHUFFLES(__nv_bfloat162)
#undef TOCHA_SIM_SHUFFLES

static inline unsigned __ballot_sync(unsigned mask, int predicate) { return tocha_sim::vote("__ballot_sync", mask, predicate); }
static inline int __any_sync(unsigned mask, int predicate) { return tocha_sim::vote("__any_sync", mask, predicate) != 0; }
static inline int __all_sync(unsigned mask, int predicate)
{
    const unsigned lanes = mask & tocha_sim::lanes_of(tocha_sim::team.current / tocha_sim::WARP);
    return tocha_sim::vote("__all_sync", mask, predicate) == lanes;
}
static inline int __uni_sync(unsigned mask, int predicate)
{
    const unsigned lanes = mask & tocha_sim::lanes_of(tocha_sim::team.current / tocha_sim::WARP);
    const unsigned b = tocha_sim::vote("__uni_sync", mask, predicate);
    return b == 0 || b == lanes;
}
#define __activemask() tocha_sim::activemask(__LINE__)

#define TOCHA_SIM_MATCH(T)                                                                                       \
    static inline unsigned __match_any_sync(unsigned mask, T value)                                              \
    {                                                                                                            \
        return tocha_sim::match("__match_any_sync", tocha_sim::OP_MATCH_ANY, mask, value, nullptr);              \
    }                                                                                                            \
    static inline unsigned __match_all_sync(unsigned mask, T value, int *pred)                                   \
    {                                                                                                            \
        return tocha_sim::match("__match_all_sync", tocha_sim::OP_MATCH_ALL, mask, value, pred);                 \
    }
TOCHA_SIM_MATCH(int)
TOCHA_SIM_MATCH(unsigned int)
TOCHA_SIM_MATCH(long)
TOCHA_SIM_MATCH(unsigned long)
TOCHA_SIM_MATCH(long long)
TOCHA_SIM_MATCH(unsigned long long)
TOCHA_SIM_MATCH(float)
TOCHA_SIM_MATCH(double)
#undef TOCHA_SIM_MATCH

static inline int __reduce_add_sync(unsigned mask, int v) { return (int)tocha_sim::reduce("__reduce_add_sync", mask, (unsigned)v, tocha_sim::RED_ADD); }
static inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_add_sync", mask, v, tocha_sim::RED_ADD); }
static inline int __reduce_min_sync(unsigned mask, int v) { return (int)tocha_sim::reduce("__reduce_min_sync", mask, (unsigned)v, tocha_sim::RED_MIN); }
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_min_sync", mask, v, tocha_sim::RED_UMIN); }
static inline int __reduce_max_sync(unsigned mask, int v) { return (int)tocha_sim::reduce("__reduce_max_sync", mask, (unsigned)v, tocha_sim::RED_MAX); }
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_max_sync", mask, v, tocha_sim::RED_UMAX); }
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_and_sync", mask, v, tocha_sim::RED_AND); }
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_or_sync", mask, v, tocha_sim::RED_OR); }
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) { return tocha_sim::reduce("__reduce_xor_sync", mask, v, tocha_sim::RED_XOR); }

