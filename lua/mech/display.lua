--- mech.display (docs/notebook.md): shows a value as a notebook shows it. In the Jupyter kernel
--- (`mechlab --kernel`) a cell's value and every mech.display(x) become a MIME bundle: a figure,
--- heatmap or patching map as image/png (image/svg+xml with {format = "svg"}), the attention
--- viewer as text/html, anything else (tensors too) as text/plain in the REPL's form (mech.pp).
--- In the terminal REPL and in scripts, mech.display writes the file and prints its path.
local M = {}

local IMAGE = { png = "image/png", svg = "image/svg+xml", html = "text/html" }

local function fail(msg) error("mech.display: " .. msg, 3) end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The extension of a path mech.display shows as a picture or page ("png", "svg", "html"), or nil.
local function kind_of(path)
  local ext = path:match("%.(%w+)$")
  return ext and IMAGE[ext:lower()] and ext:lower() or nil
end

-- A patching map (mech.interp.patching_map): it draws itself with map:plot{out=}.
local function is_map(x)
  if type(x) ~= "table" then return false end
  local ok, plot = pcall(function() return x.plot end)
  return ok and type(plot) == "function" and rawget(x, "values") ~= nil
end

local function check_opts(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then fail("argument 2 expected a table of options, got " .. type(opts)) end
  local bad = require("mech.util").unknown_option(opts, { "format", "out", "title" })
  if bad then fail(bad) end
  if opts.format ~= nil and opts.format ~= "png" and opts.format ~= "svg" then
    fail("option 'format': expected \"png\" or \"svg\", got " .. tostring(opts.format))
  end
  if opts.out ~= nil and type(opts.out) ~= "string" then fail("option 'out': expected a path, got " .. type(opts.out)) end
  return opts
end

-- A fresh temporary path ending in ".ext" (os.tmpname's file is removed with it).
local function temp_path(ext)
  local base = os.tmpname()
  return base .. "." .. ext, base
end

-- Draws a map to opts.out or a temporary file; returns the path and, for a temporary file, the
-- names to remove once it is read.
local function draw_map(x, opts)
  local ext = opts.format or "png"
  if opts.out then
    x:plot { out = opts.out, title = opts.title }
    return opts.out
  end
  local path, base = temp_path(ext)
  local ok, err = pcall(x.plot, x, { out = path, title = opts.title })
  if not ok then os.remove(base); os.remove(path); os.remove((path:gsub("%.%w+$", ".csv"))); error(err, 0) end
  return path, { base, path, (path:gsub("%.%w+$", ".csv")) }
end

-- The attention viewer's page inside an iframe: its script and ids stay apart from the
-- notebook's and from other viewers in the same notebook.
local function html_frame(page)
  local escaped = page:gsub("[&\"]", { ["&"] = "&amp;", ['"'] = "&quot;" })
  local height = tonumber(page:match('data%-height="(%d+)"')) or 640
  return string.format('<iframe srcdoc="%s" style="width:100%%;height:%dpx;border:1px solid #ddd" '
    .. 'sandbox="allow-scripts"></iframe>', escaped, height)
end

local function file_bundle(path, kind)
  local data = read(path)
  if not data then return nil end
  local b = { ["text/plain"] = path }
  if kind == "html" then b["text/html"] = html_frame(data) else b[IMAGE[kind]] = data end
  return b
end

--- The MIME bundle of x (a table {[mime] = string}): what the kernel sends for a value.
function M.bundle_of(x, opts)
  opts = check_opts(opts)
  if type(x) == "string" then
    local kind = kind_of(x)
    local b = kind and file_bundle(x, kind)
    if b then return b end
    return { ["text/plain"] = require("mech.pp").format(x) }
  end
  if is_map(x) then
    local path, temps = draw_map(x, opts)
    local b = file_bundle(path, opts.format or kind_of(path) or "png") or {}
    for _, p in ipairs(temps or {}) do os.remove(p) end
    b["text/plain"] = M.map_summary(x)
    return b
  end
  return { ["text/plain"] = require("mech.pp").format(x) }
end

--- One line for a patching map (its text form in a notebook; the picture carries the numbers).
function M.map_summary(x)
  local v = rawget(x, "values")
  local shape = mech.is_tensor(v) and table.concat(v:shape(), " x ") or "?"
  local parts = { "patching map " .. shape .. " (rows: layer x component, columns: positions)" }
  if x.metric then parts[#parts + 1] = "metric " .. tostring(x.metric) end
  if type(x.accuracy) == "number" then parts[#parts + 1] = string.format("accuracy %.3g", x.accuracy) end
  if x.passes == false then parts[#parts + 1] = "clean - corrupted below the threshold" end
  return table.concat(parts, ", ")
end

--- The bundle of a cell's values: one value as bundle_of shows it; several as text, tab-separated.
function M.bundle(...)
  if select("#", ...) == 1 then return M.bundle_of((...)) end
  return { ["text/plain"] = require("mech.pp").format(...) }
end

--- Set by the kernel: sends a bundle as display_data. Outside the kernel it is nil.
M.sink = nil

--- mech.display(x[, {format=, out=, title=}]) -> the file's path (or nil for text)
function M.display(x, opts)
  opts = check_opts(opts)
  if M.sink then
    M.sink(M.bundle_of(x, opts))
    return nil
  end
  -- terminal and scripts: the picture as a file, its path printed
  if type(x) == "string" and kind_of(x) and io.open(x, "rb") then
    print(x)
    return x
  end
  if is_map(x) then
    local path = opts.out or (temp_path(opts.format or "png"))
    x:plot { out = path, title = opts.title }
    print(path)
    return path
  end
  print(require("mech.pp").format(x))
  return nil
end

--- Draws mechlab's logo (the kernel spec's, logo-SIZExSIZE.png): a causal attention pattern
--- in which each token attends to itself and to the token before (a previous-token head), drawn
--- by mech.plot.heatmap with nothing around it.
function M.logo(path, size)
  if type(path) ~= "string" then fail("logo: argument 1 expected a path") end
  if math.type(size) ~= "integer" or size < 16 or size > 512 then fail("logo: argument 2 expected a size in [16, 512]") end
  local n = 8
  local data = {}
  for q = 1, n do
    local row = {}
    for k = 1, n do
      row[k] = k > q and 0 or (k == q and 1 or (k == q - 1 and 0.7 or 0.15))
    end
    data[q] = row
  end
  local labels = {}
  for i = 1, n do labels[i] = "" end
  mech.plot.heatmap { data = data, xlabels = labels, ylabels = labels, cmap = "viridis", vmin = 0, vmax = 1,
    colorbar = false, cell = 8, scale = size / 64, out = path }
  os.remove((path:gsub("%.png$", ".csv")))
  return path
end

-- mech.display is M.display (the host sets it); the kernel requires this module for the rest.
return M
