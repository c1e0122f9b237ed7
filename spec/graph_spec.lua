-- Graphs: capture records work without running it, replay runs it on the same tensors, the
-- tensors a capture allocates outlive it, and misuse during a capture is a clear error that
-- leaves the session as it was; on sim and, tagged #gpu, on cuda (the driver's stream capture).
local tocha = require "tocha"
local ffi = require "ffi"
local ref = require "support.reference"
local up_ref = require "support.upsample_reference"

describe("graphs", function()
  for _, dev in ipairs(ref.devices()) do
    describe("on " .. dev.name .. dev.tag, function()
      local device = dev.name
      local up = tocha.UpsampleNearest2dForward.new(2, 3, 64)

      local function input(seed)
        return tocha.rand({ 2, 3, 5, 7 }, { device = device, seed = seed, dtype = "i32", low = -50, high = 50 }):cast("f32")
      end

      it("record the work without running it, and each replay runs it on the tensors' values then", function()
        local x = input(1)
        up:forward(x) -- loads the kernel before the capture
        local y = tocha.zeros({ 2, 3, 10, 21 }, { device = device })
        local g = tocha.graph(function() up:forward(x, y) end, device)
        assert.are.same(tocha.zeros({ 2, 3, 10, 21 }, { device = device }):to_table(true), y:to_table(true))
        g:replay()
        assert.are.same(up_ref.forward(x:to_table(true), { 2, 3, 5, 7 }, 2, 3), y:to_table(true))
        x:copy(input(2)) -- new values in the same tensor
        g:replay()
        assert.are.same(up_ref.forward(x:to_table(true), { 2, 3, 5, 7 }, 2, 3), y:to_table(true))
      end)

      it("keep the tensors the capture allocates: a chain of 100 launches, replayed after a collection", function()
        local x = input(3)
        local small = tocha.UpsampleNearest2dForward.new(1, 1, 64) -- a copy through the kernel
        small:forward(x)
        local g = tocha.graph(function()
          local h = x
          for _ = 1, 100 do h = small:forward(h) end
          return up:forward(h)
        end, device)
        collectgarbage("collect")
        collectgarbage("collect")
        -- Tensors of the intermediates' size made now: had the capture's blocks been freed,
        -- these would hold them and the replay would write into them.
        local others = {}
        for i = 1, 100 do others[i] = tocha.full({ 2, 3, 5, 7 }, 7, { device = device }) end
        g:replay()
        assert.are.equal(1, #g.outputs)
        assert.are.same(up_ref.forward(x:to_table(true), { 2, 3, 5, 7 }, 2, 3), g.outputs[1]:to_table(true))
        local sevens = tocha.full({ 2, 3, 5, 7 }, 7, { device = device }):to_table(true)
        for i = 1, 100 do assert.are.same(sevens, others[i]:to_table(true), "tensor " .. i) end
      end)

      it("keep a block freed during the capture while the graph lives, and give it back with it", function()
        local x = input(6)
        up:forward(x)
        collectgarbage()
        collectgarbage()
        local before = tocha.memory.stats(device)
        local g = tocha.graph(function()
          local y = up:forward(x)
          y:free()
          local s = tocha.memory.stats(device)
          assert.are.equal(before.frees, s.frees) -- not given back yet
          return true
        end, device)
        assert.is_true(g.outputs[1])
        assert.are.equal(before.frees, tocha.memory.stats(device).frees) -- the graph writes it
        g:replay()
        g = nil -- luacheck: ignore 311
        collectgarbage()
        collectgarbage()
        assert.are.equal(before.frees + 1, tocha.memory.stats(device).frees)
      end)

      it("hold the tensors they read and write: a freed output's block never reaches a new tensor", function()
        local x = tocha.ones({ 1, 1, 2, 2 }, { device = device })
        up:forward(x)
        local g = tocha.graph(function() return up:forward(x) end, device)
        local allocated = tocha.memory.stats(device).allocated
        g.outputs[1]:free()
        x:free()
        assert.are.equal(allocated, tocha.memory.stats(device).allocated) -- both blocks held
        -- Of the freed blocks' sizes, so that a pool would hand those very blocks out.
        local z = tocha.full({ 1, 1, 4, 6 }, 7, { device = device })
        local w = tocha.full({ 1, 1, 2, 2 }, 5, { device = device })
        g:replay()
        g:replay()
        for _, v in ipairs(z:to_table(true)) do assert.are.equal(7, v) end
        assert.are.same({ 5, 5, 5, 5 }, w:to_table(true))
        local ok, err = pcall(function() return g.outputs[1]:to_table() end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("tocha.Tensor:to_table: tensor was freed", 1, true), err)
      end)

      it("replay on the current stream", function()
        local x = input(4)
        up:forward(x)
        local y = tocha.zeros({ 2, 3, 10, 21 }, { device = device })
        local g = tocha.graph(function() up:forward(x, y) end, device)
        local s = tocha.stream(device)
        s:use(function() g:replay() end)
        s:synchronize()
        assert.are.same(up_ref.forward(x:to_table(true), { 2, 3, 5, 7 }, 2, 3), y:to_table(true))
      end)

      it("refuse what would wait for the device or reach it from the host, and leave the session as it was", function()
        local x = input(5)
        up:forward(x)
        local probe = ffi.new("float[1]")
        local cases = {
          { "tocha.synchronize: cannot synchronize while a graph is being captured on " .. tocha.device(device).name,
            function() tocha.synchronize(device) end },
          { "tocha.Tensor:to_table: cannot read a tensor to the host while a graph is being captured",
            function() x:to_table() end },
          { "tocha.Tensor:read: cannot read a tensor to the host", function() x:read(probe, 0, 1) end },
          { "tocha.Tensor:write: cannot write a tensor from the host", function() x:write(ffi.new("float[210]")) end },
          { "tocha.Event:record: cannot record an event", function() tocha.event(device):record() end },
          { "tocha.memory.empty_cache: cannot empty the memory cache while a graph is being captured",
            function() tocha.memory.empty_cache(device) end },
          { "kernel upsample_nearest2d_forward_entry_point: not loaded on",
            function() tocha.UpsampleNearest2dForward.new(5, 5, 64):forward(x) end },
          { "tocha.graph: stream: a capture is already under way on", function() tocha.graph(function() end, device) end },
        }
        for _, case in ipairs(cases) do
          local ok, message = pcall(tocha.graph, case[2], device)
          assert.is_false(ok, case[1])
          assert.truthy(message:find(case[1], 1, true), message)
          -- the capture ended: the default stream is current, the device works as before
          assert.is_nil(tocha.current_stream(device))
          tocha.synchronize(device)
          assert.are.equal(#x:to_table(true), 210)
        end
        assert.is_true(collectgarbage("isrunning"))
      end)

      it("name their bad arguments", function()
        local ok, message = pcall(tocha.graph, 5, device)
        assert.is_false(ok)
        assert.truthy(message:find("tocha.graph: fn: expected a function, got number", 1, true), message)
        local g = tocha.graph(function() end, device)
        local _, replay_message = pcall(g.replay)
        assert.truthy(replay_message:find("tocha.Graph:replay: self: expected a Graph", 1, true), replay_message)
      end)
    end)
  end
end)
