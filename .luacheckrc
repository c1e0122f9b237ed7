std = "luajit"
max_line_length = 140
files["spec/"] = { std = "+busted" }
ignore = { "212/self" }
files["bindings/tocha/ffi.lua"] = { max_line_length = false }
files["spec/"].max_line_length = 160
