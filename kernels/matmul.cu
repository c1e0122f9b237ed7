// matmul.cu: C = A x B (+ bias), A [m, k], B [k, n], C [m, n] row-major, a batch of them along
// grid.z (stride_* elements between a batch's matrices, 0 to repeat one), bias [n] added to
// every row when has_bias. TA: A is stored column-major (A's transpose [k, m] row-major, as a
// transposed view holds it); TB likewise for B ([n, k]): y = x w^T reads w [n, k] as it is.
// Each sum is written through the epilogue F (activation.cuh, epilogue.cuh): + bias, +
// residual [m, n] where the flags `epilogue` name it, then F, or with EPILOGUE_GRAD the
// backward's grad F'(z) (grad [m, n], a fused activation's dz), rounded once to T.
// Every kernel takes CTAs of 256 threads but tocha_matmul_ws, 384 (launch bounds; any other
// block traps). Four kernels:
// - tocha_matmul_tc (f16, bf16; f32 as tf32, below): the tensor cores, f32 accumulators rounded
//   once to T. A CTA computes a 128 x BN tile of C (BN 128 or 256); the tiles are numbered
//   along grid.x in groups of 8 rows of tiles, column by column within a group, so that the
//   CTAs running together share their A rows and B columns in L2. Each operand's slices of k go
//   to shared memory by cp.async in 16-byte chunks along its consecutive elements. Needs each
//   operand's consecutive dimension a multiple of 8 and A, B 16-byte aligned (each chunk wholly
//   inside the matrix or wholly out: chunks past an edge are zero-filled); the host sends other
//   shapes to tocha_matmul_simt. C is written in pairs of elements where it is 4-byte aligned,
//   else one by one. Two main loops:
//   - on sm_90 (and the simulator), wgmma (warpgroup.cuh): two warpgroups, each the tile's 64
//     rows by BN columns in BN / 2 registers a thread; MM_STAGES slices in dynamic shared
//     memory (the kernel's launches give MM_SHARED(BN) bytes), 128-byte swizzled as wgmma reads
//     them, K-major or MN-major as the operand lies, so that no operand is transposed on the
//     way. The copies run MM_STAGES - 2 slices ahead of the multiplies and are issued while the
//     tensor cores work (wgmma is asynchronous); each thread's chunks are fixed steps apart,
//     set up once (mm_operand_copy), so that a slice's copies cost a few instructions a chunk.
//   - elsewhere (or built with -DMATMUL_MMA_SYNC), mma.sync (tensor_core.cuh), 128 columns of
//     the tile at a time: 8 warps of 64 x 32, slices of 32 of k in two buffers (in the same
//     dynamic shared memory, so that both loops ask MM_SHARED(BN) bytes), read
//     through ldmatrix (transposed where the stored layout is the fragment's transpose), rows
//     padded by 16 bytes so that the eight rows an ldmatrix phase reads fall on distinct banks.
// - tocha_matmul_tc on f32 is tf32 (the opt-in; sm_90 and the simulator): the same wgmma loop
//   on 128 x 128 tiles, slices of 32 f32 (128 bytes, as the halves' 64), both operands K-major
//   in the stages as tf32's wgmma needs: an MN-major one is transposed on its way there through
//   registers (mm_operand_transpose).
// - tocha_matmul_ws (f16, bf16; sm_90 and the simulator): tocha_matmul_tc's tiles and stages on
//   a warp-specialized loop (mm_ws_tile): a copying warpgroup and two multiplying ones, handing
//   stages over on mbarriers (mbarrier.cuh). The host takes it where B is row-major.
// - tocha_matmul_f32 (f32, each operand's consecutive dimension a multiple of 4, 16-byte
//   aligned): 128 x 128 tiles, 8 x 8 outputs a thread (below).
// - tocha_matmul_simt (any float dtype, any shape): 64 x 64 tiles of C on 256 threads, each 4 x
//   4 outputs (rows ty + 16i, columns tx + 16j), A's and B's 64 x 16 slices staged in shared
//   memory in the compute type; sums in k order, one fma a product (f32 for halves, f64 for
//   f64).

#if (defined(TOCHA_SIM) || defined(__CUDA_ARCH_FEAT_SM90_ALL)) && !defined(MATMUL_MMA_SYNC)
#define TOCHA_MATMUL_WGMMA 1
#endif

#define MM_STAGES 4
// A stage: A's 128 x 64 halves (16 KiB), then B's BN x 64; MM_SHARED(BN) bytes a CTA, with the
// slack to align the stages to 1 KiB.
#define MM_STAGE_BYTES(BN) (16384 + (BN)*128)
#define MM_SHARED(BN) (MM_STAGES * MM_STAGE_BYTES(BN) + 1024)

// The (row, column) tile of C (bm x bn) this CTA computes: blockIdx.x numbers the tiles in
// groups of 8 rows of tiles, down each column of a group, then the group's next column.
__device__ __forceinline__ void mm_tile_of_rows(long long m, long long n, int bm, int bn, long long *row0,
                                                long long *col0)
{
    const long long tiles_m = (m + bm - 1) / bm, tiles_n = (n + bn - 1) / bn, per_group = 8 * tiles_n;
    const long long id = blockIdx.x, first = id / per_group * 8;
    const long long rows = tiles_m - first < 8 ? tiles_m - first : 8, in_group = id % per_group;
    *row0 = (first + in_group % rows) * bm;
    *col0 = (in_group / rows) * bn;
}

// The (row, column) tile of C (128 x bn) this CTA computes, as mm_tile_of_rows numbers them.
__device__ __forceinline__ void mm_tile_of(long long m, long long n, int bn, long long *row0,
                                           long long *col0)
{
    mm_tile_of_rows(m, n, 128, bn, row0, col0);
}

// C's elements (r, col) and (r, col + 1) from two f32 sums through the epilogue (bias,
// residual, activation: epilogue.cuh), those inside C.
template <typename T, typename F>
__device__ __forceinline__ void mm_store_pair(T *c, const tocha_epilogue<T, F> &epi, long long m,
                                              long long n, long long r, long long col, float v0,
                                              float v1)
{
    if (r >= m || col >= n) return;
    v0 = epi.apply(v0, r * n + col, col);
    if (col + 1 < n) v1 = epi.apply(v1, r * n + col + 1, col + 1);
    const T pair[2] = {tocha::from_compute<T>(v0), tocha::from_compute<T>(v1)};
    // one store of the pair where r * n + col is even and C aligned to it (a view may start
    // anywhere)
    if (col + 1 < n && n % 2 == 0 && (unsigned long long)c % (2 * sizeof(T)) == 0) {
        if constexpr (sizeof(T) == 2) {
            unsigned bits;
            memcpy(&bits, pair, 4);
            *(unsigned *)(c + r * n + col) = bits;
        } else {
            *(float2 *)(c + r * n + col) = make_float2(v0, v1);
        }
    } else {
        c[r * n + col] = pair[0];
        if (col + 1 < n) c[r * n + col + 1] = pair[1];
    }
}

#ifdef TOCHA_MATMUL_WGMMA
// One operand's part of a thread in the copies of a slice (its EXTENT rows or columns of the
// tile over 64 of k, 128-byte swizzled as wgmma reads them), set up once so that a slice costs a
// few instructions a chunk: the thread's chunks are i = 0 .. CHUNKS - 1, fixed steps apart in
// global and in shared memory. K-major (an operand stored with its rows along k: row-major A,
// column-major B): EXTENT rows of 128 bytes, chunk e = thread + 256 i at row e / 8, chunk e % 8
// of it. MN-major (stored along m or n): 64 rows of k, each EXTENT / 8 chunks, in blocks of 64
// (of m or n) x 64 rows 8 KiB apart.
template <typename T, bool K_MAJOR, int EXTENT, int THREADS = 256> struct mm_operand_copy {
    static const int E = 16 / sizeof(T); // elements a chunk
    static const int SLICE = 8 * E;      // k a slice: 128 bytes of it (64 halves, 32 f32)
    static_assert(K_MAJOR || sizeof(T) == 2, "mm_operand_copy: f32 operands K-major (tf32 reads no other)");
    static const int CHUNKS = EXTENT * 8 / THREADS;
    static const int PER_ROW = K_MAJOR ? 8 : EXTENT / 8; // chunks a row of the stage
    static const int ROW_STEP = THREADS / PER_ROW;       // rows from one chunk of a thread to the next
    static_assert(ROW_STEP % 8 == 0 || ROW_STEP % 8 == 4, "mm_operand_copy: rows 8 or 4 apart");
    const T *src;    // chunk 0 at k = 0
    long long ld;    // elements between stored rows
    int dst, k_row;  // chunk 0's byte offset in the stage; MN-major: its row of k
    unsigned inside; // bit i: chunk i inside the matrix along m or n

    // base: the operand, ld: its stored row length, extent: its m or n, origin: the tile's first
    // row or column.
    __device__ __forceinline__ mm_operand_copy(const T *base, long long ld_, long long extent,
                                               long long origin, int thread = threadIdx.x)
        : ld(ld_)
    {
        const int r = thread / PER_ROW, c = thread % PER_ROW;
        inside = 0;
        if (K_MAJOR) {
            src = base + (origin + r) * ld + c * E;
            dst = tocha::swizzle128(r, c);
            k_row = c * E;
#pragma unroll
            for (int i = 0; i < CHUNKS; ++i)
                inside |= (origin + r + ROW_STEP * i < extent ? 1u : 0u) << i;
        } else {
            src = base + r * ld + origin + c * 8;
            dst = (c / 8) * 8192 + tocha::swizzle128(r, c % 8);
            k_row = r;
            inside = origin + c * 8 < extent ? ~0u : 0u;
        }
    }

    // Starts the copies of slice s (k from SLICE s) into the operand's part of a stage; chunks
    // past k or the matrix's edge are zero-filled (their source, base, is not read).
    __device__ __forceinline__ void start(unsigned char *stage, long long s, long long k,
                                          const T *base) const
    {
        const T *p = src + s * (K_MAJOR ? SLICE : SLICE * ld);
        const long long step = ROW_STEP * ld;
        const long long k0 = s * SLICE + k_row;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const bool in = (inside >> i & 1u) && (K_MAJOR ? k0 : k0 + ROW_STEP * i) < k;
            // rows ROW_STEP apart keep their swizzle when ROW_STEP is a multiple of 8; 4 apart
            // (128 threads, 256 columns MN-major) every other chunk's row flips bit 2 of it
            const int flip = ROW_STEP % 8 == 4 && (i & 1) ? 64 : 0;
            tocha::cp_async16(stage + (dst ^ flip) + i * ROW_STEP * 128, in ? p + i * step : base,
                              in ? 16 : 0);
        }
    }
};

// A if C, else B.
template <bool C, typename A, typename B> struct mm_pick {
    typedef A type;
};
template <typename A, typename B> struct mm_pick<false, A, B> {
    typedef B type;
};

// An f32 operand stored MN-major (along m of A or n of B: a transposed A, a row-major B) copied
// into the K-major swizzled layout tf32's wgmma reads: EXTENT rows (of m or n) of a stage, each
// 128 bytes of k (32 f32). The global reads stay 16-byte chunks along m or n; each chunk's four
// elements go to four rows of the stage through registers (cp.async cannot transpose). A warp
// covers 8 rows of k by 4 chunks (16 of m or n) a step, so that its stores of one element a
// thread spread over the banks (the swizzle moves each row's chunk). Every chunk of a slice is
// loaded before any is stored: CHUNKS loads in flight a thread.
template <int EXTENT, int THREADS = 256> struct mm_operand_transpose {
    static const int WARPS = THREADS / 32;
    static const int CHUNKS = EXTENT / (4 * WARPS); // 16-byte chunks a thread a slice
    static_assert(WARPS % 4 == 0 && CHUNKS >= 1, "mm_operand_transpose: 4 or 8 warps a copy");
    const float *src;           // the thread's first chunk at k = 0
    long long ld, extent;       // elements between stored rows (of k); m or n
    int k_row, row;             // its row of k in a slice; its first stage row

    // base: the operand, ld: its stored row length, extent: its m or n (a multiple of 4, as the
    // host asks), origin: the tile's first row or column.
    __device__ __forceinline__ mm_operand_transpose(const float *base, long long ld_, long long extent_,
                                                    long long origin, int thread = threadIdx.x)
        : ld(ld_), extent(extent_ - origin)
    {
        const int lane = thread % 32, warp = thread / 32;
        // a warp's first unit: rows of k 8 (warp % 4) .. + 7, stage rows 16 (warp / 4) .. + 15;
        // step i moves on 4 WARPS stage rows
        k_row = 8 * (warp % 4) + lane % 8;
        row = 16 * (warp / 4) + 4 * (lane / 8);
        src = base + (long long)k_row * ld + origin + row;
    }

    // Copies slice s (k from 32 s) into the operand's part of a stage; what lies past k or the
    // matrix's edge is stored as zeros.
    __device__ __forceinline__ void start(unsigned char *stage, long long s, long long k, const float *) const
    {
        float4 v[CHUNKS];
        const bool k_in = s * 32 + k_row < k;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const int r = row + 4 * WARPS * i;
            v[i] = k_in && r < extent ? *(const float4 *)(src + s * 32 * ld + 4 * WARPS * i)
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        unsigned char *col = stage + (k_row % 4) * 4;
#pragma unroll
        for (int i = 0; i < CHUNKS; ++i) {
            const int r = row + 4 * WARPS * i, c = k_row / 4;
            *(float *)(col + tocha::swizzle128(r, c)) = v[i].x;
            *(float *)(col + tocha::swizzle128(r + 1, c)) = v[i].y;
            *(float *)(col + tocha::swizzle128(r + 2, c)) = v[i].z;
            *(float *)(col + tocha::swizzle128(r + 3, c)) = v[i].w;
        }
    }
};

// The wgmma main loop and epilogue of a 128 x BN tile of C at (row0, col0) over the `count`
// slices of k from slice `first`, the operands' slices copied by copy_a and copy_b
// (mm_operand_copy, or any type with its start(): an implicit GEMM's gather); a and b are what
// their chunks outside the operands name as source (not read). With `partial`, the tile's f32
// sums go there ([m, n], no epilogue: a split of k, summed later) instead of C.
template <typename T, int TA, int TB, int BN, typename CopyA, typename CopyB, typename F>
__device__ __forceinline__ void mm_wg_run(const CopyA &copy_a, const CopyB &copy_b, const T *a,
                                          const T *b, const tocha_epilogue<T, F> &epi, T *c, long long m,
                                          long long n, long long k, long long first, long long count,
                                          long long row0, long long col0, float *partial)
{
    extern __shared__ __align__(1024) unsigned char mm_shared[];
    unsigned char *stages = tocha::align_1024(mm_shared); // (wgmma's swizzle follows address bits)
    const int wg = threadIdx.x / 128;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    const int ahead = MM_STAGES - 2; // a stage is refilled once the multiplies two slices back are done
    const long long slices = count;
    for (int s = 0; s < ahead; ++s) {
        if (s < slices) {
            copy_a.start(stages + s * MM_STAGE_BYTES(BN), first + s, k, a);
            copy_b.start(stages + s * MM_STAGE_BYTES(BN) + 16384, first + s, k, b);
        }
        tocha::cp_async_commit();
    }
    for (long long t = 0; t < slices; ++t) {
        tocha::cp_async_wait<MM_STAGES - 3>(); // slice t's copies (this thread's) are done
        tocha::fence_async_shared();
        __syncthreads(); // everyone's are, and every warpgroup is done with slice t - 2
        const unsigned char *sa = stages + (t % MM_STAGES) * MM_STAGE_BYTES(BN) + wg * 8192,
                            *sb = sa - wg * 8192 + 16384;
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            tocha::wgmma<T, BN, TA, !TB>(acc, sa + (TA ? 2048 * kk : 32 * kk), 8192, 1024,
                                         sb + (TB ? 32 * kk : 2048 * kk), 8192, 1024);
        tocha::wgmma_commit();
        // The stage two slices back is free (the barrier above): refill it while the tensor
        // cores work, then wait for slice t - 1's multiplies, so that at the next barrier the
        // stage refilled then is free too.
        if (t + ahead < slices) {
            unsigned char *stage = stages + ((t + ahead) % MM_STAGES) * MM_STAGE_BYTES(BN);
            copy_a.start(stage, first + t + ahead, k, a);
            copy_b.start(stage + 16384, first + t + ahead, k, b);
        }
        tocha::cp_async_commit();
        tocha::wgmma_wait<1>();
    }
    tocha::wgmma_wait<0>();
    const int w = threadIdx.x % 128 / 32, g = threadIdx.x % 32 / 4, q = threadIdx.x % 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long r = row0 + wg * 64 + 16 * w + g + 8 * h, col = col0 + 8 * j + 2 * q;
            const float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
            if (!partial) {
                mm_store_pair(c, epi, m, n, r, col, v0, v1);
            } else if (r < m && col < n) { // n even: both or neither inside, 8-byte aligned
                *(float2 *)(partial + r * n + col) = make_float2(v0, v1);
            }
        }
}

template <typename T, int TA, int TB, int BN, typename F>
__device__ __forceinline__ void mm_wg_tile(const T *a, const T *b, const tocha_epilogue<T, F> &epi, T *c,
                                           long long m, long long n, long long k, long long row0,
                                           long long col0)
{
    if constexpr (sizeof(T) == 4) {
        // tf32: both operands K-major in the stages, an MN-major one transposed on the way
        typedef typename mm_pick<TA != 0, mm_operand_transpose<128>, mm_operand_copy<T, true, 128>>::type CopyA;
        typedef typename mm_pick<TB != 0, mm_operand_copy<T, true, BN>, mm_operand_transpose<BN>>::type CopyB;
        const CopyA copy_a(a, TA ? m : k, m, row0);
        const CopyB copy_b(b, TB ? k : n, n, col0);
        mm_wg_run<T, 0, 1, BN>(copy_a, copy_b, a, b, epi, c, m, n, k, 0, (k + 31) / 32, row0, col0, (float *)0);
    } else {
        // A's 128 rows (16 KiB of a stage), then B's BN columns
        const mm_operand_copy<T, !TA, 128> copy_a(a, TA ? m : k, m, row0);
        const mm_operand_copy<T, TB != 0, BN> copy_b(b, TB ? k : n, n, col0);
        mm_wg_run<T, TA, TB, BN>(copy_a, copy_b, a, b, epi, c, m, n, k, 0, (k + 63) / 64, row0, col0,
                                 (float *)0);
    }
}

// The warp-specialized main loop: 384 threads, warpgroup 0 copies (cp.async, each stage's
// arrival on full[s] once its copies land), warpgroups 1 and 2 multiply (each waits on full[s],
// and frees the stage on empty[s] once its multiplies of it are done). No CTA-wide barrier in
// the loop; the copying warps hold few registers (setmaxnreg), the multiplying ones many.
#define MM_WS_STAGES 4
#define MM_WS_SHARED(BN) (MM_WS_STAGES * MM_STAGE_BYTES(BN) + 1024 + 2 * MM_WS_STAGES * 8)
template <typename T, int TA, int TB, int BN, typename F>
__device__ __forceinline__ void mm_ws_tile(const T *a, const T *b, const tocha_epilogue<T, F> &epi, T *c,
                                           long long m, long long n, long long k, long long row0,
                                           long long col0)
{
    extern __shared__ __align__(1024) unsigned char mm_shared[];
    unsigned char *stages = tocha::align_1024(mm_shared);
    unsigned long long *full = (unsigned long long *)(stages + MM_WS_STAGES * MM_STAGE_BYTES(BN)),
                       *empty = full + MM_WS_STAGES;
    if (threadIdx.x == 0)
        for (int s = 0; s < MM_WS_STAGES; ++s)
            tocha::mbarrier_init(&full[s], 128), tocha::mbarrier_init(&empty[s], 256);
    __syncthreads();
    const long long slices = (k + 63) / 64;
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        tocha::set_max_registers<40, false>();
        const int t = threadIdx.x;
        const mm_operand_copy<T, !TA, 128, 128> copy_a(a, TA ? m : k, m, row0, t);
        const mm_operand_copy<T, TB != 0, BN, 128> copy_b(b, TB ? k : n, n, col0, t);
        for (long long i = 0; i < slices; ++i) {
            const int s = (int)(i % MM_WS_STAGES);
            const unsigned round = (unsigned)(i / MM_WS_STAGES);
            tocha::mbarrier_wait(&empty[s], (round + 1) & 1); // the first round: free at once
            copy_a.start(stages + s * MM_STAGE_BYTES(BN), i, k, a);
            copy_b.start(stages + s * MM_STAGE_BYTES(BN) + 16384, i, k, b);
            tocha::cp_async_arrive(&full[s]);
        }
        return;
    }
    tocha::set_max_registers<232, true>();
    const int cw = wg - 1; // this warpgroup's 64 rows of the tile
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    for (long long i = 0; i < slices; ++i) {
        const int s = (int)(i % MM_WS_STAGES);
        tocha::mbarrier_wait(&full[s], (unsigned)(i / MM_WS_STAGES) & 1);
        tocha::fence_async_shared(); // the copies (generic writes) before wgmma's reads
        const unsigned char *sa = stages + s * MM_STAGE_BYTES(BN) + cw * 8192,
                            *sb = stages + s * MM_STAGE_BYTES(BN) + 16384;
        tocha::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            tocha::wgmma<T, BN, TA, !TB>(acc, sa + (TA ? 2048 * kk : 32 * kk), 8192, 1024,
                                         sb + (TB ? 32 * kk : 2048 * kk), 8192, 1024);
        tocha::wgmma_commit();
        tocha::wgmma_wait<1>(); // slice i - 1's multiplies are done: its stage is free
        if (i > 0) tocha::mbarrier_arrive(&empty[(i - 1) % MM_WS_STAGES]);
    }
    tocha::wgmma_wait<0>();
    const int w = threadIdx.x % 128 / 32, g = threadIdx.x % 32 / 4, q = threadIdx.x % 4;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
            mm_store_pair(c, epi, m, n, row0 + cw * 64 + 16 * w + g + 8 * h, col0 + 8 * j + 2 * q,
                          acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
}
#else
// A's and B's slices in shared memory, two buffers each, rows padded by 8 elements: a row-major
// A's [128 rows of m][32 of k], a column-major A's [32 of k][128 of m]; a row-major B's [32 of
// k][128 of n], a column-major B's [128 of n][32 of k].
template <typename T, bool TA, bool TB> struct mm_tc_tiles {
    T a[2][TA ? 32 : 128][TA ? 128 + 8 : 32 + 8];
    T b[2][TB ? 128 : 32][TB ? 32 + 8 : 128 + 8];
};

// Starts the copies of A's rows [row0, row0 + 128) and B's columns [col0, col0 + 128) over
// k in [k0, k0 + 32) into buffer `buf`, as one cp.async group: 512 chunks of 16 bytes each,
// two a thread, along each operand's consecutive elements.
template <typename T, bool TA, bool TB>
__device__ __forceinline__ void mm_tc_load(mm_tc_tiles<T, TA, TB> &s, int buf, const T *a, const T *b,
                                           long long m, long long n, long long k, long long row0,
                                           long long col0, long long k0)
{
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = tid + i * 256;
        if (!TA) { // 128 rows of m, 4 chunks of k each
            const int r = chunk / 4, cc = (chunk % 4) * 8;
            const long long gr = row0 + r, gk = k0 + cc;
            const bool in = gr < m && gk < k;
            tocha::cp_async16(&s.a[buf][r][cc], in ? a + gr * k + gk : a, in ? 16 : 0);
        } else { // 32 rows of k, 16 chunks of m each
            const int r = chunk / 16, cc = (chunk % 16) * 8;
            const long long gk = k0 + r, gr = row0 + cc;
            const bool in = gk < k && gr < m;
            tocha::cp_async16(&s.a[buf][r][cc], in ? a + gk * m + gr : a, in ? 16 : 0);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int chunk = tid + i * 256;
        if (!TB) { // 32 rows of k, 16 chunks of n each
            const int r = chunk / 16, cc = (chunk % 16) * 8;
            const long long gk = k0 + r, gc = col0 + cc;
            const bool in = gk < k && gc < n;
            tocha::cp_async16(&s.b[buf][r][cc], in ? b + gk * n + gc : b, in ? 16 : 0);
        } else { // 128 rows of n, 4 chunks of k each
            const int r = chunk / 4, cc = (chunk % 4) * 8;
            const long long gc = col0 + r, gk = k0 + cc;
            const bool in = gc < n && gk < k;
            tocha::cp_async16(&s.b[buf][r][cc], in ? b + gc * k + gk : b, in ? 16 : 0);
        }
    }
    tocha::cp_async_commit();
}

template <typename T, int TA, int TB, typename F>
__device__ __forceinline__ void mm_sync_tile(const T *a, const T *b, const tocha_epilogue<T, F> &epi,
                                             T *c, long long m, long long n, long long k, long long row0,
                                             long long col0)
{
    // the launch's dynamic shared memory (MM_SHARED(BN) bytes: the wgmma loop's size, so that
    // the kernel asks one size wherever it runs) holds the two buffers
    extern __shared__ __align__(1024) unsigned char mm_shared[];
    mm_tc_tiles<T, TA != 0, TB != 0> &s =
        *reinterpret_cast<mm_tc_tiles<T, TA != 0, TB != 0> *>(mm_shared);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / 4, wn = warp % 4; // 2 x 4 warps
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    const long long slices = (k + 31) / 32;
    if (slices > 0) mm_tc_load(s, 0, a, b, m, n, k, row0, col0, 0);
    for (long long t = 0; t < slices; ++t) {
        const int buf = (int)(t & 1);
        if (t + 1 < slices) {
            mm_tc_load(s, buf ^ 1, a, b, m, n, k, row0, col0, (t + 1) * 32);
            tocha::cp_async_wait<1>();
        } else {
            tocha::cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            unsigned fa[4][4], fb[4][2];
            // Lane l gives a row of matrix l / 8 of the four: A's (m 0-7, k 0-7), (m 8-15, k 0-7),
            // (m 0-7, k 8-15), (m 8-15, k 8-15) of an mma tile; B's (k 0-7, n tile j), (k 8-15,
            // tile j), then the same of tile j + 1. A column-major A's matrices are read
            // transposed, and a row-major B's (its fragment is column-major).
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if (!TA)
                    tocha::ldmatrix<4>(fa[i],
                                       &s.a[buf][wm * 64 + i * 16 + lane % 16][kk + 8 * (lane / 16)]);
                else
                    tocha::ldmatrix<4, true>(fa[i], &s.a[buf][kk + 8 * (lane / 16) + lane % 8]
                                                        [wm * 64 + i * 16 + 8 * (lane / 8 % 2)]);
            }
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                unsigned r[4];
                if (!TB)
                    tocha::ldmatrix<4, true>(
                        r, &s.b[buf][kk + lane % 16][wn * 32 + j * 8 + 8 * (lane / 16)]);
                else
                    tocha::ldmatrix<4>(r, &s.b[buf][wn * 32 + j * 8 + 8 * (lane / 16) + lane % 8]
                                              [kk + 8 * (lane / 8 % 2)]);
                fb[j][0] = r[0], fb[j][1] = r[1], fb[j + 1][0] = r[2], fb[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) tocha::mma_16816<T>(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads(); // the buffer is refilled two slices on
    }
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                mm_store_pair(c, epi, m, n, row0 + wm * 64 + i * 16 + g + 8 * h,
                              col0 + wn * 32 + j * 8 + 2 * q, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
}
#endif

template <typename T, int TA, int TB, int BN, typename F>
__device__ void tocha_matmul_tc(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                long long k, long long stride_a, long long stride_b, long long stride_c,
                                int has_bias, const T *residual, const T *grad, int epilogue)
{
    static_assert(BN == 128 || BN == 256, "tocha_matmul_tc: tiles of 128 or 256 columns");
    static_assert(sizeof(T) == 2 || BN == 128, "tocha_matmul_tc: tf32 tiles of 128 columns");
#ifdef MATMUL_SHARED // the bytes the host's launches give (matmul.lua)
    static_assert(MM_SHARED(BN) <= MATMUL_SHARED,
                  "tocha_matmul_tc: the launches give too little shared memory");
#endif
    if (blockDim.x != 256) __trap(); // the tile's maps take 8 warps
    if (m <= 0 || n <= 0) return;    // an empty C: no tiles to number
    long long row0, col0;
    mm_tile_of(m, n, BN, &row0, &col0);
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, blockIdx.z * stride_c);
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
#ifdef TOCHA_MATMUL_WGMMA
    mm_wg_tile<T, TA, TB, BN>(a, b, epi, c, m, n, k, row0, col0);
#else
    if constexpr (sizeof(T) == 4) {
        // tf32 without wgmma: the tile's outputs summed in f32 by a plain loop (correct, slow:
        // the host asks for tf32 only where the device has wgmma)
        for (int e = threadIdx.x; e < 128 * BN / 2; e += 256) {
            const long long r = row0 + e / (BN / 2), col = col0 + 2 * (e % (BN / 2));
            float v[2] = {0.0f, 0.0f};
            for (int h = 0; h < 2; ++h)
                if (r < m && col + h < n)
                    for (long long p = 0; p < k; ++p)
                        v[h] += a[TA ? p * m + r : r * k + p] * b[TB ? (col + h) * k + p : p * n + col + h];
            mm_store_pair(c, epi, m, n, r, col, v[0], v[1]);
        }
    } else {
        for (int h = 0; h < BN; h += 128) mm_sync_tile<T, TA, TB>(a, b, epi, c, m, n, k, row0, col0 + h);
    }
#endif
}

// f32 in registers: a CTA a 128 x 128 tile of C (numbered as tocha_matmul_tc's), 16 x 16
// threads of 8 x 8 outputs each (rows 4 ty + i and 64 + 4 ty + i, columns 4 tx + j and 64 + 4
// tx + j: 16-byte reads of shared memory, the warp's rows broadcast). Slices of 8 of k: A as
// [k][128 rows] and B as [k][128 columns] in shared memory (rows padded by 4 floats, so that the
// transposing stores of a row-major A or column-major B fall on distinct banks), two buffers;
// the next slice is loaded into registers (one 16-byte load of each operand a thread) while
// this one is multiplied. Sums in k order, one fma a product, as tocha_matmul_simt. Needs
// each operand's consecutive dimension a multiple of 4 and A, B 16-byte aligned.
template <bool K_ALONG, int W = 128> struct mm_f32_chunk {
    // Which 4 consecutive floats of a W x 8 operand slice (W 128 or 64) thread t loads: along k
    // (a row-major A, a column-major B: row t / 2, k 4 (t % 2)) or along m / n (k t / (W / 4),
    // columns 4 (t % (W / 4))); threads 2 W and up load none.
    static __device__ __forceinline__ bool loads(int t) { return t < 2 * W; }
    static __device__ __forceinline__ int row(int t) { return K_ALONG ? t / 2 : 4 * (t % (W / 4)); }
    static __device__ __forceinline__ int k(int t) { return K_ALONG ? 4 * (t % 2) : t / (W / 4); }
};

// A thread's 16-byte chunk of an operand's slices (W wide), set up once: its address at k = 0,
// the step from one slice to the next, whether its row (column) is inside the matrix, its k in
// a slice.
template <bool K_ALONG, int W = 128> struct mm_f32_operand {
    const float *p;
    long long step;
    int k_in_slice;
    bool inside;

    // x: the operand, ld: its stored row length, extent: its m or n, origin: the tile's first
    // row or column.
    __device__ __forceinline__ mm_f32_operand(const float *x, long long ld, long long extent,
                                              long long origin)
    {
        const int t = threadIdx.x;
        const long long r = origin + mm_f32_chunk<K_ALONG, W>::row(t);
        k_in_slice = mm_f32_chunk<K_ALONG, W>::k(t);
        // whole chunks: the consecutive dimension is a multiple of 4
        inside = mm_f32_chunk<K_ALONG, W>::loads(t) && r < extent;
        p = x + (inside ? (K_ALONG ? r * ld + k_in_slice : k_in_slice * ld + r) : 0);
        step = 8 * ld; // along m or n; along k a slice is 8 elements on
    }

    // The chunk of slice s (zeros past k or the matrix's edge).
    __device__ __forceinline__ float4 load(long long s, long long k) const
    {
        if (inside && s * 8 + k_in_slice < k) return *(const float4 *)(p + s * (K_ALONG ? 8 : step));
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
};

template <bool K_ALONG, int W = 128> __device__ __forceinline__ void mm_f32_store(float (*s)[W + 4], float4 v)
{
    const int t = threadIdx.x, r = mm_f32_chunk<K_ALONG, W>::row(t), kk = mm_f32_chunk<K_ALONG, W>::k(t);
    if (!mm_f32_chunk<K_ALONG, W>::loads(t)) return;
    if (K_ALONG) {
        s[kk][r] = v.x, s[kk + 1][r] = v.y, s[kk + 2][r] = v.z, s[kk + 3][r] = v.w;
    } else {
        *(float4 *)&s[kk][r] = v;
    }
}

// The f32 tiles' main loop over slices [first, last) of 8 of k (k in all), for a BM x BN tile
// (each 128 or 64: a convolution's 64 channels fill a tile of 64, not half of one of 128): each
// thread's chunk of the next slice loaded into registers (op_a.load(s, k), op_b.load(s, k):
// float4 chunks, along k where KA / KB) while this one is multiplied out of shared memory (sa,
// sb: two buffers), into acc, its BM / 16 x BN / 16 outputs (rows 4 ty + i and, in a tile of
// 128, 64 + 4 ty + i; columns likewise with tx). The operands' loaders are the caller's, of
// BM and BN chunks: a convolution's gathered patches and its weight or dy (conv2d_igemm.cu).
template <bool KA, bool KB, int BM, int BN, typename LA, typename LB>
__device__ __forceinline__ void mm_f32_run(const LA &op_a, const LB &op_b, long long first,
                                           long long last, long long k, float (*sa)[8][BM + 4],
                                           float (*sb)[8][BN + 4], float (&acc)[BM / 16][BN / 16])
{
    static_assert((BM == 128 || BM == 64) && (BN == 128 || BN == 64), "mm_f32_run: tiles of 64 or 128");
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
    for (int i = 0; i < BM / 16; ++i)
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) acc[i][j] = 0.0f;
    float4 na = op_a.load(first, k), nb = op_b.load(first, k);
    mm_f32_store<KA, BM>(sa[0], na);
    mm_f32_store<KB, BN>(sb[0], nb);
    __syncthreads();
    for (long long t = first; t < last; ++t) {
        const int buf = (int)((t - first) & 1);
        if (t + 1 < last) {
            na = op_a.load(t + 1, k);
            nb = op_b.load(t + 1, k);
        }
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            float av[BM / 16], bv[BN / 16];
            *(float4 *)&av[0] = *(const float4 *)&sa[buf][kk][4 * ty];
            if (BM == 128) *(float4 *)&av[BM / 16 - 4] = *(const float4 *)&sa[buf][kk][64 + 4 * ty];
            *(float4 *)&bv[0] = *(const float4 *)&sb[buf][kk][4 * tx];
            if (BN == 128) *(float4 *)&bv[BN / 16 - 4] = *(const float4 *)&sb[buf][kk][64 + 4 * tx];
#pragma unroll
            for (int i = 0; i < BM / 16; ++i)
#pragma unroll
                for (int j = 0; j < BN / 16; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        if (t + 1 < last) { // the other buffer was last read before the previous barrier
            mm_f32_store<KA, BM>(sa[buf ^ 1], na);
            mm_f32_store<KB, BN>(sb[buf ^ 1], nb);
        }
        __syncthreads();
    }
}

template <typename T, int TA, int TB, typename F>
__device__ void tocha_matmul_f32(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                 long long k, long long stride_a, long long stride_b, long long stride_c,
                                 int has_bias, const T *residual, const T *grad, int epilogue)
{
    __shared__ __align__(16) float sa[2][8][128 + 4], sb[2][8][128 + 4];
    if (blockDim.x != 256) __trap(); // 16 x 16 threads
    if (m <= 0 || n <= 0) return;    // an empty C: no tiles to number
    long long row0, col0;
    mm_tile_of(m, n, 128, &row0, &col0);
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, blockIdx.z * stride_c);
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
    // (the loop is mm_f32_run's, written out: through it ptxas spills 8 bytes more here)
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const mm_f32_operand<!TA> op_a(a, TA ? m : k, m, row0);
    const mm_f32_operand<TB != 0> op_b(b, TB ? k : n, n, col0);
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    float4 na = op_a.load(0, k), nb = op_b.load(0, k);
    mm_f32_store<!TA>(sa[0], na);
    mm_f32_store<TB != 0>(sb[0], nb);
    __syncthreads();
    const long long slices = (k + 7) / 8;
    for (long long t = 0; t < slices; ++t) {
        const int buf = (int)(t & 1);
        if (t + 1 < slices) {
            na = op_a.load(t + 1, k);
            nb = op_b.load(t + 1, k);
        }
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            float av[8], bv[8];
            *(float4 *)&av[0] = *(const float4 *)&sa[buf][kk][4 * ty];
            *(float4 *)&av[4] = *(const float4 *)&sa[buf][kk][64 + 4 * ty];
            *(float4 *)&bv[0] = *(const float4 *)&sb[buf][kk][4 * tx];
            *(float4 *)&bv[4] = *(const float4 *)&sb[buf][kk][64 + 4 * tx];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        if (t + 1 < slices) { // the other buffer was last read before the previous barrier
            mm_f32_store<!TA>(sa[buf ^ 1], na);
            mm_f32_store<TB != 0>(sb[buf ^ 1], nb);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const long long r = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
        if (r >= m) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const long long col = col0 + 64 * h + 4 * tx;
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j)
                v[j] = col + j < n ? epi.apply(acc[i][4 * h + j], r * n + col + j, col + j)
                                   : acc[i][4 * h + j];
            if (col + 3 < n && n % 4 == 0 && (unsigned long long)c % 16 == 0) {
                *(float4 *)(c + r * n + col) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < n) c[r * n + col + j] = v[j];
            }
        }
    }
}

#ifdef TOCHA_MATMUL_WGMMA
// tocha_matmul_tc's tiles on the warp-specialized loop (mm_ws_tile): 384 threads a CTA.
template <typename T, int TA, int TB, int BN, typename F>
__device__ void tocha_matmul_ws(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                long long k, long long stride_a, long long stride_b, long long stride_c,
                                int has_bias, const T *residual, const T *grad, int epilogue)
{
    if (blockDim.x != 384) __trap();
    if (m <= 0 || n <= 0) return;
    long long row0, col0;
    mm_tile_of(m, n, BN, &row0, &col0);
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, blockIdx.z * stride_c);
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
    mm_ws_tile<T, TA, TB, BN>(a, b, epi, c, m, n, k, row0, col0);
}
#endif

template <typename T, int TA, int TB, typename F>
__device__ void tocha_matmul_simt(const T *a, const T *b, const T *bias, T *c, long long m, long long n,
                                  long long k, long long stride_a, long long stride_b,
                                  long long stride_c, int has_bias, const T *residual, const T *grad,
                                  int epilogue)
{
    typedef typename tocha::compute<T>::type A;
    __shared__ A sa[16][64 + 1], sb[16][64 + 1]; // [k][row], [k][column]
    if (blockDim.x != 256) __trap();             // 16 x 16 threads, each 4 x 4 outputs
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const long long row0 = (long long)blockIdx.y * 64, col0 = (long long)blockIdx.x * 64;
    const tocha_epilogue<T, F> epi =
        tocha_epilogue_of<T, F>(bias, has_bias, residual, grad, epilogue, blockIdx.z * stride_c);
    a += blockIdx.z * stride_a, b += blockIdx.z * stride_b, c += blockIdx.z * stride_c;
    A acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = (A)0;
    for (long long k0 = 0; k0 < k; k0 += 16) {
        for (int e = threadIdx.x; e < 64 * 16; e += blockDim.x) {
            const int r = e / 16, ka = e % 16; // A: consecutive threads along k
            const long long gr = row0 + r, gk = k0 + ka;
            sa[ka][r] = gr < m && gk < k ? tocha::to_compute(a[TA ? gk * m + gr : gr * k + gk]) : (A)0;
            const int kb = e / 64, col = e % 64; // B: consecutive threads along a row
            const long long gkb = k0 + kb, gc = col0 + col;
            sb[kb][col] =
                gkb < k && gc < n ? tocha::to_compute(b[TB ? gc * k + gkb : gkb * n + gc]) : (A)0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            A av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) av[i] = sa[kk][ty + 16 * i], bv[i] = sb[kk][tx + 16 * i];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const long long r = row0 + ty + 16 * i, col = col0 + tx + 16 * j;
            if (r < m && col < n)
                c[r * n + col] = tocha::from_compute<T>(epi.apply(acc[i][j], r * n + col, col));
        }
}
