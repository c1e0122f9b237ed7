// cooperative_groups.h: CUDA's cooperative groups on the simulator: the thread block, its tiles
// of 1 to 32 threads (tiled_partition<N>), their shuffles and votes, and cg::reduce and the
// scans, which combine values in the order the toolkit's own headers do (a butterfly of
// shfl_xor from N/2 down for reduce; shfl_up steps of 1, 2, 4... for the inclusive scan), so
// that floating-point results match the GPU's bit for bit. The toolkit's headers, when a
// kernel includes them, add nothing on the simulator: their guards are set here.
#define _COOPERATIVE_GROUPS_H_
#define _COOPERATIVE_GROUPS_REDUCE_H
#define _COOPERATIVE_GROUPS_SCAN_H

namespace cooperative_groups {

// The calling thread's rank in its block.
static inline unsigned block_rank() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }

class thread_block {
  public:
    // A barrier over the block: __syncthreads at the caller's line.
    void sync(int line = __builtin_LINE()) const { tocha_sim::barrier(line, 0); }
    unsigned long long thread_rank() const { return block_rank(); }
    unsigned long long size() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return blockDim; }
    dim3 dim_threads() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }

// N consecutive threads of a block, N a power of two up to a warp.
template <unsigned N, typename Parent = void> class thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiles of 1 to 32 threads, a power of two");

  public:
    thread_block_tile() = default;
    // A tile converts to one of the same size whatever its parent type, as in CUDA.
    template <typename Other> thread_block_tile(const thread_block_tile<N, Other> &) {}
    // The tile's lanes within its warp.
    unsigned mask() const
    {
        const unsigned first = block_rank() % 32 / N * N;
        return (N == 32 ? 0xffffffffu : (1u << N) - 1u) << first;
    }
    void sync() const { __syncwarp(mask()); }
    unsigned long long thread_rank() const { return block_rank() % N; }
    unsigned long long size() const { return N; }
    unsigned long long num_threads() const { return N; }
    unsigned long long meta_group_rank() const { return block_rank() / N; }
    unsigned long long meta_group_size() const
    {
        const unsigned long long threads = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
        return (threads + N - 1) / N;
    }
    template <typename T> T shfl(T v, int src) const
    {
        return tocha_sim::shuffle("thread_block_tile::shfl", mask(), v, tocha_sim::SHFL_IDX, src, (int)N);
    }
    template <typename T> T shfl_up(T v, unsigned d) const
    {
        return tocha_sim::shuffle("thread_block_tile::shfl_up", mask(), v, tocha_sim::SHFL_UP, (int)d, (int)N);
    }
    template <typename T> T shfl_down(T v, unsigned d) const
    {
        return tocha_sim::shuffle("thread_block_tile::shfl_down", mask(), v, tocha_sim::SHFL_DOWN, (int)d, (int)N);
    }
    template <typename T> T shfl_xor(T v, unsigned m) const
    {
        return tocha_sim::shuffle("thread_block_tile::shfl_xor", mask(), v, tocha_sim::SHFL_XOR, (int)m, (int)N);
    }
    // Votes: the ballot's bits are the tile's ranks.
    unsigned ballot(int p) const { return tocha_sim::vote("thread_block_tile::ballot", mask(), p) >> (block_rank() % 32 / N * N); }
    int any(int p) const { return tocha_sim::vote("thread_block_tile::any", mask(), p) != 0; }
    int all(int p) const
    {
        const unsigned m = mask() & tocha_sim::lanes_of(tocha_sim::team.current / tocha_sim::WARP);
        return tocha_sim::vote("thread_block_tile::all", mask(), p) == m;
    }
    template <typename T> unsigned match_any(T v) const
    {
        return tocha_sim::match("thread_block_tile::match_any", tocha_sim::OP_MATCH_ANY, mask(), v, nullptr) >>
               (block_rank() % 32 / N * N);
    }
    template <typename T> unsigned match_all(T v, int &pred) const
    {
        return tocha_sim::match("thread_block_tile::match_all", tocha_sim::OP_MATCH_ALL, mask(), v, &pred) >>
               (block_rank() % 32 / N * N);
    }
};

template <unsigned N, typename Parent> static inline thread_block_tile<N, Parent> tiled_partition(const Parent &)
{
    return thread_block_tile<N, Parent>();
}

template <typename Group> static inline void sync(const Group &g) { g.sync(); }

template <typename T> struct plus {
    T operator()(T a, T b) const { return a + b; }
};
template <typename T> struct less {
    T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T> struct greater {
    T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T> struct bit_and {
    T operator()(T a, T b) const { return a & b; }
};
template <typename T> struct bit_or {
    T operator()(T a, T b) const { return a | b; }
};
template <typename T> struct bit_xor {
    T operator()(T a, T b) const { return a ^ b; }
};

template <typename Tile, typename T, typename Op> static inline T reduce(const Tile &tile, T value, Op op)
{
    T out = value;
    for (int m = (int)tile.size() >> 1; m > 0; m >>= 1) out = op(out, tile.shfl_xor(out, (unsigned)m));
    return out;
}

template <typename Tile, typename T, typename Op> static inline T inclusive_scan(const Tile &tile, T value, Op op)
{
    T out = value;
    for (unsigned m = 1; m < tile.size(); m <<= 1) {
        const T from = tile.shfl_up(out, m);
        if (m <= tile.thread_rank()) out = op(out, from);
    }
    return out;
}
template <typename Tile, typename T> static inline T inclusive_scan(const Tile &tile, T value)
{
    return inclusive_scan(tile, value, plus<T>());
}

// The exclusive scan as the toolkit derives it: an integer sum subtracts the value; any other
// shifts the inclusive scan up by one, rank 0 getting T{}.
template <typename Tile, typename T, typename Op> static inline T exclusive_scan(const Tile &tile, T value, Op op)
{
    const T inclusive = inclusive_scan(tile, value, op);
    if (std::is_same<Op, plus<T>>::value && std::is_integral<T>::value) return inclusive - value;
    const T up = tile.shfl_up(inclusive, 1);
    return tile.thread_rank() == 0 ? T{} : up;
}
template <typename Tile, typename T> static inline T exclusive_scan(const Tile &tile, T value)
{
    return exclusive_scan(tile, value, plus<T>());
}

} // namespace cooperative_groups
