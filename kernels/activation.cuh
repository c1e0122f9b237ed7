// activation.cuh: the activation functions a kernel bakes in as a template argument F, each a
// struct with value(x) = F(x) and grad(x, dy) = dy F'(x) computed from x alone (a backward
// recomputes the forward's input where F' needs it). A is the compute type (f32 for halves,
// f64 for f64). Elementwise ops (elementwise.cu) and the fused epilogues of matrix products
// and convolutions (epilogue.cuh) share them, so a fused Conv2d + SiLU and a Conv2d followed by
// Elementwise("silu") compute the same function. Gradients follow PyTorch's: relu' is 0 at 0;
// gelu is the exact form, with erf.
// identity passes x (Elementwise's copy).

__device__ __forceinline__ float ew_exp(float v) { return expf(v); }
__device__ __forceinline__ double ew_exp(double v) { return exp(v); }
__device__ __forceinline__ float ew_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double ew_tanh(double v) { return tanh(v); }
__device__ __forceinline__ float ew_erf(float v) { return erff(v); }
__device__ __forceinline__ double ew_erf(double v) { return erf(v); }
__device__ __forceinline__ float ew_expm1(float v) { return expm1f(v); }
__device__ __forceinline__ double ew_expm1(double v) { return expm1(v); }
__device__ __forceinline__ float ew_log1p(float v) { return log1pf(v); }
__device__ __forceinline__ double ew_log1p(double v) { return log1p(v); }

// A value baked in as the bits of a double (a floating-point value cannot be a template
// argument), in the compute type A: leaky_relu's slope, elu's and celu's alpha.
template <typename A, long long BITS> __device__ __forceinline__ A ew_baked()
{
    const long long bits = BITS;
    double v;
    memcpy(&v, &bits, sizeof v);
    return (A)v;
}

template <typename A> __device__ __forceinline__ A ew_sigmoid(A v) { return (A)1 / ((A)1 + ew_exp(-v)); }

#define ACT_DEV template <typename A> static __device__ __forceinline__
struct ew_fn_identity {
    ACT_DEV A value(A x) { return x; }
    ACT_DEV A grad(A, A dy) { return dy; }
};
struct ew_fn_relu {
    // NaN passes through, as PyTorch's relu
    ACT_DEV A value(A x) { return x > (A)0 || x != x ? x : (A)0; }
    ACT_DEV A grad(A x, A dy) { return x > (A)0 ? dy : (A)0; }
};
struct ew_fn_sigmoid {
    ACT_DEV A value(A x) { return ew_sigmoid(x); }
    ACT_DEV A grad(A x, A dy)
    {
        A s = ew_sigmoid(x);
        return dy * s * ((A)1 - s);
    }
};
struct ew_fn_tanh {
    ACT_DEV A value(A x) { return ew_tanh(x); }
    ACT_DEV A grad(A x, A dy)
    {
        A t = ew_tanh(x);
        return dy * ((A)1 - t * t);
    }
};
struct ew_fn_silu {
    ACT_DEV A value(A x) { return x * ew_sigmoid(x); }
    ACT_DEV A grad(A x, A dy)
    {
        A s = ew_sigmoid(x);
        return dy * s * ((A)1 + x * ((A)1 - s));
    }
};
struct ew_fn_gelu {
    ACT_DEV A value(A x) { return (A)0.5 * x * ((A)1 + ew_erf(x * (A)0.70710678118654752440)); }
    ACT_DEV A grad(A x, A dy)
    {
        A cdf = (A)0.5 * ((A)1 + ew_erf(x * (A)0.70710678118654752440));
        A pdf = ew_exp((A)-0.5 * x * x) * (A)0.39894228040143267794;
        return dy * (cdf + x * pdf);
    }
};
// gelu_tanh, PyTorch's gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct ew_fn_gelu_tanh {
    template <typename A> static __device__ __forceinline__ A inner(A x)
    {
        return (A)0.79788456080286535588 * (x + (A)0.044715 * x * x * x);
    }
    ACT_DEV A value(A x) { return (A)0.5 * x * ((A)1 + ew_tanh(inner(x))); }
    ACT_DEV A grad(A x, A dy)
    {
        A t = ew_tanh(inner(x));
        A du = (A)0.79788456080286535588 * ((A)1 + (A)3 * (A)0.044715 * x * x);
        return dy * ((A)0.5 * ((A)1 + t) + (A)0.5 * x * ((A)1 - t * t) * du);
    }
};
// PyTorch's hardsigmoid, relu6(x + 3) / 6, and hardswish, x relu6(x + 3) / 6 (MobileNetV3's);
// their gradients as PyTorch's: hardsigmoid' is 1/6 strictly inside (-3, 3), hardswish' is x/3 +
// 1/2 on [-3, 3] and 0 or 1 outside.
template <typename A> __device__ __forceinline__ A ew_relu6(A v) { return v < (A)0 ? (A)0 : v > (A)6 ? (A)6 : v; }
struct ew_fn_hardsigmoid {
    ACT_DEV A value(A x) { return x != x ? x : ew_relu6(x + (A)3) / (A)6; }
    ACT_DEV A grad(A x, A dy) { return x > (A)-3 && x < (A)3 ? dy / (A)6 : (A)0; }
};
struct ew_fn_hardswish {
    ACT_DEV A value(A x) { return x != x ? x : x * ew_relu6(x + (A)3) / (A)6; }
    ACT_DEV A grad(A x, A dy) { return x < (A)-3 ? (A)0 : x <= (A)3 ? dy * (x / (A)3 + (A)0.5) : dy; }
};
// relu6 = min(max(x, 0), 6) (MobileNetV2's; ONNX's Clip(0, 6)), its gradient dy strictly inside
// (0, 6) as PyTorch's hardtanh; erf, for networks that write GELU out with it.
struct ew_fn_relu6 {
    ACT_DEV A value(A x) { return x != x ? x : ew_relu6(x); }
    ACT_DEV A grad(A x, A dy) { return x > (A)0 && x < (A)6 ? dy : (A)0; }
};
struct ew_fn_erf {
    ACT_DEV A value(A x) { return ew_erf(x); }
    ACT_DEV A grad(A x, A dy) { return dy * (A)1.12837916709551257390 * ew_exp(-x * x); }
};
// leaky_relu with its negative slope baked in (ew_baked): x for x > 0, else slope x, as
// PyTorch's (its gradient likewise, the slope at 0).
template <long long SLOPE_BITS> struct ew_fn_leaky_relu {
    ACT_DEV A value(A x) { return x > (A)0 ? x : x * ew_baked<A, SLOPE_BITS>(); }
    ACT_DEV A grad(A x, A dy) { return x > (A)0 ? dy : dy * ew_baked<A, SLOPE_BITS>(); }
};
// elu, alpha baked in: x for x > 0, else alpha (e^x - 1) (expm1, exact near 0); selu is elu
// with PyTorch's alpha and scale; celu(alpha) = max(0, x) + min(0, alpha (e^(x/alpha) - 1)).
// Gradients as PyTorch's: the negative branch's at 0.
template <long long ALPHA_BITS> struct ew_fn_elu {
    ACT_DEV A value(A x) { return x > (A)0 ? x : ew_baked<A, ALPHA_BITS>() * ew_expm1(x); }
    ACT_DEV A grad(A x, A dy) { return x > (A)0 ? dy : dy * ew_baked<A, ALPHA_BITS>() * ew_exp(x); }
};
template <long long ALPHA_BITS> struct ew_fn_celu {
    ACT_DEV A value(A x) { return x > (A)0 ? x : ew_baked<A, ALPHA_BITS>() * ew_expm1(x / ew_baked<A, ALPHA_BITS>()); }
    ACT_DEV A grad(A x, A dy) { return x > (A)0 ? dy : dy * ew_exp(x / ew_baked<A, ALPHA_BITS>()); }
};
struct ew_fn_selu {
    template <typename A> static __device__ __forceinline__ A alpha() { return (A)1.6732632423543772848170429916717; }
    template <typename A> static __device__ __forceinline__ A scale() { return (A)1.0507009873554804934193349852946; }
    ACT_DEV A value(A x) { return scale<A>() * (x > (A)0 ? x : alpha<A>() * ew_expm1(x)); }
    ACT_DEV A grad(A x, A dy) { return dy * scale<A>() * (x > (A)0 ? (A)1 : alpha<A>() * ew_exp(x)); }
};
// softplus = log(1 + e^x), PyTorch's with beta 1 and threshold 20 (x itself past 20, where the
// two differ by under e^-20); its gradient sigmoid(x). mish = x tanh(softplus(x)) (YOLOv4's,
// timm's), as PyTorch's: no threshold (e^x overflows to inf past 88 and tanh(inf) = 1).
template <typename A> __device__ __forceinline__ A ew_softplus(A x) { return x > (A)20 ? x : ew_log1p(ew_exp(x)); }
struct ew_fn_softplus {
    ACT_DEV A value(A x) { return ew_softplus(x); }
    ACT_DEV A grad(A x, A dy) { return x > (A)20 ? dy : dy * ew_sigmoid(x); }
};
struct ew_fn_mish {
    ACT_DEV A value(A x) { return x * ew_tanh(ew_log1p(ew_exp(x))); }
    ACT_DEV A grad(A x, A dy)
    {
        A t = ew_tanh(ew_log1p(ew_exp(x)));
        return dy * (t + x * ew_sigmoid(x) * ((A)1 - t * t));
    }
};
#undef ACT_DEV
