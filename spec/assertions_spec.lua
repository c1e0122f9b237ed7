-- tocha.assertions: assert.tensor.equal and assert.tensor.near pass when they should, and fail
-- with messages naming the first mismatching index, both values, the count and the largest
-- error; their negations too.
local tocha = require "tocha"
require "tocha.assertions"

local function failure_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected the assertion to fail")
  return tostring(err)
end

describe("tensor assertions", function()
  local a = tocha.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { device = "sim" })

  it("equal: same dtype, shape and elements, NaN equal to NaN", function()
    assert.tensor.equal(a, a:clone())
    local n = tocha.tensor({ 0 / 0, 1 }, { device = "sim" })
    assert.tensor.equal(n, n:clone())
    local b = tocha.tensor({ { 1, 2, 3 }, { 4, 5.5, 6 } }, { device = "sim" })
    local message = failure_of(assert.tensor.equal, a, b)
    assert.truthy(message:find("1 of 6 elements differ; the first at [2, 2]: 5 against 5.5; the largest error 0.5 at [2, 2]", 1, true), message)
    assert.truthy(message:find("Expected the tensors to be equal", 1, true), message)
    assert.is_not.tensor.equal(a, b)
    message = failure_of(assert.tensor.equal, a, a:cast("f64"))
    assert.truthy(message:find("dtypes differ: f32 and f64", 1, true), message)
    message = failure_of(assert.tensor.equal, a, tocha.zeros({ 3, 2 }, { device = "sim" }))
    assert.truthy(message:find("shapes differ: [2, 3] and [3, 2]", 1, true), message)
    message = failure_of(assert.tensor.equal, a, 5)
    assert.truthy(message:find("expected two tensors, got tocha.Tensor f32 [2x3] sim and number", 1, true), message)
  end)

  it("near: within atol + rtol * |b| element by element", function()
    local b = tocha.tensor({ { 1, 2, 3 }, { 4, 5, 6.001 } }, { device = "sim" })
    assert.tensor.near(a, b, { rtol = 1e-3 })
    assert.tensor.near(a, b, { atol = 2e-3, rtol = 0 })
    local message = failure_of(assert.tensor.near, a, b, { rtol = 1e-6, atol = 0 })
    assert.truthy(message:find("1 of 6 elements differ; the first at [2, 3]: 6 against 6.0009999275208", 1, true), message)
    assert.truthy(message:find("(rtol 1e-06, atol 0)", 1, true), message)
    assert.is_not.tensor.near(a, b, { rtol = 0, atol = 0 })
    local inf = tocha.tensor({ 1 / 0, 0 / 0 }, { device = "sim" })
    assert.tensor.near(inf, inf:clone())
    message = failure_of(assert.tensor.near, inf, tocha.tensor({ 1 / 0, 1 }, { device = "sim" }))
    assert.truthy(message:find("the first at [2]: nan against 1", 1, true), message)
    message = failure_of(assert.tensor.near, a, a, 5)
    assert.truthy(message:find("options: expected a table {rtol=, atol=}, got number", 1, true), message)
  end)
end)
