-- Tensors made from a rule (arange, range, linspace, eye, the *_like constructors), joined
-- (cat, stack) and split (split, chunk, unbind), masked_fill and zero_, and the reductions made
-- of the others (any, all, logsumexp, norm). Every element is checked against a reference
-- computed here in f64 from the inputs as stored, rounded once to the result's dtype. On sim and,
-- tagged #gpu, on cuda.
local tocha = require "tocha"
local ref = require "support.reference"
local assertions = require "support.assertions"
local fails, fails_with = assertions.fails, assertions.fails_with

-- got (a tensor) against want (a flat list of f64 values) within `ulps` roundings of got's
-- dtype relative to max(1, |want|); NaN and infinities exactly.
local function check(got, want, ulps, label)
  local dt = got:dtype()
  local g = got:cast(dt == "u8" and "i64" or dt):to_table(true)
  assert.are.equal(#want, #g, label .. ": element count")
  for i = 1, #want do
    local w = ref.convert(want[i], dt)
    local ok
    if w ~= w then ok = g[i] ~= g[i]
    elseif w == math.huge or w == -math.huge then ok = g[i] == w
    else ok = math.abs(g[i] - w) <= (ulps or 0) * ref.eps[dt] * math.max(1, math.abs(w)) end
    if not ok then error(("%s [%d]: got %.17g, want %.17g (%s)"):format(label, i, g[i], w, dt), 2) end
  end
end

local indices_of, flat_of = ref.indices_of, ref.flat_of

-- The reference reduction of values (row-major, of shape) over the sorted dims: acc = init;
-- acc = step(acc, v) per element; finish(acc) at the end. Returns the flat results in the order
-- of the kept dimensions.
local function reduce_ref(values, shape, dims, init, step, finish)
  local gone = {}
  for _, k in ipairs(dims) do gone[k] = true end
  local kept = {}
  for k = 1, #shape do kept[k] = gone[k] and 1 or shape[k] end
  local acc = {}
  for o = 1, ref.numel(kept) do acc[o] = init end
  for i = 1, #values do
    local idx = indices_of(i, shape)
    for k = 1, #shape do if gone[k] then idx[k] = 1 end end
    local o = flat_of(idx, kept)
    acc[o] = step(acc[o], values[i])
  end
  for o = 1, #acc do acc[o] = finish and finish(acc[o]) or acc[o] end
  return acc, kept
end

describe("tensors from rules, joins and splits", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local seed = 100
      local function randn(shape, dt)
        seed = seed + 1
        return tocha.randn(shape, { dtype = dt or "f32", device = device, seed = seed, std = 2 })
      end

      it("counts and fills arange and range as PyTorch and Torch7 do, in every dtype", function()
        -- (start, stop, step) and the count PyTorch's arange gives (stop left out)
        local cases = { { 0, 5, 1, 5 }, { 0, 0.3, 0.1, 3 }, { 1, 2.5, 0.5, 3 }, { 10, 0, -3, 4 },
          { -2, 2, 0.4, 10 }, { 3, 3, 1, 0 }, { 0.5, 7, 1.5, 5 } }
        for _, c in ipairs(cases) do
          local y = tocha.arange(c[1], c[2], c[3], { device = device, dtype = "f64" })
          assert.are.same({ c[4] }, y:size(), ("arange(%s, %s, %s)"):format(c[1], c[2], c[3]))
          local want = {}
          for i = 1, c[4] do want[i] = c[1] + (i - 1) * c[3] end
          check(y, want, 0, "arange f64")
          for _, dt in ipairs({ "f32", "f16", "bf16" }) do
            check(tocha.arange(c[1], c[2], c[3], { device = device, dtype = dt }), want, 0, "arange " .. dt)
          end
        end
        local y = tocha.arange(5, { device = device })
        assert.are.equal("i64", y:dtype())
        assert.are.same({ 0, 1, 2, 3, 4 }, y:to_table())
        assert.are.equal("f32", tocha.arange(0, 1, 0.25, { device = device }):dtype())
        assert.are.same({ 250, 251, 252, 253, 254, 255 }, tocha.arange(250, 256, { dtype = "u8", device = device }):to_table())
        assert.are.same({ -3, -1, 1 }, tocha.arange(-3, 2, 2, { dtype = "i32", device = device }):to_table())
        -- i64 counts in integers past 2^53, where doubles have gaps
        local big = tocha.arange(2 ^ 53 + 2, 2 ^ 53 + 6, { device = device })
        assert.are.same({ 2, 3, 4, 5 }, big:sub(2 ^ 53):to_table())
        -- Torch7's range keeps the stop
        assert.are.same({ 1, 2, 3, 4, 5 }, tocha.range(1, 5, { device = device }):to_table())
        check(tocha.range(1, 2, 0.5, { device = device }), { 1, 1.5, 2 }, 0, "range")
        assert.are.same({ 5, 3, 1 }, tocha.range(5, 0, -2, { device = device }):to_table())
        -- a long one: many CTAs
        local long = tocha.arange(0, 70000, 1, { device = device, dtype = "f32" }):to_table()
        for i = 1, #long, 997 do assert.are.equal(i - 1, long[i]) end
        assert.are.equal(69999, long[70000])
        fails_with("tocha.arange: step: must not be zero", function() tocha.arange(0, 5, 0) end)
        fails_with("tocha.arange: step: 1 goes away from stop 0 (start 5)", function() tocha.arange(5, 0) end)
        fails_with("tocha.arange: dtype: i32 needs whole start and step, got start 0 and step 0.5", function()
          tocha.arange(0, 1, 0.5, { dtype = "i32" }) end)
        fails_with("tocha.arange: stop: the values 0 to 299 do not fit u8", function() tocha.arange(0, 300, { dtype = "u8" }) end)
        fails_with("tocha.arange: stop: expected a finite number, got nan", function() tocha.arange(0, 0 / 0) end)
        fails("expected (stop), (start, stop) or (start, stop, step)", function() tocha.arange(1, 2, 3, 4) end)
        fails("options: expected a table", function() tocha.arange(1, 2, "f32") end)
        fails("Torch7's range has no one-number form", function() tocha.range(3) end)
      end)

      it("spaces linspace symmetrically with both ends exact, and makes eye", function()
        for _, c in ipairs({ { 0, 1, 7 }, { -3.5, 11, 10 }, { 2, -2, 5 }, { 0.1, 0.7, 3 }, { 4, 9, 1 }, { 1, 2, 0 } }) do
          local start, stop, n = c[1], c[2], c[3]
          local step = n > 1 and (stop - start) / (n - 1) or 0
          local want = {}
          for i = 0, n - 1 do
            want[i + 1] = (n == 1 or i < math.floor(n / 2)) and start + i * step or stop - (n - 1 - i) * step
          end
          for _, dt in ipairs({ "f64", "f32", "bf16" }) do
            local y = tocha.linspace(start, stop, n, { device = device, dtype = dt })
            assert.are.same({ n }, y:size())
            check(y, want, 0, ("linspace(%s, %s, %d) %s"):format(start, stop, n, dt))
          end
          if n > 1 then
            local y = tocha.linspace(start, stop, n, { device = device, dtype = "f64" }):to_table()
            assert.are.equal(start, y[1])
            assert.are.equal(stop, y[n])
          end
        end
        assert.are.same({ 0, 2, 5, 7, 10 }, tocha.linspace(0, 10, 5, { dtype = "i64", device = device }):to_table())
        assert.are.same({ 4 }, tocha.linspace(4, 9, 1, { device = device }):to_table()) -- one step: start, as PyTorch's
        fails_with("tocha.linspace: steps: expected a whole number >= 0, got 2.5", function() tocha.linspace(0, 1, 2.5) end)
        for _, dt in ipairs({ "f32", "i32", "bf16" }) do
          for _, nm in ipairs({ { 3, 3 }, { 2, 5 }, { 4, 1 }, { 0, 2 } }) do
            local y = tocha.eye(nm[1], nm[2], { device = device, dtype = dt })
            assert.are.same({ nm[1], nm[2] }, y:size())
            local want = {}
            for r = 1, nm[1] do for c = 1, nm[2] do want[#want + 1] = r == c and 1 or 0 end end
            check(y, want, 0, "eye " .. dt)
          end
        end
        assert.are.same({ { 1, 0 }, { 0, 1 } }, tocha.eye(2, { device = device }):to_table())
        fails_with("tocha.eye: n: expected a whole number >= 0, got -1", function() tocha.eye(-1) end)
      end)

      it("makes tensors like another, its dtype and device unless asked otherwise", function()
        local x = randn({ 2, 3, 4 }, "bf16")
        for name, want in pairs({ zeros_like = 0, ones_like = 1 }) do
          local y = tocha[name](x)
          assert.are.same({ 2, 3, 4 }, y:size())
          assert.are.equal("bf16", y:dtype())
          assert.are.equal(x:device(), y:device())
          for _, v in ipairs(y:to_table(true)) do assert.are.equal(want, v) end
        end
        local f = tocha.full_like(x, 2.5, { dtype = "f64" })
        assert.are.equal("f64", f:dtype())
        for _, v in ipairs(f:to_table(true)) do assert.are.equal(2.5, v) end
        assert.are.same({ 2, 3, 4 }, tocha.empty_like(x):size())
        local r1 = tocha.rand_like(x, { seed = 7 })
        local r2 = tocha.rand({ 2, 3, 4 }, { dtype = "bf16", device = device, seed = 7 })
        assert.are.same(r2:to_table(true), r1:to_table(true))
        local n1 = tocha.randn_like(x, { seed = 8, dtype = "f32" })
        assert.are.same(tocha.randn({ 2, 3, 4 }, { device = device, seed = 8 }):to_table(true), n1:to_table(true))
        fails_with("tocha.zeros_like: input: expected a tensor, got table", function() tocha.zeros_like({ 2, 3 }) end)
      end)

      it("converts with to(dtype), to(device, dtype) and PyTorch's and Torch7's dtype methods", function()
        local x = randn({ 2, 3 })
        local xv = x:to_table(true)
        local h = x:to("f16")
        assert.are.equal("f16", h:dtype())
        local hv = h:to_table(true)
        for i = 1, 6 do assert.are.equal(hv[i], require("support.reference").convert(xv[i], "f16")) end
        local d = x:to(device, "f64")
        assert.are.same(xv, d:to_table(true))
        assert.are_not.equal(x, x:to(device)) -- always a new tensor
        for method, name in pairs({ float = "f32", double = "f64", half = "f16", bfloat16 = "bf16", long = "i64",
          int = "i32", byte = "u8" }) do
          local y = x[method](x)
          assert.are.equal(name, y:dtype(), method)
          if name == "f32" then assert.are.equal(x, y) else assert.are_not.equal(x, y) end
        end
        local l = tocha.tensor({ -1.7, 2.9, 0.4 }, { device = device }):long()
        assert.are.same({ -1, 2, 0 }, l:to_table()) -- toward zero, as a C cast and PyTorch
        assert.are.equal("bf16", x:type_as(tocha.zeros({ 1 }, { dtype = "bf16", device = device })):dtype())
        assert.are.same({ 3, 2 }, x:view_as(tocha.zeros({ 3, 2 }, { device = device })):size())
        assert.are.same({ 2, 3 }, tocha.ones({ 1, 3 }, { device = device }):expand_as(x):size())
        assert.are.same(x:to_table(), x:tolist())
        assert.are.same(x:to_table(), x:totable())
        fails_with("tocha.Tensor:to: device: unknown device 'f17' (expected cuda, cuda:N, sim or sim:N)", function() x:to("f17") end)
        fails_with("tocha.Tensor:to: dtype: unknown dtype 'f17' (expected f32, f64, f16, bf16, u8, i32 or i64)",
          function() x:to(device, "f17") end)
      end)

      it("joins with cat along every dimension, promoting dtypes, reading views, passing over empty vectors", function()
        ref.rng("cat")
        for _ = 1, 6 do
          local shape = ref.random_shape(4, 5)
          local dim = math.random(1, #shape)
          local parts, values, sizes = {}, {}, {}
          for p = 1, math.random(1, 4) do
            local s = {}
            for k = 1, #shape do s[k] = shape[k] end
            s[dim] = math.random(0, 3)
            sizes[p] = s[dim]
            local dt = ({ "f32", "f64", "f16" })[math.random(1, 3)]
            local t = randn(s, dt)
            if p == 2 and #s >= 2 and dim ~= 1 and dim ~= 2 then
              -- a transposed view as an input
              local sw = { s[2], s[1] }
              for k = 3, #s do sw[k] = s[k] end
              t = randn(sw, dt):transpose(1, 2)
            end
            parts[p], values[p] = t, t:cast("f64"):to_table(true)
          end
          local y = tocha.cat(parts, dim)
          local out_dt = parts[1]:dtype()
          for p = 2, #parts do
            local a, b = out_dt, parts[p]:dtype()
            out_dt = (a == "f64" or b == "f64") and "f64" or ((a == "f32" or b == "f32") and "f32" or "f16")
          end
          assert.are.equal(out_dt, y:dtype())
          local total = 0
          for p = 1, #parts do total = total + sizes[p] end
          local yshape = {}
          for k = 1, #shape do yshape[k] = k == dim and total or shape[k] end
          assert.are.same(yshape, y:size())
          -- the reference: each output element from its part
          local want = {}
          for i = 1, ref.numel(yshape) do
            local idx = indices_of(i, yshape)
            local at, p = idx[dim], 1
            while at > sizes[p] do at, p = at - sizes[p], p + 1 end
            local pshape = {}
            for k = 1, #shape do pshape[k] = k == dim and sizes[p] or shape[k] end
            idx[dim] = at
            want[i] = values[p][flat_of(idx, pshape)]
          end
          check(y, want, 0, ("cat of %d along %d"):format(#parts, dim))
        end
        local a, b = randn({ 2, 3 }), randn({ 2, 2 }, "f64")
        local y = tocha.cat(a, b, -1) -- Torch7's form
        assert.are.same({ 2, 5 }, y:size())
        assert.are.equal("f64", y:dtype())
        local i = tocha.tensor({ 1, 2 }, { dtype = "i32", device = device })
        local e = tocha.empty({ 0 }, { device = device })
        local z = tocha.cat({ e, i, e, tocha.tensor({ 3.5 }, { device = device }) })
        assert.are.equal("f32", z:dtype())
        assert.are.same({ 1, 2, 3.5 }, z:to_table())
        assert.are.same({ 0 }, tocha.cat({ e, e }):size())
        fails_with("tocha.cat: tensors[2]: shape [3, 3] does not join [2, 3] along dimension 2 (every other size must be equal)",
          function() tocha.cat({ a, randn({ 3, 3 }) }, 2) end)
        fails_with("tocha.cat: tensors: expected at least one tensor, got an empty list", function() tocha.cat({}) end)
        fails_with("tocha.cat: tensors[2]: expected a tensor, got number", function() tocha.cat({ a, 3 }) end)
        fails_with("tocha.cat: dim: expected a dimension from 1 to 2 (or -1 to -2), got 3", function() tocha.cat({ a, a }, 3) end)
      end)

      it("stacks along a new dimension anywhere, and splits into views", function()
        local a, b, c = randn({ 2, 3 }), randn({ 2, 3 }), randn({ 2, 3 }, "f64")
        local va, vb, vc = a:to_table(), b:to_table(), c:to_table()
        local srcs = { va, vb, vc }
        for _, dim in ipairs({ 1, 2, 3, -1 }) do
          local y = tocha.stack({ a, b, c }, dim)
          local k = dim < 0 and 4 + dim or dim
          local want_shape = { 2, 3 }
          table.insert(want_shape, k, 3)
          assert.are.same(want_shape, y:size(), "stack along " .. dim)
          assert.are.equal("f64", y:dtype())
          local want = {}
          for i = 1, 18 do
            local idx = indices_of(i, want_shape)
            local which = table.remove(idx, k)
            want[i] = srcs[which][idx[1]][idx[2]]
          end
          check(y, want, 0, "stack along " .. dim)
        end
        fails_with("tocha.stack: tensors[2]: shape [3, 2], tensors[1] [2, 3]: stack needs one shape",
          function() tocha.stack({ a, a:t() }) end)
        -- splits are views: writing into one writes into x
        local x = tocha.arange(10, { device = device })
        local parts = x:split(3)
        assert.are.equal(4, #parts)
        assert.are.same({ 9 }, parts[4]:to_table())
        parts[2]:fill(-1)
        assert.are.same({ 0, 1, 2, -1, -1, -1, 6, 7, 8, 9 }, x:to_table())
        local m = randn({ 4, 7 })
        local mv = m:to_table()
        local sized = m:split({ 2, 0, 5 }, 2)
        assert.are.same({ { 4, 2 }, { 4, 0 }, { 4, 5 } }, { sized[1]:size(), sized[2]:size(), sized[3]:size() })
        assert.are.equal(mv[3][4], sized[3]:to_table()[3][2])
        local chunks = m:chunk(3, -1) -- 7 in 3: sizes 3, 3, 1
        assert.are.same({ 4, 1 }, chunks[3]:size())
        assert.are.equal(mv[2][7], chunks[3]:to_table()[2][1])
        assert.are.equal(2, #m:chunk(3, 1)) -- 4 in 3: sizes 2, 2, as PyTorch's
        local rows = m:unbind(1)
        assert.are.equal(4, #rows)
        assert.are.same(mv[3], rows[3]:to_table())
        fails_with("tocha.Tensor:split: size: the sizes add up to 6, dimension 2 has 7", function() m:split({ 3, 3 }, 2) end)
        fails_with("tocha.Tensor:chunk: chunks: expected at least 1, got 0", function() m:chunk(0) end)
        local empty_chunks = tocha.zeros({ 0, 2 }, { device = device }):chunk(3)
        assert.are.equal(3, #empty_chunks) -- PyTorch's count of empty views
        assert.are.same({ 0, 2 }, empty_chunks[3]:size())
      end)

      it("fills where a mask says, out of place and in place, and zeroes a view alone", function()
        local x = randn({ 3, 4, 5 })
        local mask = randn({ 4, 1 }):gt(0) -- broadcast over dimensions 1 and 3
        local xv, mv = x:to_table(true), mask:to_table(true)
        local y = x:masked_fill(mask, -7.5)
        local want = {}
        for i = 1, #xv do
          local idx = indices_of(i, { 3, 4, 5 })
          want[i] = mv[idx[2]] ~= 0 and -7.5 or xv[i]
        end
        check(y, want, 0, "masked_fill")
        check(x, xv, 0, "masked_fill leaves x")
        x:masked_fill_(mask, tocha.tensor({ -7.5 }, { device = device }))
        check(x, want, 0, "masked_fill_")
        local k = tocha.arange(6, { device = device })
        assert.are.same({ 0, 9, 9, 3, 4, 9 }, k:masked_fill(k:gt(0):logical_and(k:lt(3)):logical_or(k:eq(5)), 9):to_table())
        fails_with("tocha.Tensor:masked_fill: value: 0.5 is not a value of self's dtype i64", function() k:masked_fill(k:gt(0), 0.5) end)
        local b = tocha.zeros({ 3 }, { dtype = "u8", device = device })
        fails_with("tocha.Tensor:masked_fill: value: 300 is not a value of self's dtype u8",
          function() b:masked_fill(b:eq(0), tocha.tensor({ 300 }, { dtype = "f64", device = device })) end)
        local h = tocha.zeros({ 2 }, { dtype = "f16", device = device })
        fails_with("tocha.Tensor:masked_fill: value: 1000000 is not a value of self's dtype f16",
          function() h:masked_fill(h:eq(0), 1e6) end)
        assert.are.same({ -math.huge, -math.huge }, h:masked_fill(h:eq(0), -math.huge):to_table())
        fails_with("tocha.Tensor:masked_fill: value: expected a number or a one-element tensor, got 6 elements",
          function() k:masked_fill(k:gt(0), k) end)
        local m = randn({ 3, 4 })
        local before = m:to_table()
        m:narrow(2, 2, 2):zero_()
        local after = m:to_table()
        for r = 1, 3 do
          assert.are.same({ before[r][1], 0, 0, before[r][4] }, after[r])
        end
      end)

      it("reduces any and all to u8 masks, NaN counting as non-zero, over no elements 0 and 1", function()
        ref.rng("any all")
        for _ = 1, 4 do
          local shape = ref.random_shape(3, 5)
          local x = randn(shape):round():clamp(-1, 1) -- many zeros
          local dims = {}
          for k = 1, #shape do if math.random() < 0.5 then dims[#dims + 1] = k end end
          local list = #dims > 0 and dims or nil
          local all = {}
          for k = 1, #shape do all[k] = k end
          local v = x:to_table(true)
          local want_any = reduce_ref(v, shape, list or all, 0, function(a, e) return (a == 1 or e ~= 0) and 1 or 0 end)
          local want_all = reduce_ref(v, shape, list or all, 1, function(a, e) return (a == 1 and e ~= 0) and 1 or 0 end)
          check(x:any(list), want_any, 0, "any")
          check(x:all(list, true), want_all, 0, "all")
          assert.are.equal("u8", x:any(list):dtype())
        end
        local n = tocha.tensor({ 0, 0 / 0, 0 }, { device = device })
        assert.are.equal(1, n:any():item())
        assert.are.equal(0, n:all():item())
        assert.are.same({ 0, 0 }, tocha.zeros({ 0, 2 }, { device = device }):any(1):to_table())
        assert.are.same({ 1, 1 }, tocha.zeros({ 0, 2 }, { device = device }):all(1):to_table())
      end)

      it("computes logsumexp without overflow, and the p-norms, halves in f32", function()
        ref.rng("logsumexp norm")
        for _, dt in ipairs({ "f64", "f32", "f16" }) do
          local shape = ref.random_shape(3, 6)
          local x = randn(shape, dt):mul(dt == "f16" and 2 or 40)
          local dims = {}
          for k = 1, #shape do if math.random() < 0.6 then dims[#dims + 1] = k end end
          if #dims == 0 then dims = { #shape } end
          local v = x:cast("f64"):to_table(true)
          local mx = reduce_ref(v, shape, dims, -math.huge, math.max)
          local lse = {}
          do
            local gone = {}
            for _, k in ipairs(dims) do gone[k] = true end
            local kept = {}
            for k = 1, #shape do kept[k] = gone[k] and 1 or shape[k] end
            local sums = {}
            for i = 1, #v do
              local idx = indices_of(i, shape)
              for k = 1, #shape do if gone[k] then idx[k] = 1 end end
              local o = flat_of(idx, kept)
              sums[o] = (sums[o] or 0) + math.exp(v[i] - mx[o])
            end
            for o = 1, #sums do lse[o] = math.log(sums[o]) + mx[o] end
          end
          local ulps = dt == "f64" and 64 or (dt == "f32" and 16 or 1)
          check(x:logsumexp(dims), lse, ulps, "logsumexp " .. dt)
          local p2 = reduce_ref(v, shape, dims, 0, function(a, e) return a + e * e end, math.sqrt)
          check(x:norm(2, dims), p2, ulps, "norm 2 " .. dt)
          local p1 = reduce_ref(v, shape, dims, 0, function(a, e) return a + math.abs(e) end)
          check(x:norm(1, dims, true), p1, ulps, "norm 1 " .. dt)
          local pinf = reduce_ref(v, shape, dims, 0, function(a, e) return math.max(a, math.abs(e)) end)
          check(x:norm(math.huge, dims), pinf, 0, "norm inf " .. dt)
          local p3 = reduce_ref(v, shape, dims, 0, function(a, e) return a + math.abs(e) ^ 3 end, function(s) return s ^ (1 / 3) end)
          check(x:norm(3, dims), p3, 4 * ulps, "norm 3 " .. dt)
        end
        local rows = tocha.tensor({ { -math.huge, -math.huge }, { math.huge, 1 }, { 0 / 0, 1 }, { 1000, 1000 } }, { device = device })
        local r = rows:logsumexp(2):to_table()
        assert.are.equal(-math.huge, r[1])
        assert.are.equal(math.huge, r[2])
        assert.is_true(r[3] ~= r[3])
        assert.is_true(math.abs(r[4] - (1000 + math.log(2))) < 1e-3)
        local h = rows:cast("bf16"):logsumexp(2) -- halves: the same rows through the f32 shift, rounded once
        assert.are.equal("bf16", h:dtype())
        h = h:to_table()
        assert.are.same({ -math.huge, math.huge }, { h[1], h[2] })
        assert.is_true(h[3] ~= h[3])
        assert.are.equal(1000, h[4]) -- 1000.69 rounds to bf16's 1000
        assert.are.same({ -math.huge, -math.huge }, tocha.zeros({ 0, 2 }, { device = device }):logsumexp(1):to_table())
        -- over one dimension, one launch: rows by a warp's lanes (up to 8 KB: the maximum, then the
        -- sum; 4096 rows of 8.2 KB: a running pair) and by a CTA (8 KB: the maximum, then the sum;
        -- past 8 KB: the pair), columns by a thread each; rows of -inf, of two +inf, with a NaN
        for _, c in ipairs({ { { 5, 37 }, 2, "f32" }, { { 3, 2500 }, 2, "f32" }, { { 2, 9000 }, -1, "bf16" },
          { { 4, 9, 3 }, 2, "f64" }, { { 6, 300 }, 1, "f16" }, { { 2, 5000 }, 2, "f64" }, { { 4, 2048 }, 2, "f32" },
          { { 4096, 1025 }, 2, "f64" } }) do
          local shape, dim, dt = c[1], c[2], c[3]
          local v = randn(shape, "f64"):mul(dt == "f64" and 30 or 3):to_table(true)
          local k = dim < 0 and #shape + 1 + dim or dim
          local outer, n, inner = 1, shape[k], 1
          for j = 1, k - 1 do outer = outer * shape[j] end
          for j = k + 1, #shape do inner = inner * shape[j] end
          local function at(o, j, q) return (o * n + j) * inner + q + 1 end
          -- outputs 1, 2 and 3 (those that exist): all -inf; two +inf among finite; a NaN
          local specials = { function(e, j) return -math.huge end,
            function(e, j) return (j == 1 or j == n - 1) and math.huge or e end,
            function(e, j) return j == math.floor(n / 2) and 0 / 0 or e end }
          for o = 0, outer - 1 do
            for q = 0, inner - 1 do
              local f = specials[o * inner + q + 1]
              if f then for j = 0, n - 1 do v[at(o, j, q)] = f(v[at(o, j, q)], j) end end
            end
          end
          local x = tocha.tensor(v, { device = device, dtype = "f64" }):view(shape):cast(dt)
          local xs = x:cast("f64"):to_table(true)
          local want = {}
          for o = 0, outer - 1 do
            for q = 0, inner - 1 do
              local m = -math.huge
              for j = 0, n - 1 do m = math.max(m, xs[at(o, j, q)]) end
              local shift = (m == m and m - m == 0) and m or 0
              local sum, nan = 0, false
              for j = 0, n - 1 do
                local e = xs[at(o, j, q)]
                if e ~= e then nan = true end
                sum = sum + math.exp(e - shift)
              end
              want[o * inner + q + 1] = nan and 0 / 0 or (m == math.huge and m or math.log(sum) + shift)
            end
          end
          local got = x:logsumexp(dim)
          local keep = x:logsumexp(dim, true)
          local label = ("logsumexp %s of %s along %d"):format(dt, table.concat(shape, "x"), dim)
          assert.are.equal(#shape - 1, #got:shape(), label .. ": the dimension dropped")
          assert.are.equal(1, keep:shape()[k], label .. ": kept as 1")
          local g, gk = got:cast("f64"):to_table(true), keep:cast("f64"):to_table(true)
          local tol = ({ f64 = 1e-13, f32 = 2e-6, f16 = 1e-3, bf16 = 8e-3 })[dt]
          for e = 1, #want do
            local w = want[e]
            if w ~= w then
              assert.is_true(g[e] ~= g[e], ("%s: element %d is %s, expected NaN"):format(label, e, tostring(g[e])))
            elseif math.abs(w) == math.huge then
              assert.are.equal(w, g[e], ("%s: element %d"):format(label, e))
            else
              assert.is_true(math.abs(g[e] - w) <= tol * math.max(1, math.abs(w)),
                ("%s: element %d is %.17g, expected %.17g"):format(label, e, g[e], w))
            end
            assert.is_true(g[e] == gk[e] or (g[e] ~= g[e] and gk[e] ~= gk[e]), label .. ": keepdim's the same")
          end
        end
        local z = tocha.tensor({ 0, 3, 0, -4 }, { device = device })
        assert.are.equal(5, z:norm():item())
        assert.are.equal(2, z:norm(0):item())
        assert.are.equal(0, z:norm(-math.huge):item())
        local signed = tocha.tensor({ -0.0, 0.0, -0.0 }, { device = device }) -- |-0| is +0, as PyTorch's abs
        for _, p in ipairs({ math.huge, -math.huge, 1, 2 }) do
          assert.are.equal(math.huge, 1 / signed:norm(p):item(), "norm " .. p .. " of signed zeros")
        end
        fails_with("tocha.Tensor:norm: self: norm() needs a float tensor, got i64 (cast it first: x:cast(\"f32\"))",
          function() tocha.arange(3):norm() end)
      end)

      it("takes the 1-, 2- and max norms of large tensors in one read, through split passes, halves rounded once", function()
        -- long rows, long columns and every element: shapes whose reductions split into partials
        ref.rng("norm splits")
        for _, case in ipairs({ { { 2, 70001 }, { 2 } }, { { 4099, 33 }, { 1 } }, { { 3, 50000 }, nil }, { { 600, 7, 9 }, { 1, 3 } } }) do
          local shape, dims = case[1], case[2]
          for _, dt in ipairs({ "f32", "bf16", "f64" }) do
            local x = randn(shape, dt)
            local v = x:cast("f64"):to_table(true)
            local all = {}
            for k = 1, #shape do all[k] = k end
            local over = dims or all
            local function r(step, finish) return reduce_ref(v, shape, over, 0, step, finish) end
            -- f32 sums of this many terms are off their exact value by up to ~n^(1/2) ulps
            local ulps = dt == "f64" and 256 or (dt == "f32" and 512 or 1)
            local function norm(p) return dims and x:norm(p, dims) or x:norm(p) end
            check(norm(2), r(function(a, e) return a + e * e end, math.sqrt), ulps, "norm 2 " .. dt)
            check(norm(1), r(function(a, e) return a + math.abs(e) end), ulps, "norm 1 " .. dt)
            check(norm(math.huge), r(function(a, e) return math.max(a, math.abs(e)) end), 0, "norm inf " .. dt)
            check(norm(-math.huge), reduce_ref(v, shape, over, math.huge, function(a, e) return math.min(a, math.abs(e)) end),
              0, "norm -inf " .. dt)
          end
        end
      end)
    end)
  end
end)
