-- The tocha executable through pipes: scripts and their arguments, -e, -l, -i, exit codes,
-- the REPL, and the info and cache commands. Its bad input is in bad_cli_spec.lua.
local process = require "support.process"

local function write_script(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

local function tocha(args, stdin, env)
  return process.run { args = args, stdin = stdin, env = env }
end

describe("the tocha executable", function()
  describe("running a script", function()
    it("passes arguments in arg and ... as luajit does", function()
      local script = write_script([[print(arg[0] == ... and "no" or "ok", arg[1], arg[2], select("#", ...), ...)]])
      local out, err, status = tocha({ script, "a b", "c" })
      os.remove(script)
      assert.are.equal(0, status, err)
      assert.are.equal("ok\ta b\tc\t2\ta b\tc\n", out)
    end)

    it("lets scripts require tocha", function()
      local out, err, status = tocha({ "-e", "local t = require 'tocha' io.write(t.ones({2}, {device='sim'}):to_table()[2])" })
      assert.are.equal(0, status, err)
      assert.are.equal("1", out)
    end)
  end)

  describe("options", function()
    it("-e runs code, and several run in order", function()
      local out, _, status = tocha({ "-e", "x = 2", "-e", "io.write(x * 21)" })
      assert.are.equal(0, status)
      assert.are.equal("42", out)
    end)

    it("-l requires a module into a global", function()
      local out, _, status = tocha({ "-l", "tocha", "-e", "io.write(type(tocha.zeros))" })
      assert.are.equal(0, status)
      assert.are.equal("function", out)
    end)

    it("-v prints the version", function()
      local out, _, status = tocha({ "-v" })
      assert.are.equal(0, status)
      assert.truthy(out:find("^tocha %d+%.%d+%.%d+ %(LuaJIT"))
    end)

    it("--help prints the usage", function()
      local out, _, status = tocha({ "--help" })
      assert.are.equal(0, status)
      assert.truthy(out:find("usage: tocha [options] [script [args...]]", 1, true))
    end)

    it("-i enters the REPL after the script", function()
      local script = write_script("answer = 42\n")
      local out, err, status = tocha({ "-i", script }, "answer + 1\n")
      os.remove(script)
      assert.are.equal(0, status, err)
      assert.truthy(out:find("\n43\n$"))
    end)
  end)

  describe("the REPL", function()
    it("prints a banner naming the version and the device", function()
      local out = tocha({}, "", { TOCHA_DEVICE = "sim" })
      assert.truthy(out:find("^tocha %d+%.%d+%.%d+ on LuaJIT[^\n]* device sim %(CPU simulator[^\n]*chosen by TOCHA_DEVICE=sim\n"))
    end)

    it("prints the values of expressions, with and without =", function()
      local out, _, status = tocha({}, "x = 6\nx * 7\n=x, 'y'\n")
      assert.are.equal(0, status)
      assert.truthy(out:find("\n42\n6\ty\n$"))
    end)

    it("continues an unfinished chunk on the next lines", function()
      local out = tocha({}, "for i = 1, 3 do\nio.write(i)\nend\n")
      assert.truthy(out:find("\n123$"))
    end)

    it("reports an error with its traceback and goes on", function()
      local out, err, status = tocha({}, "error('boom')\nprint('after')\n")
      assert.are.equal(0, status)
      assert.truthy(err:find("stdin:1: boom\nstack traceback:", 1, true))
      assert.truthy(out:find("\nafter\n$"))
    end)

    it("offers tocha as a global", function()
      local out = tocha({}, "tocha.ones({2}, {device = 'sim'})\n")
      assert.truthy(out:find("tocha.Tensor f32 [2] sim [1, 1]", 1, true))
    end)
  end)

  describe("info and cache", function()
    it("info lists the devices, versions and the cache", function()
      local out, err, status = tocha({ "info" })
      assert.are.equal(0, status, err)
      assert.truthy(out:find("NVRTC: ", 1, true))
      assert.truthy(out:find("\n  sim      CPU simulator", 1, true))
      assert.truthy(out:find("kernel cache: ", 1, true))
    end)

    it("cache info counts entries and cache clear removes them", function()
      local dir = process.tempdir()
      local env = { TOCHA_CACHE_DIR = dir }
      tocha({ "-e", "require('tocha').zeros({2}, {device='sim'})" }, "", env)
      local out = tocha({ "cache", "info" }, "", env)
      assert.truthy(out:find("kernel cache: " .. dir .. ", 1 entries", 1, true))
      out = tocha({ "cache", "clear" }, "", env)
      assert.truthy(out:find("removed 1 entries", 1, true))
      out = tocha({ "cache", "info" }, "", env)
      assert.truthy(out:find(", 0 entries", 1, true))
      process.remove_tree(dir)
    end)

  end)
end)
