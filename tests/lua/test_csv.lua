-- lua/mech/csv.lua: reading what mech.sys.metrics writes, quoting, and bad files.
local T = require "check"
local csv = require "mech.csv"

T.test("fields split with RFC 4180 quoting", function()
  T.eq(csv.fields("1,test,accuracy,0.5"), { "1", "test", "accuracy", "0.5" })
  T.eq(csv.fields('2,"a,b","say ""hi""",3'), { "2", "a,b", 'say "hi"', "3" })
  T.eq(csv.fields("x,,y"), { "x", "", "y" })
  T.raises(function() csv.fields('1,"open') end, "unterminated quote")
end)

T.test("metrics written by mech.sys.metrics read back", function()
  local path = os.tmpname()
  os.remove(path)
  local m = mech.sys.metrics(path)
  m:append(0, "test", "accuracy", 0.25)
  m:append(200, "dev,split", 'odd "name"', 1 / 3)
  m:close()
  local rows = csv.read_metrics(path)
  T.eq(#rows, 2)
  T.eq(rows[1], { step = 0, split = "test", metric = "accuracy", value = 0.25 })
  T.eq(rows[2].split, "dev,split")
  T.eq(rows[2].metric, 'odd "name"')
  T.eq(rows[2].value, 1 / 3) -- shortest round-trip digits: exact
  os.remove(path)
end)

T.test("bad files are errors", function()
  T.raises(function() csv.read_metrics("/nonexistent/metrics.csv") end, "csv.read_metrics")
  local path = os.tmpname()
  local f = io.open(path, "w")
  f:write("a,b\n1,2\n")
  f:close()
  T.raises(function() csv.read_metrics(path) end, "expected the header")
  os.remove(path)
end)

T.done()
