-- Tensors and tocha's other objects as Lua values: every metamethod a script can reach is
-- defined, as tensor math, as Torch7's habits or as an error that names itself, never pointer arithmetic on the
-- C struct behind a tensor or a raw Lua error.
local tocha = require "tocha"

local function fails(pattern, fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
  return err
end

local function matrix() return tocha.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { device = "sim" }) end

describe("a tensor as a Lua value", function()
  describe("x[i]", function()
    it("is x:select(1, i): a view of row i, negative i from the end", function()
      local x = matrix()
      assert.are.same({ 4, 5, 6 }, x[2]:to_table())
      assert.are.same({ 1, 2, 3 }, x[-2]:to_table())
      assert.are.same({ 6 }, x[2][3]:to_table())
      x[2][1] = 40 -- written through the views
      assert.are.same({ { 1, 2, 3 }, { 40, 5, 6 } }, x:to_table())
    end)

    it("writes a row: a number fills it, a tensor is copied into it", function()
      local x = matrix()
      x[1] = 9
      x[-1] = tocha.tensor({ 7, 8, 9 }, { device = "sim" })
      assert.are.same({ { 9, 9, 9 }, { 7, 8, 9 } }, x:to_table())
    end)

    it("refuses 0, an index past the end, a fraction and a value that is no number or tensor", function()
      local x = matrix()
      fails("tocha.Tensor:index: index: expected 1 to 2 (or -1 to -2), got 0", function() return x[0] end)
      fails("tocha.Tensor:index: index: expected 1 to 2 (or -1 to -2), got 3", function() return x[3] end)
      fails("tocha.Tensor:index: index: expected an integer, got 1.5", function() return x[1.5] end)
      fails("tocha.Tensor:index: index: expected 1 to 2 (or -1 to -2), got 5", function() x[5] = 1 end)
      fails('tocha.Tensor:index: value: expected a number or a tensor, got "4"', function() x[1] = "4" end)
      assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:to_table())
    end)

    it("names a field that is no method, read or written", function()
      local x = matrix()
      fails('tocha.Tensor:index: "shpe": a tensor has no method or field of that name', function() return x.shpe end)
      fails('tocha.Tensor:index: "dims2": a tensor has no field to set', function() x.dims2 = 1 end)
    end)
  end)

  describe("index specs", function()
    it("refuse a range of more than two numbers, holes and named keys", function()
      local x = matrix()
      fails("tocha.Tensor:index: spec[1]: expected {}, {a} or {a, b}, got 3 numbers", function() return x[{ { 1, 2, 2 } }] end)
      fails("tocha.Tensor:index: spec: expected a list without holes or named keys", function() return x[{ 1, dim = 2 }] end)
      fails("tocha.Tensor:index: spec[2]: expected a list without holes or named keys", function() return x[{ 1, { 1, step = 2 } }] end)
    end)
  end)

  it("#x is the size of the first dimension", function()
    assert.are.equal(2, #matrix())
    assert.are.equal(7, #tocha.zeros({ 7, 2, 3 }, { device = "sim" }))
  end)

  it("== is identity: the same tensor, not one of equal values, nor a view", function()
    local x, y = matrix(), matrix()
    local same = x
    assert.is_true(x == same)
    assert.is_false(x == y)
    assert.is_false(x == x:view(-1))
    assert.is_false(x == nil)
    assert.is_false(x == 1)
    assert.is_true(x ~= "x")
  end)

  it("tostring shows the values; t:summary() one line", function()
    local x = matrix()
    assert.truthy(tostring(x):find("tocha.Tensor f32 [2x3] sim", 1, true))
    assert.truthy(tostring(x):find("6", 1, true))
  end)

  it("computes with arithmetic operators; refuses ordering, concatenation and calls by name", function()
    local x = matrix()
    assert.are.same({ { 2, 3, 4 }, { 5, 6, 7 } }, (x + 1):to_table())
    assert.are.same({ { 2, 3, 4 }, { 5, 6, 7 } }, (1 + x):to_table())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, (x - x):to_table())
    assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 } }, (2 * x):to_table())
    assert.are.same({ { 1, 0, 1 }, { 0, 1, 0 } }, (x % 2):to_table())
    assert.are.same({ { 1, 4, 9 }, { 16, 25, 36 } }, (x ^ 2):to_table())
    assert.are.same({ { -1, -2, -3 }, { -4, -5, -6 } }, (-x):to_table())
    local cases = {
      { "tocha.Tensor.__add: right operand: expected a tensor or a number, got string", function() return x + "1" end },
      { "tocha.Tensor.__mul: left operand: expected a tensor or a number, got table", function() return {} * x end },
      { "tocha.Tensor.__lt: <: tensors have no ordering operator", function() return x < x end },
      { "tocha.Tensor.__le: <=: tensors have no ordering operator", function() return x <= x end },
      { "tocha.Tensor.__lt: <: tensors have no ordering operator", function() return x > 1 end },
      { "tocha.Tensor.__concat: .. : a tensor is not a string", function() return x .. "" end },
      { "tocha.Tensor.__concat: .. : a tensor is not a string", function() return "" .. x end },
      { "tocha.Tensor.__call: a tensor cannot be called", function() return x() end },
    }
    for _, case in ipairs(cases) do fails(case[1], case[2]) end
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:to_table()) -- and x is untouched
  end)
end)

describe("tocha's other objects as Lua values", function()
  local function objects()
    local up = tocha.UpsampleNearest2dForward.new(2, 2)
    local p = tocha.Model.input({ -1, 1, 2, 2 })
    local node = up(p)
    return {
      { "Event", tocha.event("sim") },
      { "Stream", tocha.stream("sim") },
      { "Graph", tocha.graph(function() end, "sim") },
      { "Kernel", tocha.kernel { source = "__device__ void k(float *x) {}", name = "k", params = "f32* x" } },
      { "Model", tocha.Model({ p }, { node }) },
      { "Model node", node },
      { "Device", tocha.device("sim") },
      { "UpsampleNearest2dForward", up },
    }
  end

  it("refuse arithmetic, ordering, concatenation and calls, naming the object", function()
    for _, case in ipairs(objects()) do
      local name, v = case[1], case[2]
      fails(("tocha.%s.__add: +: a %s has no operators"):format(name, name), function() return v + 1 end)
      fails(("tocha.%s.__lt: <: a %s has no operators"):format(name, name), function() return v < v end)
      fails(("tocha.%s.__concat: ..: a %s has no operators"):format(name, name), function() return v .. "" end)
      fails(("tocha.%s.__unm: unary -: a %s has no operators"):format(name, name), function() return -v end)
      if name ~= "UpsampleNearest2dForward" then -- an op called on nodes builds a model
        fails(("tocha.%s.__call: a %s cannot be called"):format(name, name), function() return v() end)
      end
      assert.is_true(v == v)
    end
  end)

  it("events check the arguments of elapsed", function()
    local e = tocha.event("sim"):record()
    fails("tocha.Event:elapsed: later: expected an event, got table", function() return e:elapsed({}) end)
    fails("tocha.Event:elapsed: later: expected an event, got nil", function() return e:elapsed(nil) end)
    fails('tocha.Event:elapsed: later: expected an event, got "e"', function() return e:elapsed("e") end)
    fails("tocha.Event:elapsed: self: expected a Event", function() return e.elapsed({}, e) end)
    local later = tocha.event("sim"):record()
    assert.is_true(e:elapsed(later) >= 0)
  end)

  it("streams check the events they wait for and record", function()
    local s = tocha.stream("sim")
    fails("tocha.Stream:wait: event: expected an event, got table", function() s:wait({}) end)
    fails("tocha.Stream:wait: event: expected an event, got table", function() s:wait({ handle = 1 }) end)
    fails("tocha.Stream:record: event: expected an event, got number", function() s:record(3) end)
    fails("tocha.Stream:use: fn: expected a function, got nil", function() s:use() end)
  end)
end)
