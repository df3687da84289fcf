--- Reading and writing mechlab's CSV files (metrics.csv, results.csv, curves.csv, interchange and
--- figure CSVs) as RFC 4180 says: a field holding `,`, `"`, a line break or surrounding spaces is
--- quoted, `""` inside a quoted field is one `"`, a quoted field may span lines, and lines may end
--- in CRLF. Numbers are read anchored: the whole field is the number, or it is not one.
local csv = {}

--- A field as CSV writes it (the rule of io/csv.c's ml_csv_quote).
function csv.quote(v)
  v = tostring(v)
  if v:find('[,"\r\n]') or v:match("^ ") or v:match(" $") then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

--- A row of fields as one CSV line (with its "\n").
function csv.line(fields)
  local out = {}
  for i, v in ipairs(fields) do out[i] = csv.quote(v) end
  return table.concat(out, ",") .. "\n"
end

-- The line number (1-based) of byte pos of text, counted from (from_pos, from_line).
local function count_lines(text, a, b)
  local n = 0
  for _ in text:sub(a, b):gmatch("\n") do n = n + 1 end
  return n
end

--- The records of a CSV text: a list of field lists, each with `line`, the line it starts on.
--- A line holding nothing is skipped. name is used in messages (a file's path).
function csv.parse(text, name)
  name = name or "csv"
  local records, pos, n, line = {}, 1, #text, 1
  local quote = 0 -- the next '"' at or after pos (n + 1: none), found once per quote, not per line
  while pos <= n do
    local eol = text:find("\n", pos, true) or (n + 1)
    local rec = { line = line }
    if quote < pos then quote = text:find('"', pos, true) or (n + 1) end
    if quote > eol then
      -- the common case: a line without quotes
      local s = text:sub(pos, eol - 1)
      if s:sub(-1) == "\r" then s = s:sub(1, -2) end
      if s ~= "" then
        for f in (s .. ","):gmatch("([^,]*),") do rec[#rec + 1] = f end
        records[#records + 1] = rec
      end
      pos, line = eol + 1, line + 1
    else
      while true do
        if text:sub(pos, pos) == '"' then
          local buf, e = {}, pos + 1
          while true do
            local q = text:find('"', e, true)
            if not q then error(string.format("%s: line %d: an unterminated quote: a quoted field is not closed", name, rec.line), 0) end
            buf[#buf + 1] = text:sub(e, q - 1)
            if text:sub(q + 1, q + 1) == '"' then
              buf[#buf + 1], e = '"', q + 2
            else
              line = line + count_lines(text, pos, q)
              pos = q + 1
              break
            end
          end
          rec[#rec + 1] = table.concat(buf)
          local d = text:sub(pos, pos)
          if d ~= "," and d ~= "\n" and d ~= "" and not (d == "\r" and text:sub(pos + 1, pos + 1) == "\n") then
            error(string.format("%s: line %d: a quoted field is followed by '%s', not a comma or the line's end",
              name, line, d), 0)
          end
        else
          local e = text:find("[,\n]", pos) or (n + 1)
          local f = text:sub(pos, e - 1)
          if text:sub(e, e) ~= "," and f:sub(-1) == "\r" then f = f:sub(1, -2) end
          rec[#rec + 1] = f
          pos = e
        end
        local d = text:sub(pos, pos)
        if d == "," then
          pos = pos + 1
        else -- the record's end: "\n", "\r\n" or the text's end
          if d == "\r" then pos = pos + 1 end
          pos, line = pos + 1, line + 1
          break
        end
      end
      records[#records + 1] = rec
    end
  end
  return records
end

--- Splits one CSV line into its fields ("a ""b""" is a quoted field holding quotes).
function csv.fields(line)
  local rec = csv.parse(line)[1] or { "" }
  rec.line = nil
  return rec
end

--- The number a field holds, read anchored (the whole field: "-5" is -5, "5x", " 5" and "0x10"
--- are not numbers); nan, inf and -inf as mechlab writes them. nil when it holds none.
function csv.number(t)
  if type(t) ~= "string" then return nil end
  if t == "nan" or t == "-nan" then return 0 / 0 end
  if t == "inf" then return math.huge elseif t == "-inf" then return -math.huge end
  local mant = t:match("^(.-)[eE][-+]?%d+$") or t
  if not (mant:match("^[-+]?%d+%.?%d*$") or mant:match("^[-+]?%.%d+$")) then return nil end
  return math.tointeger(tonumber(t)) or tonumber(t)
end

--- The integer a field holds, anchored ("-5" is -5); nil when it holds none.
function csv.integer(t)
  if type(t) ~= "string" or not t:match("^[-+]?%d+$") then return nil end
  return math.tointeger(tonumber(t))
end

-- CSV files read whole are bounded (mech.sys.read_file refuses FIFOs and devices too).
csv.max_bytes = 1 << 31

--- The text of a CSV file: a regular file within csv.max_bytes; an error naming fn otherwise.
function csv.read_text(path, fn)
  local text, err = mech.sys.read_file(path, csv.max_bytes)
  if not text then error(fn .. ": " .. tostring(err), 0) end
  return text
end

--- Rows {step=, split=, metric=, value=} of a long-format file, in file order.
function csv.read_metrics(path)
  local ok, text = pcall(csv.read_text, path, "csv.read_metrics")
  if not ok then error(text, 2) end
  local recs = csv.parse(text, path)
  local header = recs[1] and table.concat(recs[1], ",")
  if header ~= "step,split,metric,value" then
    error(string.format("csv.read_metrics: %s: expected the header 'step,split,metric,value', got '%s'", path,
      tostring(header)), 2)
  end
  local rows = {}
  for i = 2, #recs do
    local r = recs[i]
    rows[#rows + 1] = { step = csv.integer(r[1]), split = r[2], metric = r[3], value = csv.number(r[4]) }
  end
  return rows
end

return csv
