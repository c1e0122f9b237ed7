-- Launch plans (tocha.plan): launches packed once and run many times, slots patched with each
-- run's addresses (offsets kept), fixed addresses held, guarded tensors refused once freed,
-- and runs captured by graphs; on sim and, tagged #gpu, on cuda.
local tocha = require "tocha"
local plan = require "tocha.plan"
local ref = require "support.reference"
local kernels = require "support.kernels"
local ffi = require "ffi"

local f32_box = ffi.new("float[1]")
local function f32(v) f32_box[0] = v; return tonumber(f32_box[0]) end

-- What axpy computes (y = A * x + y + b) in float32 arithmetic, over n elements.
local function axpy_ref(a, x, y, b)
  local out = {}
  for i = 1, #y do out[i] = y[i] end
  for i = 1, #x do out[i] = f32(f32(f32(a * x[i]) + y[i]) + b) end
  return out
end

describe("tocha.plan", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local k = kernels.axpy("f32", 3)

      local function random(n, seed)
        return tocha.rand({ n }, { device = device, seed = seed, low = -4, high = 4 })
      end

      it("patches each run's slot addresses, offsets into them kept, and passes floats as floats", function()
        ref.rng("plan slots " .. device)
        local p = plan.new(device, 2)
        -- y[0:100] += 3 x[0:100] + 0.75, then y[100:150] += 3 x[8:58] - 0.375: the second launch
        -- reads slot 1 and writes slot 2 at byte offsets.
        p:add(k, 1, 128, { plan.slot(1), plan.slot(2), 100, 0.75 })
        p:add(k, 1, 64, { plan.slot(1) + 8 * 4, plan.slot(2) + 100 * 4, 50, -0.375 })
        assert.are.equal(2, p:launches())
        for run = 1, 3 do -- new tensors each run: the same packed launches reach them
          local x, y = random(200, math.random(1, 1e6)), random(160, math.random(1, 1e6))
          local xs, want = x:to_table(), y:to_table()
          want = axpy_ref(3, { unpack(xs, 1, 100) }, want, 0.75)
          local tail = axpy_ref(3, { unpack(xs, 9, 58) }, { unpack(want, 101, 150) }, -0.375)
          for i = 1, 50 do want[100 + i] = tail[i] end
          p:run({ x, y })
          local got = y:to_table()
          for i = 1, 160 do
            assert.is_true(math.abs(got[i] - want[i]) <= 1e-5 * (1 + math.abs(want[i])),
              ("run %d: y[%d] = %s, expected %s"):format(run, i, got[i], want[i]))
          end
        end
      end)

      it("runs a range of its launches alone, and refuses a range it does not have", function()
        local p = plan.new(device, 2)
        for j = 1, 3 do p:add(k, 1, 64, { plan.slot(1), plan.slot(2) + (j - 1) * 16 * 4, 16, j }) end
        local x = random(16, 5)
        local y = tocha.zeros({ 48 }, { device = device })
        p:run({ x, y }, 2, 1) -- the second launch only: y[17..32] = 3 x + 2
        local xs, got = x:to_table(), y:to_table()
        for j = 1, 48 do
          local want = (j > 16 and j <= 32) and ref.convert(3 * xs[j - 16] + 2, "f32") or 0
          assert.is_true(math.abs(got[j] - want) <= 1e-5 * (1 + math.abs(want)), ("y[%d] = %s, expected %s"):format(j, got[j], want))
        end
        for _, bad in ipairs({ { 0, 1 }, { 3, 2 }, { 4, 1 }, { 1, -1 } }) do
          local ok, message = pcall(p.run, p, { x, y }, bad[1], bad[2])
          assert.is_false(ok)
          assert.truthy(tostring(message):find("is not a range of the plan's 3", 1, true), message)
        end
        p:run({ x, y }, 4, 0) -- an empty range at the end
      end)

      it("holds the blocks its fixed addresses name: a freed tensor's block reaches no new tensor", function()
        local x, y = tocha.ones({ 64 }, { device = device }), tocha.zeros({ 64 }, { device = device })
        local p = plan.new(device, 0)
        p:add(k, 1, 64, { x.data, y.data, 64, 1 })
        collectgarbage()
        collectgarbage()
        local allocated = tocha.memory.stats(device).allocated
        x:free()
        y:free()
        assert.are.equal(allocated, tocha.memory.stats(device).allocated)
        local z = tocha.full({ 64 }, 7, { device = device }) -- the size a pool would reuse
        p:run({})
        p:run({})
        for _, v in ipairs(z:to_table()) do assert.are.equal(7, v) end
        p = nil -- luacheck: ignore 311
        collectgarbage()
        collectgarbage()
        assert.are.equal(allocated - 64 * 4, tocha.memory.stats(device).allocated) -- both given back; z lives
      end)

      it("refuses a run once a guarded tensor is freed, by its name, and stays usable", function()
        local w, y = tocha.ones({ 16 }, { device = device }), tocha.zeros({ 16 }, { device = device })
        local p = plan.new(device, 1)
        p:add(k, 1, 16, { w.data, plan.slot(1), 16, 0 })
        p:guard(w, "conv1.weight")
        p:run({ y })
        assert.are.same({ 3, 3, 3 }, { unpack(y:to_table(), 1, 3) })
        w:free()
        local ok, err = pcall(p.run, p, { y })
        assert.is_false(ok)
        assert.truthy(tostring(err):find("conv1.weight: tensor was freed", 1, true), err)
        assert.are.same({ 3, 3, 3 }, { unpack(y:to_table(), 1, 3) }) -- nothing ran
        local other = plan.new(device, 1)
        other:add(k, 1, 16, { plan.slot(1), plan.slot(1), 16, 1 })
        other:run({ y })
        assert.are.same({ 13, 13, 13 }, { unpack(y:to_table(), 1, 3) })
      end)

      it("runs inside a graph capture, each replay reading the slot tensors' values then", function()
        local x, y = random(300, 5), tocha.zeros({ 300 }, { device = device })
        local p = plan.new(device, 2)
        p:add(k, 3, 128, { plan.slot(1), plan.slot(2), 300, 0.5 })
        local g = tocha.graph(function() p:run({ x, y }) end, device)
        assert.are.same(tocha.zeros({ 300 }):to_table(), y:to_table()) -- recorded, not run
        g:replay()
        local want = axpy_ref(3, x:to_table(), tocha.zeros({ 300 }):to_table(), 0.5)
        local got = y:to_table()
        for i = 1, 300 do assert.is_true(math.abs(got[i] - want[i]) <= 1e-5 * (1 + math.abs(want[i]))) end
      end)

      it("names its bad arguments", function()
        local x = tocha.zeros({ 4 }, { device = device })
        local function refuses(pattern, f, ...)
          local ok, err = pcall(f, ...)
          assert.is_false(ok)
          assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
        end
        refuses("slots: expected 0 to 4096, got 4097", plan.new, device, 4097)
        refuses("slots: expected 0 to 4096, got -1", plan.new, device, -1)
        refuses("n_slots: expected an integer, got 1.5", plan.new, device, 1.5)
        local p = plan.new(device, 1)
        refuses("is the placeholder of no slot of the plan (it has 1)", p.add, p, k, 1, 4, { plan.slot(2), x.data, 4, 0 })
        local many = { x.data, x.data, 4, 0 }
        for i = 5, 70 do many[i] = i end
        refuses("args: expected at most 64 arguments, got 70", p.add, p, k, 1, 4, many)
        refuses("args[2]: expected a number or an address (uint64_t), got string", p.add, p, k, 1, 4, { x.data, "y", 4, 0 })
        refuses("block[1]: expected a positive integer, got 0", p.add, p, k, 1, 0, { x.data, x.data, 4, 0 })
        refuses("expected 4", p.add, p, k, 1, 4, { x.data, x.data, 4 })
        assert.are.equal(0, p:launches()) -- a refused launch is not added
        p:add(k, 1, 4, { x.data, plan.slot(1), 4, 0 })
        refuses("slots: expected 1 tensors or addresses, got 2", p.run, p, { x, x })
        refuses("slots[1]: expected a tensor or an address (uint64_t), got string", p.run, p, { "x" })
        refuses("slots[1]: expected an address, got 0", p.run, p, { plan.slot(1) - plan.slot(1) })
        refuses("slots: expected a list of tensors or addresses, got nil", p.run, p, nil)
        local gone = tocha.zeros({ 4 }, { device = device })
        gone:free()
        refuses("slots[1]: tensor was freed", p.run, p, { gone })
        p:run({ x }) -- still usable
        assert.are.same({ 0, 0, 0, 0 }, x:to_table())
      end)
    end)
  end
end)
