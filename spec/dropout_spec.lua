-- tocha.Dropout: every element's keep or drop against the draw worked out here (the splitmix64
-- hash of seed, step and pair index in LuaJIT's 64-bit integers, a 32-bit half an element), the
-- scale 1 / (1 - p), a new draw each forward, the backward from the last forward's draw, tensors
-- of several vectors a thread and of odd lengths, p at the draw's resolution (2^-32), the
-- dropped fraction near p on a large tensor, inference as the identity, p = 0, p = 1 and p
-- within 2^-32 of 1; in a model (forward_train and backward share a draw; the step is an i64
-- buffer, not trained); bad arguments. On sim and, tagged #gpu, on cuda.
local ffi = require "ffi"
local tocha = require "tocha"
local op = require "tocha.op"
local ref = require "support.reference"

local fails = require("support.assertions").fails

-- kernels/dropout.cu's draw, written from its definition: elements 2j and 2j + 1 share
-- splitmix64(base + j), the first its low 32 bits, the second its high 32, as u; kept when the
-- uniform u / 2^32 (exact in a double) is at least p.
local function mix(z)
  z = z + 0x9E3779B97F4A7C15ULL
  z = bit.bxor(z, bit.rshift(z, 30)) * 0xBF58476D1CE4E5B9ULL
  z = bit.bxor(z, bit.rshift(z, 27)) * 0x94D049BB133111EBULL
  return bit.bxor(z, bit.rshift(z, 31))
end
local function uniform(seed, step, i)
  local h = mix(mix(bit.bxor(0ULL + seed, mix(0ULL + step))) + math.floor(i / 2))
  return tonumber(i % 2 == 0 and bit.band(h, 0xFFFFFFFFULL) or bit.rshift(h, 32))
end
local function keep(seed, step, i, p)
  return uniform(seed, step, i) * 2 ^ -32 >= p
end

-- Every element of y against the draw: x / (1 - p) where kept, else 0.
local function check_all(dt, y, xv, seed, step, p, what)
  for i = 1, #xv do
    local want = keep(seed, step, i - 1, p) and ref.convert(xv[i] / (1 - p), dt) or 0
    assert(math.abs(y[i] - want) <= 2 * ref.eps[dt] * math.abs(want),
      ("%s %s step %d [%d]: got %.9g, want %.9g"):format(what, dt, step, i, y[i], want))
  end
end

describe("tocha.Dropout", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("drops the elements the draw names, scales the rest, draws afresh each forward", function()
        for _, dt in ipairs({ "f32", "f64", "bf16" }) do
          local p, seed = 0.4, 1234
          local drop = tocha.Dropout.new(p, { seed = seed, dtype = dt })
          local x = tocha.randn({ 7, 33 }, { dtype = dt, device = device, seed = 3 })
          local xv = x:to_table(true)
          for step = 0, 2 do
            check_all(dt, drop:forward(x):to_table(true), xv, seed, step, p, "y")
          end
          -- the backward: the last forward's draw (step 2)
          local dy = tocha.randn({ 7, 33 }, { dtype = dt, device = device, seed = 4 })
          check_all(dt, drop:backward(x, dy):to_table(true), dy:to_table(true), seed, 2, p, "dx")
        end
      end)

      it("draws every element of tensors of several vectors a thread and of odd lengths", function()
        -- 1324 16-byte vectors: two CTAs of 256 threads, four vectors a thread, then the
        -- elements past the last whole vector one by one
        local p, seed = 0.3, 2 ^ 40 + 5
        for _, dt in ipairs({ "f32", "f16", "bf16", "f64" }) do
          local per = 16 / require("tocha.dtype").size(dt)
          local n = 1324 * per + per - 1
          local drop = tocha.Dropout.new(p, { seed = seed, dtype = dt })
          local x = tocha.randn({ n }, { dtype = dt, device = device, seed = 6 })
          local xv = x:to_table(true)
          drop:forward(x)
          check_all(dt, drop:forward(x):to_table(true), xv, seed, 1, p, "y")
          check_all(dt, drop:backward(x, x):to_table(true), xv, seed, 1, p, "dx")
        end
      end)

      it("compares each element's uniform with p exactly, at a resolution of 2^-32", function()
        local seed, n = 99, 64
        local x = tocha.randn({ n }, { device = device, seed = 8 })
        local xv = x:to_table(true)
        for _, i in ipairs({ 4, 5 }) do -- a low and a high half of a pair's hash
          local u = uniform(seed, 0, i)
          for _, case in ipairs({ { u * 2 ^ -32, true }, { (u + 1) * 2 ^ -32, false } }) do
            local p = case[1]
            local y = tocha.Dropout.new(p, { seed = seed }):forward(x):to_table(true)
            assert.are.equal(case[2], y[i + 1] ~= 0, ("element %d at p = u / 2^32%s"):format(i, case[2] and "" or " + 2^-32"))
            check_all("f32", y, xv, seed, 0, p, "y")
          end
        end
        -- within 2^-32 of 1, p * 2^32 rounds up to 2^32: every element dropped
        local y = tocha.Dropout.new(1 - 2 ^ -33, { seed = seed }):forward(tocha.ones({ 100000 }, { device = device }))
        assert.are.equal(0, y:abs():sum():item())
      end)

      it("draws the same mask element by element where x and y are not 16-byte aligned", function()
        -- the op's launches on views one element into their blocks: the kernel's element path
        local p, seed, n = 0.3, 77, 40
        local drop = tocha.Dropout.new(p, { seed = seed })
        local x = tocha.randn({ n + 1 }, { device = device, seed = 5 })
        local y = tocha.zeros({ n + 1 }, { device = device })
        local step = tocha.zeros({ 1 }, { dtype = "i64", device = device })
        local xa, ya = ffi.cast("uint64_t", x.data) + 4, ffi.cast("uint64_t", y.data) + 4
        for i = 1, 2 do
          op.launch_packed(drop.kernel, device, drop:grid_for_launch(i, { { n } }), drop:block(),
            drop:pack_args_for_launch(i, { { xa, { n } } }, { step }, ya, { n }))
        end
        assert.are.equal(1, step:item())
        local xv, yv = x:to_table(true), y:to_table(true)
        assert.are.equal(0, yv[1])
        for i = 1, n do
          local want = keep(seed, 0, i - 1, p) and ref.convert(xv[i + 1] / (1 - p), "f32") or 0
          assert(math.abs(yv[i + 1] - want) <= 2 * ref.eps.f32 * math.abs(want), ("[%d]: got %.9g, want %.9g"):format(i, yv[i + 1], want))
        end
      end)

      it("drops a fraction near p, keeps all at p = 0, none at p = 1; inference is the identity", function()
        local x = tocha.ones({ 200000 }, { device = device })
        local frac = tocha.Dropout.new(0.25, { seed = 9 }):forward(x):eq(0):cast("f64"):mean():item()
        -- 200000 draws: the standard deviation of the fraction is 0.001
        assert(math.abs(frac - 0.25) < 0.006, "dropped fraction " .. frac)
        assert.is_true(tocha.allclose(tocha.Dropout.new(0):forward(x), x, 0, 0))
        assert.are.equal(0, tocha.Dropout.new(1):forward(x):abs():sum():item())
        local drop = tocha.Dropout.new(0.5):train(false)
        local r = tocha.randn({ 10 }, { device = device })
        assert.is_true(tocha.allclose(drop:forward(r), r, 0, 0))
        assert.is_true(tocha.allclose(drop:backward(r, r), r, 0, 0))
      end)

      it("shares a draw between a model's forward_train and its backward", function()
        local input = tocha.Model.input({ -1, 64 })
        local drop = tocha.Dropout.new(0.5, { seed = 11 })
        local m = tocha.Model({ input }, { drop(input) })
        m:load(4, device)
        assert.are.same({}, m:trainable_parameters())
        local x = tocha.full({ 4, 64 }, 3, { device = device })
        local first = m:forward({ x })[1]:clone()
        local out, cache = m:forward_train({ x })
        assert.is_false(tocha.allclose(first, out[1]))
        local dy = tocha.ones({ 4, 64 }, { device = device })
        local grads = m:backward({ dy }, cache)
        -- dx = dy * keep * 2, y = 3 * keep * 2: dx = y / 3
        assert.is_true(tocha.allclose(grads[1], out[1] / 3, 1e-6, 0))
        local step
        for name, t in pairs(m:parameters()) do
          assert.truthy(name:find("%.step$"))
          step = t
        end
        assert.are.equal("i64", step:dtype())
        assert.are.equal(2, step:item())
        m:train(false)
        assert.is_true(tocha.allclose(m:forward({ x })[1], x, 0, 0))
      end)

      it("refuses bad arguments by name", function()
        fails("p: expected a probability from 0 to 1, got 1.5", tocha.Dropout.new, 1.5)
        fails("seed: expected an integer from 0 to 2^53, got -1", tocha.Dropout.new, 0.5, { seed = -1 })
        fails('"inplace": unknown option of tocha.Dropout', tocha.Dropout.new, 0.5, { inplace = true })
        local drop = tocha.Dropout.new(0.5)
        local x = tocha.ones({ 3 }, { device = device })
        fails("dy: expected shape [3] (x's), got [4]", drop.backward, drop, x, tocha.ones({ 4 }, { device = device }))
      end)
    end)
  end
end)
