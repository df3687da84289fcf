--- The attention viewer (docs/analysis.md, "The attention viewer"): mech.viz.attention writes one
--- self-contained HTML page (no network, no external script) with every layer and head of a
--- pattern; hovering a token shows what it attends to and what attends to it (the CircuitsVis
--- idea). mech.viz.attention_grid draws every head into one static heatmap (PNG, SVG or PDF).
local V = {}

local function fail(fn, msg) error(fn .. ": " .. msg, 3) end

local function check_opts(fn, opts, allowed)
  if type(opts) ~= "table" then fail(fn, "argument 1 expected a table of options, got " .. type(opts)) end
  local bad = require("mech.util").unknown_option(opts, allowed)
  if bad then fail(fn, bad) end
end

-- The layers of option `pattern` as {{name=, t=(H, L, L)}, ...}: a tensor (H, L, L) or (B, H, L, L)
-- (example `example`), a list of them (one per layer), or a cache (its mixer.pattern sites).
local function layers_of(fn, pattern, example)
  local function one(t, name)
    if not mech.is_tensor(t) or (t:dim() ~= 3 and t:dim() ~= 4) then
      fail(fn, "option 'pattern' expected tensors (H, L, L) or (B, H, L, L), got " .. (mech.is_tensor(t) and
        ("shape " .. table.concat(t:shape(), "x")) or type(t)))
    end
    if t:dim() == 4 then
      if example < 0 or example >= t:size(0) then
        fail(fn, string.format("option 'example' expected an index in [0, %d), got %d", t:size(0), example))
      end
      t = t[example]
    end
    if t:size(1) ~= t:size(2) then fail(fn, "option 'pattern' expected square (L, L) matrices per head") end
    return { name = name, t = t:float() }
  end
  local mt = getmetatable(pattern)
  if type(pattern) == "table" and type(mt) == "table" and rawget(mt, "__name") == "mech.Cache" then
    local out = {}
    for _, n in ipairs(pattern:names("mixer%.pattern$")) do out[#out + 1] = one(pattern[n], n:match("^(blocks%.%d+)")) end
    if #out == 0 then fail(fn, "option 'pattern': the cache holds no mixer.pattern") end
    return out
  end
  if mech.is_tensor(pattern) then return { one(pattern, "layer 0") } end
  if type(pattern) == "table" and #pattern > 0 then
    local out = {}
    for i, t in ipairs(pattern) do out[i] = one(t, "layer " .. (i - 1)) end
    return out
  end
  fail(fn, "option 'pattern' expected a tensor, a list of tensors (one per layer) or a cache, got " .. type(pattern))
end

local function labels_of(fn, tokens, L)
  local out = {}
  if tokens == nil then
    for i = 1, L do out[i] = tostring(i - 1) end
  elseif mech.is_tensor(tokens) then
    local t = tokens:dim() == 2 and tokens[0] or tokens
    if t:dim() ~= 1 or t:size(0) ~= L then fail(fn, string.format("option 'tokens' expected %d tokens", L)) end
    for i = 1, L do out[i] = tostring(t[i - 1]) end
  elseif type(tokens) == "table" then
    if #tokens ~= L then fail(fn, string.format("option 'tokens' expected %d labels, got %d", L, #tokens)) end
    for i = 1, L do out[i] = tostring(tokens[i]) end
  else
    fail(fn, "option 'tokens' expected a list of labels or token ids, got " .. type(tokens))
  end
  return out
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\<>&]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

-- The page: data as JSON in the page, drawn by the script below it. A hover on a token of a head
-- colours, in that head, the tokens it attends to (blue, row "to") and those attending to it
-- (red, row "from"), and outlines its row of the head's matrix. "#selftest" runs a hover and
-- writes data-selftest = "pass" / "fail" and data-errors (uncaught errors) on <body>.
local PAGE = [[<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:sans-serif;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin:14px 0 4px}
.head{display:inline-block;vertical-align:top;margin:0 14px 14px 0;padding:6px;border:1px solid #ddd}
.head h3{font-size:13px;margin:0 0 4px}
.row{white-space:nowrap;margin:2px 0}.row b{display:inline-block;width:38px;font-size:11px;color:#666}
.tok{display:inline-block;padding:1px 3px;margin:1px;border:1px solid #ccc;font:12px monospace;cursor:default}
.tok.sel{outline:2px solid #000}
.grid{display:grid;gap:0;margin-top:4px}.cell{width:10px;height:10px}.cell.sel{outline:1px solid #000}
</style></head>
<body data-selftest="" data-errors="0">
<h1>%s</h1>
<p>Hover a token: blue, what it attends to; red, what attends to it.</p>
<div id="view"></div>
<script>
var DATA = %s;
var errors = 0;
window.onerror = function () { errors++; document.body.setAttribute("data-errors", String(errors)); };
function shade(x, rgb) { var a = Math.max(0, Math.min(1, x)); return "rgba(" + rgb + "," + a.toFixed(3) + ")"; }
function draw() {
  var view = document.getElementById("view"), L = DATA.tokens.length;
  DATA.layers.forEach(function (layer, li) {
    var h2 = document.createElement("h2"); h2.textContent = layer.name; view.appendChild(h2);
    layer.heads.forEach(function (A, hi) {
      var box = document.createElement("div"); box.className = "head"; box.id = "head-" + li + "-" + hi;
      var title = document.createElement("h3"); title.textContent = layer.name + " head " + hi; box.appendChild(title);
      var rows = {};
      ["tokens", "to", "from"].forEach(function (kind) {
        var row = document.createElement("div"); row.className = "row";
        var lab = document.createElement("b"); lab.textContent = kind === "tokens" ? "" : kind; row.appendChild(lab);
        rows[kind] = [];
        DATA.tokens.forEach(function (t, i) {
          var s = document.createElement("span"); s.className = "tok"; s.textContent = t;
          s.setAttribute("data-i", String(i)); row.appendChild(s); rows[kind].push(s);
        });
        box.appendChild(row);
      });
      var grid = document.createElement("div"); grid.className = "grid";
      grid.style.gridTemplateColumns = "repeat(" + L + ", 10px)";
      var cells = [];
      for (var q = 0; q < L; q++) for (var k = 0; k < L; k++) {
        var c = document.createElement("div"); c.className = "cell";
        c.style.background = shade(A[q][k], "33,102,172"); c.title = DATA.tokens[q] + " -> " + DATA.tokens[k] + ": " + A[q][k].toFixed(4);
        grid.appendChild(c); cells.push(c);
      }
      box.appendChild(grid);
      view.appendChild(box);
      function hover(i) {
        for (var j = 0; j < L; j++) {
          rows.to[j].style.background = shade(A[i][j], "33,102,172");
          rows.from[j].style.background = shade(A[j][i], "178,24,43");
          rows.tokens[j].classList.toggle("sel", j === i);
          for (var k = 0; k < L; k++) cells[j * L + k].classList.toggle("sel", j === i);
        }
      }
      rows.tokens.concat(rows.to, rows.from).forEach(function (s) {
        s.addEventListener("mouseover", function () { hover(Number(s.getAttribute("data-i"))); });
      });
    });
  });
}
function selftest() {
  var box = document.getElementById("head-0-0");
  var tok = box.querySelectorAll(".row")[0].children[DATA.tokens.length];
  var target = box.querySelectorAll(".row")[1].children[1];
  var before = target.style.background;
  tok.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  var after = target.style.background, sel = tok.classList.contains("sel");
  document.body.setAttribute("data-selftest", after !== before && sel ? "pass" : "fail");
}
draw();
if (location.hash === "#selftest") selftest();
</script></body></html>
]]

--- mech.viz.attention{pattern=, tokens=, out=, title=, example=0} -> the page's path
function V.attention(opts)
  local fn = "mech.viz.attention"
  check_opts(fn, opts, { "pattern", "tokens", "out", "title", "example" })
  if type(opts.out) ~= "string" then fail(fn, "option 'out' (the .html file to write) is required") end
  local example = opts.example or 0
  if math.type(example) ~= "integer" then fail(fn, "option 'example' expected an integer") end
  local layers = layers_of(fn, opts.pattern, example)
  local L = layers[1].t:size(1)
  for _, l in ipairs(layers) do
    if l.t:size(1) ~= L then fail(fn, "option 'pattern': every layer needs the same length") end
  end
  local labels = labels_of(fn, opts.tokens, L)
  local parts = { '{"tokens":[' }
  for i, s in ipairs(labels) do parts[#parts + 1] = (i > 1 and "," or "") .. json_string(s) end
  parts[#parts + 1] = '],"layers":['
  for li, l in ipairs(layers) do
    parts[#parts + 1] = (li > 1 and "," or "") .. '{"name":' .. json_string(l.name) .. ',"heads":['
    for h = 0, l.t:size(0) - 1 do
      local rows = {}
      for q = 0, L - 1 do
        local r = {}
        for k = 0, L - 1 do
          local x = l.t[{ h, q, k }]
          r[k + 1] = x == x and string.format("%.5g", x) or "0" -- NaN would break the JSON
        end
        rows[q + 1] = "[" .. table.concat(r, ",") .. "]"
      end
      parts[#parts + 1] = (h > 0 and "," or "") .. "[" .. table.concat(rows, ",") .. "]"
    end
    parts[#parts + 1] = "]}"
  end
  parts[#parts + 1] = "]}"
  local title = (opts.title or "Attention patterns"):gsub("[<>&]", "")
  local f, err = io.open(opts.out, "w")
  if not f then fail(fn, "cannot write " .. tostring(err)) end
  f:write(string.format(PAGE, title, title, table.concat(parts)))
  f:close()
  return opts.out
end

--- mech.viz.attention_grid{pattern=, tokens=, out=, title=, example=0}: every head of every layer
--- in one heatmap (rows: layers, columns: heads; NaN gaps between the blocks).
function V.attention_grid(opts)
  local fn = "mech.viz.attention_grid"
  check_opts(fn, opts, { "pattern", "tokens", "out", "title", "example" })
  if type(opts.out) ~= "string" then fail(fn, "option 'out' (a .png, .svg or .pdf file) is required") end
  local layers = layers_of(fn, opts.pattern, opts.example or 0)
  local L = layers[1].t:size(1)
  local labels = labels_of(fn, opts.tokens, L)
  local H = 0
  for _, l in ipairs(layers) do H = math.max(H, l.t:size(0)) end
  local data, xl, yl = {}, {}, {}
  for h = 0, H - 1 do
    for k = 1, L do xl[#xl + 1] = (k == 1 and ("H" .. h .. " ") or "") .. labels[k] end
    if h < H - 1 then xl[#xl + 1] = "" end
  end
  for li, l in ipairs(layers) do
    for q = 0, L - 1 do
      local row = {}
      for h = 0, H - 1 do
        for k = 0, L - 1 do row[#row + 1] = h < l.t:size(0) and l.t[{ h, q, k }] or 0 / 0 end
        if h < H - 1 then row[#row + 1] = 0 / 0 end
      end
      data[#data + 1] = row
      yl[#yl + 1] = (q == 0 and (l.name .. " ") or "") .. labels[q + 1]
    end
    if li < #layers then
      local gap = {}
      for i = 1, #data[1] do gap[i] = 0 / 0 end
      data[#data + 1], yl[#yl + 1] = gap, ""
    end
  end
  mech.plot.heatmap { data = data, xlabels = xl, ylabels = yl, vmin = 0, vmax = 1, cmap = "Blues",
    title = opts.title or "Attention patterns", xlabel = "key (per head)", ylabel = "query (per layer)",
    colorbar = "attention", out = opts.out }
  return opts.out
end

return V
