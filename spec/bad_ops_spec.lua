-- Bad input to the upsample ops: construction (scales, block widths, dtypes), the launches
-- (shapes, dtypes, devices, freed tensors, the i32 output limit) and the RuntimeOp methods
-- (shapes, launch indices). Every case is refused before anything runs, with the argument
-- named and the error at the caller's line; the outputs stay as they were.
local tocha = require "tocha"
local ref = require "support.reference"

local POISON = 77
local Forward, Backward = tocha.UpsampleNearest2dForward, tocha.UpsampleNearest2dBackward

local fails_with = require("support.assertions").fails_with

describe("bad upsample input", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
    describe("bad input, refused before anything runs", function()
      local up, y
      before_each(function()
        up = Forward.new(2, 2, 32)
        y = tocha.empty({ 1, 1, 4, 4 }, { device = device }):fill(POISON)
      end)
      after_each(function()
        for _, v in ipairs(y:to_table(true)) do assert.are.equal(POISON, v) end
      end)

      it("an input that is not 4-D", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: expected a 4-D tensor [B, C, H, W], got 3-D",
          function() up:forward(tocha.ones({ 1, 2, 2 }, { device = device }), y) end)
      end)
      it("a dtype other than the kernel's", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: expected dtype f32 (the kernel's), got f64",
          function() up:forward(tocha.ones({ 1, 1, 2, 2 }, { dtype = "f64", device = device }), y) end)
      end)
      it("y of the wrong shape", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: y: expected shape [1, 1, 6, 6] (the forward's output), got [1, 1, 4, 4]",
          function() up:forward(tocha.ones({ 1, 1, 3, 3 }, { device = device }), y) end)
      end)
      it("dy whose shape is not the forward's output", function()
        fails_with("tocha.UpsampleNearest2dForward:backward: dy: expected shape [1, 1, 2, 2] (the forward's output for dx), got [1, 1, 4, 4]",
          function() up:backward(tocha.ones({ 1, 1, 1, 1 }, { device = device }), y) end)
      end)
      it("dx whose shape is not x's", function()
        fails_with("tocha.UpsampleNearest2dForward:backward: dx: expected shape [1x1x2x2], got [1x1x4x4]",
          function() up:backward(tocha.ones({ 1, 1, 2, 2 }, { device = device }), tocha.ones({ 1, 1, 4, 4 }, { device = device }), y) end)
      end)
      it("a freed tensor", function()
        local x = tocha.ones({ 1, 1, 2, 2 }, { device = device })
        x:free()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: tensor was freed", function() up:forward(x, y) end)
      end)
      it("something that is not a tensor", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: expected a tensor, got table",
          function() up:forward({ 1, 2 }) end)
      end)
      it("tensors on different devices", function()
        if device == "sim" then return end -- needs a second device
        fails_with(("tocha.UpsampleNearest2dForward:forward: y: tensor is on %s, x on sim"):format(y:device()),
          function() up:forward(tocha.ones({ 1, 1, 2, 2 }, { device = "sim" }), y) end)
      end)
      it("an output dimension past i32", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: the output [1, 1, 2, 2147483648] has a dimension past 2147483647",
          function() up:forward(tocha.empty({ 1, 1, 1, 2 ^ 30 }, { device = device, dtype = "f32" })) end)
      end)
      it("an output tensor of another dtype", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: y: expected dtype f32 (the kernel's), got f16",
          function() up:forward(tocha.ones({ 1, 1, 2, 2 }, { device = device }), tocha.ones({ 1, 1, 4, 4 }, { device = device, dtype = "f16" })) end)
      end)
      it("no input at all", function()
        fails_with("tocha.UpsampleNearest2dForward:forward: x: expected a tensor, got nil", function() up:forward() end)
      end)
    end)
    end)
  end

  describe("RuntimeOp methods", function()
    local up = Forward.new(2, 2, 64)
    it("an output shape whose height or width is not a multiple of the scales", function()
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: height 5 and width 4 must be multiples of the scales 2 and 2",
        function() up:grid({ 1, 1, 5, 4 }) end)
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: height 4 and width 7 must be multiples of the scales 2 and 2",
        function() up:grid({ 1, 1, 4, 7 }) end)
    end)
    it("packed arguments whose output shape is not the input's output", function()
      -- The kernel writes the output that x's shape implies, so a smaller output_shape would
      -- let it write past the buffer: refused before anything is packed.
      fails_with("tocha.UpsampleNearest2dForward:pack_args: output_shape: [1, 1, 4, 4] is not the output of inputs[1] [1, 1, 4, 4]",
        function() up:pack_args({ { 0, { 1, 1, 4, 4 } } }, {}, 0, { 1, 1, 4, 4 }) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_backward_args: output_shape: [1, 2, 8, 8] is not the output of "
        .. "inputs[1] [1, 1, 4, 4]",
        function() up:pack_backward_args({ { 0, { 1, 1, 4, 4 } } }, {}, 0, { 1, 2, 8, 8 }, 0, 8, { 0 }, {}) end)
    end)
    it("an {address, shape} input or an output tensor smaller than its shape", function()
      -- The kernel read and wrote past both tensors (a crash or heap corruption).
      local x, y = tocha.ones({ 1, 1, 2, 2 }, { device = "sim" }), tocha.zeros({ 1, 1, 4, 4 }, { device = "sim" })
      fails_with("tocha.UpsampleNearest2dForward:pack_args: inputs[1]: the shape's 1048576 elements do not fit in the tensor's 4",
        function() up:pack_args({ { x, { 1, 1, 1024, 1024 } } }, {}, y, { 1, 1, 2048, 2048 }) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_args: output: the shape's 64 elements do not fit in the tensor's 16",
        function() up:pack_args({ { x, { 1, 1, 2, 2 } } }, {}, y, { 1, 1, 8, 8 }) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_backward_args: grad_inputs[1]: the shape's 16 elements do not fit in the tensor's 4",
        function() up:pack_backward_args({ { 0, { 1, 1, 4, 4 } } }, {}, 0, { 1, 1, 8, 8 }, 0, 8, { x }, {}) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_args: inputs[1]: expected dtype f32 (the kernel's), got f16",
        function() up:pack_args({ x:cast("f16") }, {}, y) end)
    end)
    it("an optional shape or a row stride of the wrong kind", function()
      fails_with("tocha.UpsampleNearest2dForward:backward_grid: output_shape: expected a shape table",
        function() up:backward_grid({ { 1, 1, 2, 2 } }, false) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_args: output_row_stride: expected an integer, got \"x\"",
        function() up:pack_args({ { 0, { 1, 1, 2, 2 } } }, {}, 0, { 1, 1, 4, 4 }, "x") end)
    end)
    it("a shape with a fractional size, a hole or too many sizes", function()
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape[3]: expected an integer size, got 2.5",
        function() up:grid({ 1, 1, 2.5, 4 }) end)
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: expected a list of sizes, got a table with other keys or holes",
        function() up:grid({ 1, 1, nil, 4 }) end)
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: expected at most 8 sizes, got 9",
        function() up:grid({ 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end)
    end)
    it("an NHWC shape, named in its layout", function()
      local cl = Forward.new(2, 2, 64, "f32", { layout = "nhwc" })
      fails_with("tocha.UpsampleNearest2dForward:forward: x: expected a 4-D tensor [B, H, W, C], got 2-D",
        function() cl:forward(tocha.zeros({ 2, 2 }, { device = "sim" })) end)
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: height 4 and width 3 must be multiples of the scales 2 and 2",
        function() cl:grid({ 1, 4, 3, 8 }) end)
      fails_with("tocha.UpsampleNearest2dForward:forward: y: expected shape [1, 4, 6, 5] (the forward's output), got [1, 2, 6, 10]",
        function() cl:forward(tocha.zeros({ 1, 2, 3, 5 }, { device = "sim" }), tocha.zeros({ 1, 2, 6, 10 }, { device = "sim" })) end)
      fails_with("tocha.UpsampleNearest2dForward:compute_concrete_output_shape: inputs[1]: the output "
        .. "[1, 2, 131072, 16384] has a row (OW x C elements) past 2147483647",
        function() cl:compute_concrete_output_shape({ { 1, 1, 65536, 16384 } }) end)
    end)
    it("an output shape that is not 4-D", function()
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: expected 4-D, got 3-D",
        function() up:grid({ 1, 1, 4 }) end)
    end)
    it("an output shape with a zero size", function()
      fails_with("tocha.UpsampleNearest2dForward:grid: output_shape: size 0 of dimension 3 is outside 1..2147483647",
        function() up:grid({ 1, 1, 0, 4 }) end)
    end)
    it("no input shapes", function()
      fails_with("tocha.UpsampleNearest2dForward:compute_concrete_output_shape: inputs: expected 1 input shape, got 0",
        function() up:compute_concrete_output_shape({}) end)
    end)
    it("two input shapes", function()
      fails_with("tocha.UpsampleNearest2dForward:compute_concrete_output_shape: inputs: expected 1 input shape, got 2",
        function() up:compute_concrete_output_shape({ { 1, 2, 3, 4 }, { 1, 2, 3, 4 } }) end)
    end)
    it("an input shape that is not 4-D", function()
      fails_with("tocha.UpsampleNearest2dForward:compute_concrete_output_shape: inputs[1]: expected a 4-D tensor [B, C, H, W], got 3-D",
        function() up:compute_concrete_output_shape({ { 1, 2, 3 } }) end)
    end)
    it("pack inputs that are not a list of tensors or {address, shape}", function()
      local y = tocha.zeros({ 1, 1, 4, 4 }, { device = "sim" })
      fails_with("tocha.UpsampleNearest2dForward:pack_args: inputs: expected a list of tensors or {address, shape}",
        function() up:pack_args(5, {}, y) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_args: inputs[1]: expected a tensor or {address, shape}, got number",
        function() up:pack_args({ 5 }, {}, y) end)
    end)
    it("a pack without an output shape", function()
      local x = tocha.zeros({ 1, 1, 2, 2 }, { device = "sim" })
      fails_with("tocha.UpsampleNearest2dForward:pack_args: output_shape: expected a shape table",
        function() up:pack_args({ x }, {}, nil) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_backward_args: output_shape: expected a shape table",
        function() up:pack_backward_args({ x }, {}, nil, nil, nil) end)
    end)
    it("a launch index outside the op's launches", function()
      fails_with("tocha.UpsampleNearest2dForward:grid_for_launch: launch: expected an integer from 1 to 1, got 0",
        function() up:grid_for_launch(0, { { 1, 1, 2, 2 } }, { 1, 1, 4, 4 }) end)
      fails_with("tocha.UpsampleNearest2dForward:grid_for_launch: launch: expected an integer from 1 to 1, got 2",
        function() up:grid_for_launch(2, { { 1, 1, 2, 2 } }, { 1, 1, 4, 4 }) end)
      local x = tocha.zeros({ 1, 1, 2, 2 }, { device = "sim" })
      local y = tocha.zeros({ 1, 1, 4, 4 }, { device = "sim" })
      fails_with("tocha.UpsampleNearest2dForward:pack_args_for_launch: launch: expected an integer from 1 to 1, got 2",
        function() up:pack_args_for_launch(2, { x }, {}, y) end)
      fails_with("tocha.UpsampleNearest2dForward:pack_backward_args_for_launch: launch: expected an integer from 1 to 1, got 0",
        function() up:pack_backward_args_for_launch(0, { x }, {}, y, y:shape(), y, 4, { x }, {}) end)
      fails_with("tocha.UpsampleNearest2dForward:backward_grid_for_launch: launch: expected an integer from 1 to 1, got 1.5",
        function() up:backward_grid_for_launch(1.5, { { 1, 1, 2, 2 } }, { 1, 1, 4, 4 }) end)
    end)
  end)

  describe("construction", function()
    it("refuses scales that are not positive integers", function()
      fails_with("tocha.UpsampleNearest2dForward.new: scale_h: expected an integer from 1 to 64, got 0",
        function() Forward.new(0, 2, 128) end)
      fails_with("tocha.UpsampleNearest2dForward.new: scale_w: expected an integer from 1 to 64, got -2",
        function() Forward.new(2, -2, 128) end)
      fails_with("tocha.UpsampleNearest2dBackward.new: scale_h: expected an integer, got 1.5",
        function() Backward.new(1.5, 2, 128) end)
      fails_with("tocha.UpsampleNearest2dForward.new: scale_h: expected an integer, got \"2\"",
        function() Forward.new("2", 2, 128) end)
    end)
    it("refuses a block width the kernel does not accept", function()
      fails_with("tocha.UpsampleNearest2dForward.new: block_ow: expected a multiple of 32 from 32 to 1024, got 100",
        function() Forward.new(2, 2, 100) end)
      fails_with("tocha.UpsampleNearest2dBackward.new: block_iw: expected a multiple of 32 from 32 to 1024, got 2048",
        function() Backward.new(2, 2, 2048) end)
      fails_with("tocha.UpsampleNearest2dForward.new: block_iw: expected a multiple of 32 from 32 to 1024, got 48",
        function() Forward.new(2, 2, 64, "f32", 48) end)
      fails_with("tocha.UpsampleNearest2dForward.new: block_iw: expected a multiple of 32 from 32 to 1024, got 0",
        function() Forward.new(2, 2, 64, "f32", 0) end)
      fails_with("tocha.UpsampleNearest2dForward.new: block_ow: expected an integer, got 4294967360",
        function() Forward.new(2, 2, 2 ^ 32 + 64) end)
    end)
    it("refuses an unknown dtype", function()
      fails_with("tocha.UpsampleNearest2dForward.new: dtype: unknown dtype 'f8' (expected f32, f64, f16, bf16, u8, i32 or i64)",
        function() Forward.new(2, 2, 128, "f8") end)
    end)
    it("refuses a module scale of zero", function()
      fails_with("tocha.nn.UpsampleNearest2d: scale_h: expected an integer from 1 to 64, got 0",
        function() tocha.nn.UpsampleNearest2d(0) end)
    end)
  end)
end)

-- An output that shares memory with another output, or with an input other than element for
-- element, would overwrite a result or an element still to be read: every op refuses it by the
-- arguments' names, and nothing is written.
describe("outputs that alias", function()
  local function poisoned(shape) return tocha.full(shape, POISON, { device = "sim" }) end
  local function untouched(t)
    for _, v in ipairs(t:to_table(true)) do assert.are.equal(POISON, v) end
  end

  it("the same tensor for two gradients", function()
    local mul = tocha.Elementwise.new("mul")
    local a, b, dy = tocha.rand({ 2, 8 }, { device = "sim" }), tocha.rand({ 2, 8 }, { device = "sim" }), tocha.ones({ 2, 8 }, { device = "sim" })
    local g = poisoned({ 2, 8 })
    fails_with("tocha.Elementwise:backward: db: shares memory with da: each output needs a tensor of its own",
      function() mul:backward(a, b, dy, g, g) end)
    untouched(g)
    local cat = tocha.ChannelCat.new()
    local whole = poisoned({ 1, 4, 2, 2 })
    fails_with("tocha.ChannelCat:backward: db: shares memory with da: each output needs a tensor of its own",
      function()
        local half = tocha.ones({ 1, 2, 2, 2 }, { device = "sim" })
        cat:backward(half, half, tocha.ones({ 1, 4, 2, 2 }, { device = "sim" }), whole:narrow(2, 1, 2), whole:narrow(2, 2, 2))
      end)
    untouched(whole)
    local bias = tocha.ChannelBiasAdd.new()
    local dx = poisoned({ 1, 3, 2, 2 })
    fails_with("tocha.ChannelBiasAdd:backward: dbias: shares memory with dx: each output needs a tensor of its own",
      function() bias:backward(tocha.ones({ 1, 3, 2, 2 }, { device = "sim" }), dx, dx:view(-1):narrow(1, 1, 3)) end)
    untouched(dx)
  end)

  it("an output over part of its input, while in place element for element is taken", function()
    local relu = tocha.Elementwise.new("relu")
    local x = tocha.tensor({ { -1, 2 }, { 3, -4 }, { 5, 6 } }, { device = "sim" })
    fails_with("tocha.Elementwise:forward: y: overlaps x (an output may be its input only element for element, in place)",
      function() relu:forward(x:narrow(1, 1, 2), x:narrow(1, 2, 2)) end)
    assert.are.same({ { -1, 2 }, { 3, -4 }, { 5, 6 } }, x:to_table())
    relu:forward(x, x) -- in place
    assert.are.same({ { 0, 2 }, { 3, 0 }, { 5, 6 } }, x:to_table())
    local up = Forward.new(2, 2, 32)
    local big = poisoned({ 1, 1, 4, 4 })
    fails_with("tocha.UpsampleNearest2dForward:forward: y: overlaps x (an output may be its input only element for element, in place)",
      function() up:forward(big:view(4, 1, 2, 2):narrow(1, 1, 1), big) end)
    untouched(big)
    local sum = tocha.Reduce.new("sum", 2)
    local t = poisoned({ 4, 3 })
    fails_with("tocha.Reduce:forward: y: overlaps x (an output may be its input only element for element, in place)",
      function() sum:forward(t, t:view(-1):narrow(1, 1, 4):view(4, 1)) end)
    untouched(t)
    local chunk = tocha.ChannelChunk.new(2, 1)
    local whole = poisoned({ 1, 4, 2, 2 })
    fails_with("tocha.ChannelChunk:forward: y: overlaps x (an output may be its input only element for element, in place)",
      function() chunk:forward(whole, whole:narrow(2, 1, 2)) end)
    untouched(whole)
  end)
end)
