// channel_cat.cu: y = the concatenation of a and b along dimension 1 (the channels of NCHW,
// or of any tensor of two or more dimensions), and its backward, the split of dy into da and
// db. Seen per batch item, y's item is a's item (sa = C_a x the inner sizes elements) followed
// by b's (sb elements): the kernels copy those runs. Where sa and sb are whole 16-byte vectors
// and every pointer is 16-byte aligned, a thread copies one vector (a vector never straddles a
// and b); otherwise one element.

template <typename T>
__device__ __forceinline__ void cat_copy16(T *dst, const T *src)
{
    unsigned w[4];
    tocha::load_words<16>(src, w);
    tocha::pack16<T> x;
    x.w[0] = w[0], x.w[1] = w[1], x.w[2] = w[2], x.w[3] = w[3];
    tocha::store_pack(dst, x);
}

// The position in a (first) or b of element e of the concatenated tensor.
__device__ __forceinline__ long long cat_source(long long e, long long sa, long long sb, bool *in_a)
{
    const long long item = e / (sa + sb), at = e - item * (sa + sb);
    *in_a = at < sa;
    return *in_a ? item * sa + at : item * sb + (at - sa);
}

template <typename T>
__device__ bool cat_vectors(const T *a, const T *b, const T *y, long long sa, long long sb)
{
    const long long V = 16 / (long long)sizeof(T);
    return sa % V == 0 && sb % V == 0 &&
           (((unsigned long long)a | (unsigned long long)b | (unsigned long long)y) & 15u) == 0;
}

// y: batch x (sa + sb) elements; a: batch x sa; b: batch x sb.
template <typename T>
__device__ void tocha_channel_cat(const T *a, const T *b, T *y, long long batch, long long sa, long long sb)
{
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long total = batch * (sa + sb);
    if (cat_vectors(a, b, y, sa, sb)) {
        const long long V = 16 / (long long)sizeof(T);
        for (long long v = first; v < total / V; v += stride) {
            bool in_a;
            long long at = cat_source(v * V, sa, sb, &in_a);
            cat_copy16(y + v * V, (in_a ? a : b) + at);
        }
        return;
    }
    for (long long e = first; e < total; e += stride) {
        bool in_a;
        long long at = cat_source(e, sa, sb, &in_a);
        y[e] = (in_a ? a : b)[at];
    }
}

// The backward: da and db are dy's runs.
template <typename T>
__device__ void tocha_channel_split(const T *dy, T *da, T *db, long long batch, long long sa, long long sb)
{
    const long long stride = (long long)blockDim.x * gridDim.x, first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long total = batch * (sa + sb);
    if (cat_vectors(da, db, dy, sa, sb)) {
        const long long V = 16 / (long long)sizeof(T);
        for (long long v = first; v < total / V; v += stride) {
            bool in_a;
            long long at = cat_source(v * V, sa, sb, &in_a);
            cat_copy16((in_a ? da : db) + at, dy + v * V);
        }
        return;
    }
    for (long long e = first; e < total; e += stride) {
        bool in_a;
        long long at = cat_source(e, sa, sb, &in_a);
        (in_a ? da : db)[at] = dy[e];
    }
}
