// channel_chunk.cu: y = one of `chunks` equal parts of x along dimension 2 (NCHW's channels),
// and its backward, dx = dy in that part and 0 elsewhere. Per batch item, x's item is `item`
// elements and y's part of it a run of `run` elements from `offset`. Where the lengths are whole
// 16-byte vectors and the pointers 16-byte aligned, a thread moves one vector; else one element.

template <typename T>
__device__ __forceinline__ bool chunk_vectors(const T *a, const T *b, long long item, long long offset, long long run)
{
    const long long V = 16 / (long long)sizeof(T);
    return item % V == 0 && offset % V == 0 && run % V == 0 &&
           (((unsigned long long)a | (unsigned long long)b) & 15u) == 0;
}

template <typename T>
__device__ __forceinline__ void chunk_copy16(T *dst, const T *src)
{
    unsigned w[4];
    tocha::load_words<16>(src, w);
    tocha::pack16<T> x;
    x.w[0] = w[0], x.w[1] = w[1], x.w[2] = w[2], x.w[3] = w[3];
    tocha::store_pack(dst, x);
}

template <typename T>
__device__ void tocha_channel_chunk(const T *x, T *y, long long batch, long long item, long long offset, long long run)
{
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long total = batch * run;
    if (chunk_vectors(x, y, item, offset, run)) {
        const long long V = 16 / (long long)sizeof(T);
        for (long long v = first; v < total / V; v += stride) {
            const long long e = v * V, b = e / run;
            chunk_copy16(y + e, x + b * item + offset + (e - b * run));
        }
        return;
    }
    for (long long e = first; e < total; e += stride) {
        const long long b = e / run;
        y[e] = x[b * item + offset + (e - b * run)];
    }
}

template <typename T>
__device__ void tocha_channel_unchunk(const T *dy, T *dx, long long batch, long long item, long long offset, long long run)
{
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long total = batch * item;
    const T zero = tocha::from_double<T>(0.0);
    if (chunk_vectors(dy, dx, item, offset, run)) {
        const long long V = 16 / (long long)sizeof(T);
        for (long long v = first; v < total / V; v += stride) {
            const long long e = v * V, b = e / item, at = e - b * item;
            if (at >= offset && at < offset + run) {
                chunk_copy16(dx + e, dy + b * run + (at - offset));
            } else {
                tocha::pack16<T> z; // all bits zero: 0 in every dtype
                tocha::store_pack(dx + e, z);
            }
        }
        return;
    }
    for (long long e = first; e < total; e += stride) {
        const long long b = e / item, at = e - b * item;
        dx[e] = at >= offset && at < offset + run ? dy[b * run + (at - offset)] : zero;
    }
}
