-- Tensor math: operators and methods with broadcasting, comparisons, where and clamp, the
-- unary functions, in-place forms, views as operands, dtype promotion, reductions (over every
-- element, one and several dimensions, keepdim), arg reductions, var/std and softmax. Every
-- result element is checked against a reference computed here in f64 from the inputs as
-- stored, rounded once to the result's dtype. On sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"

ffi.cdef [[ double erf(double); double expm1(double); double log1p(double); double trunc(double); double rint(double); ]]
local C = ffi.C

local fails = require("support.assertions").fails

-- got (a tensor) against want (a flat list of f64 values, before rounding to got's dtype):
-- within `ulps` roundings of the dtype, relative to max(1, |want|) (`scale` overrides the 1).
local function check(got, want, ulps, label, scale)
  local dt = got:dtype()
  local g = got:to_table(true)
  assert.are.equal(#want, #g, label .. ": element count")
  local eps = ref.eps[dt]
  for i = 1, #want do
    local w = ref.convert(want[i], dt)
    local ok
    if w ~= w then ok = g[i] ~= g[i]
    elseif w == math.huge or w == -math.huge then ok = g[i] == w
    else ok = math.abs(g[i] - w) <= (ulps or 0) * eps * math.max(scale or 1, math.abs(w)) end
    if not ok then
      error(("%s [%d]: got %.10g, want %.10g (%s)"):format(label, i, g[i], w, dt), 2)
    end
  end
end

-- Row-major flat index -> indices (support.reference's), and the flat index of indices in a
-- shape (broadcasting: a size-1 dimension of `shape`, or a missing leading one, reads index 1).
local indices_of = ref.indices_of
local function flat_of(idx, shape)
  local lead, pos = #idx - #shape, 0
  for k = 1, #shape do
    local v = shape[k] == 1 and 1 or idx[k + lead]
    pos = pos * shape[k] + (v - 1)
  end
  return pos + 1
end

-- A broadcast pair of shapes: the result's (worked out here, right-aligned), a's and b's.
local function broadcast_case()
  local full = ref.random_shape(4, 5)
  local function operand()
    local s = {}
    local drop = math.random(0, #full - 1)
    for k = drop + 1, #full do s[#s + 1] = math.random() < 0.35 and 1 or full[k] end
    return s
  end
  local a, b = operand(), operand()
  local n, out = math.max(#a, #b), {}
  for k = 1, n do
    out[k] = math.max(a[#a - n + k] or 1, b[#b - n + k] or 1)
  end
  return out, a, b
end

local function shape_of(t) return t:size() end

local BIN = {
  add = function(a, b) return a + b end,
  sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end,
  div = function(a, b) return a / b end,
  maximum = function(a, b) return (a ~= a or a > b) and a or b end,
  minimum = function(a, b) return (a ~= a or a < b) and a or b end,
  pow = function(a, b) return a ^ b end,
  remainder = function(a, b) local r = math.fmod(a, b) if r ~= 0 and (r < 0) ~= (b < 0) then r = r + b end return r end,
}
local BIN_ULPS = { pow = 4 }

local function sigmoid(x) return 1 / (1 + math.exp(-x)) end
local function tanh(x)
  if math.abs(x) > 20 then return x > 0 and 1 or -1 end
  local e = math.exp(2 * x)
  return (e - 1) / (e + 1)
end
local UN = {
  neg = { function(x) return -x end }, abs = { math.abs },
  sign = { function(x) return x > 0 and 1 or x < 0 and -1 or 0 end },
  square = { function(x) return x * x end }, relu = { function(x) return math.max(x, 0) end },
  exp = { math.exp, 2 }, expm1 = { function(x) return C.expm1(x) end, 2 },
  log = { math.log, 2, positive = true }, log1p = { function(x) return C.log1p(x) end, 2, positive = true },
  sqrt = { math.sqrt, 1, positive = true }, rsqrt = { function(x) return 1 / math.sqrt(x) end, 2, positive = true },
  reciprocal = { function(x) return 1 / x end, 1 }, sigmoid = { sigmoid, 3 }, tanh = { tanh, 3 },
  silu = { function(x) return x * sigmoid(x) end, 4 },
  gelu = { function(x) return 0.5 * x * (1 + C.erf(x / math.sqrt(2))) end, 4 },
  erf = { function(x) return C.erf(x) end, 3 }, sin = { math.sin, 3 }, cos = { math.cos, 3 },
  floor = { math.floor }, ceil = { math.ceil }, trunc = { function(x) return C.trunc(x) end },
  round = { function(x) return C.rint(x) end },
}
local CMP = {
  lt = function(a, b) return a < b end, le = function(a, b) return a <= b end,
  gt = function(a, b) return a > b end, ge = function(a, b) return a >= b end,
  eq = function(a, b) return a == b end, ne = function(a, b) return a ~= b end,
}

-- Sizes of a reduced shape and the reference reduction over dims (a sorted list).
local function reduce_ref(values, shape, dims, init, combine, finish)
  local gone = {}
  for _, k in ipairs(dims) do gone[k] = true end
  local kept = {}
  for k = 1, #shape do kept[k] = gone[k] and 1 or shape[k] end
  local acc, count = {}, {}
  for i = 1, #values do
    local idx = indices_of(i, shape)
    local o = flat_of(idx, kept)
    if acc[o] == nil then acc[o], count[o] = init(values[i], idx), 0 else acc[o] = combine(acc[o], values[i], idx) end
    count[o] = count[o] + 1
  end
  if finish then for o = 1, #acc do acc[o] = finish(acc[o], count[o]) end end
  return acc, kept
end

describe("tensor math", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 0
      local function randn(shape, dt, opts)
        seed = seed + 1
        opts = opts or {}
        if opts.positive then
          return tocha.rand(shape, { dtype = dt or "f32", device = device, seed = seed, low = 0.5, high = 3 })
        end
        return tocha.randn(shape, { dtype = dt or "f32", device = device, seed = seed, std = 2 })
      end
      local function ints(shape, dt, low, high)
        seed = seed + 1
        return tocha.rand(shape, { dtype = dt, device = device, seed = seed, low = low, high = high })
      end

      it("broadcasts every binary function, with numbers on either side, f32", function()
        ref.rng("binary broadcast")
        for fn, f in pairs(BIN) do
          for _ = 1, 3 do
            local out, sa, sb = broadcast_case()
            local a = randn(sa, "f32", { positive = fn == "pow" })
            local b = randn(sb, "f32", { positive = fn == "div" or fn == "pow" or fn == "remainder" })
            local y = tocha.Tensor[fn](a, b)
            assert.are.same(out, shape_of(y))
            local av, bv, want = a:to_table(true), b:to_table(true), {}
            for i = 1, ref.numel(out) do
              local idx = indices_of(i, out)
              want[i] = f(av[flat_of(idx, sa)], bv[flat_of(idx, sb)])
            end
            check(y, want, BIN_ULPS[fn] or 0, fn .. " " .. table.concat(sa, "x") .. " with " .. table.concat(sb, "x"))
          end
          local a = randn({ 3, 5 }, "f32", { positive = true })
          local av = a:to_table(true)
          local want_r, want_l = {}, {}
          for i = 1, #av do want_r[i], want_l[i] = f(av[i], 1.5), f(1.5, av[i]) end
          check(tocha.Tensor[fn](a, 1.5), want_r, BIN_ULPS[fn] or 0, fn .. " with a number")
          check(require("tocha.tensor_math").binary(fn, 1.5, a), want_l,
            BIN_ULPS[fn] or 0, "a number " .. fn)
        end
      end)

      it("gives the operators their methods' results", function()
        local a, b = randn({ 4, 6 }), randn({ 6 }, "f32", { positive = true })
        local av, bv = a:to_table(true), b:to_table(true)
        local function each(f)
          local w = {}
          for i = 1, #av do w[i] = f(av[i], bv[(i - 1) % 6 + 1]) end
          return w
        end
        check(a + b, each(BIN.add), 0, "+")
        check(a - b, each(BIN.sub), 0, "-")
        check(a * b, each(BIN.mul), 0, "*")
        check(a / b, each(BIN.div), 0, "/")
        check(a % b, each(BIN.remainder), 0, "%")
        check(b ^ 2, (function() local w = {} for i = 1, 6 do w[i] = bv[i] ^ 2 end return w end)(), 1, "^")
        check(-a, each(function(x) return -x end), 0, "unary -")
        check(2 - a, each(function(x) return 2 - x end), 0, "number - tensor")
        check(1 / b, (function() local w = {} for i = 1, 6 do w[i] = 1 / bv[i] end return w end)(), 0, "number / tensor")
        check(a * 2 + 1, each(function(x) return ref.convert(x * 2, "f32") + 1 end), 0, "a * 2 + 1")
        -- innermost sizes that are multiples of 8 (runs of 8 a thread): a broadcast row, a
        -- transposed view, a channel scale
        local m, row = randn({ 5, 3, 16 }), randn({ 16 })
        local mv, rv = m:to_table(true), row:to_table(true)
        local w1 = {}
        for i = 1, #mv do w1[i] = mv[i] * rv[(i - 1) % 16 + 1] end
        check(m * row, w1, 0, "runs of 8, broadcast row")
        local tview = randn({ 16, 8 }):t() -- [8, 16] with strides {1, 8}
        local tv2, w2 = tview:to_table(true), {}
        for i = 1, #tv2 do w2[i] = tv2[i] - rv[(i - 1) % 16 + 1] end
        check(tview - row, w2, 0, "runs of 8, transposed view")
        local sc = randn({ 5, 3, 1 })
        local sv, w3 = sc:to_table(true), {}
        for i = 1, #mv do w3[i] = mv[i] * sv[math.floor((i - 1) / 16) + 1] end
        check(m * sc, w3, 0, "runs of 8, channel scale")
      end)

      it("computes every unary function in f32 and f64, and integer rounding as the identity", function()
        for fn, f in pairs(UN) do
          for _, dt in ipairs({ "f32", "f64" }) do
            local x = randn({ 5, 7 }, dt, { positive = f.positive })
            local xv, want = x:to_table(true), {}
            for i = 1, #xv do want[i] = f[1](xv[i]) end
            check(x[fn](x), want, f[2] or 0, fn .. " " .. dt)
          end
        end
        local k = ints({ 9 }, "i32", -50, 50)
        assert.are.same(k:to_table(), k:floor():to_table())
        assert.are.equal("i32", k:round():dtype())
        assert.are.equal("f32", k:exp():dtype())
        assert.are.equal("i32", k:abs():dtype())
        local kv, want = k:to_table(true), {}
        for i = 1, #kv do want[i] = math.abs(kv[i]) end
        check(k:abs(), want, 0, "abs i32")
      end)

      it("computes halves in f32, rounded once", function()
        for _, dt in ipairs({ "f16", "bf16" }) do
          local a, b = randn({ 3, 33 }, dt), randn({ 33 }, dt)
          local av, bv, want, wexp = a:to_table(true), b:to_table(true), {}, {}
          for i = 1, #av do
            want[i] = ref.convert(av[i] * bv[(i - 1) % 33 + 1], "f32")
            wexp[i] = math.exp(av[i] / 4)
          end
          check(a * b, want, 0, "mul " .. dt)
          check((a / 4):exp(), wexp, 1, "exp " .. dt)
          assert.are.equal(dt, (a + 1):dtype())
        end
      end)

      it("promotes dtypes as PyTorch does", function()
        local f, h, bf, d = randn({ 3 }), randn({ 3 }, "f16"), randn({ 3 }, "bf16"), randn({ 3 }, "f64")
        local i, l, u = ints({ 3 }, "i32", -9, 9), ints({ 3 }, "i64", -9, 9), ints({ 3 }, "u8", 0, 9)
        assert.are.equal("f32", (h + bf):dtype())
        assert.are.equal("f64", (f + d):dtype())
        assert.are.equal("f16", (h + 2.5):dtype())
        assert.are.equal("f32", (i + f):dtype())
        assert.are.equal("f16", (u * h):dtype())
        assert.are.equal("i64", (i + l):dtype())
        assert.are.equal("i32", (u + i):dtype())
        assert.are.equal("i32", (i * 3):dtype())
        assert.are.equal("f32", (i + 0.5):dtype())
        assert.are.equal("f32", (i / 2):dtype())
        assert.are.equal("u8", i:gt(0):dtype())
        local iv, fv, want = i:to_table(true), f:to_table(true), {}
        for k = 1, 3 do want[k] = iv[k] + fv[k] end
        check(i + f, want, 0, "i32 + f32")
        -- integer arithmetic wraps as the dtype's does
        local big = tocha.tensor({ 250, 3 }, { dtype = "u8", device = device })
        assert.are.same({ 4, 13 }, (big + 10):to_table())
        local mx = tocha.tensor({ 2147483647 }, { dtype = "i32", device = device })
        assert.are.same({ -2147483648 }, (mx + 1):to_table())
        assert.are.same({ 1, 0, 81 }, (tocha.tensor({ 1, 2, 3 }, { dtype = "i64", device = device }) ^ tocha.tensor({ 5, -1, 4 }, { dtype = "i64", device = device })):to_table())
        assert.are.same({ 2, 0, 1 }, (tocha.tensor({ -7, 6, 7 }, { dtype = "i32", device = device }) % 3):to_table())
        assert.are.same({ 0 }, (tocha.tensor({ 7 }, { dtype = "i32", device = device }) % 0):to_table())
      end)

      it("compares into u8 masks, with logical functions and NaN", function()
        local a, b = randn({ 4, 5 }), randn({ 5 })
        a[{ 1, 1 }] = 0 / 0
        b[{ 2 }] = a[{ 2, 2 }]:item()
        local av, bv = a:to_table(true), b:to_table(true)
        for fn, f in pairs(CMP) do
          local m = a[fn](a, b)
          assert.are.equal("u8", m:dtype())
          local want = {}
          for i = 1, #av do want[i] = f(av[i], bv[(i - 1) % 5 + 1]) and 1 or 0 end
          check(m, want, 0, fn)
          local s, ws = a[fn](a, 0.5), {}
          for i = 1, #av do ws[i] = f(av[i], 0.5) and 1 or 0 end
          check(s, ws, 0, fn .. " number")
        end
        local p, q = a:gt(0), a:isnan()
        assert.are.same({ 1, 0, 0, 0, 0 }, q:to_table()[1])
        local pv, wand, wor, wnot = p:to_table(true), {}, {}, {}
        for i = 1, #pv do
          local nan = av[i] ~= av[i]
          wand[i] = (pv[i] == 1 and nan) and 1 or 0
          wor[i] = (pv[i] == 1 or nan) and 1 or 0
          wnot[i] = pv[i] == 1 and 0 or 1
        end
        check(p:logical_and(q), wand, 0, "logical_and")
        check(p:logical_or(q), wor, 0, "logical_or")
        check(p:logical_not(), wnot, 0, "logical_not")
      end)

      it("selects with where and bounds with clamp, broadcasting", function()
        local x, y = randn({ 3, 4 }), randn({ 4 })
        local m = x:gt(y)
        local xv, yv, mv = x:to_table(true), y:to_table(true), m:to_table(true)
        local w, w0, wc = {}, {}, {}
        for i = 1, #xv do
          local yi = yv[(i - 1) % 4 + 1]
          w[i] = mv[i] == 1 and xv[i] or yi
          w0[i] = mv[i] == 1 and 0 or xv[i]
          wc[i] = math.min(math.max(xv[i], -0.5), 1)
        end
        check(tocha.where(m, x, y), w, 0, "where")
        check(tocha.where(m, 0, x), w0, 0, "where number")
        check(x:where(m:logical_not(), 0), w0, 0, "x:where")
        check(x:clamp(-0.5, 1), wc, 0, "clamp")
        local lo = {}
        for i = 1, #xv do lo[i] = math.max(xv[i], 0.25) end
        check(x:clamp(0.25), lo, 0, "clamp min only")
        local hi = {}
        for i = 1, #xv do hi[i] = math.min(xv[i], yv[(i - 1) % 4 + 1]) end
        check(x:clamp(nil, y), hi, 0, "clamp max a tensor")
        local n = tocha.tensor({ 0 / 0, 5 }, { device = device }):clamp(0, 1):to_table()
        assert.is_true(n[1] ~= n[1])
        assert.are.equal(1, n[2])
        assert.are.same({ -3, 7, 7 }, tocha.tensor({ -9, 7, 100 }, { dtype = "i32", device = device }):clamp(-3, 7):to_table())
      end)

      it("takes every path of the pointwise kernel: dense chunks, rows with broadcasts, unaligned views", function()
        -- Last dimensions of whole 8-element chunks (the rows path: channel scales, row
        -- biases and row maxima broadcast along it), dense shapes with a tail past the last
        -- chunk, and views whose first element is off a chunk boundary (the element path), in
        -- dtypes whose chunks differ in bytes, with mixed-dtype results (masks, where).
        local cases = {
          { { 2, 3, 16 }, { 3, 1 } }, -- x * s[c]: inner stride 0
          { { 4, 24 }, { 24 } },       -- x + b: outer stride 0
          { { 3, 2, 8 }, { 3, 1, 8 } }, -- both
          { { 5, 8 }, { 5, 1 } },
          { { 1003 }, { 1003 } },      -- dense, a tail of 3
          { { 2, 40 }, { 1 } },        -- one value broadcast
        }
        for _, dt in ipairs({ "f32", "bf16", "f64", "i32" }) do
          for _, c in ipairs(cases) do
            local a = dt == "i32" and ints(c[1], dt, -50, 50) or randn(c[1], dt)
            local b = dt == "i32" and ints(c[2], dt, -50, 50) or randn(c[2], dt)
            local out = c[1]
            local av, bv = a:to_table(true), b:to_table(true)
            local prod, sum, gt, sel = {}, {}, {}, {}
            for i = 1, ref.numel(out) do
              local idx = indices_of(i, out)
              local x, y = av[i], bv[flat_of(idx, c[2])]
              prod[i], sum[i], gt[i], sel[i] = x * y, x + y, x > y and 1 or 0, x > y and x or y
            end
            local label = dt .. " " .. table.concat(c[1], "x") .. " with " .. table.concat(c[2], "x")
            check(a * b, prod, 1, "mul " .. label)
            check(b + a, sum, 1, "add " .. label)
            check(a:gt(b), gt, 0, "gt " .. label)
            check(tocha.where(a:gt(b), a, b), sel, 0, "where " .. label)
            check(a:neg(), (function() local w = {} for i = 1, #av do w[i] = -av[i] end return w end)(), 0, "neg " .. label)
          end
          -- unaligned: a narrow starting one element in, dense along rows of 16
          local base = dt == "i32" and ints({ 3, 17 }, dt, -50, 50) or randn({ 3, 17 }, dt)
          local v = base:narrow(2, 2, 16)
          local s = dt == "i32" and ints({ 3, 1 }, dt, -50, 50) or randn({ 3, 1 }, dt)
          local bv, sv, want = base:to_table(true), s:to_table(true), {}
          for r = 1, 3 do for k = 1, 16 do want[#want + 1] = bv[(r - 1) * 17 + k + 1] * sv[r] end end
          check(v * s, want, 1, dt .. " unaligned view")
          local flat = (dt == "i32" and ints({ 41 }, dt, -50, 50) or randn({ 41 }, dt)):narrow(1, 2, 40)
          local fv, w2 = flat:to_table(true), {}
          for i = 1, 40 do w2[i] = fv[i] + 1 end
          check(flat + 1, w2, 1, dt .. " unaligned dense")
        end
      end)

      it("reads views through their strides and writes in place into views", function()
        local base = randn({ 6, 8 })
        local bv = base:to_table()
        local tv = base:t() -- 8 x 6, strided
        local nv = base:narrow(2, 3, 4) -- 6 x 4
        local sum = tv:narrow(1, 3, 4):t() + nv -- both read 6 x 4 columns 3..6
        local want = {}
        for r = 1, 6 do for c = 1, 4 do want[#want + 1] = 2 * bv[r][c + 2] end end
        check(sum, want, 0, "views")
        local e = tocha.tensor({ 1, 2, 3 }, { device = device }):view(3, 1):expand(3, 4)
        check(e * 2, { 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6 }, 0, "expanded operand")
        -- in place into a narrow view: the rest of the tensor is untouched
        local target = tocha.full({ 4, 5 }, 7, { device = device })
        local v = target:narrow(2, 2, 3)
        assert.are.equal(v, v:mul_(2))
        v:add_(tocha.tensor({ 1, 2, 3 }, { device = device }))
        assert.are.same({ 7, 15, 16, 17, 7 }, target:to_table()[3])
        local x = randn({ 5 })
        local xv = x:to_table(true)
        assert.are.equal(x, x:exp_())
        local want_e = {}
        for i = 1, 5 do want_e[i] = math.exp(xv[i]) end
        check(x, want_e, 2, "exp_")
        assert.are.equal(x, x:clamp_(0, 2))
        fails("an expanded view cannot be written", function() e:add_(1) end)
        fails("the result's dtype f32 cannot be written into self's i32 in place",
          function() ints({ 3 }, "i32", 0, 5):add_(0.5) end)
        fails("the result has shape [4, 3], which cannot be written into self's [3]",
          function() randn({ 3 }):add_(randn({ 4, 1 })) end)
        fails("gives a u8 mask, which cannot replace a tensor in place", function() randn({ 2 }):isnan_() end)
      end)

      it("reduces over every element, dimensions and lists of them, keepdim or not", function()
        ref.rng("reductions")
        local MODES = {
          sum = { function(v) return v end, function(a, v) return a + v end, nil, 2 },
          mean = { function(v) return v end, function(a, v) return a + v end, function(a, n) return a / n end, 2 },
          prod = { function(v) return v end, function(a, v) return a * v end, nil, 4 },
          amax = { function(v) return v end, function(a, v) return (v > a or v ~= v) and v or a end },
          amin = { function(v) return v end, function(a, v) return (v < a or v ~= v) and v or a end },
        }
        for mode, f in pairs(MODES) do
          for _, dt in ipairs({ "f32", "f64", "bf16" }) do
            local shape = ref.random_shape(4, 6)
            local x = mode == "prod" and randn(shape, dt, { positive = true }) or randn(shape, dt)
            local dims = {}
            for k = 1, #shape do if math.random() < 0.5 then dims[#dims + 1] = k end end
            if #dims == 0 then dims = nil end
            local keep = math.random() < 0.5
            local y = x[mode](x, dims, keep)
            local want, kept = reduce_ref(x:to_table(true), shape, dims or (function() local a = {} for k = 1, #shape do a[k] = k end return a end)(),
              f[1], f[2], f[3])
            local label = ("%s %s %s over %s keepdim %s"):format(mode, dt, table.concat(shape, "x"),
              dims and table.concat(dims, ",") or "all", tostring(keep))
            if keep then assert.are.same(kept, shape_of(y), label) end
            local scale = 1
            if mode == "sum" or mode == "mean" then scale = 8 * ref.numel(shape) end
            local ulps = (f[4] or 0) * (dt == "f64" and 64 or (dt == "f32" and 16 or 1))
            check(y, want, dt == "bf16" and 1 or ulps, label, scale)
          end
        end
        -- a half reduced over dimensions apart (two runs) rounds once: (1 + 2^-7)^120 is 2.5443, whose
        -- bf16 is 2.546875; the runs rounded to bf16 between would give 1.03125^30 = 2.5172 -> 2.515625
        local ones = tocha.full({ 30, 2, 4 }, 1 + 2 ^ -7, { device = device, dtype = "bf16" })
        local want = tocha.tensor({ (1 + 2 ^ -7) ^ 120 }, { dtype = "f64" }):cast("bf16"):cast("f64"):item()
        assert.are.same({ want, want }, ones:prod({ 1, 3 }):cast("f64"):to_table())
        assert.are.equal(2.546875, want)
        -- the same, large enough that the second run reads the first's f32 results through split
        -- passes (a team columns pass, then one over its partials) and stores bf16 at the end (4096
        -- passes), and through the other paths of a pass reading f32: short columns (12 rows of 8
        -- f32) and rows (the size-1 dimension between the runs leaves rows of 300)
        for _, big_shape in ipairs({ { 4096, 2, 16 }, { 12, 8, 300 }, { 300, 1, 8 } }) do
          local big = randn(big_shape, "bf16", { positive = true })
          local bv = big:to_table(true)
          for mode, f in pairs({ sum = MODES.sum, mean = MODES.mean, amax = MODES.amax }) do
            local got = big[mode](big, { 1, 3 })
            assert.are.equal("bf16", got:dtype())
            assert.are.same({ big_shape[2] }, got:size())
            check(got, (reduce_ref(bv, big_shape, { 1, 3 }, f[1], f[2], f[3])), mode == "amax" and 0 or 1,
              ("%s bf16 over dimensions 1 and 3 of %s"):format(mode, table.concat(big_shape, "x")))
          end
        end
        local x = randn({ 2, 3, 4 })
        assert.are.same({ 1 }, x:sum():size())
        assert.are.same({ 2, 4 }, x:sum(2):size())
        assert.are.same({ 2, 1, 4 }, x:sum(-2, true):size())
        assert.are.same({ 3 }, x:mean({ 1, -1 }):size())
        -- long enough to be split across CTAs and finished by a second pass
        local long = tocha.rand({ 300000 }, { dtype = "f64", device = device, seed = 41 })
        local lv, total = long:to_table(true), 0
        for i = 1, #lv do total = total + lv[i] end
        check(long:sum(), { total }, 1e-12 / ref.eps.f64, "a split sum")
        check(long:mean(), { total / #lv }, 1e-12 / ref.eps.f64, "a split mean")
        local k = tocha.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "i32", device = device })
        assert.are.equal("i64", k:sum():dtype())
        assert.are.equal(10, k:sum():item())
        assert.are.same({ 2, 12 }, k:prod(2):to_table())
        assert.are.same({ 3, 4 }, k:amax(1):to_table())
        assert.are.equal("i32", k:amax(1):dtype())
        fails("mean() needs a float tensor, got i32", function() k:mean() end)
        fails("dim: expected dimensions from 1 to 3 (or -1 to -3), got 4", function() x:sum(4) end)
        fails("dim: dimension 2 appears twice", function() x:sum({ 2, -2 }) end)
        fails("keepdim: expected a boolean, got number", function() x:sum(1, 1) end)
      end)

      it("finds 1-based indices with max(dim), argmax and argmin: first of ties, NaN first", function()
        for _, shape in ipairs({ { 3, 37 }, { 2, 1500 }, { 4, 5, 6 } }) do
          for _, dt in ipairs({ "f32", "f16", "i32" }) do
            local x = dt == "i32" and ints(shape, dt, -5, 5) or randn(shape, dt)
            local d = #shape == 3 and 2 or 2
            local v, i = x:max(d)
            local am = x:argmin(d)
            local xv = x:to_table(true)
            local dims = { d }
            local wmax = reduce_ref(xv, shape, dims, function(val, idx) return { val, idx[d] } end,
              function(a, val, idx) if val > a[1] then return { val, idx[d] } end return a end)
            local wmin = reduce_ref(xv, shape, dims, function(val, idx) return { val, idx[d] } end,
              function(a, val, idx) if val < a[1] then return { val, idx[d] } end return a end)
            local vv, iv, mv = v:to_table(true), i:to_table(true), am:to_table(true)
            for o = 1, #wmax do
              assert.are.equal(wmax[o][1], vv[o])
              assert.are.equal(wmax[o][2], iv[o], ("argmax %s %s [%d]"):format(dt, table.concat(shape, "x"), o))
              assert.are.equal(wmin[o][2], mv[o], ("argmin %s %s [%d]"):format(dt, table.concat(shape, "x"), o))
            end
            assert.are.equal("i64", i:dtype())
          end
        end
        local t = tocha.tensor({ 1, 5, 5, 0 / 0, 0 / 0, -1 }, { device = device })
        assert.are.equal(4, t:argmax():item())
        assert.are.equal(4, t:argmin():item())
        assert.are.equal(2, tocha.tensor({ 1, 5, 5, 2 }, { device = device }):argmax():item())
        local flat = randn({ 3, 700 })
        local fv = flat:to_table(true)
        local best = 1
        for k = 2, #fv do if fv[k] > fv[best] then best = k end end
        assert.are.equal(best, flat:argmax():item())
        assert.are.same({ 3, 1 }, flat:argmax(2, true):size())
      end)

      it("computes var and std with a correction", function()
        for _, dt in ipairs({ "f32", "f64", "f16" }) do
          local x = randn({ 4, 9 }, dt)
          local xv = x:to_table()
          for _, correction in ipairs({ 1, 0 }) do
            local wv, ws = {}, {}
            for r = 1, 4 do
              local m = 0
              for c = 1, 9 do m = m + xv[r][c] end
              m = m / 9
              local s = 0
              for c = 1, 9 do s = s + (xv[r][c] - m) ^ 2 end
              wv[r] = s / (9 - correction)
              ws[r] = math.sqrt(wv[r])
            end
            local tol = dt == "f16" and 1 or 32
            check(x:var(2, false, correction), wv, tol, "var " .. dt)
            check(x:std(-1, false, correction), ws, tol, "std " .. dt)
          end
        end
        assert.are.same({ 1 }, randn({ 3, 3 }):var():size())
        -- dimensions that are not adjacent (a permuted copy brings them together)
        local z = randn({ 3, 4, 5 }, "f64")
        local zv, want = z:to_table(), {}
        for j = 1, 4 do
          local m, s = 0, 0
          for i = 1, 3 do for k = 1, 5 do m = m + zv[i][j][k] end end
          m = m / 15
          for i = 1, 3 do for k = 1, 5 do s = s + (zv[i][j][k] - m) ^ 2 end end
          want[j] = s / 14
        end
        check(z:var({ 1, 3 }), want, 64, "var over dimensions 1 and 3")
        assert.are.same({ 1, 4, 1 }, z:var({ 1, 3 }, true):size())
      end)

      it("computes softmax and log_softmax along rows, long rows and columns", function()
        -- rows of at most 8 KB take three reads, longer ones a running pair: both in each dtype
        for _, shape in ipairs({ { 5, 10 }, { 2, 2000 }, { 2, 5000 }, { 3, 6, 4 } }) do
          for _, dt in ipairs({ "f32", "f64", "bf16" }) do
            local x = randn(shape, dt)
            local d = #shape
            if #shape == 3 then d = 2 end
            local xv = x:to_table(true)
            local mx = reduce_ref(xv, shape, { d }, function(v) return v end, function(a, v) return math.max(a, v) end)
            local kept = {}
            for k = 1, #shape do kept[k] = k == d and 1 or shape[k] end
            local sums = reduce_ref(xv, shape, { d }, function(v, idx) return math.exp(v - mx[flat_of(idx, kept)]) end,
              function(a, v, idx) return a + math.exp(v - mx[flat_of(idx, kept)]) end)
            local ws, wl = {}, {}
            for i = 1, #xv do
              local o = flat_of(indices_of(i, shape), kept)
              ws[i] = math.exp(xv[i] - mx[o]) / sums[o]
              wl[i] = xv[i] - mx[o] - math.log(sums[o])
            end
            local tol = dt == "bf16" and 1 or 16
            local label = dt .. " " .. table.concat(shape, "x")
            check(x:softmax(d), ws, tol, "softmax " .. label)
            check(x:log_softmax(d), wl, tol, "log_softmax " .. label, 8)
          end
        end
        local inf = tocha.tensor({ { -math.huge, 0, 0 } }, { device = device }):softmax(2):to_table()[1]
        assert.are.same({ 0, 0.5, 0.5 }, inf)
        -- masked rows (-inf before the first finite element, as an attention mask) on the
        -- three-read path, the running pair of a long row (a CTA: lanes holding only -inf) and
        -- a column: the masked elements give 0, the rest the softmax of the finite ones
        for _, n in ipairs({ 40, 3000 }) do
          local row, fin = {}, {}
          for i = 1, n do
            row[i] = i <= math.floor(n / 3) and -math.huge or ((i * 37) % 11) / 5
            if row[i] ~= -math.huge then fin[#fin + 1] = row[i] end
          end
          local top = -math.huge
          for _, v in ipairs(fin) do top = math.max(top, v) end
          local sum = 0
          for _, v in ipairs(fin) do sum = sum + math.exp(v - top) end
          local want = {}
          for i = 1, n do want[i] = row[i] == -math.huge and 0 or math.exp(row[i] - top) / sum end
          check(tocha.tensor({ row }, { device = device }):softmax(2), want, 16, "masked row of " .. n)
        end
        local col = tocha.tensor({ { -math.huge, 1 }, { -math.huge, 2 }, { 0, 3 } }, { device = device }):softmax(1)
        local e1, e2, e3 = math.exp(1 - 3), math.exp(2 - 3), 1
        check(col, { 0, e1 / (e1 + e2 + e3), 0, e2 / (e1 + e2 + e3), 1, e3 / (e1 + e2 + e3) }, 16, "masked column")
        -- a NaN anywhere in a row makes the whole row NaN, on both paths
        for _, n in ipairs({ 40, 3000 }) do
          local row = {}
          for i = 1, n do row[i] = (i % 7) / 7 end
          row[math.floor(n / 2) + 1] = 0 / 0
          for _, v in ipairs(tocha.tensor({ row }, { device = device }):softmax(2):to_table()[1]) do
            assert(v ~= v, ("softmax of a row of %d with a NaN: got %s"):format(n, tostring(v)))
          end
        end
        fails("softmax() needs a dimension, got nil", function() randn({ 3 }):softmax() end)
      end)

      it("gives item, negative sizes and t", function()
        local x = randn({ 2, 3 })
        assert.are.equal(3, x:size(-1))
        assert.are.equal(2, x:size(-2))
        fails("dim: expected 1 to 2 (or -1 to -2), got -3", function() x:size(-3) end)
        assert.are.same({ 3, 2 }, x:t():size())
        assert.are.equal(x:to_table()[2][3], x:t():to_table()[3][2])
        fails("t() takes a tensor of 1 or 2 dimensions, got 3", function() randn({ 2, 2, 2 }):t() end)
        assert.are.equal(x:to_table()[2][1], x[{ 2, 1 }]:item())
        assert.are.equal(7, tocha.tensor({ 7 }, { dtype = "i64", device = device }):item())
        fails("item() needs a tensor of one element, got 6", function() x:item() end)
      end)

      it("refuses bad operands by name and goes on", function()
        local x = randn({ 2, 3 })
        fails("right operand: shape [3, 2] does not broadcast with [2, 3]", function() return x + randn({ 3, 2 }) end)
        fails("right operand: expected a tensor or a number, got string", function() return x + "1" end)
        fails("right operand: expected a tensor or a number, got table", function() return x * {} end)
        fails("<: tensors have no ordering operator", function() return x < x end)
        fails("other: 1.1805916207174e+21 is outside the 64-bit integers i32 arithmetic computes in",
          function() ints({ 2 }, "i32", 0, 4):maximum(2 ^ 70) end)
        assert.are.equal("f32", ints({ 2 }, "i32", 0, 4):maximum(0.5):dtype())
        fails("condition: expected a u8 mask (as comparisons give), got f32", function() tocha.where(x, x, x) end)
        fails("min: at least one of min and max must be given", function() x:clamp() end)
        local freed = randn({ 2, 3 })
        freed:free()
        fails("tensor was freed", function() return x + freed end)
        if device ~= "sim" then
          fails("on sim, but left operand is on", function() return x + tocha.zeros({ 2, 3 }, { device = "sim" }) end)
        end
        check(x + 0, x:to_table(true), 0, "still usable")
      end)
    end)
  end
end)
