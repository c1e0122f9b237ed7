-- tocha.errors: misuse is raised as "tocha.<the public function the user called>: <detail>"
-- at the user's line, the name and the level found on the stack, never passed by hand.
local tocha = require "tocha"
local errors = require "tocha.errors"
local fails_with = require("support.assertions").fails_with
local reload = require "support.reload"

describe("tocha.errors", function()
  describe("raise()", function()
    it("names the public function the user called, at the user's line, through tocha's helpers", function()
      -- zeros -> make -> check_shape, three frames inside tocha
      fails_with("tocha.zeros: shape[2]: size must be a non-negative integer, got -1",
        function() tocha.zeros({ 2, -1 }) end)
      fails_with("tocha.Tensor:fill: value: expected a number, got string",
        function() tocha.zeros({ 2 }, { device = "sim" }):fill("x") end)
    end)

    it("names the outer public function when it reached the check through another one", function()
      -- tocha.time makes its events through tocha.event
      fails_with("tocha.time: device: expected a device name (cuda, cuda:N, sim, sim:N), got number",
        function() tocha.time(function() end, 7) end)
    end)

    it("takes a function of the user's that tocha calls as the user's code", function()
      local ok, err = pcall(tocha.time, function() tocha.ones({ -2 }) end, "sim")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("errors_spec%.lua:%d+: tocha%.ones: shape%[1%]: size must be a non%-negative integer, got %-2$"),
        tostring(err))
    end)

    it("carries the C library's message for a failed call", function()
      local up = tocha.UpsampleNearest2dForward.new(2, 2, 64)
      fails_with("tocha.UpsampleNearest2dForward:forward: y: expected shape [1, 1, 4, 4] (the forward's output), got [1, 1, 4, 5]",
        function() up:forward(tocha.zeros({ 1, 1, 2, 2 }, { device = "sim" }), tocha.zeros({ 1, 1, 4, 5 }, { device = "sim" })) end)
    end)


    it("names the public function after tocha's modules are loaded again (busted, between spec files)", function()
      -- A second instance of every module but the tensor methods (an FFI metatype is set once):
      -- the capture's replay (new) reaches Tensor:copy (first instance), which must still see
      -- the replay as the public function the user called.
      reload.with_second_load(function(again)
        assert.are_not.equal(tocha, again)
        local x = again.Model.input({ -1, 2, 3 }, { name = "x" })
        local c = again.Model({ x }, { again.Elementwise.new("relu")(x) }):load(1, "sim"):capture()
        fails_with("tocha.Model capture:replay: src: shapes differ: [1x2x3] and [1x2x4]",
          function() c:replay({ again.zeros({ 1, 2, 4 }, { device = "sim" }) }) end)
      end)
    end)
    it("says tocha alone where no public function is on the stack", function()
      local ok, err = pcall(errors.raise, "something")
      assert.is_false(ok)
      assert.are.equal("tocha: something", err)
    end)
  end)

  describe("check()", function()
    it("returns what it was given, or raises the message", function()
      assert.are.equal(5, errors.check(5, "unused"))
      local ok, err = pcall(errors.check, false, "no")
      assert.is_false(ok)
      assert.are.equal("tocha: no", err)
    end)
  end)
end)
