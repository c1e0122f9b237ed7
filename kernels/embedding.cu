// embedding.cu: a lookup table's rows picked by integer indices (PyTorch's nn.Embedding,
// Torch7's nn.LookupTable, ONNX's Gather of an initializer along axis 0) and the table's
// gradient.
//
// Forward: y[p, :] = weight[r(p), :] for each of the n positions p, where r(p) = idx[p] - base
// (base 1 for Lua's 1-based indices, 0 for PyTorch's and ONNX's), and with `wrap` a negative
// r counts from the table's end (ONNX's Gather). An index outside the table makes its row of y
// NaN and is recorded in `bad` when `record` is set (the position + 1, the first written wins),
// so that a direct call raises and a model's output shows it instead of reading past the table.
//
// Backward, in one order on every device (no float atomics, the same bits every run):
//   tocha_embedding_index (one CTA) sorts the positions by row, stably: it counts each row's
//   positions (integer atomics), turns the counts into starts, then places the positions chunk
//   by chunk in order, a position's slot its row's cursor plus the number of earlier positions
//   of its chunk with the same row;
//   tocha_embedding_grad sums, for each row and column, dy over the row's positions in
//   ascending order (in f32 for halves, f64 for f64) and writes the row of dweight (0 for a
//   row no position picks and for the padding row).
// The workspace holds start (rows + 1 i32), cursor (rows i32) and the sorted positions (n i32).

#define EMBEDDING_INDEX_THREADS 256

// The table row of index v, or -1 outside the table.
template <typename I>
__device__ __forceinline__ long long embedding_row(I v, long long rows, long long base, int wrap)
{
    long long r = (long long)v - base;
    if (wrap && r < 0) r += rows;
    return (r >= 0 && r < rows) ? r : -1;
}

// Block (32, 8): threadIdx.y picks a position, threadIdx.x walks its row's columns.
template <typename T, typename I>
__global__ void tocha_embedding(const I *idx, const T *weight, T *y, long long n, long long rows,
                                long long dim, long long base, int wrap, long long *bad, int record)
{
    // Rows of whole 16-byte vectors, with the table and y on 16-byte boundaries, copy in
    // vectors: a quarter (f32) or an eighth (halves) of the loads an element at a time takes.
    const long long row_bytes = dim * (long long)sizeof(T);
    const long long vectors = (row_bytes % 16 == 0 && ((unsigned long long)weight % 16) == 0 &&
                               ((unsigned long long)y % 16) == 0) ? row_bytes / 16 : 0;
    for (long long p = (long long)blockIdx.x * blockDim.y + threadIdx.y; p < n;
         p += (long long)gridDim.x * blockDim.y) {
        const long long r = embedding_row(idx[p], rows, base, wrap);
        T *out = y + p * dim;
        if (r < 0) {
            if (threadIdx.x == 0 && record) atomicCAS((unsigned long long *)bad, 0ull, (unsigned long long)(p + 1));
            const T nan = tocha::from_double<T>(__longlong_as_double(0x7ff8000000000000ll));
            for (long long c = threadIdx.x; c < dim; c += blockDim.x) out[c] = nan;
            continue;
        }
        const T *in = weight + r * dim;
        if (vectors) {
            const uint4 *in16 = (const uint4 *)in;
            uint4 *out16 = (uint4 *)out;
            for (long long c = threadIdx.x; c < vectors; c += blockDim.x) out16[c] = in16[c];
        } else {
            for (long long c = threadIdx.x; c < dim; c += blockDim.x) out[c] = in[c];
        }
    }
}

// One CTA of EMBEDDING_INDEX_THREADS (any shape: the gradient's (32, 8) too; its counters 64-bit,
// so that n and rows up to 2^31 - 1 do not wrap them): the positions of each row, in ascending
// order, as sorted[start[r] .. start[r + 1]). Positions whose index is outside the table are left out.
template <typename I>
__global__ void __launch_bounds__(EMBEDDING_INDEX_THREADS)
tocha_embedding_index(const I *idx, int *start, int *cursor, int *sorted, int n, int rows, long long base, int wrap)
{
    __shared__ int part[EMBEDDING_INDEX_THREADS];
    __shared__ int keys[EMBEDDING_INDEX_THREADS];
    const int t = threadIdx.x + threadIdx.y * blockDim.x, B = EMBEDDING_INDEX_THREADS;
    for (long long r = t; r < rows; r += B) cursor[r] = 0;
    __syncthreads();
    for (long long p = t; p < n; p += B) {
        const long long r = embedding_row(idx[p], rows, base, wrap);
        if (r >= 0) atomicAdd(&cursor[r], 1);
    }
    __syncthreads();
    // Exclusive scan of the counts: thread t sums its span of rows, the spans' sums are scanned
    // in shared memory, then each span is written from its offset.
    const long long span = ((long long)rows + B - 1) / B;
    const long long lo = tocha::min_ll(t * span, rows), hi = tocha::min_ll(lo + span, rows);
    int sum = 0;
    for (long long r = lo; r < hi; r++) sum += cursor[r];
    part[t] = sum;
    __syncthreads();
    for (int step = 1; step < B; step *= 2) {
        const int add = t >= step ? part[t - step] : 0;
        __syncthreads();
        part[t] += add;
        __syncthreads();
    }
    int at = part[t] - sum;
    for (long long r = lo; r < hi; r++) {
        const int count = cursor[r];
        start[r] = at;
        cursor[r] = at;
        at += count;
    }
    if (t == B - 1) start[rows] = part[B - 1];
    __syncthreads();
    // Stable placement, a chunk of B positions at a time.
    for (long long chunk = 0; chunk < n; chunk += B) {
        const long long p = chunk + t;
        const int key = p < n ? (int)embedding_row(idx[p], rows, base, wrap) : -1;
        keys[t] = key;
        __syncthreads();
        int rank = 0;
        bool last = true;
        if (key >= 0) {
            for (int s = 0; s < B; s++) {
                if (keys[s] == key) {
                    if (s < t) rank++;
                    else if (s > t) last = false;
                }
            }
            sorted[cursor[key] + rank] = (int)p;
        }
        __syncthreads();
        if (key >= 0 && last) cursor[key] += rank + 1;
        __syncthreads();
    }
}

// Block (32, 8): threadIdx.y picks a table row, threadIdx.x walks its columns. padding: the
// 0-based row whose gradient stays 0 (-1 for none).
template <typename T>
__global__ void tocha_embedding_grad(const T *dy, const int *start, const int *sorted, T *dweight, long long rows,
                                     long long dim, long long padding)
{
    typedef typename tocha::compute<T>::type A;
    for (long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y; r < rows;
         r += (long long)gridDim.x * blockDim.y) {
        const int lo = r == padding ? 0 : start[r], hi = r == padding ? 0 : start[r + 1];
        for (long long c = threadIdx.x; c < dim; c += blockDim.x) {
            A acc = 0;
            for (int j = lo; j < hi; j++) acc += tocha::to_compute(dy[(long long)sorted[j] * dim + c]);
            dweight[r * dim + c] = tocha::from_compute<T>(acc);
        }
    }
}
