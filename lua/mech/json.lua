-- JSON for manifests and sweep records: an encoder (objects with sorted keys, so output is
-- reproducible; a sweep's run ids are hashes of its text, so it stays as it is: docs/ARCHITECTURE.md,
-- "The Lua library") and the core's decoder (null reads as nil).
local json = {}

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or string.format("\\u%04x", c:byte()) end) .. '"'
end

local function is_array(t)
  local n = #t
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k > n or math.type(k) ~= "integer" then return false end
  end
  return true
end

local function encode(v, indent, depth)
  local tv = type(v)
  if tv == "nil" then return "null"
  elseif tv == "boolean" then return tostring(v)
  elseif tv == "number" then
    -- no JSON form: null, as the C writer writes it (docs/ARCHITECTURE.md, "JSON")
    if v ~= v or v == math.huge or v == -math.huge then return "null" end
    if math.type(v) == "integer" then return tostring(v) end
    for digits = 15, 17 do -- the shortest text that reads back to the same double
      local text = string.format("%." .. digits .. "g", v)
      if tonumber(text) == v then return text end
    end
  elseif tv == "string" then return encode_string(v)
  elseif tv == "table" then
    if depth > 64 then error("json.encode: nesting too deep") end
    local pad = indent and ("\n" .. string.rep(indent, depth + 1)) or ""
    local close = indent and ("\n" .. string.rep(indent, depth)) or ""
    local parts = {}
    if next(v) ~= nil and is_array(v) then
      for i = 1, #v do parts[i] = pad .. encode(v[i], indent, depth + 1) end
      return "[" .. table.concat(parts, ",") .. close .. "]"
    end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for i, k in ipairs(keys) do
      local val = v[k]
      if val == nil then val = v[tonumber(k)] end
      parts[i] = pad .. encode_string(k) .. (indent and ": " or ":") .. encode(val, indent, depth + 1)
    end
    if #parts == 0 then return "{}" end
    return "{" .. table.concat(parts, ",") .. close .. "}"
  else
    return encode_string(tostring(v))
  end
end

--- Encodes a Lua value; `indent` (e.g. "  ") pretty-prints.
function json.encode(v, indent) return encode(v, indent, 0) end

--- Decodes JSON text: the core's strict reader (src/io/json.c, through mech.json_decode), so
--- the project has one JSON parser. null reads as nil, a whole number as an integer. Raises
--- "mech.json_decode: [name: ]<what> at byte N" on malformed input; `name` (a file path, say)
--- names the text.
json.decode = mech.json_decode

--- Reads and decodes a JSON file; nil and a message when it cannot be read.
function json.read(path)
  local text, err = mech.sys.read_file(path)
  if not text then return nil, err end
  return json.decode(text, path)
end

return json
