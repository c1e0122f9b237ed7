// upsample_nearest2d_forward.cu: nearest-neighbour 2-D upsampling, NCHW or NHWC.
//
//   NCHW: x [B, C, H, W] -> y [B, C, OH, OW], y[b, c, oh, ow] = x[b, c, oh / SCALE_H, ow / SCALE_W]
//   NHWC: x [B, H, W, C] -> y [B, OH, OW, C], y[b, oh, ow, c] = x[b, oh / SCALE_H, ow / SCALE_W, c]
//   OH = H * SCALE_H, OW = W * SCALE_W; integer division, PyTorch's "nearest" for integer scales.
//
// Both layouts are rows of pixels (upsample_plan.h, which the host compiles ahead of this
// file): NCHW rows (b, c, h) of one-element pixels, NHWC rows (b, h) of C-element pixels;
// output row r reads input row r / SCALE_H.
//
// Mapping: each thread writes one 16-byte vector of y (V = 16 / sizeof(D) elements) per step
// of a grid-stride loop; BLOCK_OW threads per CTA, grid.x = ceil(vectors / BLOCK_OW)
// (tocha_upsample_forward_vectors). Which vectors, chosen per launch:
// - rows of whole vectors (a row's bytes a multiple of 16, y 16-byte aligned): the vectors of
//   each input row's output, each built once and stored to its SCALE_H output rows;
// - else the flat output's vectors on y's 16-byte grid, a partial one at each end.
// How a vector is built, chosen per vector:
// - inside one output row: one 16-byte load of x at its first source element
//   (tocha::load_unaligned16), taken whole where the sources are consecutive (NCHW with
//   SCALE_W 1, NHWC inside one pixel), else each output word one byte permute of it (NCHW);
// - otherwise (across rows or pixels, and y's two ends): element by element.
// x is read through the read-only path, asking L2 for 256-byte blocks (a warp's neighbours
// then find their lines there); y's vectors are plain 16-byte stores.
namespace tocha {

// A vector of one output row from the 16 bytes s at its first source element, whose place
// in that element's run of SCALE_W outputs is ph: output element j is source element
// (ph + j) / SCALE_W, which is j / SCALE_W, or the next one once ph reaches
// SCALE_W - j % SCALE_W.
template <typename D, int SCALE_W> __device__ __forceinline__ pack16<D> widen_run(const unsigned s[4], int ph)
{
    const int Z = (int)sizeof(D);
    pack16<D> p;
    if (Z >= 4) {
#pragma unroll
        for (int j = 0; j < vec16<D>::n; ++j) {
            const int e = j / SCALE_W, m = j % SCALE_W;
            const bool next = m != 0 && ph >= SCALE_W - m;
            const D here = element_of<D>(s, e), after = element_of<D>(s, e + 1 < vec16<D>::n ? e + 1 : e);
            p.set(j, next ? after : here);
        }
        return p;
    }
    // Bytes: each output word a permute of the two span words around its sources.
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int wi = (4 * k / Z) / SCALE_W * Z / 4;
        unsigned sel = 0;
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            const int j = (4 * k + t) / Z, b = (4 * k + t) % Z, m = j % SCALE_W;
            const int at = (j / SCALE_W) * Z + b - 4 * wi;
            const bool next = m != 0 && ph >= SCALE_W - m;
            sel |= (unsigned)(next ? at + Z : at) << (4 * t);
        }
        p.w[k] = __byte_perm(s[wi], wi + 1 < 4 ? s[wi + 1] : 0u, sel);
    }
    return p;
}

// Whether the vector at element e0 of a row of input row in_row (its first element xr) can be
// built whole, and if so builds it into p.
template <typename D, int SCALE_W, bool NHWC>
__device__ __forceinline__ bool row_vector(const D *xr, const tocha_upsample_rows &g, int e0, pack16<D> &p)
{
    const int V = vec16<D>::n;
    if (NHWC) {
        const int px = e0 / g.pixel, c = e0 - px * g.pixel;
        if (c + V > g.pixel) return false;
        load_unaligned16<true>(xr + (long long)(px / SCALE_W) * g.pixel + c, 16, p.w);
    } else if (SCALE_W == 1) {
        load_unaligned16<true>(xr + e0, 16, p.w);
    } else {
        const int ph = e0 % SCALE_W;
        unsigned s[4];
        load_unaligned16<true>(xr + e0 / SCALE_W, ((ph + V - 1) / SCALE_W + 1) * (int)sizeof(D), s);
        p = widen_run<D, SCALE_W>(s, ph);
    }
    return true;
}

// Elements lo to hi - 1 of the vector at element f of a space of rows of g.width elements,
// whose row r reads input row r / ROWS, element by element; the others are left 0.
template <typename D, int ROWS, int SCALE_W, bool NHWC>
__device__ __forceinline__ pack16<D> row_elements(const D *x, const tocha_upsample_rows &g, long long f, int lo, int hi)
{
    pack16<D> p;
    f += lo;
    const long long r = div_small(f, g.width);
    int e = (int)(f - r * g.width), rr = (int)(r % ROWS);
    const D *xr = x + r / ROWS * g.in_width;
    int px = NHWC ? e / g.pixel : e, c = NHWC ? e - px * g.pixel : 0;
#pragma unroll
    for (int j = 0; j < vec16<D>::n; ++j) {
        if (j < lo || j >= hi) continue;
        p.set(j, load_element(NHWC ? xr + (long long)(px / SCALE_W) * g.pixel + c : xr + e / SCALE_W));
        if (NHWC && ++c == g.pixel) c = 0, ++px;
        if (++e == g.width) {
            e = px = c = 0;
            if (++rr == ROWS) rr = 0, xr += g.in_width;
        }
    }
    return p;
}

} // namespace tocha

#define TOCHA_ENTRY_BOUNDS(...) TOCHA_UPSAMPLE_BOUNDS(2048, 2048, __VA_ARGS__, 0)

template <typename D, int SCALE_H, int SCALE_W, int BLOCK_OW, bool NHWC = false>
__device__ void upsample_nearest2d_forward(const D *x, D *y, int B, int C, int H, int W, int OH, int OW)
{
    (void)OH, (void)OW; // teeny-kernels' Args; the output follows from x's shape and the scales
    const int V = tocha::vec16<D>::n;
    const tocha_upsample_rows g = tocha_upsample_rows_of(NHWC, B, C, H, W, W * SCALE_W);
    const int head = (int)(((unsigned long long)y & 15u) / sizeof(D));
    const long long stride = (long long)gridDim.x * BLOCK_OW;
    long long i = (long long)blockIdx.x * BLOCK_OW + threadIdx.x;
    const long long n = tocha_upsample_forward_vectors(g, (int)sizeof(D), SCALE_H, head);
    if (tocha_upsample_forward_whole_rows(g, (int)sizeof(D), head)) {
        // Rows of whole vectors: vector i of the input rows' space, stored SCALE_H times.
        const int per_row = g.width / V;
        for (; i < n; i += stride) {
            const long long row = tocha::div_small(i, per_row);
            const int e0 = (int)(i - row * per_row) * V;
            tocha::pack16<D> p;
            if (!tocha::row_vector<D, SCALE_W, NHWC>(x + row * g.in_width, g, e0, p))
                p = tocha::row_elements<D, 1, SCALE_W, NHWC>(x, g, row * g.width + e0, 0, V);
            D *out = y + row * SCALE_H * g.width + e0;
#pragma unroll
            for (int r = 0; r < SCALE_H; ++r) tocha::store_pack(out + (long long)r * g.width, p);
        }
        return;
    }
    // The flat output on y's 16-byte grid: vector i holds elements i * V - head onwards.
    const long long total = g.in_rows * SCALE_H * g.width;
    for (; i < n; i += stride) {
        const long long f = i * V - head;
        const int lo = f < 0 ? (int)-f : 0, hi = (int)tocha::min_ll(V, total - f);
        if (lo == 0 && hi == V) {
            const long long r = tocha::div_small(f, g.width);
            const int e0 = (int)(f - r * g.width);
            tocha::pack16<D> p;
            if (e0 + V > g.width || !tocha::row_vector<D, SCALE_W, NHWC>(x + r / SCALE_H * g.in_width, g, e0, p))
                p = tocha::row_elements<D, SCALE_H, SCALE_W, NHWC>(x, g, f, 0, V);
            tocha::store_pack(y + f, p);
        } else {
            tocha::store_elements(y + f, tocha::row_elements<D, SCALE_H, SCALE_W, NHWC>(x, g, f, lo, hi), lo, hi);
        }
    }
}
