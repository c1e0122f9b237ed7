-- tocha.op: the base of the RuntimeOps written in Lua. A class that defines only what differs
-- (its output shape, grid and packed arguments) gets the interface's defaults, its methods
-- named in errors, and runs in a tocha.Model like tocha's own ops.
local tocha = require "tocha"
local op = require "tocha.op"
local ref = require "support.reference"

local SCALE = [[
__device__ void scaled(const float *x, float *y, long long n, float a) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}]]

-- y = a x over every element: the smallest op a class can define.
local function scale_class(with_backward)
  local Scale = op.class("Scale")
  function Scale.new(a)
    local k = tocha.kernel { source = SCALE, name = "scaled", params = "f32* x, f32* y, i64 n, f32 a" }
    -- its backward is the same kernel: dx = a dy
    return setmetatable({ a = a, dtype = "f32", block_size = 64, id = "scale " .. a, kernel = k,
      grad_kernel = with_backward and k or nil }, Scale)
  end
  function Scale:compute_concrete_output_shape(input_shapes) return op.one_input(input_shapes) end
  function Scale:grid(output_shape) return { math.ceil(op.numel(output_shape) / 64), 1, 1 } end
  function Scale:pack_args(inputs, _, output, output_shape)
    local x = op.input_of(inputs)
    return { x, op.address(output, "output"), op.numel(output_shape), self.a }
  end
  if with_backward then
    function Scale:backward_grid(input_shapes) return self:grid(input_shapes[1]) end
    function Scale:pack_backward_args(inputs, _, _, output_shape, grad_output, _, grad_inputs)
      op.input_of(inputs)
      return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "grad_inputs[1]"),
        op.numel(output_shape), self.a }
    end
  end
  return op.finish(Scale)
end

local function message(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("tocha.op", function()
  it("gives a class the interface's defaults for what it does not define", function()
    local Scale = scale_class(false)
    local s = Scale.new(2)
    assert.are.equal(1, s:n_activation_inputs())
    assert.are.same({}, s:param_names())
    assert.are.same({}, s:param_shapes({ { 4 } }, { 4 }))
    assert.is_nil(s:param_init_data(1))
    assert.is_false(s:has_backward())
    assert.are.same({ 64, 1, 1 }, s:block())
    assert.are.equal(7, s:forward_output_row_stride({ 3, 5, 7 }))
    assert.are.equal(7, s:backward_grad_output_row_stride({ 3, 5, 7 }))
    assert.are.equal(1, s:n_launches())
    assert.are.equal(0, s:n_backward_launches())
    assert.are.same({ 2, 1, 1 }, s:grid_for_launch(1, { { 100 } }, { 100 }))
    local x = tocha.ones({ 10 }, { device = "sim" })
    assert.are.same(s:pack_args({ x }, {}, x, { 10 }), s:pack_args_for_launch(1, { x }, {}, x, { 10 }))
    assert.are.equal("tocha.Scale scale 2", tostring(s))
    local err = message(s.grid_for_launch, s, 2, { { 100 } }, { 100 })
    assert.truthy(err:find("tocha.Scale:grid_for_launch: launch: expected an integer from 1 to 1, got 2", 1, true), err)
    err = message(s.backward_grid, s, { { 100 } }, { 100 })
    assert.truthy(err:find("tocha.Scale:backward_grid: self: the op has no backward", 1, true), err)
    err = message(s.backward_block, s)
    assert.truthy(err:find("tocha.Scale:backward_block: self: the op has no backward", 1, true), err)
    err = message(Scale.grid, nil, { 4 })
    assert.truthy(err:find("tocha.Scale:grid: self: expected a Scale", 1, true), err)
  end)

  it("refuses a class that lacks its output shape, grid or packed arguments", function()
    local Bare = op.class("Bare")
    local err = message(op.finish, Bare)
    assert.truthy(err:find("Bare defines no compute_concrete_output_shape", 1, true), err)
    function Bare:compute_concrete_output_shape(s) return s[1] end
    err = message(op.finish, Bare)
    assert.truthy(err:find("Bare defines neither grid nor grid_for_launch", 1, true), err)
    function Bare:grid_for_launch() return { 1, 1, 1 } end
    err = message(op.finish, Bare)
    assert.truthy(err:find("Bare defines neither pack_args nor pack_args_for_launch", 1, true), err)
    function Bare:pack_args_for_launch() return {} end
    op.finish(Bare)
    local b = setmetatable({ dtype = "f32" }, Bare)
    err = message(b.grid, b, { 4 })
    assert.truthy(err:find("call grid_for_launch(i, ...)", 1, true), err)
  end)

  -- y = 2 x + v[j] (v a parameter of the last size) in two launches through a workspace:
  -- what the default direct calls must carry besides the inputs.
  local TWO_PASS = [[
__device__ void two_pass(const float *x, float *ws, float *y, const float *v, long long n, long long m, int pass) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (pass == 0) ws[i] = 2.0f * x[i]; else y[i] = ws[i] + v[i % m];
}
__device__ void two_pass_grad(const float *dy, float *dx, float *dv, long long n, long long m) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) dx[i] = 2.0f * dy[i];
  if (i < m) { float s = 0.0f; for (long long k = i; k < n; k += m) s += dy[k]; dv[i] = s; }
}]]
  local function two_pass_class()
    local TwoPass = op.class("TwoPass")
    function TwoPass.new()
      return setmetatable({ dtype = "f32", block_size = 64, id = "two pass",
        kernel = tocha.kernel { source = TWO_PASS, name = "two_pass",
          params = "f32* x, f32* ws, f32* y, f32* v, i64 n, i64 m, i32 pass" },
        grad_kernel = tocha.kernel { source = TWO_PASS, name = "two_pass_grad",
          params = "f32* dy, f32* dx, f32* dv, i64 n, i64 m" } }, TwoPass)
    end
    function TwoPass:compute_concrete_output_shape(input_shapes) return op.one_input(input_shapes) end
    function TwoPass:param_names() return { "v" } end
    function TwoPass:param_shapes(input_shapes) local s = input_shapes[1]; return { { s[#s] } } end
    function TwoPass:workspace_bytes(input_shapes) return 4 * op.numel(input_shapes[1]) end
    function TwoPass:n_launches() return 2 end
    function TwoPass:grid_for_launch(_, _, output_shape) return { math.ceil(op.numel(output_shape) / 64), 1, 1 } end
    function TwoPass:pack_args_for_launch(i, inputs, params, output, output_shape)
      local x = op.input_of(inputs)
      return { x, params[2], op.address(output, "output"), params[1], op.numel(output_shape),
        output_shape[#output_shape], i - 1 }
    end
    function TwoPass:backward_grid(input_shapes) return { math.ceil(op.numel(input_shapes[1]) / 64), 1, 1 } end
    function TwoPass:pack_backward_args(_, _, _, output_shape, grad_output, _, grad_inputs, grad_params)
      return { op.address(grad_output, "grad_output"), op.address(grad_inputs[1], "dx"), op.address(grad_params[1], "dv"),
        op.numel(output_shape), output_shape[#output_shape] }
    end
    return op.finish(TwoPass)
  end

  for _, dev in ipairs(ref.devices()) do
    it("gives direct calls made from the methods: inputs, parameters, a workspace, launches, on " .. dev.name .. dev.tag, function()
      local t = two_pass_class().new()
      local x = tocha.randn({ 3, 70 }, { device = dev.name, seed = 21 })
      local v = tocha.randn({ 70 }, { device = dev.name, seed = 22 })
      local y = t:forward(x, v, tocha.full({ 3, 70 }, -77, { device = dev.name }))
      local xs, vs, ys = x:to_table(true), v:to_table(true), y:to_table(true)
      for i, a in ipairs(xs) do assert.are.equal(ref.convert(2 * a + vs[(i - 1) % 70 + 1], "f32"), ys[i], i) end
      assert.are.same(ys, t:forward(x, v):to_table(true)) -- y allocated
      local dy = tocha.randn({ 3, 70 }, { device = dev.name, seed = 23 })
      local dx, dv = t:backward(x, v, dy, tocha.full({ 3, 70 }, -77, { device = dev.name }))
      local dys, dxs, dvs = dy:to_table(true), dx:to_table(true), dv:to_table(true)
      for i, g in ipairs(dys) do assert.are.equal(2 * g, dxs[i], i) end
      for j = 1, 70 do
        local s = 0
        for k = j, 210, 70 do s = ref.convert(s + dys[k], "f32") end
        assert.are.equal(s, dvs[j], j)
      end
      local err = message(t.forward, t, x, tocha.ones({ 71 }, { device = dev.name }))
      assert.truthy(err:find("tocha.TwoPass:forward: v: expected shape [70] (the op's parameter), got [71]", 1, true), err)
      local big = tocha.zeros({ 4, 70 }, { device = dev.name })
      err = message(t.forward, t, big:narrow(1, 1, 3), v, big:narrow(1, 2, 3))
      assert.truthy(err:find("tocha.TwoPass:forward: y: overlaps x", 1, true), err)
      err = message(t.backward, t, x, v, tocha.ones({ 3, 71 }, { device = dev.name }))
      assert.truthy(err:find("tocha.TwoPass:backward: dy: expected shape [3, 70] (the output for x), got [3, 71]", 1, true), err)
      local s = scale_class(false).new(2)
      err = message(s.backward, s, x, x)
      assert.truthy(err:find("tocha.Scale:backward: self: the op has no backward", 1, true), err)
    end)
  end

  for _, dev in ipairs(ref.devices()) do
    it("runs in a model, forward and backward, on " .. dev.name .. dev.tag, function()
      local Scale = scale_class(true)
      local x = tocha.Model.input({ -1, 300 }, { name = "x" })
      local m = tocha.Model({ x }, { Scale.new(3)(Scale.new(0.5)(x)) }):load(2, dev.name)
      local xt = tocha.randn({ 2, 300 }, { device = dev.name, seed = 17 })
      local y = m:forward({ xt })[1]:to_table(true)
      for i, v in ipairs(xt:to_table(true)) do
        assert.are.equal(ref.convert(3 * ref.convert(0.5 * v, "f32"), "f32"), y[i])
      end
      local _, cache = m:forward_train({ xt })
      local dy = tocha.randn({ 2, 300 }, { device = dev.name, seed = 18 })
      local dx = m:backward({ dy }, cache)[1]:to_table(true)
      for i, v in ipairs(dy:to_table(true)) do
        assert.are.equal(ref.convert(0.5 * ref.convert(3 * v, "f32"), "f32"), dx[i])
      end
    end)
  end
end)
