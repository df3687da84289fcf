-- mech.json_decode against Nicolas Seriot's JSONTestSuite (318 parsing cases, kept beside the
-- checkout in ../shared/fixtures/JSONTestSuite, as CI keeps ../shared beside the clone):
-- every y_ file is accepted except the duplicate-key ones that I-JSON (RFC 7493) refuses, every
-- n_ file is refused with mechlab's error, and every i_ file ends either way without a crash or
-- a hang. tests/c/test_json.c runs the same files through the C reader. The writers' rule for
-- NaN and infinities (both write null) is checked at the end.
local T = require "check"
local json = require "mech.json"

local suite = "../shared/fixtures/JSONTestSuite/test_parsing"
-- the documented refusals (docs/api.md, mech.json_decode): objects with a repeated key
local duplicate_keys = { ["y_object_duplicated_key.json"] = true, ["y_object_duplicated_key_and_value.json"] = true }

local function list_cases()
  local ls = io.popen("ls '" .. suite .. "' 2>/dev/null")
  local files = {}
  for name in ls:lines() do if name:match("^[yni]_.*%.json$") then files[#files + 1] = name end end
  ls:close()
  table.sort(files)
  return files
end

local files = list_cases()
if #files == 0 then -- never a silent skip: the suite is part of the tests
  error("test_json_conformance.lua: no JSONTestSuite cases under " .. suite .. " (run from the repository root, "
    .. "with ../shared/fixtures/JSONTestSuite beside the checkout)", 0)
end

local function read(name)
  local f = assert(io.open(suite .. "/" .. name, "rb"))
  local text = f:read("a")
  f:close()
  return text
end

T.test("the suite is complete: 318 cases (95 y_, 188 n_, 35 i_)", function()
  local count = { y = 0, n = 0, i = 0 }
  for _, name in ipairs(files) do count[name:sub(1, 1)] = count[name:sub(1, 1)] + 1 end
  T.eq(count, { y = 95, n = 188, i = 35 })
end)

T.test("every y_ is accepted, except the two duplicate-key refusals", function()
  local refused = {}
  for _, name in ipairs(files) do
    if name:sub(1, 2) == "y_" then
      local ok, err = pcall(mech.json_decode, read(name), name)
      if duplicate_keys[name] then
        T.falsy(ok, name .. " has a duplicate key")
        T.truthy(tostring(err):find("duplicate key", 1, true), err)
      elseif not ok then
        refused[#refused + 1] = name .. ": " .. tostring(err)
      end
    end
  end
  T.eq(refused, {})
end)

T.test("every n_ is refused with mechlab's message", function()
  local accepted = {}
  for _, name in ipairs(files) do
    if name:sub(1, 2) == "n_" then
      local ok, err = pcall(mech.json_decode, read(name), name)
      if ok then accepted[#accepted + 1] = name
      else T.truthy(tostring(err):find("^mech%.json_decode: " .. name:gsub("%p", "%%%0") .. ": .* at byte %d+"), err) end
    end
  end
  T.eq(accepted, {})
end)

T.test("every i_ ends, accepted or refused with mechlab's message", function()
  local n = 0
  for _, name in ipairs(files) do
    if name:sub(1, 2) == "i_" then
      local ok, err = pcall(mech.json_decode, read(name), name)
      if not ok then T.truthy(tostring(err):find("^mech%.json_decode: "), err) end
      n = n + 1
    end
  end
  T.eq(n, 35)
end)

T.test("NaN and infinities: the Lua writer writes null, as the C writer does", function()
  T.eq(json.encode { a = 0 / 0, b = math.huge, c = -math.huge, d = 1.5 }, '{"a":null,"b":null,"c":null,"d":1.5}')
  T.eq(json.encode { 0 / 0, 1 }, "[null,1]")
  -- and what reads back is nil (absent), never a number
  T.eq(json.decode(json.encode { loss = 0 / 0 }).loss, nil)
end)

T.done()
