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

// Pads of two neighbouring dimensions only, the tensor seen as planes of h x w pixels of
// `inner` elements (1 for pads of the last two dimensions; a channels-last tensor's channels for
// pads of its H and W): a team of lanes a row of w inner elements, each lane PAD_ROW_BYTES of a
// pass along it, every load of a pass issued before its stores (a copy keeps the memory system
// busy only with enough bytes in flight: one scalar a thread is a fraction of what HBM needs),
// one division a row to find its plane, coalesced reads and writes. Only the pads' elements
// divide to find their pixel. The same values as tocha_pad, and in the backward the same sums in
// the same order as tocha_pad_backward. A row and its padded one are under 2^31 elements
// together (pad.lua checks), so the index math along them is in 32 bits.
#define PAD_ROW_BYTES 32

// The lanes of a row's team: the least power of two whose passes of `unroll` elements a lane
// cover a row of `width` in one, at most a warp.
__device__ __forceinline__ unsigned pad_row_team(long long width, int unroll)
{
    unsigned team = 32;
    while (team > 1 && (long long)(team / 2) * unroll >= width) team /= 2;
    return team;
}

// The row's plane: r / per_plane, in 32 bits where the rows allow (a 64-bit division is many
// times dearer).
__device__ __forceinline__ long long pad_row_plane(long long r, long long rows, long long per_plane)
{
    return rows <= 0x7fffffffLL ? (long long)((unsigned)r / (unsigned)per_plane) : r / per_plane;
}

// The inputs [lo, hi) of a dimension (n inputs, b before, out outputs) that one output reads,
// at j + b, as each mode's readers make it (the mirror sources of reflect, the edges of
// replicate and the wrapped columns of circular read more than one).
template <int MODE>
__device__ __forceinline__ void pad_single_readers(long long n, long long out, long long b, long long *lo, long long *hi)
{
    const long long a = out - n - b, before = b > 0 ? b : 0, after = a > 0 ? a : 0;
    const long long cut_lo = b < 0 ? -b : 0, cut_hi = a < 0 ? -a : 0; // what the crops take
    long long l = cut_lo, h = n - cut_hi;
    if (MODE == 1) {
        if (before > 0) l = before + 1;
        if (after > 0) h = n - 1 - after;
    } else if (MODE == 2) {
        if (before > 0) l = 1;
        if (after > 0) h = n - 1;
    } else if (MODE == 3) {
        l = cut_lo + after;
        h = n - cut_hi - before;
    }
    *lo = l;
    *hi = h > l ? h : l;
}

// y [planes, oh, ow, inner] from x [planes, h, w, inner]; top and left the pads before
// (negative crops), in pixels.
template <typename T, int MODE>
__device__ void tocha_pad_rows(const T *__restrict__ x, T *__restrict__ y, long long planes, long long h, long long w,
                               long long oh, long long ow, long long inner, long long top, long long left,
                               double value)
{
    enum { U = PAD_ROW_BYTES / sizeof(T) };
    const T fill = tocha::from_compute<T>((typename tocha::compute<T>::type)value);
    const long long in_row = w * inner, out_row = ow * inner;
    const unsigned team = pad_row_team(out_row, U), each = (unsigned)inner;
    const int lane = threadIdx.x % team, width = (int)out_row, shift = (int)(left * inner);
    // the outputs that read x at ox - shift (the kept pixels), without pad_source's cases
    // (crops may take more than the row: constant and replicate allow it, and then keep none)
    const long long cut_lo = left < 0 ? tocha::min_ll(-left, w) : 0, cut_hi = ow - w - left < 0 ? w + left - ow : 0;
    const int kept_lo = (int)(cut_lo * inner), kept = (int)(tocha::max_ll(w - cut_lo - cut_hi, 0) * inner);
    const long long rows = planes * oh, step = (long long)gridDim.x * blockDim.x / team;
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / team; r < rows; r += step) {
        const long long plane = pad_row_plane(r, rows, oh), iy = pad_source<MODE>(r - plane * oh, h, oh, top);
        const T *src = x + (plane * h + (iy < 0 ? 0 : iy)) * in_row;
        T *dst = y + r * out_row;
        for (int base = lane; base < width; base += (int)team * U) {
            T v[U];
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const int ox = base + k * (int)team;
                int ix = ox - shift;
                if ((unsigned)(ix - kept_lo) >= (unsigned)kept) { // a pad's element: its pixel's source
                    const unsigned px = each == 1 ? (unsigned)ox : (unsigned)ox / each;
                    const int source = (int)pad_source<MODE>(px, w, ow, left);
                    ix = source < 0 ? -1 : source * (int)each + (ox - (int)(px * each));
                }
                v[k] = ox < width && iy >= 0 && ix >= 0 ? src[ix] : fill;
            }
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const int ox = base + k * (int)team;
                if (ox < width) dst[ox] = v[k];
            }
        }
    }
}

// The sum over dx element (jy, pixel ix, element e of it)'s readers in dy's plane, in
// tocha_pad_backward's order.
template <typename T, int MODE>
__device__ __forceinline__ typename tocha::compute<T>::type pad_rows_gather(const T *plane, long long jy, long long ix,
                                                                           long long e, long long h, long long w,
                                                                           long long oh, long long ow, long long inner,
                                                                           long long top, long long left)
{
    typedef typename tocha::compute<T>::type A;
    long long fy[3], cy[3], sy[3], fx[3], cx[3], sx[3];
    const long long ny = pad_readers<MODE>(jy, h, oh, top, fy, cy, sy);
    const long long nx = pad_readers<MODE>(ix, w, ow, left, fx, cx, sx);
    A sum = (A)0;
    for (long long a = 0; a < ny; ++a) {
        const T *row = plane + pad_reader(a, fy, cy, sy) * ow * inner + e;
        for (long long c = 0; c < nx; ++c) sum += tocha::to_compute(row[pad_reader(c, fx, cx, sx) * inner]);
    }
    return sum;
}

// dx [planes, h, w, inner] from dy [planes, oh, ow, inner]: a thread PAD_ROW_BYTES of a dx row
// a pass. An element whose row and pixel each have one reader loads it in the pass's first round
// (all loads in flight together); the edges' several readers are summed after.
template <typename T, int MODE>
__device__ void tocha_pad_rows_backward(const T *__restrict__ dy, T *__restrict__ dx, long long planes, long long h,
                                        long long w, long long oh, long long ow, long long inner, long long top,
                                        long long left, double value)
{
    typedef typename tocha::compute<T>::type A;
    enum { U = PAD_ROW_BYTES / sizeof(T) };
    (void)value;
    const long long in_row = w * inner, out_row = ow * inner;
    const unsigned team = pad_row_team(in_row, U), each = (unsigned)inner;
    const int lane = threadIdx.x % team, width = (int)in_row, shift = (int)(left * inner);
    long long xl, xh, y_lo, y_hi;
    pad_single_readers<MODE>(w, ow, left, &xl, &xh);
    pad_single_readers<MODE>(h, oh, top, &y_lo, &y_hi);
    const int x_lo = (int)(tocha::min_ll(xl, w) * inner), x_hi = (int)(tocha::min_ll(xh, w) * inner); // in elements
    const long long rows = planes * h, step = (long long)gridDim.x * blockDim.x / team;
    for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / team; r < rows; r += step) {
        const long long plane = pad_row_plane(r, rows, h), jy = r - plane * h;
        const T *planed = dy + plane * oh * out_row;
        const bool row_single = jy >= y_lo && jy < y_hi;
        const T *direct = planed + (row_single ? jy + top : 0) * out_row + shift;
        T *out = dx + r * in_row;
        for (int base = lane; base < width; base += (int)team * U) {
            A v[U];
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const int ix = base + k * (int)team;
                v[k] = (A)0;
                if (row_single && ix >= x_lo && ix < x_hi) v[k] += tocha::to_compute(direct[ix]);
            }
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const int ix = base + k * (int)team;
                if (ix < width && !(row_single && ix >= x_lo && ix < x_hi)) {
                    const unsigned px = each == 1 ? (unsigned)ix : (unsigned)ix / each;
                    v[k] = pad_rows_gather<T, MODE>(planed, jy, px, ix - (int)(px * each), h, w, oh, ow, inner, top,
                                                    left);
                }
            }
#pragma unroll
            for (int k = 0; k < U; ++k) {
                const int ix = base + k * (int)team;
                if (ix < width) out[ix] = tocha::from_compute<T>(v[k]);
            }
        }
    }
}
