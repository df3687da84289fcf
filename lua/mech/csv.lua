--- Reading mechlab's long-format CSV files (metrics.csv, interchange CSVs):
--- header `step,split,metric,value`, RFC 4180 quoting.
local csv = {}

--- Splits one CSV line into its fields ("a ""b""" is a quoted field holding quotes).
function csv.fields(line)
  local fields, pos = {}, 1
  while pos <= #line + 1 do
    if line:sub(pos, pos) == '"' then
      local buf, e = {}, pos + 1
      while true do
        local q = line:find('"', e, true) or error("csv: unterminated quote in: " .. line)
        buf[#buf + 1] = line:sub(e, q - 1)
        if line:sub(q + 1, q + 1) ~= '"' then pos = q + 2; break end
        buf[#buf + 1], e = '"', q + 2
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local c = line:find(",", pos, true) or (#line + 1)
      fields[#fields + 1] = line:sub(pos, c - 1)
      pos = c + 1
    end
  end
  return fields
end

--- Rows {step=, split=, metric=, value=} of a long-format file, in file order.
function csv.read_metrics(path)
  local f, err = io.open(path)
  if not f then error("csv.read_metrics: " .. tostring(err), 2) end
  local header = f:read("l")
  if header ~= "step,split,metric,value" then
    f:close()
    error(string.format("csv.read_metrics: %s: expected the header 'step,split,metric,value', got '%s'", path,
      tostring(header)), 2)
  end
  local rows = {}
  for line in f:lines() do
    local r = csv.fields(line)
    rows[#rows + 1] = { step = tonumber(r[1]), split = r[2], metric = r[3], value = tonumber(r[4]) }
  end
  f:close()
  return rows
end

return csv
