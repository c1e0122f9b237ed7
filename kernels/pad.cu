// pad.cu: padding (and, with negative pads, cropping) of a dense tensor of up to 8 dimensions,
// forward and backward, as PyTorch's F.pad and ONNX's Pad compute it. MODE (0 constant, 1
// reflect, 2 replicate, 3 circular) and the dtype T are compile-time constants; the sizes come
// as d (the input's), o (the output's) and b (the pad before each dimension; negative crops).
//
// Along a dimension of n inputs, output index p reads input j = p - b, or where j is outside
// [0, n): constant, no input (the value); reflect, the mirror image without repeating the edge
// (-1 -> 1, n -> n - 2; the host keeps each pad under what the crops leave); replicate, the
// nearer edge; circular, as PyTorch: the crops first, then j wrapped over what is left (the
// host keeps each pad at most that).
//
// Backward: gathered, never scattered (no atomics: one summation order on every device). The
// outputs that read input j along a dimension are at most three points (constant: one;
// reflect: j + b and its two mirror images), a run (replicate: the edges take the pads) or a
// progression of step n (circular); a thread a dx element sums dy over every combination of
// its dimensions' readers, the last dimension fastest.

#define PAD_DIMS 8

// Circular mode crops first (the negative pads) and wraps what is left: the kept inputs
// [lo, lo + m) and the outputs' shift (the pad before, or 0), for n inputs, out outputs, b before.
__device__ __forceinline__ void pad_kept(long long n, long long out, long long b, long long *lo, long long *m,
                                         long long *shift)
{
    const long long a = out - n - b;
    *lo = b < 0 ? -b : 0;
    *m = n - *lo - (a < 0 ? -a : 0);
    *shift = b > 0 ? b : 0;
}

// The input index output index p of a dimension of n inputs, out outputs, b before reads, or -1
// (constant mode, outside).
template <int MODE> __device__ __forceinline__ long long pad_source(long long p, long long n, long long out, long long b)
{
    long long j = p - b;
    if (MODE != 3 && j >= 0 && j < n) return j;
    if (MODE == 0) return -1;
    if (MODE == 1) return j < 0 ? -j : 2 * (n - 1) - j;
    if (MODE == 2) return j < 0 ? 0 : n - 1;
    long long lo, m, shift;
    pad_kept(n, out, b, &lo, &m, &shift);
    j = (p - shift) % m;
    return (j < 0 ? j + m : j) + lo;
}

// The outputs along one dimension that read input index j, as up to three progressions
// (first, count, step); returns how many outputs in all.
template <int MODE>
__device__ __forceinline__ long long pad_readers(long long j, long long n, long long out, long long b, long long first[3],
                                                 long long count[3], long long step[3])
{
#pragma unroll
    for (int k = 0; k < 3; ++k) first[k] = 0, count[k] = 0, step[k] = 1;
    if (MODE == 0 || MODE == 1) {
        const long long cand[3] = {j + b, b - j, b + 2 * (n - 1) - j};
        const int m = MODE == 0 ? 1 : 3;
#pragma unroll
        for (int k = 0; k < m; ++k) {
            const long long p = cand[k];
            bool fresh = p >= 0 && p < out && pad_source<MODE>(p, n, out, b) == j;
#pragma unroll
            for (int q = 0; q < k; ++q) fresh = fresh && !(count[q] && first[q] == p);
            if (fresh) first[k] = p, count[k] = 1;
        }
    } else if (MODE == 2) {
        long long lo = j == 0 ? 0 : j + b, hi = j == n - 1 ? out - 1 : j + b;
        if (lo < 0) lo = 0;
        if (hi > out - 1) hi = out - 1;
        if (lo <= hi) first[0] = lo, count[0] = hi - lo + 1;
    } else {
        long long lo, m, shift;
        pad_kept(n, out, b, &lo, &m, &shift);
        if (j >= lo && j < lo + m) {
            const long long p = (j - lo + shift) % m;
            if (p < out) first[0] = p, count[0] = (out - 1 - p) / m + 1, step[0] = m;
        }
    }
    return count[0] + count[1] + count[2];
}

// The k-th (from 0) of the outputs pad_readers gave.
__device__ __forceinline__ long long pad_reader(long long k, const long long first[3], const long long count[3],
                                                const long long step[3])
{
#pragma unroll
    for (int q = 0; q < 2; ++q) {
        if (k < count[q]) return first[q] + k * step[q];
        k -= count[q];
    }
    return first[2] + k * step[2];
}

// y of shape o from x of shape d: a thread an output element.
template <typename T, int MODE>
__device__ void tocha_pad(const T *x, T *y, long long total, int ndim, long long d0, long long d1, long long d2,
                          long long d3, long long d4, long long d5, long long d6, long long d7, long long o0,
                          long long o1, long long o2, long long o3, long long o4, long long o5, long long o6,
                          long long o7, long long b0, long long b1, long long b2, long long b3, long long b4,
                          long long b5, long long b6, long long b7, double value)
{
    const long long d[PAD_DIMS] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long o[PAD_DIMS] = {o0, o1, o2, o3, o4, o5, o6, o7};
    const long long b[PAD_DIMS] = {b0, b1, b2, b3, b4, b5, b6, b7};
    const T fill = tocha::from_compute<T>((typename tocha::compute<T>::type)value);
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        long long rest = e, at = 0, stride = 1;
        bool inside = true;
#pragma unroll
        for (int k = PAD_DIMS - 1; k >= 0; --k) {
            if (k >= ndim) continue; // (unrolled with constant indices: the sizes stay in registers)
            const long long p = rest % o[k];
            rest /= o[k];
            const long long j = pad_source<MODE>(p, d[k], o[k], b[k]);
            inside = inside && j >= 0;
            at += j * stride;
            stride *= d[k];
        }
        y[e] = inside ? x[at] : fill;
    }
}

// dx of shape d from dy of shape o: a thread a dx element, summing dy over its readers.
template <typename T, int MODE>
__device__ void tocha_pad_backward(const T *dy, T *dx, long long total, int ndim, long long d0, long long d1,
                                   long long d2, long long d3, long long d4, long long d5, long long d6, long long d7,
                                   long long o0, long long o1, long long o2, long long o3, long long o4, long long o5,
                                   long long o6, long long o7, long long b0, long long b1, long long b2, long long b3,
                                   long long b4, long long b5, long long b6, long long b7, double value)
{
    typedef typename tocha::compute<T>::type A;
    const long long d[PAD_DIMS] = {d0, d1, d2, d3, d4, d5, d6, d7};
    const long long o[PAD_DIMS] = {o0, o1, o2, o3, o4, o5, o6, o7};
    const long long b[PAD_DIMS] = {b0, b1, b2, b3, b4, b5, b6, b7};
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)blockDim.x * gridDim.x) {
        long long first[PAD_DIMS][3], count[PAD_DIMS][3], step[PAD_DIMS][3], readers[PAD_DIMS];
        long long rest = e, combinations = 1;
#pragma unroll
        for (int k = PAD_DIMS - 1; k >= 0; --k) {
            if (k >= ndim) continue;
            const long long j = rest % d[k];
            rest /= d[k];
            readers[k] = pad_readers<MODE>(j, d[k], o[k], b[k], first[k], count[k], step[k]);
            combinations *= readers[k];
        }
        A sum = (A)0;
        for (long long c = 0; c < combinations; ++c) {
            long long r = c, at = 0, stride = 1;
#pragma unroll
            for (int k = PAD_DIMS - 1; k >= 0; --k) {
                if (k >= ndim) continue;
                const long long q = r % readers[k];
                r /= readers[k];
                at += pad_reader(q, first[k], count[k], step[k]) * stride;
                stride *= o[k];
            }
            sum += tocha::to_compute(dy[at]);
        }
        dx[e] = tocha::from_compute<T>(sum);
    }
}

// Pads of the last two dimensions only (every pad before them 0), the tensor seen as planes of
// h x w: a team of lanes a row (32, or the least power of two not under a narrower row), one
// division a row to find its plane, coalesced reads and writes along it. The same values as
// tocha_pad, and in the backward the same sums in the same order as tocha_pad_backward.
__device__ __forceinline__ unsigned pad_row_team(long long width)
{
    unsigned team = 32;
    while (team > 1 && team / 2 >= width) team /= 2;
    return team;
}

// y [planes, oh, ow] from x [planes, h, w]; top and left the pads before (negative crops).
template <typename T, int MODE>
__device__ void tocha_pad_rows(const T *x, T *y, long long planes, long long h, long long w, long long oh, long long ow,
                               long long top, long long left, double value)
{
    const T fill = tocha::from_compute<T>((typename tocha::compute<T>::type)value);
    const unsigned team = pad_row_team(ow);
    const long long lane = threadIdx.x % team, rows = planes * oh;
    const long long step = (long long)gridDim.x * blockDim.x / team;
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / team; r < rows; r += step) {
        const long long plane = r / oh, iy = pad_source<MODE>(r - plane * oh, h, oh, top);
        const T *src = x + (plane * h + (iy < 0 ? 0 : iy)) * w;
        T *dst = y + r * ow;
        for (long long ox = lane; ox < ow; ox += team) {
            const long long ix = iy < 0 ? -1 : pad_source<MODE>(ox, w, ow, left);
            dst[ox] = ix >= 0 ? src[ix] : fill;
        }
    }
}

// dx [planes, h, w] from dy [planes, oh, ow]: a thread a dx element, its row's readers found once
// by the team.
template <typename T, int MODE>
__device__ void tocha_pad_rows_backward(const T *dy, T *dx, long long planes, long long h, long long w, long long oh,
                                        long long ow, long long top, long long left, double value)
{
    typedef typename tocha::compute<T>::type A;
    (void)value;
    const unsigned team = pad_row_team(w);
    const long long lane = threadIdx.x % team, rows = planes * h;
    const long long step = (long long)gridDim.x * blockDim.x / team;
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / team; r < rows; r += step) {
        const long long plane = r / h;
        long long fy[3], cy[3], sy[3], fx[3], cx[3], sx[3];
        const long long ny = pad_readers<MODE>(r - plane * h, h, oh, top, fy, cy, sy);
        const T *planed = dy + plane * oh * ow;
        for (long long ix = lane; ix < w; ix += team) {
            const long long nx = pad_readers<MODE>(ix, w, ow, left, fx, cx, sx);
            A sum = (A)0;
            for (long long a = 0; a < ny; ++a) {
                const T *row = planed + pad_reader(a, fy, cy, sy) * ow;
                for (long long c = 0; c < nx; ++c) sum += tocha::to_compute(row[pad_reader(c, fx, cx, sx)]);
            }
            dx[r * w + ix] = tocha::from_compute<T>(sum);
        }
    }
}
