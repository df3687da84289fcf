-- JSON for manifests and sweep records: an encoder (objects with sorted keys, so output is
-- reproducible) and a decoder (null reads as nil).
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

local unescapes = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

--- Decodes JSON text; raises "json.decode: <what> at byte N" on malformed input. `name` (a
--- file path, say) prefixes the message.
function json.decode(text, name)
  local pos = 1
  local function fail(what)
    error(string.format("json.decode: %s%s at byte %d", name and (name .. ": ") or "", what, pos), 0)
  end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or #text + 1 end
  local value
  local function str()
    local parts = {}
    pos = pos + 1
    while true do
      local i = text:find('["\\]', pos)
      if not i then fail("unterminated string") end
      parts[#parts + 1] = text:sub(pos, i - 1)
      if text:sub(i, i) == '"' then pos = i + 1; break end
      local c = text:sub(i + 1, i + 1)
      if c == "u" then
        local hex = text:match("^%x%x%x%x", i + 2) or fail("bad \\u escape")
        parts[#parts + 1] = utf8.char(tonumber(hex, 16))
        pos = i + 6
      else
        parts[#parts + 1] = unescapes[c] or fail("bad escape")
        pos = i + 2
      end
    end
    return table.concat(parts)
  end
  function value()
    skip()
    local c = text:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "}" then pos = pos + 1; return t end
      while true do
        skip()
        if text:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str()
        skip()
        if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t, n = {}, 0
      pos = pos + 1
      skip()
      if text:sub(pos, pos) == "]" then pos = pos + 1; return t end
      while true do
        n = n + 1
        t[n] = value()
        skip()
        local d = text:sub(pos, pos)
        pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then return str()
    elseif text:find("^true", pos) then pos = pos + 4; return true
    elseif text:find("^false", pos) then pos = pos + 5; return false
    elseif text:find("^null", pos) then pos = pos + 4; return nil
    end
    local num = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not num or num == "" or num == "-" then fail("unexpected " .. (c == "" and "end of text" or ("'" .. c .. "'"))) end
    pos = pos + #num
    return math.tointeger(tonumber(num)) or tonumber(num) or fail("bad number")
  end
  if type(text) ~= "string" then error("json.decode: argument 1 expected a string, got " .. type(text), 2) end
  local v = value()
  skip()
  if pos <= #text then fail("trailing text") end
  return v
end

--- Reads and decodes a JSON file; nil and a message when it cannot be read.
function json.read(path)
  local text, err = mech.sys.read_file(path)
  if not text then return nil, err end
  return json.decode(text, path)
end

return json
