-- The attention viewer (issue 29, item 4; issue 44, item 5): one self-contained HTML page with
-- every layer and head (or an SSM's channels through its implicit attention), checked in a real
-- headless browser (Debian's chromium: the page loads without an error, the token labels are on
-- both axes, hovering a cell marks its destination and source and shows the value, through the
-- page's #selftest hook and --dump-dom), and the static grid of all heads. The screenshot's
-- pixels are checked by tests/kernel/test_viewer.py.
local T = require "check"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local m = mech.model { d_model = 16, n_layers = 2, vocab = 20, n_heads = 2, seed = 1 }
local tok = mech.tensor({ { 1, 5, 9, 2, 7, 3 }, { 4, 4, 8, 1, 2, 6 } }, { dtype = "int32" })
local _, cache = m:run_with_cache(tok, { names = "pattern" })
local labels = { "<bos>", "k5", "v9", "k2 & <x>", "v7", "k\"3" }

local function read(p) local f = assert(io.open(p, "rb")); local s = f:read("a"); f:close(); return s end

T.test("mech.viz.attention writes one self-contained page with every layer and head", function()
  local out = mech.viz.attention { pattern = cache, tokens = labels, out = dir .. "/view.html", title = "AR" }
  T.eq(out, dir .. "/view.html")
  local page = read(out)
  T.falsy(page:find("http", 1, true), "no network reference")
  T.falsy(page:find("<script src", 1, true) or page:find("<link", 1, true), "no external script or style")
  T.truthy(page:find('"name":"blocks.1"', 1, true), "layers by site")
  T.truthy(page:find("k2 \\u0026 \\u003cx\\u003e", 1, true), "labels escaped inside the JSON")
  -- the data round trip: head 1 of layer 1, row 3, in the page equals the pattern
  local p = cache["blocks.1.mixer.pattern"][{ 0, 1, 3 }]
  local block = page:match('"name":"blocks.1","unit":"head","labels":%["head 0","head 1"%],"units":%[(.-)%]%]%]')
  T.truthy(block, "layer 1's heads")
  local row = string.format("%.4g,%.4g,%.4g,%.4g", p[0], p[1], p[2], p[3])
  T.truthy(block:find(row, 1, true), row)
  T.truthy(page:find('"method":"Attention pattern', 1, true), "the method is named")
  -- a tensor (B, H, L, L) with an example, a list of layers, token ids as labels
  mech.viz.attention { pattern = cache["blocks.0.mixer.pattern"], example = 1, tokens = tok[1], out = dir .. "/one.html" }
  T.truthy(read(dir .. "/one.html"):find('"tokens":["4","4","8"', 1, true))
  mech.viz.attention { pattern = { cache["blocks.0.mixer.pattern"][0], cache["blocks.1.mixer.pattern"][0] }, out = dir .. "/two.html" }
  T.truthy(read(dir .. "/two.html"):find('"name":"layer 1"', 1, true))
  T.raises(function() mech.viz.attention { pattern = cache, out = dir .. "/x.html", tokens = { "a" } } end, "expected 6 labels")
  T.raises(function() mech.viz.attention { pattern = mech.zeros(3), out = dir .. "/x.html" } end, "expected tensors (H, L, L)")
  T.raises(function() mech.viz.attention { pattern = cache } end, "option 'out'")
  T.raises(function() mech.viz.attention { pattern = cache, out = dir .. "/x.html", exmaple = 1 } end, "did you mean 'example'")
  T.raises(function() mech.viz.attention { pattern = cache["blocks.0.mixer.pattern"], example = 5, out = dir .. "/x.html" } end,
    "an index in [0, 2)")
  T.raises(function() mech.viz.attention(3) end, "bad argument #1 to 'mech.viz.attention' (a table expected, got 3)")
  T.raises(function() mech.viz.attention { pattern = mech.zeros(1, 300, 300), out = dir .. "/x.html" } end,
    "L = 300 is above 256 positions")
end)

-- an SSM: its cache has no pattern (the error names the way), its model shows its implicit attention
local mamba = mech.model { arch = "mamba", d_model = 16, n_layers = 2, vocab = 20, pos_emb = false, seed = 1 }
T.test("an SSM is shown through mech.interp.implicit_attention, channels labelled, at most 16 per layer", function()
  local _, c = mamba:run_with_cache(tok, { names = "ssm_state" })
  T.raises(function() mech.viz.attention { pattern = c, out = dir .. "/x.html" } end, "mech.interp.implicit_attention")
  mech.viz.attention { model = mamba, input = tok[0], tokens = labels, out = dir .. "/ssm.html" }
  local page = read(dir .. "/ssm.html")
  T.truthy(page:find("Implicit attention of mamba (mech.interp.implicit_attention: Mamba", 1, true), "the method named")
  T.truthy(page:find('"unit":"channel","labels":["channel 0"', 1, true), "channels, not heads")
  T.truthy(page:find("channels 0-15 of 32 shown", 1, true), "the cut is said on the page")
  local A = mech.interp.implicit_attention(mamba, tok[{ { 0, 1 } }], 1)
  local x = A[{ 0, 3, 5, 2 }]
  T.truthy(page:find(string.format("%.4g", x), 1, true), "the implicit attention's values")
  T.raises(function() mech.viz.attention { model = mamba, out = dir .. "/x.html" } end, "option 'input'")
  T.raises(function() mech.viz.attention { model = mamba, pattern = cache, input = tok, out = dir .. "/x.html" } end, "not both")
  -- an attention model through model= gives its softmax pattern
  mech.viz.attention { model = m, input = tok, out = dir .. "/att.html" }
  local q = cache["blocks.0.mixer.pattern"][{ 0, 1, 4 }]
  T.truthy(read(dir .. "/att.html"):find(string.format("%.4g,%.4g", q[0], q[1]), 1, true), "the pattern, through model=")
end)

-- chromium as Debian names it (scripts/setup.sh installs it; CI runs this part)
local function find_chromium()
  for _, name in ipairs { "chromium", "chromium-browser" } do
    local p = io.popen("command -v " .. name .. " 2>/dev/null")
    local path = p:read("l")
    p:close()
    if path and path ~= "" then return path end
  end
end

T.test("the viewer in headless chromium: loads without an error, a hover changes the highlight", function()
  local chromium = find_chromium()
  if not chromium then
    print("skip  the browser check: chromium is not installed here (scripts/setup.sh installs it for CI)")
    return
  end
  local page = dir .. "/view.html"
  local function run(url)
    local cmd = string.format("timeout 120 %s --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=%s "
      .. "--enable-logging=stderr --v=0 --dump-dom '%s' 2>%s", chromium, dir .. "/profile", url, dir .. "/chrome.err")
    local p = io.popen(cmd)
    local dom = p:read("a")
    p:close()
    return dom, read(dir .. "/chrome.err")
  end
  local dom, log = run("file://" .. page .. "#selftest")
  local body = dom:match("<body[^>]*>")
  T.truthy(body, "the browser returned the page: " .. dom:sub(1, 200) .. log:sub(-500))
  T.truthy(body:find('data-selftest="pass"', 1, true), "the hover changed the highlight: " .. body)
  T.truthy(body:find('data-errors="0"', 1, true), "no uncaught error: " .. body)
  for line in log:gmatch("[^\n]+") do
    T.falsy(line:find("CONSOLE", 1, true) and (line:find("Uncaught", 1, true) or line:find("rror", 1, true)), line)
  end
  T.eq(select(2, dom:gsub('class="thumb', "")), 4, "2 layers x 2 heads in the grid")
  T.eq(select(2, dom:gsub('class="tok', "")), 6, "one token strip")
  T.eq(select(2, dom:gsub('class="lab row', "")), 6, "token labels on the rows")
  T.eq(select(2, dom:gsub('class="lab col', "")), 6, "and on the columns")
  T.truthy(dom:find("k2 &amp; &lt;x&gt;", 1, true), "a label as text, escaped")
  local sdom = run("file://" .. dir .. "/ssm.html#selftest")
  local sbody = sdom:match("<body[^>]*>") or ""
  T.truthy(sbody:find('data-selftest="pass"', 1, true) and sbody:find('data-errors="0"', 1, true), "the SSM page loads and hovers: " .. sbody)
  T.truthy(sdom:find("Channel", 1, true), "its selector says channel")
  -- the check can fail: a page whose script breaks is caught
  local broken = read(page):gsub("function build%(%) {", "function build() { undefined_call();", 1)
  local f = assert(io.open(dir .. "/broken.html", "wb"))
  f:write(broken)
  f:close()
  local bdom, blog = run("file://" .. dir .. "/broken.html#selftest")
  T.falsy((bdom:match("<body[^>]*>") or ""):find('data-errors="0"', 1, true), "a broken page reports its error")
  T.truthy(blog:find("Uncaught ReferenceError", 1, true), "and the console shows it: " .. blog:sub(-300))
end)

T.test("mech.viz.attention_grid draws every head into one figure", function()
  local out = mech.viz.attention_grid { pattern = cache, tokens = labels, out = dir .. "/grid.png" }
  T.eq(out, dir .. "/grid.png")
  T.truthy(io.open(dir .. "/grid.png"))
  local csv = read(dir .. "/grid.csv")
  T.truthy(csv:find("blocks.1 <bos>", 1, true), csv:sub(1, 200))
  local n = select(2, csv:gsub("\n", ""))
  T.truthy(n >= 2 * 6 * 2 * 6, "every cell of 2 layers x 2 heads x 6 x 6 in the CSV (" .. n .. " rows)")
end)

os.execute("rm -rf " .. dir)
T.done()
