-- mech.plot: every figure kind from Lua tables and tensors, CSV beside the PNG, errors.
local T = require "check"
assert(mech.plot, "mech.plot is not registered: luaopen_mech must call mlL_open_plot (src/lua/plot.c)")

local base = os.tmpname() -- a unique name; figures go to base .. "_<name>.png"
local made = {base}
local function out(name)
  local p = base .. "_" .. name .. ".png"
  made[#made + 1] = p
  made[#made + 1] = p:gsub("%.png$", ".csv")
  return p
end
local function read(p) return assert(mech.sys.read_file(p)) end
local function is_png(p) return read(p):sub(1, 8) == "\137PNG\r\n\26\n" end

local toks = {"<bos>", "k12", "v7", "k3"}
local sites = {"layer 0 block_input", "layer 0 block_output", "layer 1 block_input"}
local M = {{0.0, 0.1, 0.9, -0.2}, {0.05, -0.6, 0.3, 0 / 0}, {1.0, 0.2, -0.1, 0.4}}

T.test("heatmap from nested tables writes a PNG and a long CSV", function()
  local p = out("heat")
  T.eq(mech.plot.heatmap {data = M, xlabels = toks, ylabels = sites, cmap = "RdBu", center = 0, values = true,
                          title = "Patching", xlabel = "position", ylabel = "site", colorbar = "Attrib", out = p}, p)
  T.truthy(is_png(p))
  local csv = read(p:gsub("%.png$", ".csv"))
  T.truthy(csv:find("row,col,ylabel,xlabel,value\n0,0,layer 0 block_input,<bos>,0\n", 1, true))
  T.truthy(csv:find("1,3,layer 0 block_output,k3,NaN\n", 1, true))
end)

T.test("heatmap from a 2-D tensor equals the one from tables, byte for byte", function()
  local a, b = out("ta"), out("tb")
  local flat = {{1, 2, 3}, {4, 5, 6}}
  mech.plot.heatmap {data = flat, xlabels = {"a", "b", 3}, out = a, scale = 2}
  mech.plot.heatmap {data = mech.tensor(flat), xlabels = {"a", "b", 3}, out = b, scale = 2}
  T.eq(read(a), read(b))
end)

T.test("heatmap argument errors are clear", function()
  T.raises(function() mech.plot.heatmap {data = {{1, 2}, {3}}, out = out("e")} end,
           "bad argument #1 to 'mech.plot.heatmap' (option 'data': expected a matrix (table of equal-length rows or a 2-D tensor), got row 2 with 1 values (row 1 has 2))")
  T.raises(function() mech.plot.heatmap {data = "x", out = out("e")} end, "expected a matrix")
  T.raises(function() mech.plot.heatmap {data = mech.tensor({1, 2}), out = out("e")} end, "got a tensor of shape [2]")
  T.raises(function() mech.plot.heatmap {data = M, out = out("e"), cmpa = "RdBu"} end, "did you mean 'cmap'")
  T.raises(function() mech.plot.heatmap {data = M, xlabels = {"a"}, out = out("e")} end, "1 xlabels for 4 columns")
  T.raises(function() mech.plot.heatmap {data = M, ylabels = {"a", "b"}, out = out("e")} end, "2 ylabels for 3 rows")
  T.raises(function() mech.plot.heatmap {data = M} end, "field 'out'")
  T.raises(function() mech.plot.heatmap {data = M, cmap = "jet", out = out("e")} end, "unknown cmap 'jet'")
  T.raises(function() mech.plot.heatmap {data = {{0 / 0}}, out = out("e")} end, "no finite value")
  T.raises(function() mech.plot.heatmap {data = {{1, "x"}}, out = out("e")} end, "expected a number")
  T.raises(function() mech.plot.heatmap {data = M, vmin = 1, vmax = 0, out = out("e")} end, "vmin")
end)

local widths = {16, 32, 64, 128, 256}
local function arch_series(dashed)
  return {
    {label = "attention", x = widths, y = {0.2, 0.6, 0.95, 1, 1}, dashed = dashed},
    {label = "mamba", x = widths, y = mech.tensor({0.1, 0.2, 0.5, 0.8, 0.97}), dashed = dashed},
  }
end

T.test("lines: one panel, facets, log-x, legend at the bottom", function()
  local p = out("lines")
  mech.plot.lines {series = arch_series(), logx = 2, xticks = widths, ylim = {0, 1.05}, legend_title = "Arch.",
                   title = "AR accuracy", xlabel = "d", ylabel = "accuracy", out = p}
  T.truthy(is_png(p))
  T.truthy(read(p:gsub("%.png$", ".csv")):find("panel,series,x,y\n1,attention,16,0.2\n", 1, true))
  local q = out("facets")
  mech.plot.lines {facets = {{title = "L = 5", series = arch_series()}, {title = "L = 10", series = arch_series(true)}},
                   logx = 2, legend = "bottom", width = 520, height = 280, out = q}
  T.truthy(read(q:gsub("%.png$", ".csv")):find("L = 10,mamba,256,0.97", 1, true))
  mech.plot.lines {series = {{label = "y only", y = {3, 1, 2}}}, markers = false, out = out("yonly")}
end)

T.test("scatter, box and bar", function()
  local xs, ys = {}, {}
  for i = 1, 50 do xs[i], ys[i] = math.sin(i), math.cos(i * 0.7) end
  mech.plot.scatter {series = {{label = "attention", x = xs, y = ys}, {label = "h3", x = ys, y = xs, marker = "diamond"}},
                     alpha = 0.3, xlabel = "Attrib @ Value", ylabel = "Attrib @ Query", out = out("scatter")}
  mech.plot.scatter {series = {{label = "a", x = xs, y = ys, alpha = 0.2}, {label = "a", x = {0, 0.5, 1}, y = {0, 0.4, 0.9}, path = true, alpha = 1}},
                     out = out("scatter_path")}
  local p = out("box")
  mech.plot.box {facets = {{title = "@Key", groups = {{label = "attention", values = xs}, {label = "mamba", values = ys}}},
                           {title = "@Query", groups = {{label = "attention", values = ys}}}},
                 hlines = {0, 1}, free_y = true, ylabel = "Attrib", out = p}
  T.truthy(read(p:gsub("%.png$", ".csv")):find("panel,group,value\n@Key,attention,", 1, true))
  local b = out("bar")
  mech.plot.bar {categories = {"AR", "ATR"}, series = {{label = "1 layer", values = {1, 0.5}}, {label = "2 layers", values = {0.9, 0.7}}},
                 ylabel = "accuracy", palette = "tab10", out = b}
  T.truthy(read(b:gsub("%.png$", ".csv")):find("panel,category,series,value\n1,AR,1 layer,1\n", 1, true))
end)

T.test("figure argument errors are clear", function()
  local e = out("fe")
  T.raises(function() mech.plot.lines {series = {{label = "a", x = {1, 2}, y = {1}}}, out = e} end, "series 1 has 2 x values and 1 y values")
  T.raises(function() mech.plot.lines {series = {{label = "a", x = {1, 2}}}, out = e} end, "series 1 has no 'y'")
  T.raises(function() mech.plot.lines {series = {{label = "a", y = {1}, colour = "#ff0000"}}, out = e} end, "did you mean 'color'")
  T.raises(function() mech.plot.lines {series = {}, facets = {}, out = e} end, "either 'series' or 'facets'")
  T.raises(function() mech.plot.lines {series = {{y = {1, 2}, marker = "star"}}, out = e} end, "bad argument #1 to 'mech.plot.lines' (series 1: "
    .. "option 'marker': expected one of 'none', 'circle', 'triangle', 'square', 'diamond', 'triangle_down', 'plus', 'cross', got 'star')")
  -- an option of a table inside argument 1 names argument 1 and where it lies
  T.raises(function() mech.plot.lines {series = {{y = {1}}, {y = {1}, dashed = "yes"}}, out = e} end,
    "bad argument #1 to 'mech.plot.lines' (series 2: option 'dashed': expected a boolean, got 'yes')")
  T.raises(function() mech.plot.lines {facets = {{title = "a", series = {{y = {1}}}}, {blank = 1}}, out = e} end,
    "bad argument #1 to 'mech.plot.lines' (facet 2: option 'blank': expected a boolean, got 1)")
  T.raises(function() mech.plot.heatmap {data = {{1}}, out = 5} end,
    "bad argument #1 to 'mech.plot.heatmap' (option 'out': expected a string, got 5)")
  T.raises(function() mech.plot.lines {series = {{y = {1, 2}}}, logx = "yes", out = e} end, "bad argument #1 to 'mech.plot.lines' (option 'logx': expected true or a base such as 2, got string)")
  T.raises(function() mech.plot.lines {series = {{x = {0, 1}, y = {1, 2}}}, logx = 10, out = e} end, "log axis")
  T.raises(function() mech.plot.lines {series = {{y = {0 / 0}}}, out = e} end, "mech.plot.lines: no finite data")
  T.raises(function() mech.plot.lines {series = {{y = {1}}}, legend = "left", out = e} end, "bad argument #1 to 'mech.plot.lines' (option 'legend': expected 'right', 'bottom' or 'none', got 'left')")
  T.raises(function() mech.plot.lines {series = {{y = {1, 2}, path = true}}, out = e} end, "'path' belongs to mech.plot.scatter")
  T.raises(function() mech.plot.scatter {series = {{x = {1}, y = {1}, alpha = 2}}, out = e} end, "alpha 2, expected 0..1")
  T.raises(function() mech.plot.box {series = {{values = {1}}}, out = e} end, "use 'groups'")
  T.raises(function() mech.plot.box {groups = {{label = "a"}}, out = e} end, "no 'values'")
  T.raises(function() mech.plot.bar {series = {{values = {1}}}, out = e} end, "field 'categories'")
  T.raises(function() mech.plot.bar {categories = {"a", "b"}, series = {{values = {1}}}, out = e} end, "1 values for 2 categories")
  T.raises(function() mech.plot.scatter {series = {{x = {1}, y = {1}}}, palette = "rainbow", out = e} end, "unknown palette")
  T.raises(function() mech.plot.scatter {series = {{x = {1}, y = {1}}}, out = "/dev/null/x.png"} end, "/dev/null/x.png")
end)

T.test("plot.color gives the figures' palette colours; bad arguments are clear", function()
  T.eq(mech.plot.color("set2", 0), "#66c2a5")
  T.eq(mech.plot.color("Set2", 7), "#b3b3b3")
  T.eq(mech.plot.color("set2", 8), "#66c2a5") -- qualitative palettes cycle
  T.eq(mech.plot.color("tab10", 1), "#f28e2b")
  T.eq(mech.plot.color("blues", 0, 2), mech.plot.color("blues", 0, 5)) -- the lightest shade is fixed
  T.eq(mech.plot.color("blues", 1, 2), "#08306b")
  T.raises(function() mech.plot.color("rainbow", 0) end, "bad argument #1 to 'mech.plot.color' (expected a palette (set2, tab10, blues), got 'rainbow')")
  T.raises(function() mech.plot.color("set2", -1) end, "expected 0 <= i < n, got i = -1")
  T.raises(function() mech.plot.color("blues", 3, 3) end, "got i = 3, n = 3")
  T.raises(function() mech.plot.color("set2", 0.5) end, "bad argument #2 to 'mech.plot.color' (an integer expected, got 0.5)")
end)

T.test("every kind writes SVG and PDF by the extension, and the same call gives the same bytes", function()
  local function vec(name, ext)
    local p = base .. "_" .. name .. "." .. ext
    made[#made + 1] = p
    made[#made + 1] = base .. "_" .. name .. ".csv"
    return p
  end
  local xs = {0.1, 0.5, 0.9}
  local calls = {
    heatmap = function(o) mech.plot.heatmap {data = M, center = 0, values = true, title = "Σ", out = o} end,
    lines = function(o) mech.plot.lines {facets = {{title = "a", series = arch_series()}, {title = "b", series = arch_series(true)}}, logx = 2, out = o} end,
    scatter = function(o) mech.plot.scatter {series = {{label = "a", x = xs, y = xs}, {label = "b", x = xs, y = {1, 0, 1}, path = true}}, out = o} end,
    box = function(o) mech.plot.box {groups = {{label = "a", values = xs}, {label = "b", values = {1, 2, 3, 9}}}, hlines = {0}, out = o} end,
    bar = function(o) mech.plot.bar {categories = {"AR", "ATR"}, series = {{label = "1", values = {1, 0.5}}, {label = "2", values = {0.9, 0.7}}}, out = o} end,
  }
  for name, call in pairs(calls) do
    for ext, magic in pairs {svg = "<?xml", pdf = "%PDF-"} do
      local a, b = vec(name .. "_a", ext), vec(name .. "_b", ext)
      call(a)
      call(b)
      T.eq(read(a):sub(1, #magic), magic, name .. " " .. ext)
      T.truthy(read(a) == read(b), name .. " " .. ext .. " differs between two equal calls")
      T.truthy(read(base .. "_" .. name .. "_a.csv"):find("\n", 1, true), name .. " has no CSV")
    end
  end
end)

T.test("heatmap mask and filter mark cells without NaNs in the data", function()
  local p = out("mask")
  mech.plot.heatmap {data = M, mask = {{false, false, true, false}, {false, false, false, false}, {false, 0, 1, false}}, mask_note = "below filter", out = p}
  local csv = read(p:gsub("%.png$", ".csv"))
  T.truthy(csv:find("row,col,ylabel,xlabel,value,masked\n0,0,0,0,0,0\n0,1,0,1,0.1,0\n0,2,0,2,0.9,1\n", 1, true))
  T.truthy(csv:find("2,2,2,2,-0.1,1\n", 1, true))
  local q = out("filter")
  local den = {{0.5, 0.005, 0.5, 0.5}, {0.5, 0.5, 0 / 0, 0.5}, {0.01, 0.5, 0.5, 0.5}}
  mech.plot.heatmap {data = M, filter = {values = mech.tensor(den), min = 0.01, note = "attrib_den ≤ 0.01"}, out = q}
  local marked = {}
  for r, c, m in read(q:gsub("%.png$", ".csv")):gmatch("\n(%d+),(%d+),[^\n]*,(%d)") do
    if m == "1" then marked[#marked + 1] = r .. "," .. c end
  end
  T.eq(table.concat(marked, " "), "0,1 1,2 2,0") -- 0.005, NaN and 0.01 fail "> 0.01"
  T.raises(function() mech.plot.heatmap {data = M, mask = {{true}}, out = out("e")} end, "field 'mask' is 1 x 1, data is 3 x 4")
  T.raises(function() mech.plot.heatmap {data = M, mask = M, filter = {values = M, min = 0}, out = out("e")} end, "'mask' or 'filter', not both")
  T.raises(function() mech.plot.heatmap {data = M, filter = {values = M}, out = out("e")} end, "bad argument #1 to 'mech.plot.heatmap' (option 'filter.min': expected a number, got nil)")
  T.raises(function() mech.plot.heatmap {data = M, filter = {values = M, min = 0, mni = 1}, out = out("e")} end, "mni")
  T.raises(function() mech.plot.heatmap {data = M, mask = {{"x", 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, out = out("e")} end, "expected a number or boolean")
  T.raises(function() mech.plot.heatmap {data = M, mask_note = "n", out = out("e")} end, "'mask_note' needs a 'mask'")
end)

T.test("tiny scale or cell is an error, not an endless loop; CSVs never carry -0", function()
  T.raises(function() mech.plot.heatmap {data = M, scale = 0.01, out = out("e")} end, "scale must be in 0.1..10")
  T.raises(function() mech.plot.heatmap {data = M, cell = 0.4, out = out("e")} end, "cell must be 0 (automatic) or 1..200")
  T.raises(function() mech.plot.lines {series = {{y = {1, 2}}}, scale = 0.01, out = out("e")} end, "scale must be in 0.1..10")
  local p = out("negzero")
  mech.plot.lines {series = {{label = "z", x = {-0.0, 1}, y = {-0.0, 2}}}, out = p}
  T.truthy(read(p:gsub("%.png$", ".csv")):find("1,z,0,0\n", 1, true))
end)

T.test("scatter jitter is seeded: same seed same bytes, another seed other bytes, the CSV unmoved", function()
  local spot = {{label = "a", x = {1, 1, 1, 1}, y = {0, 0, 0, 0}}, {label = "b", x = {1, 1}, y = {0, 0}}}
  local a, b, c, d = out("j1"), out("j2"), out("j3"), out("j0")
  mech.plot.scatter {series = spot, jitter = 6, seed = 3, caption = "jittered", out = a}
  mech.plot.scatter {series = spot, jitter = 6, seed = 3, caption = "jittered", out = b}
  mech.plot.scatter {series = spot, jitter = 6, seed = 4, caption = "jittered", out = c}
  mech.plot.scatter {series = spot, caption = "jittered", out = d}
  T.eq(read(a), read(b))
  T.truthy(read(a) ~= read(c))
  T.truthy(read(a) ~= read(d))
  T.eq(read(a:gsub("%.png$", ".csv")), read(d:gsub("%.png$", ".csv")))
  T.raises(function() mech.plot.scatter {series = spot, jitter = -1, out = out("e")} end,
           "mech.plot.scatter: jitter must be in 0..100 pixels, got -1")
  T.raises(function() mech.plot.lines {series = spot, jitter = 2, out = out("e")} end, "jitter belongs to scatter plots")
  T.raises(function() mech.plot.scatter {series = spot, jitter = "x", out = out("e")} end, "jitter")
  T.raises(function() mech.plot.scatter {series = spot, seed = -2, out = out("e")} end,
           "bad argument #1 to 'mech.plot.scatter' (option 'seed': expected a non-negative integer, got -2)")
  T.raises(function() mech.plot.scatter {series = spot, seed = 1.5, out = out("e")} end, "seed")
end)

T.test("dodge moves series apart, caption adds a line; box groups keep their key in the CSV", function()
  local series = {{label = "a", x = {32, 64}, y = {0, 0.01}}, {label = "b", x = {32, 64}, y = {0, 0.01}}}
  local a, b = out("d1"), out("d0")
  mech.plot.lines {series = series, logx = 2, dodge = 6, caption = "series dodged", out = a}
  mech.plot.lines {series = series, logx = 2, caption = "series dodged", out = b}
  T.truthy(read(a) ~= read(b))
  T.eq(read(a:gsub("%.png$", ".csv")), read(b:gsub("%.png$", ".csv")))
  T.raises(function() mech.plot.lines {series = series, dodge = 200, out = out("e")} end, "dodge must be in 0..100")
  T.raises(function() mech.plot.box {groups = {{label = "g", values = {1, 2}}}, dodge = 3, out = out("e")} end,
           "dodge belongs to line and scatter plots")
  T.raises(function() mech.plot.lines {series = series, caption = 3, out = out("e")} end, "caption")
  local p = out("boxkey")
  mech.plot.box {facets = {{title = "x", groups = {{label = "conv 2 (1)", key = "conv 2", values = {0.5}}}},
                           {title = "y", groups = {{label = "conv 2 (3)", key = "conv 2", values = {0.1, 0.2, 0.3}}}}},
                 caption = "runs per group", out = p}
  local csv = read(p:gsub("%.png$", ".csv"))
  T.truthy(csv:find("x,conv 2,0.5\n", 1, true))
  T.falsy(csv:find("(1)", 1, true))
  -- categories fix the groups' order along x: b's first panel alone no longer puts it first
  local facets = {{title = "x", groups = {{label = "b", values = {0.5}}}},
                  {title = "y", groups = {{label = "a", values = {0.1}}, {label = "b", values = {0.2}}}}}
  local first, fixed, same = out("boxorder1"), out("boxorder2"), out("boxorder3")
  mech.plot.box {facets = facets, out = first}
  mech.plot.box {facets = facets, categories = {"a", "b"}, out = fixed}
  mech.plot.box {facets = facets, categories = {"b", "a"}, out = same}
  T.truthy(read(first) ~= read(fixed))
  T.eq(read(first), read(same)) -- the order of first appearance, given
  T.raises(function() mech.plot.box {facets = facets, categories = {"a"}, out = out("e")} end,
           "group 'b' of panel 1 is not among the categories")
  T.raises(function() mech.plot.lines {series = series, categories = {"a"}, out = out("e")} end,
           "belongs to mech.plot.bar and mech.plot.box")
end)

T.test("box: tags, tag_title and blank facets from Lua; misuse names the field", function()
  local p = out("tags")
  T.eq(mech.plot.box {facets = {{title = "layer 0", groups = {{label = "mamba", values = {0.1, 0.9, 0.5}, tags = {32, 64, 64}}}},
                                {blank = true}},
                      tag_title = "d", out = p}, p)
  T.truthy(is_png(p))
  T.eq(read(p:gsub("%.png$", ".csv")), "panel,group,value\nlayer 0,mamba,0.1\nlayer 0,mamba,0.9\nlayer 0,mamba,0.5\n")
  T.raises(function() mech.plot.box {groups = {{label = "a", values = {1, 2}, tags = {1}}}, out = out("e")} end,
           "group 1 has 2 values and 1 tags")
  T.raises(function() mech.plot.box {facets = {{title = "a", groups = {{label = "a", values = {1}}}}, {blank = true, groups = {}}},
                                     out = out("e")} end, "facet 2 is blank and cannot have 'groups'")
  T.raises(function() mech.plot.scatter {series = {{label = "a", x = {1}, y = {1}, tags = {1}}}, out = out("e")} end,
           "'tags' belongs to mech.plot.box")
  T.raises(function() mech.plot.lines {series = {{label = "a", x = {1}, y = {1}, highlight = true}}, out = out("e")} end,
           "'highlight' belongs to mech.plot.scatter")
end)

T.test("scatter: a highlighted path and a series without points draw; the CSV keeps every point", function()
  local p = out("hl")
  mech.plot.scatter {series = {{label = "all", x = {0.1, 0.2}, y = {0.3, 0.4}, alpha = 0.2},
                               {label = "best", x = {0.2}, y = {0.4}, path = true, highlight = true},
                               {label = "none passes", x = {}, y = {}}}, out = p}
  T.eq(read(p:gsub("%.png$", ".csv")), "panel,series,x,y\n1,all,0.1,0.3\n1,all,0.2,0.4\n1,best,0.2,0.4\n")
end)

T.test("accuracy figures: the y axis separates lines bunched near the top only when asked, and says so", function()
  local accuracy_ylim = require("mech.paper.draw").accuracy_ylim
  local bunched = {{series = {{x = {32, 64}, y = {0.88, 0.96}}, {x = {32, 64}, y = {0.74, 0.92}}}}}
  T.eq(accuracy_ylim(bunched), {-0.03, 1.05}) -- the paper's range by default
  local lim, note = accuracy_ylim(bunched, {zoom = true})
  T.near(lim[1], 0.7, 1e-12)
  T.truthy(lim[2] >= 1 and lim[2] < 1.05)
  -- 0.01 of accuracy spans at least 3 % of the axis (on 0-1.05: under 1 %)
  T.truthy(0.01 / (lim[2] - lim[1]) > 0.03)
  T.truthy(note:find("y axis from 0.7", 1, true), note)
  -- a line near 0 keeps the paper's 0-1.05
  T.eq(accuracy_ylim({{series = {{x = {32}, y = {0.02}}, {x = {32}, y = {0.95}}}}}, {zoom = true}), {-0.03, 1.05})
end)

T.test("Fig. 7 draws an architecture once its rows hold both PE and NoPE, from whichever file has them", function()
  local recipe = dofile("plots/paper/fig7.lua")
  local head = "sweep,run,status,task,arch,n_layers,d_model,d_conv,pos_emb,lr,seed,steps,split,metric,step_kind,step,value\n"
  local function row(arch, pe, d, v, lr)
    return string.format("ar,%s-d%d-%s-%g,done,ar_32,%s,2,%d,,%s,%g,42,100,test,accuracy,report,100,%g\n", arch, d,
      pe and "pe" or "nope", lr or 0.001, arch, d, tostring(pe), lr or 0.001, v)
  end
  local main, later = base .. "_fig7_main.csv", base .. "_fig7_later.csv"
  made[#made + 1], made[#made + 1] = main, later
  mech.sys.write_atomic(main, head .. row("attention", true, 32, 1) .. row("attention", false, 32, 0.08)
    .. row("mamba", false, 32, 0.5) .. row("mamba", false, 32, 0.9, 0.003) .. row("attention", true, 64, 1)
    .. row("attention", false, 64, 0.05))
  mech.sys.write_atomic(later, head .. row("mamba", true, 32, 0.3))
  local paper, titles = require "mech.paper", nil
  local draw_accuracy = paper.draw_accuracy
  local function series_of(dirs)
    local p = out("fig7")
    paper.draw_accuracy = function(panels, ...)
      titles = {}
      for i, panel in ipairs(panels) do titles[i] = panel.title end
      return draw_accuracy(panels, ...)
    end
    recipe.draw(dirs, p)
    paper.draw_accuracy = draw_accuracy
    local n, ys = {}, {}
    for line in read(p:gsub("%.png$", ".csv")):gmatch("[^\n]+") do
      local series, y = line:match('^"[^"]*",([^,]*),[^,]*,([^,]*)$') -- "AR, L = 32" is quoted
      if not series then series, y = line:match("^[^,\"]*,([^,]*),[^,]*,([^,]*)$") end
      n[series] = (n[series] or 0) + 1
      ys[series] = ys[series] or {}
      table.insert(ys[series], tonumber(y))
    end
    return n, ys
  end
  local none = base .. "_none.csv"
  local n = series_of({ ar = { main }, atr_easy = none, atr_hard = none })
  T.eq({ n.attention, n.mamba }, { 4, nil }) -- Mamba without its PE partner is not drawn
  local ys
  n, ys = series_of({ ar = { main, later }, atr_easy = none, atr_hard = none })
  T.eq({ n.attention, n.mamba }, { 4, 2 })
  -- Mamba's pair is read at the rate both ran (1e-3: NoPE 0.5), not NoPE's best alone (3e-3: 0.9)
  table.sort(ys.mamba)
  T.eq(ys.mamba, { 0.3, 0.5 })
  -- the two ATR settings have no pair: their panels are dropped, not drawn empty
  T.eq(#titles, 1)
  T.truthy(titles[1]:find("AR, L = 32", 1, true), titles[1])
end)

for _, p in ipairs(made) do os.remove(p) end
T.done()
