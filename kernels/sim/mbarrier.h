// mbarrier.h: the simulator's side of mbarrier.cuh. The barrier's 8 bytes hold its count, the
// arrivals still pending in this phase and the number of phases completed; the block's threads
// run as fibers on one host thread, so plain reads and writes suffice. A waiting thread passes
// its turn; turns given up with no thread arriving, waiting at a barrier or returning count as
// stalled, and past STALLED_TURNS the launch fails (on a GPU the wait would hang).
namespace tocha_sim
{

struct mbarrier_state {
    unsigned short count, pending;
    unsigned phases;
};
static_assert(sizeof(mbarrier_state) == 8, "an mbarrier is 8 bytes");

static inline mbarrier_state *mbarrier_of(unsigned long long *bar)
{
    if ((uintptr_t)bar & 7u) trap("mbarrier: address %p is not 8-byte aligned", (void *)bar);
    return (mbarrier_state *)(void *)bar;
}

static inline void mbarrier_init(unsigned long long *bar, unsigned count)
{
    if (count < 1 || count > 1023) trap("mbarrier_init: count %u, expected 1 to 1023", count);
    mbarrier_state *s = mbarrier_of(bar);
    s->count = s->pending = (unsigned short)count;
    s->phases = 0;
}

static inline void mbarrier_arrive(unsigned long long *bar)
{
    mbarrier_state *s = mbarrier_of(bar);
    if (s->count == 0) trap("mbarrier_arrive: the barrier at %p was not initialised", (void *)bar);
    team.stalled = 0;
    if (--s->pending == 0) {
        s->phases++;
        s->pending = s->count;
    }
}

static inline void mbarrier_wait(unsigned long long *bar, unsigned parity)
{
    mbarrier_state *s = mbarrier_of(bar);
    // the phase of that parity completed: the current (incomplete) phase has the other parity
    while ((s->phases & 1u) == (parity & 1u)) {
        if (!team.running) not_as_fibers("mbarrier_wait");
        if (++team.stalled > STALLED_TURNS)
            stop_block("mbarrier_wait: threads of the block wait for a phase no thread can complete "
                       "(block %u, %u, "
                       "%u): on a GPU it hangs",
                       blockIdx.x, blockIdx.y, blockIdx.z);
        pass_on(team.f[team.current]);
    }
}
} // namespace tocha_sim
