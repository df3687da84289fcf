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
      fail(fn, "option 'pattern': expected tensors (H, L, L) or (B, H, L, L), got " .. (mech.is_tensor(t) and
        ("shape " .. table.concat(t:shape(), "x")) or type(t)))
    end
    if t:dim() == 4 then
      if example < 0 or example >= t:size(0) then
        fail(fn, string.format("option 'example': expected an index in [0, %d), got %d", t:size(0), example))
      end
      t = t[example]
    end
    if t:size(1) ~= t:size(2) then fail(fn, "option 'pattern': expected square (L, L) matrices per head") end
    return { name = name, t = t:float() }
  end
  local mt = getmetatable(pattern)
  if type(pattern) == "table" and type(mt) == "table" and rawget(mt, "__name") == "mech.Cache" then
    local out = {}
    for _, n in ipairs(pattern:names("mixer.pattern")) do out[#out + 1] = one(pattern[n], n:match("^(blocks%.%d+)")) end
    if #out == 0 then
      fail(fn, "option 'pattern': the cache holds no mixer.pattern (a model without attention); pass "
        .. "{model = model, input = tokens} instead, which shows its implicit attention (mech.interp.implicit_attention)")
    end
    return out
  end
  if mech.is_tensor(pattern) then return { one(pattern, "layer 0") } end
  if type(pattern) == "table" and #pattern > 0 then
    local out = {}
    for i, t in ipairs(pattern) do out[i] = one(t, "layer " .. (i - 1)) end
    return out
  end
  fail(fn, "option 'pattern': expected a tensor, a list of tensors (one per layer) or a cache, got " .. type(pattern))
end

local function labels_of(fn, tokens, L)
  local out = {}
  if tokens == nil then
    for i = 1, L do out[i] = tostring(i - 1) end
  elseif mech.is_tensor(tokens) then
    local t = tokens:dim() == 2 and tokens[0] or tokens
    if t:dim() ~= 1 or t:size(0) ~= L then fail(fn, string.format("option 'tokens': expected %d tokens", L)) end
    for i = 1, L do out[i] = tostring(t[i - 1]) end
  elseif type(tokens) == "table" then
    if #tokens ~= L then fail(fn, string.format("option 'tokens': expected %d labels, got %d", L, #tokens)) end
    for i = 1, L do out[i] = tostring(tokens[i]) end
  else
    fail(fn, "option 'tokens': expected a list of labels or token ids, got " .. type(tokens))
  end
  return out
end

local function json_string(s)
  return '"' .. s:gsub('[%c"\\<>&]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

-- The page: data as JSON in the page, drawn by the script below it (CircuitsVis's attention
-- pattern view, without its network). One view at a time: a layer and a head (or channel)
-- chosen in the selectors or by clicking a thumbnail of the per-layer grid; one token strip;
-- the matrix with the tokens on both axes (rows: destination, the position that reads; columns:
-- source, the position read), cells sized to fit the page; a colour legend. Hovering a cell
-- highlights its destination and source tokens and shows the value; hovering a token of the
-- strip shades the strip by what that token attends to. "#selftest" hovers a cell and a token and
-- writes data-selftest = "pass" / "fail" and data-errors (uncaught errors) on <body>.
local PAGE = [[<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font-family:sans-serif;margin:12px;color:#222}
h1{font-size:17px;margin:0 0 4px}h2{font-size:14px;margin:14px 0 4px}
.method{font-size:12px;color:#555;margin:0 0 8px}.note{font-size:12px;color:#a33}
.controls{font-size:13px;margin:6px 0}.controls select{margin:0 10px 0 4px}
#info{font:12px monospace;margin-left:8px}
.strip{margin:6px 0;line-height:22px}
.tok{display:inline-block;padding:0 3px;margin:1px;border:1px solid #ccc;font:12px monospace;cursor:default;white-space:pre}
.tok.dst,.lab.dst{outline:2px solid #b2182b}.tok.src,.lab.src{outline:2px solid #2166ac}
.view{display:flex;align-items:flex-start;gap:16px}
.matrix{display:grid;gap:0}
.lab{font:11px monospace;overflow:hidden;white-space:pre;color:#333}
.lab.row{text-align:right;padding-right:4px}
.lab.col{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left;padding-top:4px}
.cell.hl{outline:1px solid #000;z-index:1}
.legend{font-size:11px}.legend .bar{width:14px;height:180px;border:1px solid #999}
.grid .layer{margin:4px 0}.grid .layer b{display:inline-block;width:70px;font-size:12px}
.thumb{display:inline-block;margin:0 6px 4px 0;text-align:center;font-size:10px;cursor:pointer}
.thumb canvas{border:1px solid #ccc;display:block}.thumb.sel canvas{border:2px solid #000}
</style></head>
<body data-selftest="" data-errors="0" data-height="%d">
<h1>%s</h1>
<p class="method" id="method"></p>
<p class="note" id="note"></p>
<div class="controls">Layer<select id="layer"></select><span id="unitname"></span><select id="unit"></select><span id="info">hover a cell</span></div>
<div class="strip" id="strip"></div>
<div class="view"><div class="matrix" id="matrix"></div><div class="legend" id="legend"></div></div>
<h2>Every layer</h2><div class="grid" id="grid"></div>
<script>
var DATA = %s;
var errors = 0;
window.onerror = function () { errors++; document.body.setAttribute("data-errors", String(errors)); };
var L = DATA.tokens.length, cur = { layer: 0, unit: 0 }, strip = [], rowLabs = [], colLabs = [], cells = [];
function range(A) {
  var lo = 0, hi = 0;
  A.forEach(function (r) { r.forEach(function (x) { if (x < lo) lo = x; if (x > hi) hi = x; }); });
  return lo < 0 ? [-Math.max(-lo, hi), Math.max(-lo, hi)] : [0, hi > 0 ? hi : 1];
}
// white to blue for patterns (>= 0); red, white, blue around 0 for signed matrices
function colour(x, r) {
  var t;
  if (r[0] < 0) {
    t = Math.max(-1, Math.min(1, x / r[1]));
    var c = t >= 0 ? [33, 102, 172] : [178, 24, 43], a = Math.abs(t);
    return "rgb(" + [0, 1, 2].map(function (i) { return Math.round(255 + (c[i] - 255) * a); }).join(",") + ")";
  }
  t = Math.max(0, Math.min(1, x / r[1]));
  return "rgb(" + Math.round(255 - 222 * t) + "," + Math.round(255 - 153 * t) + "," + Math.round(255 - 83 * t) + ")";
}
function matrixOf() { return DATA.layers[cur.layer].units[cur.unit]; }
function unitName() { return DATA.layers[cur.layer].unit; }
function setInfo(q, k) {
  var A = matrixOf();
  document.getElementById("info").textContent = "destination " + q + " " + JSON.stringify(DATA.tokens[q]) +
    " \u2190 source " + k + " " + JSON.stringify(DATA.tokens[k]) + ": " + A[q][k].toPrecision(4);
}
function clearMarks() {
  strip.concat(rowLabs, colLabs).forEach(function (e) { e.classList.remove("dst"); e.classList.remove("src"); });
  cells.forEach(function (c) { c.classList.remove("hl"); });
}
function hoverCell(q, k) {
  clearMarks();
  rowLabs[q].classList.add("dst"); colLabs[k].classList.add("src");
  strip[q].classList.add("dst"); strip[k].classList.add("src");
  cells[q * L + k].classList.add("hl");
  setInfo(q, k);
}
function hoverToken(i) {
  var A = matrixOf(), r = range(A);
  clearMarks();
  strip[i].classList.add("dst"); rowLabs[i].classList.add("dst");
  for (var j = 0; j < L; j++) strip[j].style.background = j <= i || A[i][j] !== 0 ? colour(A[i][j], r) : "";
  document.getElementById("info").textContent = "destination " + i + " " + JSON.stringify(DATA.tokens[i]) + ": its row shades the strip";
}
function drawMatrix() {
  var A = matrixOf(), r = range(A), box = document.getElementById("matrix");
  var labw = Math.min(120, 8 + 7 * DATA.tokens.reduce(function (m, t) { return Math.max(m, t.length); }, 1));
  var cell = Math.max(6, Math.min(28, Math.floor((Math.max(document.documentElement.clientWidth, 600) - labw - 120) / L)));
  box.innerHTML = ""; rowLabs = []; colLabs = []; cells = [];
  box.style.gridTemplateColumns = labw + "px repeat(" + L + ", " + cell + "px)";
  box.style.gridTemplateRows = labw + "px repeat(" + L + ", " + cell + "px)";
  box.appendChild(document.createElement("div"));
  var font = Math.max(6, Math.min(11, cell - 2)) + "px";
  DATA.tokens.forEach(function (t, k) {
    var c = document.createElement("div"); c.className = "lab col"; c.textContent = t; c.style.fontSize = font;
    c.title = "source " + k; box.appendChild(c); colLabs.push(c);
  });
  for (var q = 0; q < L; q++) {
    var rl = document.createElement("div"); rl.className = "lab row"; rl.textContent = DATA.tokens[q];
    rl.style.fontSize = font; rl.style.lineHeight = cell + "px"; rl.title = "destination " + q; box.appendChild(rl); rowLabs.push(rl);
    for (var k = 0; k < L; k++) {
      var c = document.createElement("div"); c.className = "cell"; c.style.background = colour(A[q][k], r);
      (function (q, k) { c.addEventListener("mouseover", function () { hoverCell(q, k); }); })(q, k);
      box.appendChild(c); cells.push(c);
    }
  }
  var lg = document.getElementById("legend"), stops = [];
  for (var i = 0; i <= 10; i++) stops.push(colour(r[1] - (r[1] - r[0]) * i / 10, r));
  lg.innerHTML = "<div>" + r[1].toPrecision(3) + "</div><div class='bar' style='background:linear-gradient(" + stops.join(",") +
    ")'></div><div>" + r[0].toPrecision(3) + "</div><div>" + (DATA.kind === "pattern" ? "attention" : "value") + "</div>";
  strip.forEach(function (s) { s.style.background = ""; });
  document.querySelectorAll(".thumb").forEach(function (t) {
    t.classList.toggle("sel", t.getAttribute("data-layer") == cur.layer && t.getAttribute("data-unit") == cur.unit);
  });
}
function fillUnits() {
  var sel = document.getElementById("unit"), n = DATA.layers[cur.layer].units.length;
  sel.innerHTML = "";
  for (var h = 0; h < n; h++) { var o = document.createElement("option"); o.value = h; o.textContent = DATA.layers[cur.layer].labels[h]; sel.appendChild(o); }
  sel.value = cur.unit;
  document.getElementById("unitname").textContent = " " + unitName().charAt(0).toUpperCase() + unitName().slice(1);
}
function select(layer, unit) {
  cur.layer = layer; cur.unit = unit;
  document.getElementById("layer").value = layer;
  fillUnits(); drawMatrix();
}
function drawGrid() {
  var grid = document.getElementById("grid");
  DATA.layers.forEach(function (layer, li) {
    var row = document.createElement("div"); row.className = "layer";
    var b = document.createElement("b"); b.textContent = layer.name; row.appendChild(b);
    layer.units.forEach(function (A, hi) {
      var t = document.createElement("div"); t.className = "thumb"; t.setAttribute("data-layer", li); t.setAttribute("data-unit", hi);
      var px = Math.max(1, Math.floor(72 / L)), cv = document.createElement("canvas"); cv.width = cv.height = px * L;
      var ctx = cv.getContext("2d"), r = range(A);
      for (var q = 0; q < L; q++) for (var k = 0; k < L; k++) { ctx.fillStyle = colour(A[q][k], r); ctx.fillRect(k * px, q * px, px, px); }
      t.appendChild(cv); t.appendChild(document.createTextNode(layer.labels[hi]));
      t.addEventListener("click", function () { select(li, hi); });
      row.appendChild(t);
    });
    grid.appendChild(row);
  });
}
function build() {
  document.getElementById("method").textContent = DATA.method;
  document.getElementById("note").textContent = DATA.note || "";
  var ls = document.getElementById("layer");
  DATA.layers.forEach(function (l, i) { var o = document.createElement("option"); o.value = i; o.textContent = l.name; ls.appendChild(o); });
  ls.addEventListener("change", function () { select(Number(ls.value), 0); });
  document.getElementById("unit").addEventListener("change", function (e) { select(cur.layer, Number(e.target.value)); });
  var st = document.getElementById("strip");
  DATA.tokens.forEach(function (t, i) {
    var s = document.createElement("span"); s.className = "tok"; s.textContent = t; s.title = "position " + i;
    s.addEventListener("mouseover", function () { hoverToken(i); }); st.appendChild(s); strip.push(s);
  });
  drawGrid();
  select(0, 0);
}
function selftest() {
  var q = L - 1, k = 0;
  cells[q * L + k].dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  var ok = rowLabs[q].classList.contains("dst") && colLabs[k].classList.contains("src") &&
    document.getElementById("info").textContent.indexOf(matrixOf()[q][k].toPrecision(4)) >= 0;
  var before = strip[0].style.background;
  strip[q].dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  ok = ok && strip[0].style.background !== before && strip[q].classList.contains("dst");
  document.body.setAttribute("data-selftest", ok ? "pass" : "fail");
}
build();
if (location.hash === "#selftest") selftest();
</script></body></html>
]]

-- What a model's mixer shows: attention's softmax pattern has heads; the others are read
-- through mech.interp.implicit_attention, per head (Based, DeltaNet, H3) or per channel.
local HEADS = { attention = true, based = true, delta_net = true, h3 = true }

local function method_of(arch)
  if arch == "attention" then return "pattern", "head", "Attention pattern (softmax of the scaled scores), from mech.interp.implicit_attention" end
  local how = arch == "mamba" and "Mamba's mamba_attention" or "its mixer written as an L × L matrix"
  return "implicit", HEADS[arch] and "head" or "channel",
    string.format("Implicit attention of %s (mech.interp.implicit_attention: %s), whose product with the values is the mixer's output", arch, how)
end

-- The layers of a model on its input (1, L) or (L), through mech.interp.implicit_attention.
local function layers_of_model(fn, model, input)
  local ok, cfg = pcall(function() return model:config() end)
  if not ok or type(cfg) ~= "table" then fail(fn, "option 'model': expected a mech.model") end
  if not mech.is_tensor(input) or (input:dim() ~= 1 and input:dim() ~= 2) then
    fail(fn, "option 'input' (the token ids, (L) or (1, L)) is required with 'model'")
  end
  if input:dim() == 1 then input = input:reshape(1, input:size(0)) end
  input = input[{ { 0, 1 } }]
  local kind, unit, method = method_of(cfg.arch)
  local out = {}
  for l = 0, cfg.n_layers - 1 do
    out[#out + 1] = { name = "blocks." .. l, t = mech.interp.implicit_attention(model, input, l)[0]:float(), unit = unit }
  end
  return out, kind, method
end
local MAX_L = 256          -- above it a page's matrices are unreadable (and its size grows as L²)
local MAX_UNITS = 16       -- heads or channels per layer on one page; more are left out, with a note

--- mech.viz.attention{pattern= | model=, input=; tokens=, out=, title=, example=0} -> the page's path
function V.attention(opts)
  local fn = "mech.viz.attention"
  check_opts(fn, opts, { "pattern", "model", "input", "tokens", "out", "title", "example" })
  if type(opts.out) ~= "string" then fail(fn, "option 'out' (the .html file to write) is required") end
  local example = opts.example or 0
  if math.type(example) ~= "integer" then fail(fn, "option 'example': expected an integer") end
  local layers, kind, method
  if opts.model ~= nil then
    if opts.pattern ~= nil then fail(fn, "give option 'pattern' or option 'model', not both") end
    layers, kind, method = layers_of_model(fn, opts.model, opts.input)
  else
    layers = layers_of(fn, opts.pattern, example)
    kind, method = "pattern", "Attention pattern as given (rows: destination, columns: source)"
  end
  local L = layers[1].t:size(1)
  for _, l in ipairs(layers) do
    if l.t:size(1) ~= L then fail(fn, "option 'pattern': every layer needs the same length") end
  end
  if L > MAX_L then
    fail(fn, string.format("L = %d is above %d positions, which no page shows readably; pass a slice of the "
      .. "positions (pattern[{':', {a, b}, {a, b}}]) or a shorter input", L, MAX_L))
  end
  local labels = labels_of(fn, opts.tokens, L)
  local note = {}
  local parts = { '{"tokens":[' }
  for i, s in ipairs(labels) do parts[#parts + 1] = (i > 1 and "," or "") .. json_string(s) end
  parts[#parts + 1] = '],"kind":' .. json_string(kind) .. ',"method":' .. json_string(method) .. ',"layers":['
  for li, l in ipairs(layers) do
    local unit = l.unit or "head"
    local n = l.t:size(0)
    local shown = math.min(n, MAX_UNITS)
    if shown < n then note[#note + 1] = string.format("%s: %ss 0-%d of %d shown", l.name, unit, shown - 1, n) end
    local names = {}
    for h = 0, shown - 1 do names[h + 1] = json_string(unit .. " " .. h) end
    parts[#parts + 1] = (li > 1 and "," or "") .. '{"name":' .. json_string(l.name) .. ',"unit":' .. json_string(unit)
      .. ',"labels":[' .. table.concat(names, ",") .. '],"units":['
    for h = 0, shown - 1 do
      local rows = {}
      for q = 0, L - 1 do
        local r = {}
        for k = 0, L - 1 do
          local x = l.t[{ h, q, k }]
          r[k + 1] = x == x and string.format("%.4g", x) or "0" -- NaN would break the JSON
        end
        rows[q + 1] = "[" .. table.concat(r, ",") .. "]"
      end
      parts[#parts + 1] = (h > 0 and "," or "") .. "[" .. table.concat(rows, ",") .. "]"
    end
    parts[#parts + 1] = "]}"
  end
  parts[#parts + 1] = '],"note":' .. json_string(table.concat(note, "; ")) .. "}"
  if #note > 0 then io.stderr:write(fn, ": ", table.concat(note, "; "), " (", MAX_UNITS, " per layer at most)\n") end
  local title = (opts.title or (kind == "pattern" and "Attention patterns" or "Implicit attention")):gsub("[<>&]", "")
  -- the page's height in a notebook's frame: the matrix, the strip and the grid
  local cell = math.max(6, math.min(28, (1100 - 120) // L))
  local height = 300 + cell * L
  for _, l in ipairs(layers) do height = height + 100 * math.ceil(math.min(l.t:size(0), MAX_UNITS) / 9) end
  local f, err = io.open(opts.out, "w")
  if not f then fail(fn, "cannot write " .. tostring(err)) end
  f:write(string.format(PAGE, title, height, title, table.concat(parts)))
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
