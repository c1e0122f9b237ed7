-- The Lua bindings declare tocha.h through the FFI from the library's own copy of it
-- (tocha_declarations(), the header preprocessed at build time). This spec checks that every
-- function the header exports is declared and found in the library, and, since a layout
-- LuaJIT computes differently from the C compiler would corrupt memory silently, compiles a
-- small C program against the real header and compares every struct's size and field offset,
-- and the status codes and limits, with what LuaJIT sees.
local ffi = require "ffi"
require "tocha" -- loads the cdefs
local bindings = require "tocha.ffi"
local process = require "support.process"

local STRUCTS = {
  tocha_tensor = { "dev", "elem_type", "ndim", "dims", "count", "bytes", "data", "freed", "dense", "strides",
    "storage" },
  tocha_device_info = { "name", "product", "kind", "ordinal", "cc_major", "cc_minor", "multiprocessors",
    "memory_free", "memory_total", "target" },
  tocha_compare_result = { "max_abs", "max_rel", "mismatched", "first_mismatch" },
  tocha_cache_stats = { "compiles", "memory_hits", "disk_hits", "disk_writes", "disk_rejects" },
  tocha_memory_stats = { "allocated_bytes", "peak_allocated_bytes", "reserved_bytes", "cached_bytes", "allocations",
    "frees", "cache_hits" },
  tocha_arg = { "kind", "tensor", "i", "f" },
  tocha_arg_list = { "count", "args" },
  tocha_onnx_info = { "ir_version", "producer_name", "producer_version", "graph_name", "n_opsets", "n_nodes",
    "n_initializers", "n_inputs", "n_outputs", "n_value_infos" },
  tocha_onnx_tensor = { "name", "data_type", "n_dims", "dims", "n_elements", "element_bytes", "data", "bytes" },
  tocha_onnx_node = { "name", "op_type", "domain", "n_inputs", "n_outputs", "n_attributes", "inputs", "outputs" },
  tocha_onnx_attribute = { "name", "type", "f", "i", "s", "s_bytes", "n_floats", "n_ints", "n_strings", "floats", "ints",
    "strings", "tensor" },
  tocha_onnx_value = { "name", "elem_type", "n_dims", "dims", "dim_names" },
}
local STATUS = { ok = "TOCHA_OK", argument = "TOCHA_E_ARGUMENT", out_of_memory = "TOCHA_E_OUT_OF_MEMORY",
  unavailable = "TOCHA_E_UNAVAILABLE", compile = "TOCHA_E_COMPILE", driver = "TOCHA_E_DRIVER",
  io = "TOCHA_E_IO", freed = "TOCHA_E_FREED", internal = "TOCHA_E_INTERNAL" }

-- What the C compiler sees: "struct size" and "struct.field offset" lines, then "NAME value".
local function c_layout()
  local src_dir = assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest")
  local dir = process.tempdir()
  local lines = { "#include <stdio.h>", "#include <stddef.h>", '#include "tocha.h"', "int main(void)", "{" }
  for name, fields in pairs(STRUCTS) do
    lines[#lines + 1] = ('    printf("%s %%zu\\n", sizeof(%s));'):format(name, name)
    for _, f in ipairs(fields) do
      lines[#lines + 1] = ('    printf("%s.%s %%zu\\n", offsetof(%s, %s));'):format(name, f, name, f)
    end
  end
  for _, c in pairs(STATUS) do lines[#lines + 1] = ('    printf("%s %%d\\n", (int)%s);'):format(c, c) end
  lines[#lines + 1] = '    printf("TOCHA_MAX_DIMS %d\\nTOCHA_MAX_PARAMS %d\\n", TOCHA_MAX_DIMS, TOCHA_MAX_PARAMS);'
  lines[#lines + 1] = "    return 0;\n}"
  local f = assert(io.open(dir .. "/layout.c", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local cc = os.getenv("CC") or "cc"
  local ok = os.execute(("%s -std=c11 -I'%s/host/include' -o '%s/layout' '%s/layout.c'"):format(cc, src_dir, dir, dir))
  assert(ok == 0 or ok == true, "the layout program did not compile")
  local p = assert(io.popen("'" .. dir .. "/layout'"))
  local out = {}
  for line in p:lines() do
    local k, v = line:match("^(%S+) (%-?%d+)$")
    out[k] = tonumber(v)
  end
  p:close()
  process.remove_tree(dir)
  return out
end

describe("the FFI declarations", function()
  local c = c_layout()

  it("give every struct the size and every field the offset the header gives", function()
    local checked = 0
    for name, fields in pairs(STRUCTS) do
      assert.are.equal(c[name], ffi.sizeof(name), "sizeof " .. name)
      for _, f in ipairs(fields) do
        assert.are.equal(c[name .. "." .. f], ffi.offsetof(name, f), name .. "." .. f)
        checked = checked + 1
      end
    end
    assert.are.equal(87, checked)
  end)

  it("declare every function the header exports, each found in the library", function()
    local src_dir = assert(os.getenv("TOCHA_SOURCE_DIR"), "TOCHA_SOURCE_DIR is set by CTest")
    local header = assert(io.open(src_dir .. "/host/include/tocha.h")):read("*a")
    local names = {}
    for name in header:gsub("/%*.-%*/", ""):gsub("\n#[^\n]*", ""):gmatch("TOCHA_API[^;{]-([%w_]+)%s*%(") do names[#names + 1] = name end
    assert.is_true(#names > 70, "functions found in tocha.h: " .. #names)
    for _, name in ipairs(names) do
      local ok, fn = pcall(function() return bindings.C[name] end)
      assert.is_true(ok, name .. ": " .. tostring(fn))
      assert.are.equal("cdata", type(fn), name)
    end
    local text = ffi.string(bindings.C.tocha_declarations())
    assert.is_nil(text:find("#", 1, true), "the declarations hold no preprocessor line")
    assert.is_nil(text:find("TOCHA_API", 1, true))
  end)

  it("use the header's status codes and limits", function()
    for lua_name, c_name in pairs(STATUS) do
      assert.are.equal(c[c_name], bindings.status[lua_name], c_name)
    end
    assert.are.equal(c.TOCHA_MAX_DIMS, ffi.sizeof("int64_t[8]") / 8)
    assert.are.equal(c.TOCHA_MAX_PARAMS, (ffi.sizeof("tocha_arg_list") - ffi.offsetof("tocha_arg_list", "args")) / ffi.sizeof("tocha_arg"))
    assert.are.equal(c.TOCHA_MAX_DIMS, bindings.C.TOCHA_MAX_DIMS)
    assert.are.equal(c.TOCHA_MAX_PARAMS, bindings.C.TOCHA_MAX_PARAMS)
  end)
end)
