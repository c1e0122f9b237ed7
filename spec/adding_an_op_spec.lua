-- adding_an_op_spec.lua: the worked example of docs/design.md ("Adding an op"), run as it is
-- written there. The page's two files, kernels/power.cu and lua/tocha/ops/power.lua, are taken out
-- of it into a folder of their own (the kernel found through op.kernel_path, the class through
-- package.path, as an op kept beside one's scripts is), and the op runs directly and in a
-- model, forward and backward, against plain Lua on random inputs, every output poisoned
-- first. A new op needs nothing else.
local tocha = require "tocha"
local op = require "tocha.op"
local ref = require "support.reference"
local process = require "support.process"
local fails_with = require("support.assertions").fails_with

local POISON = -77

-- The fenced block of the page whose first line names path.
local function block_of(page, lang, path)
  for body in page:gmatch("```" .. lang .. "\n(.-)```") do
    if body:find(path, 1, true) and body:find(path, 1, true) < 10 then return body end
  end
  error("docs/design.md has no " .. lang .. " block for " .. path)
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local dir = process.tempdir()
local page = assert(io.open(assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest") ..
  "/docs/design.md")):read("*a")
assert(os.execute(("mkdir -p %s/kernels %s/lua/tocha/ops"):format(process.quote(dir), process.quote(dir))) == 0)
write(dir .. "/kernels/power.cu", block_of(page, "cuda", "kernels/power.cu"))
write(dir .. "/lua/tocha/ops/power.lua", block_of(page, "lua", "lua/tocha/ops/power.lua"))
op.kernel_path[#op.kernel_path + 1] = dir .. "/kernels"
package.path = dir .. "/lua/?.lua;" .. package.path
local Power = require("tocha.ops.power").Power

-- x^p, rounded to the dtype once per product as the kernel rounds it.
local function power(x, p, dt)
  local r = 1
  for _ = 1, p do r = ref.convert(r * x, dt) end
  return r
end

describe("the op of docs/design.md, from its two files alone", function()
  teardown(function() process.remove_tree(dir) end)

  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name

      it("runs directly, forward and backward, for p from 1 to 5 in f32 and f64", function()
        for _, dt in ipairs({ "f32", "f64" }) do
          for p = 1, 5 do
            local x = tocha.rand({ 3, 257 }, { device = device, dtype = dt, seed = p, low = -2, high = 2 })
            local dy = tocha.randn({ 3, 257 }, { device = device, dtype = dt, seed = 10 + p })
            local up = Power.new(p, dt)
            local y = up:forward(x, tocha.full({ 3, 257 }, POISON, { device = device, dtype = dt }))
            local dx = up:backward(x, dy, tocha.full({ 3, 257 }, POISON, { device = device, dtype = dt }))
            local xs, ys, dys, dxs = x:to_table(true), y:to_table(true), dy:to_table(true), dx:to_table(true)
            for i, v in ipairs(xs) do
              assert.are.equal(power(v, p, dt), ys[i], ("%s p=%d y[%d]"):format(dt, p, i))
              local want = ref.convert(ref.convert(p * power(v, p - 1, dt), dt) * dys[i], dt)
              assert.are.equal(want, dxs[i], ("%s p=%d dx[%d]"):format(dt, p, i))
            end
          end
        end
      end)

      it("runs in a model: the plan made at load, and the backward through it", function()
        local x = tocha.Model.input({ -1, 4, 33 }, { name = "x" })
        local m = tocha.Model({ x }, { Power.new(2)(Power.new(3)(x)) }):load(2, device)
        local xt = tocha.rand({ 2, 4, 33 }, { device = device, seed = 5, low = -1.5, high = 1.5 })
        local y = m:forward({ xt })[1]:to_table(true)
        local xs = xt:to_table(true)
        for i, v in ipairs(xs) do assert.are.equal(power(power(v, 3, "f32"), 2, "f32"), y[i], i) end
        local _, cache = m:forward_train({ xt })
        local dy = tocha.randn({ 2, 4, 33 }, { device = device, seed = 6 })
        local dx = m:backward({ dy }, cache)[1]:to_table(true)
        for i, g in ipairs(dy:to_table(true)) do
          local cube = power(xs[i], 3, "f32")
          local inner = ref.convert(ref.convert(2 * cube, "f32") * g, "f32")
          local want = ref.convert(ref.convert(3 * power(xs[i], 2, "f32"), "f32") * inner, "f32")
          assert.are.equal(want, dx[i], i)
        end
      end)

      it("names its bad input, as tocha's own ops do", function()
        fails_with("tocha.Power.new: p: expected an integer from 1 to 16, got 0", function() Power.new(0) end)
        fails_with("tocha.Power.new: dtype: expected a float dtype (f32, f64, f16, bf16), got i32",
          function() Power.new(2, "i32") end)
        local x = tocha.ones({ 4 }, { device = device })
        fails_with("tocha.Power:forward: y: expected shape [4] (the output for x), got [5]",
          function() Power.new(2):forward(x, tocha.ones({ 5 }, { device = device })) end)
        fails_with("tocha.Power:grid_for_launch: launch: expected an integer from 1 to 1, got 2",
          function() Power.new(2):grid_for_launch(2, { { 4 } }, { 4 }) end)
      end)
    end)
  end

  it("is found only where op.kernel_path says", function()
    fails_with("tocha.op.source: nowhere.cu: not a kernel file of this libtocha nor of op.kernel_path {" ..
      table.concat(op.kernel_path, ", ") .. "}", function() op.source("nowhere.cu") end)
  end)
end)
