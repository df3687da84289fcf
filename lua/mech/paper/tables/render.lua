--- docs/reproduction.md's tables of results, each from the selected runs (stats.lua): tables[id](s)
--- gives a table's lines. Part of mech.paper.tables.
local paper = require "mech.paper"
local load = require "mech.paper.tables.load"
local F = require "mech.paper.tables.format"
local S = require "mech.paper.tables.stats"
local Fl = require "mech.paper.tables.floors"

local T, passes_at = load, load.passes_at
local num, mean_of, ms, row, para, lr_str, acc, acc1 = F.num, F.mean_of, F.ms, F.row, F.para, F.lr_str, F.acc, F.acc1
local pick, field, of_arch, in_set, arch_label, passing, concat = S.pick, S.field, S.of_arch, S.in_set, S.arch_label,
  S.passing, S.concat
local passing_own, pick_conv, per_width, depth_order, mixer_at = S.passing_own, S.pick_conv, S.per_width, S.depth_order,
  S.mixer_at
local nk, nk_positions, nk_sites, nk_argmax, order6, on = S.nk, S.nk_positions, S.nk_sites, S.nk_argmax, S.order6, S.on

------------------------------------------------------------------------------------------------
-- the tables, in the page's order: each returns its lines

local tables = {}

tables["ar-accuracy"] = function(s)
  local paper_says = { attention = "100% from d = 32 on", based = "≈99% at d = 256, almost Attention's curve",
    mamba = "≈91% at d = 256, \"a close third\"", hyena = "< 30%", base_conv = "< 10%", h3 = "< 3%" }
  local order = { "attention", "based", "mamba", "hyena", "base_conv", "h3" }
  local lines = { "| architecture | d = 32 | d = 64 | the paper |", "|---|---|---|---|" }
  for _, a in ipairs(order) do
    lines[#lines + 1] = row { arch_label(a),
      acc(s.ar[a][32]), acc(s.ar[a][64]), paper_says[a] }
  end
  return lines
end


tables["ar-lr"] = function(s)
  local order = { "attention", "based", "mamba", "hyena", "base_conv", "h3" }
  local head = { "architecture", "width" }
  for _, lr in ipairs(T.lrs) do head[#head + 1] = "lr " .. lr_str(lr) end
  head[#head + 1], head[#head + 2] = "best lr", "@ Value / @ Query / @ Key at the best lr"
  local lines = { row(head), "|" .. string.rep("---|", #head) }
  for _, a in ipairs(order) do
    for _, w in ipairs { 32, 64 } do
      local cells, b = { arch_label(a), "d = " .. w }, s.ar_best[a][w]
      for _, lr in ipairs(T.lrs) do cells[#cells + 1] = acc(s.ar_lr[a][w][lr]) end
      cells[#cells + 1] = b and lr_str(b.lr) or "–"
      cells[#cells + 1] = b and string.format("%s / %s / %s", ms(field(b.runs, "value")), ms(field(b.runs, "query")),
        ms(field(b.runs, "key"))) or "–"
      lines[#lines + 1] = row(cells)
    end
    local m = a == "mamba" and s.mamba256
    if m then
      local cells = { paper.arch_name(a), "d = 256" }
      for _, lr in ipairs(T.lrs) do cells[#cells + 1] = lr == m.lr and acc1(m) or "–" end
      cells[#cells + 1] = "(" .. lr_str(m.lr) .. ")"
      cells[#cells + 1] = string.format("%s / %s / %s", num(m.value), num(m.query), num(m.key))
      lines[#lines + 1] = row(cells)
    end
  end
  lines[#lines + 1] = ""
  local dmax, dsum = 0, 0
  for _, r in ipairs(s.retrained) do
    local dv = math.abs(r.quick.accuracy - r.slice.accuracy)
    dmax, dsum = math.max(dmax, dv), dsum + dv
  end
  local done = s.slice_done == T.slice_runs and string.format("all %d of its runs", T.slice_runs)
    or string.format("%d of its %d runs so far", s.slice_done, T.slice_runs)
  para(lines, string.format("lr 1e-3: the quick profile's two seeds; the other rates: the slice's seed 42 (%s). The " ..
    "best lr has the best mean accuracy; Attrib at the layer-1 block input, unfiltered.%s The slice " ..
    "also trained the quick profile's %d runs at lr 1e-3, seed 42 again (the same ids, by a later build: the same " ..
    "seed gives the same bits within one build): their test accuracy moved by %s on average, at most %s; the table " ..
    "and the figures keep the quick profile's.", done,
    s.mamba256 and string.format(" Mamba at d = 256 is one run (profile `mamba_256`, seed 42) at its best rate at " ..
      "d = 64, %s, in parentheses: no other rate was trained at that width.", lr_str(s.mamba256.lr)) or "",
    #s.retrained, #s.retrained > 0 and num(dsum / #s.retrained, 3) or "–", num(dmax, 3)))
  return lines
end

-- The ledger judged again with runs in place of the fp32 runs of their cells (one run an
-- architecture, at d = 64: the slice's cell at its rate, the best rate's, and the main curve's
-- where the rate is 1e-3): the verdicts before and after, row by row.
local function ledger_with(s, runs, before)
  local ledger = require "mech.paper.tables.ledger"
  local saved = {}
  before = before or ledger.judge(s)
  for a, b in pairs(runs) do
    saved[a] = { lr = s.ar_lr[a][64][b.lr], best = s.ar_best[a][64], main = s.ar[a][64] }
    s.ar_lr[a][64][b.lr] = { b }
    local best = s.ar_best[a][64]
    if best and best.lr == b.lr then s.ar_best[a][64] = { lr = b.lr, mean = b.accuracy, runs = { b } } end
    if b.lr == 1e-3 then s.ar[a][64] = { b } end
  end
  local after = ledger.judge(s)
  for a in pairs(runs) do
    s.ar_lr[a][64][runs[a].lr], s.ar_best[a][64], s.ar[a][64] = saved[a].lr, saved[a].best, saved[a].main
  end
  return before, after
end

-- the numbers of the rows whose verdict differs
local function moved_rows(before, after)
  local moved = {}
  for i, j in ipairs(before) do
    if after[i].verdict ~= j.verdict then moved[#moved + 1] = i end
  end
  return moved
end

local function bf16_in_ledger(s)
  local n = 0
  for _ in pairs(s.ar_bf16) do n = n + 1 end
  if n == 0 then return "No bf16 run has finished yet." end
  local before, after = ledger_with(s, s.ar_bf16)
  local moved = {}
  for _, i in ipairs(moved_rows(before, after)) do
    moved[#moved + 1] = string.format("row %d: %s → %s", i, before[i].verdict, after[i].verdict)
  end
  return string.format("With these %d bf16 runs in place of the fp32 runs of their cells (the slice's at the same rate, "
    .. "the best rate's, and the main curve's at lr 1e-3), the ledger below gives %s.", n,
    #moved == 0 and string.format("the same verdict on all %d rows", #before)
      or string.format("%d different verdicts of %d (%s)", #moved, #before, table.concat(moved, "; ")))
end

-- bf16 against fp32 at the same (arch, d = 64, lr): the difference against twice its standard error
-- under one shared proportion (the two-proportion test's pooled error, which stays honest at 320/320
-- where each run's own error is 0), then against the fp32 seeds' spread at lr 1e-3 (the only rate
-- with two seeds)
tables["ar-bf16"] = function(s)
  local order = { "attention", "based", "mamba", "hyena", "base_conv", "h3" }
  local lines = { "| architecture | lr | fp32 | bf16 | bf16 − fp32 | fp32 seeds' sd (lr 1e-3) | @ Value / @ Query / @ Key, fp32 → bf16 | reading |",
    "|---|---|---|---|---|---|---|---|" }
  for _, a in ipairs(order) do
    local b = s.ar_bf16[a]
    if not b then
      lines[#lines + 1] = row { arch_label(a), "–", "–", "not run yet", "–", "–", "–", "–" }
    else
      local f = s.ar_lr[a][64][b.lr]
      local p32, _, n32 = F.acc_se(f)
      local p16, _, n16 = F.acc_se({ b })
      local pooled = (p32 * n32 + p16 * n16) / (n32 + n16)
      local diff, noise = p16 - p32, 2 * math.sqrt(pooled * (1 - pooled) * (1 / n32 + 1 / n16))
      local seeds = field(s.ar_lr[a][64][1e-3], "accuracy")
      local sd = #seeds > 1 and select(2, paper.mean_sd(seeds)) or nil
      local reading = math.abs(diff) <= noise and "cannot tell apart (within 2 SE)"
        or (sd and math.abs(diff) <= 2 * sd) and "apart, within twice the seeds' sd"
        or "different"
      lines[#lines + 1] = row { arch_label(a), lr_str(b.lr), acc(f), acc1(b),
        string.format("%s%.3f (2 SE %.3f)", diff < 0 and "−" or "+", math.abs(diff), noise), sd and num(sd, 3) or "–",
        string.format("%s / %s / %s → %s / %s / %s", ms(field(f, "value")), ms(field(f, "query")), ms(field(f, "key")),
          num(b.value), num(b.query), num(b.key)), reading }
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = bf16_in_ledger(s)
  return lines
end

-- where a Mamba run's key is retrieved: the position of the largest Attrib at layer 0's input
local function retrieves_at(e)
  local best, at = -math.huge, "–"
  for _, pos in ipairs { "value", "query", "key" } do
    if e[pos] and e[pos] > best then best, at = e[pos], pos end
  end
  return best >= 0.5 and at or "none ≥ 0.5"
end

-- Mamba at d = 64, lr 3e-3, seed by seed in both precisions: is the bf16 run's difference (its
-- accuracy, its retrieval at the query) the precision's or the seed's?
tables["ar-mamba-seeds"] = function(s)
  local runs = s.mamba_seeds
  local by_seed, seeds = {}, {}
  for _, prec in ipairs { "fp32", "bf16" } do
    for _, e in ipairs(runs[prec]) do
      if not by_seed[e.seed] then by_seed[e.seed], seeds[#seeds + 1] = {}, e.seed end
      by_seed[e.seed][prec] = e
    end
  end
  table.sort(seeds)
  local lines = { "| seed | fp32 | @ Value / @ Query / @ Key | retrieves at | bf16 | @ Value / @ Query / @ Key | retrieves at |",
    "|---|---|---|---|---|---|---|" }
  local function cells(e)
    if not e then return "not run yet", "–", "–" end
    return acc1(e), string.format("%s / %s / %s", num(e.value), num(e.query), num(e.key)), retrieves_at(e)
  end
  for _, seed in ipairs(seeds) do
    local a1, a2, a3 = cells(by_seed[seed].fp32)
    local b1, b2, b3 = cells(by_seed[seed].bf16)
    lines[#lines + 1] = row { tostring(seed), a1, a2, a3, b1, b2, b3 }
  end
  local function counts(list)
    local c = { value = 0, query = 0, key = 0 }
    for _, e in ipairs(list) do local at = retrieves_at(e); if c[at] then c[at] = c[at] + 1 end end
    return string.format("key %d, query %d of %d", c.key, c.query, #list)
  end
  lines[#lines + 1] = row { "mean", acc(runs.fp32), "", counts(runs.fp32), acc(runs.bf16), "", counts(runs.bf16) }
  lines[#lines + 1] = ""
  if #runs.fp32 < 2 or #runs.bf16 < 2 then
    lines[#lines + 1] = "Fewer than two seeds in a precision: the seeds' spread cannot be measured yet."
    return lines
  end
  local m32, sd32 = paper.mean_sd(field(runs.fp32, "accuracy"))
  local m16, sd16 = paper.mean_sd(field(runs.bf16, "accuracy"))
  local noise = 2 * math.sqrt(sd32 ^ 2 / #runs.fp32 + sd16 ^ 2 / #runs.bf16)
  -- the ledger with each run in Mamba's d = 64 cells in turn: the verdicts each run gives
  local verdicts = { fp32 = {}, bf16 = {} }
  local rows_moved = {}
  local before = require("mech.paper.tables.ledger").judge(s)
  for _, prec in ipairs { "fp32", "bf16" } do
    for _, e in ipairs(runs[prec]) do
      local after = select(2, ledger_with(s, { mamba = e }, before))
      for _, i in ipairs(moved_rows(before, after)) do rows_moved[i] = true end
      verdicts[prec][#verdicts[prec] + 1] = after
    end
  end
  local ids = {}
  for i in pairs(rows_moved) do ids[#ids + 1] = i end
  table.sort(ids)
  local per_row = {}
  for _, i in ipairs(ids) do
    local function list(prec)
      local v = {}
      for k, after in ipairs(verdicts[prec]) do v[#v + 1] = string.format("%s (seed %d)", after[i].verdict, runs[prec][k].seed) end
      return table.concat(v, ", ")
    end
    per_row[#per_row + 1] = string.format("row %d: fp32 %s; bf16 %s", i, list("fp32"), list("bf16"))
  end
  lines[#lines + 1] = string.format("Over its %d seeds fp32 reaches %s ± %s (sd), bf16 %s ± %s over %d: %s%.3f, "
    .. "against twice the error of the difference of the two means from the seeds' spread, %.3f: %s. "
    .. "The ledger judged with each run in turn in Mamba's d = 64 cells gives %s.",
    #runs.fp32, num(m32, 3), num(sd32, 3), num(m16, 3), num(sd16, 3), #runs.bf16, m16 < m32 and "−" or "+",
    math.abs(m16 - m32), noise, math.abs(m16 - m32) <= noise and "the precisions cannot be told apart" or "apart",
    #ids == 0 and "the committed verdicts on every row" or table.concat(per_row, "; "))
  return lines
end

tables["ar-attrib"] = function(s)
  local paper_says = { attention = "≈1 at the value (induction)", based = "≈1 at the value (induction)",
    mamba = "≈0 at the value; Query + Key ≈ 1", h3 = "≈0 at the value, mass at the query",
    base_conv = "the one filtered checkpoint: partial induction", hyena = "≈0 at the value, mass at the query" }
  local order = { "attention", "based", "mamba", "h3", "base_conv", "hyena" }
  local lines = para({}, string.format("The filter is taken per position, so each column has its own runs: %d of " ..
    "the %d runs pass it at the value (Fig. 3b's points: @ Value over them), %d at the query (Fig. 3c's points: " ..
    "@ Query and @ Key over them, as Fig. 3c plots them; the key's own filter is not in every run's rows). " ..
    "Mean ± sd over both widths, both seeds at lr 1e-3 and the slice's runs at the other rates, and Mamba's run at d = 256:", #s.ar_value,
    s.ar_total, #s.ar_query))
  for _, l in ipairs {
    "",
    "| architecture | runs: value / query filter | @ Value | @ Query | @ Key | the paper |",
    "|---|---|---|---|---|---|",
  } do lines[#lines + 1] = l end
  for _, a in ipairs(order) do
    local v, q = of_arch(s.ar_value, a), of_arch(s.ar_query, a)
    lines[#lines + 1] = row { paper.arch_name(a), #v .. " / " .. #q, ms(field(v, "value")), ms(field(q, "query")),
      ms(field(q, "key")), paper_says[a] }
  end
  return lines
end


tables["delta-net"] = function(s)
  local lines = { "| architecture | width | accuracy | @ Value | @ Query | @ Key | runs passing the filter (value / query / key) |",
    "|---|---|---|---|---|---|---|" }
  for _, w in ipairs { 32, 64 } do
    local l = s.delta[w]
    local v, q, k = passing_own(l, "value"), passing_own(l, "query"), passing_own(l, "key")
    lines[#lines + 1] = row { "DeltaNet", "d = " .. w, acc(l), ms(field(v, "value")),
      ms(field(q, "query")), ms(field(k, "key")), string.format("%d / %d / %d of %d", #v, #q, #k, #l) }
  end
  for _, a in ipairs { "attention", "based", "mamba" } do
    lines[#lines + 1] = row { paper.arch_name(a) .. " (`ar`)", "d = 32 / 64",
      acc(s.ar[a][32]) .. " / " .. acc(s.ar[a][64]), "–", "–", "–", "–" }
  end
  return lines
end

-- a sweep that has not run yet: one line instead of a table
local function not_run(lines, name)
  return para(lines, string.format("(`%s` has not run yet: \"What has run\" below says when it will.)", name))
end


tables["atr-mamba-conv"] = function(s)
  if s.atr_conv_total == 0 then return not_run({}, "atr_mamba_conv") end
  local lines = { "| d_conv | accuracy, d = 32 / 64 | @ Value | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  for k = 0, 3 do
    local r = s.atr_conv[k]
    lines[#lines + 1] = row { tostring(k), per_width(r, "accuracy"), per_width(r, "value", "value"),
      per_width(r, "query", "query"), per_width(r, "key", "key"), k == 0 and "induction: @ Value high" or "–" }
  end
  local easy, f = s.atr.mamba, s.atr_filtered
  lines[#lines + 1] = row { "4 (`atr_easy`)", per_width(easy, "accuracy"), per_width(easy, "value", "value", f.value or {}),
    per_width(easy, "query", "query", f.query or {}), per_width(easy, "key", "key", f.key or {}), "direct retrieval" }
  local runs = pick_conv(s, 0, 3)
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; – : the run fails the position's " ..
    "filter, by its own denominator for d_conv 0–3 and by Fig. 4b for d_conv 4; runs of `atr_mamba_conv` passing: %d " ..
    "of %d at the value, %d at the query, %d at the key.)", #passing_own(runs, "value"), s.atr_conv_total,
    #passing_own(runs, "query"), #passing_own(runs, "key")))
  return lines
end

-- the depth tables (appendix D): "d = 32 / d = 64" accuracy cells of by_depth runs
local function depth_acc(runs)
  return acc(runs[32]) .. " / " .. acc(runs[64])
end


tables["ar-layers"] = function(s)
  if s.layers_total == 0 then return not_run({}, "ar_layers") end
  local paper_says = { attention = "1 layer fails; 3 ≈ 2", based = "1 layer (= BaseConv) fails; 3 ≈ 2", base_conv = "3 ≈ 2",
    hyena = "1 ≥ 2; 3 ≈ 2", h3 = "3 ≈ 2", mamba = "1 ≥ 2; 3 ≈ 2 (but at one small width)" }
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers (`ar`) | 3 layers | the paper |", "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.layers[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      depth_acc(l[3]), paper_says[a] }
  end
  return lines
end


tables["ar-mixer-output"] = function(s)
  if s.layers_total == 0 then return not_run({}, "ar_layers") end
  local paper_says = { attention = "2: layer 1; 3: layer 1, a little in 2", based = "2: layer 1; 3: layer 1, a little in 2",
    base_conv = "2: layer 1; 3: layer 1, a little in 2", hyena = "layer 0 at every depth", h3 = "1: layer 0; 2: layer 1",
    mamba = "1: layer 0; 2: mostly 0, partly 1; 3: 0 or the last, never the middle" }
  local lines = { "| architecture | 1 layer: layer 0 | 2 layers: layer 0 / 1 | 3 layers: layer 0 / 1 / 2 | the paper |",
    "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local cells = { arch_label(a) }
    for L = 1, 3 do
      local parts = {}
      for layer = 0, L - 1 do
        local m, n = mixer_at(s.layers_mixer[a][L], layer)
        parts[#parts + 1] = m and string.format("%s (%d)", num(m), n) or "–"
      end
      cells[#cells + 1] = table.concat(parts, " / ")
    end
    cells[#cells + 1] = paper_says[a]
    lines[#lines + 1] = row(cells)
  end
  lines[#lines + 1] = ""
  para(lines, "(Attrib of the sequence mixer's output (`attention_output`) at the query, the key corrupted: the mean " ..
    "over both widths of the runs that pass that layer's filter, their number in brackets; – : none passes. The " ..
    "2-layer models are the slice's second training of `ar`'s seed-42 runs at lr 1e-3, whose rows hold every layer.)")
  return lines
end

tables["atr-1layer"] = function(s)
  if s.atr_1layer_total == 0 then return not_run({}, "atr_1layer") end
  local paper_says = { attention = "drops clearly", based = "weakest (= BaseConv)", base_conv = "weakest", hyena = "stays strong",
    h3 = "stays strong", mamba = "stays strong" }
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers (`atr_easy`) | the paper, 1 layer |", "|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.atr_layers[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      paper_says[a] }
  end
  return lines
end

tables.sibling = function(s)
  if s.sibling_total == 0 then return not_run({}, "sibling") end
  local lines = { "| architecture | 1 layer, d = 32 / 64 | 2 layers | 3 layers | the paper |", "|---|---|---|---|---|" }
  for _, a in ipairs(depth_order) do
    local l = s.sibling[a]
    lines[#lines + 1] = row { arch_label(a), depth_acc(l[1]), depth_acc(l[2]),
      depth_acc(l[3]), (a == "based" or a == "base_conv") and "high; 1 layer lags" or "high at every width" }
  end
  return lines
end

tables["mamba-conv-accuracy"] = function(s)
  local paper_says = { [0] = "fails (< 7 %)", "fails (< 7 %)", "succeeds", "succeeds", "succeeds (≈91 % at d = 256)" }
  local lines = { "| d_conv | lr 1e-3, d = 32 | lr 1e-3, d = 64 | lr " .. lr_str(s.mamba_rate) .. ", seed 42: d = 32 / 64 | the paper |",
    "|---|---|---|---|---|" }
  for k = 0, 4 do
    lines[#lines + 1] = row { k == 4 and "4 (`ar`)" or tostring(k), acc(s.mamba[k][32]),
      acc(s.mamba[k][64]),
      acc(s.mamba_best[k][32]) .. " / " .. acc(s.mamba_best[k][64]), paper_says[k] }
  end
  return lines
end

tables["mamba-conv-attrib"] = function(s)
  local f = s.mamba_filtered
  local lines = { "| d_conv | runs: value / query / key filter | @ Value | @ Query | @ Key |", "|---|---|---|---|---|" }
  for k = 0, 4 do
    local all = concat(s.mamba[k][32], s.mamba[k][64])
    local v, q, kk = passing(all, f.value), passing(all, f.query), passing(all, f.key)
    lines[#lines + 1] = row { tostring(k), string.format("%d / %d / %d", #v, #q, #kk), ms(field(v, "value")),
      ms(field(q, "query")), ms(field(kk, "key")) }
  end
  return lines
end


tables["next-key"] = function(s)
  local lines = { "| site, layer 0 | conv 2 | conv 3 | conv 4 |", "|---|---|---|---|" }
  local function add(label, values_of)
    local cells = { label }
    for k = 2, 4 do cells[#cells + 1] = values_of(k) end
    lines[#lines + 1] = row(cells)
  end
  add("next key: mixer output (`attention_output`)", function(k) return ms(nk(s, "Next key  mixer output", k)) end)
  add("next key: block output", function(k) return ms(nk(s, "Next key  block output", k)) end)
  add("next key: conv output (`mixer.conv`), mean", function(k)
    return num(s.next_key_heat["mixer.conv|conv " .. k .. " next key"]) end)
  add("next key: SSM state (`mixer.ssm_state`), mean", function(k)
    return num(s.next_key_heat["mixer.ssm_state|conv " .. k .. " next key"]) end)
  add("key: block output", function(k) return ms(nk(s, "Key  block output", k)) end)
  add("runs passing the filter at the next key", function(k) return tostring(#nk(s, "Next key  block output", k)) end)
  return lines
end


tables["next-key-best-lr"] = function(s)
  if #s.nk_best == 0 then return { "(not run yet: it needs the slice's Mamba runs)" } end
  local lines = { "| run (d, lr, accuracy) | site, layer 0 | @ key | @ value | @ next key | @ query |", "|---|---|---|---|---|---|" }
  for _, e in ipairs(s.nk_best) do
    for _, site in ipairs(nk_sites) do
      local cells = { string.format("d = %d, lr %s, %s", e.d, lr_str(e.lr), acc1(e)), "`" .. site .. "`" }
      for _, p in ipairs(nk_positions) do
        local v = e.at[site .. "|" .. p[1]]
        cells[#cells + 1] = v and (num(v) .. (e.pass[site .. "|" .. p[1]] and "" or " (below the filter)")) or "–"
      end
      lines[#lines + 1] = row(cells)
    end
  end
  return lines
end

tables["based-accuracy"] = function(s)
  local paper_says = { ["1"] = "fails", ["2"] = "works", ["3 (`ar`)"] = "works (≈99 % at d = 256)", ["4"] = "works",
    long = "fails (< 10 %)", ["BaseConv, long convs"] = "fails" }
  local lines = { "| BaseConv kernel in Based | d = 32 | d = 64 | the paper |", "|---|---|---|---|" }
  for _, g in ipairs(s.based_groups) do
    lines[#lines + 1] = row { g[1], acc(s.based[g[1]][32]), acc(s.based[g[1]][64]),
      paper_says[g[1]] }
  end
  -- how far the two seeds of a cell are apart (the page's prose used to say "within 0.03 everywhere")
  local wide, most = {}, 0
  for _, g in ipairs(s.based_groups) do
    for _, w in ipairs { 32, 64 } do
      local v = field(s.based[g[1]][w], "accuracy")
      local gap = #v == 2 and math.abs(v[1] - v[2]) or 0
      most = math.max(most, gap)
      if gap > 0.03 then wide[#wide + 1] = string.format("kernel %s at d = %d (%s)", g[1], w, num(gap, 3)) end
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(mean of seeds 42 and 43 ± its standard error, the seeds' sd in brackets; the seeds of a cell are at most %s apart%s.)",
    num(most, 3), #wide > 0 and (", more than 0.03 in " .. table.concat(wide, ", ")) or ""))
  return lines
end

tables["atr-easy"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction", hyena = "direct retrieval",
    h3 = "direct retrieval", mamba = "direct retrieval" }
  local f = s.atr_filtered
  local sets = { value = in_set(f.value or {}), query = in_set(f.query or {}), key = in_set(f.key or {}) }
  local function at(a, pos)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.atr[a][w]
      parts[#parts + 1] = (e and sets[pos][e]) and num(e[pos]) or "–"
    end
    return table.concat(parts, " / ")
  end
  local lines = { "| architecture | accuracy, d = 32 | d = 64 | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |",
    "|---|---|---|---|---|---|---|" }
  for _, a in ipairs { "attention", "based", "base_conv", "hyena", "h3", "mamba" } do
    lines[#lines + 1] = row { arch_label(a),
      s.atr[a][32] and acc1(s.atr[a][32]) or "–", s.atr[a][64] and acc1(s.atr[a][64]) or "–",
      at(a, "value"), at(a, "query"), at(a, "key"), paper_says[a] }
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; runs passing the filter " ..
    "(Fig. 4b's boxes): %d of %d at the value, %d at the query, %d at the key.)", #(f.value or {}), s.atr_total,
    #(f.query or {}), #(f.key or {})))
  return lines
end


tables["atr-hard-accuracy"] = function(s)
  local paper_says = { attention = "beats Mamba only at (5, 8192), d ≤ 64", mamba = "matches or beats every " ..
    "architecture at \\|Σ\\| = 20, most clearly at (10, 20)" }
  local function pair(e32, e64) return (e32 and acc1(e32) or "–") .. " / " .. (e64 and acc1(e64) or "–") end
  local head = { "| architecture | (5, 20), 32 ep., d = 32 / 64 |" }
  for _, st in ipairs(T.hard_settings) do head[#head + 1] = string.format(" %s, %s ep., d = 32 / 64 |", st.title, s.hard_epochs[st.preset] or "–") end
  local lines = { table.concat(head) .. " the paper |", "|---|---|---|---|---|" }
  for _, a in ipairs(order6) do
    local cells = { arch_label(a), pair(s.atr[a][32], s.atr[a][64]) }
    for _, st in ipairs(T.hard_settings) do cells[#cells + 1] = pair(s.hard_view[st.preset][a][32], s.hard_view[st.preset][a][64]) end
    cells[#cells + 1] = paper_says[a] or "–"
    lines[#lines + 1] = row(cells)
  end
  -- the best architecture per setting and width
  local best = {}
  for _, st in ipairs(T.hard_settings) do
    for _, w in ipairs { 32, 64 } do
      local top
      for _, a in ipairs(order6) do
        local e = s.hard_view[st.preset][a][w]
        if e and (not top or e.accuracy > top.accuracy) then top = e end
      end
      best[#best + 1] = string.format("%s at d = %d: %s", st.title, w, paper.arch_name(top.arch))
    end
  end
  lines[#lines + 1] = ""
  para(lines, "(test accuracy at the reported step, lr 1e-3, seed 42, after the epochs each column names: an `atr_hard` " ..
    "setting shows its runs at the paper's 32 epochs once all its runs have them, else its runs at 5 (Fig. 4 does the " ..
    "same). The most accurate: " .. table.concat(best, ", ") .. ".)")
  return lines
end

-- the paper's own accuracy at d = 32 / 64, best of its learning rates, % (spec paper-numbers.md,
-- the section on the paper's Sec. 5.2, [N]); H3 has no (10, 20) run in the paper
local hard_paper = {
  pcfg_easy_8192 = { attention = { 84.06, 89.38 }, base_conv = { 46.56, 55.94 }, based = { 83.12, 86.56 },
    h3 = { 63.44, 72.50 }, hyena = { 57.81, 64.69 }, mamba = { 78.12, 87.19 } },
  pcfg_10_20 = { attention = { 56.88, 75.62 }, base_conv = { 61.56, 65.31 }, based = { 71.56, 70.00 },
    hyena = { 63.75, 62.50 }, mamba = { 87.81, 86.25 } } }

tables["atr-hard-epochs"] = function(s)
  local lines = { "| setting | architecture | d = 32: 5 epochs | 32 epochs | d = 64: 5 epochs | 32 epochs | the paper, d = 32 / 64 [N] |",
    "|---|---|---|---|---|---|---|" }
  local done = 0
  for _, st in ipairs(T.hard_settings) do
    for _, a in ipairs(order6) do
      local cells = { st.title, paper.arch_name(a) }
      for _, w in ipairs { 32, 64 } do
        local e5, e32 = s.hard[st.preset][a][w], s.hard32[st.preset][a][w]
        if e32 then done = done + 1 end
        cells[#cells + 1] = e5 and acc1(e5) or "–"
        cells[#cells + 1] = e32 and acc1(e32) or "not yet"
      end
      local p = hard_paper[st.preset][a]
      cells[#cells + 1] = p and num(p[1] / 100, 3) .. " / " .. num(p[2] / 100, 3) or "–"
      lines[#lines + 1] = row(cells)
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(test accuracy at the reported step, lr 1e-3, seed 42, ± its binomial standard error: 5 " ..
    "epochs on 320 documents (`atr_hard` quick), the paper's 32 on 1,024 (quick32, issue 42's block 4): %d of its " ..
    "%d runs so far. Where a run at 32 epochs exists the ledger reads it in place of the run at 5. The paper's: " ..
    "the best of its learning rates.)", done, 2 * #T.hard_settings * #order6))
  return lines
end

tables["atr-hard-attrib"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction" }
  local ssm = { ["(5, 8192)"] = "direct retrieval, mainly layer 1 (@ Key)", ["(10, 20)"] = "direct retrieval, @ Key and @ Query mixed" }
  local lines = { "| setting | architecture | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  local count, failing = { value = 0, query = 0, key = 0 }, {}
  for _, st in ipairs(T.hard_settings) do
    local title = string.format("%s, %s ep.", st.title, s.hard_epochs[st.preset] or "–")
    for _, a in ipairs(order6) do
      local function at(pos)
        local parts = {}
        for _, w in ipairs { 32, 64 } do
          local e = s.hard_view[st.preset][a][w]
          local ok = passes_at(e, pos)
          if ok then count[pos] = count[pos] + 1 end
          -- a run below the position's filter: its value in parentheses
          parts[#parts + 1] = not e and "–" or (ok and num(e[pos]) or "(" .. num(e[pos]) .. ")")
        end
        return table.concat(parts, " / ")
      end
      lines[#lines + 1] = row { title, paper.arch_name(a), at("value"), at("query"), at("key"), paper_says[a] or ssm[st.title] }
      for _, w in ipairs { 32, 64 } do
        local e, below = s.hard_view[st.preset][a][w], {}
        for _, pos in ipairs { "value", "query", "key" } do if e and passes_at(e, pos) == false then below[#below + 1] = pos end end
        if #below > 0 then
          failing[#failing + 1] = string.format("%s at d = %d on %s (accuracy %s) at the %s", paper.arch_name(a), w, title,
            acc1(e), table.concat(below, ", "))
        end
      end
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted. Runs passing the 0.01 filter, " ..
    "from their own denominators in the rows: %d of %d at the value, %d at the query, %d at the key; below it: %s, " ..
    "its values in parentheses.)", count.value, s.hard_total, count.query, count.key,
    #failing > 0 and table.concat(failing, "; ") or "none"))
  return lines
end


tables["atr-split-accuracy"] = function(s)
  local paper_says = { attention = "the highest test accuracy (d ≥ 32)", mamba = "the highest dev accuracy; memorises, " ..
    "yet tests above the other non-Attention models", h3 = "generalises nearly as Attention", base_conv = "generalises very little" }
  local function pair(a, f)
    local parts = {}
    for _, w in ipairs { 32, 64 } do
      local e = s.split[a][w]
      parts[#parts + 1] = e and e.dev and f(e) or "–"
    end
    return table.concat(parts, " / ")
  end
  local lines = { "| architecture | dev, d = 32 / 64 | test, d = 32 / 64 | dev − test, d = 32 / 64 | the paper |",
    "|---|---|---|---|---|" }
  for _, a in ipairs(order6) do
    lines[#lines + 1] = row { arch_label(a),
      pair(a, function(e) return acc1(e.dev) end), pair(a, function(e) return acc1(e) end),
      pair(a, function(e)
        return num(e.dev.accuracy - e.accuracy, 3) .. " ± " .. num(math.sqrt(F.se(e.dev.accuracy, e.dev.n) ^ 2 +
          F.se(e.accuracy, e.n) ^ 2), 3) end), paper_says[a] or "–" }
  end
  local best = {}
  for _, split in ipairs { "dev", "test" } do
    for _, w in ipairs { 32, 64 } do
      local top, top_arch
      for _, a in ipairs(order6) do
        local e = on(s.split[a][w], split)
        if e and e.accuracy and (not top or e.accuracy > top.accuracy) then top, top_arch = e, a end
      end
      if top then best[#best + 1] = string.format("%s at d = %d: %s", split, w, paper.arch_name(top_arch)) end
    end
  end
  local quick_runs = 2 * #paper.archs -- the quick profile: every architecture at d = 32 and 64
  lines[#lines + 1] = ""
  para(lines, "(accuracy at the reported step, lr 1e-3, seed 42, 32 epochs, linear decay; the one run per cell is " ..
    "also the best-dev run Fig. 5a selects. The most accurate: " .. table.concat(best, ", ") .. "." ..
    (s.split_total < quick_runs and string.format(" –: not finished when the rows were taken (%d of the %d runs were).",
      s.split_total, quick_runs) or "") .. ")")
  return lines
end

tables["atr-split-attrib"] = function(s)
  local paper_says = { attention = "induction", based = "induction", base_conv = "induction", hyena = "direct retrieval",
    h3 = "direct retrieval", mamba = "direct retrieval" }
  local on_test = { base_conv = "much less induction than on dev" }
  local lines = { "| architecture | split | @ Value, d = 32 / 64 | @ Query | @ Key | the paper |", "|---|---|---|---|---|---|" }
  local count, total, below = 0, 0, {}
  for _, a in ipairs(order6) do
    for _, split in ipairs { "dev", "test" } do
      local function at(pos)
        local parts = {}
        for _, w in ipairs { 32, 64 } do
          local e = on(s.split[a][w], split)
          local ok = passes_at(e, pos)
          if e and e[pos] ~= nil then
            total = total + 1
            if ok then count = count + 1 else below[#below + 1] = e end
          end
          parts[#parts + 1] = (not e or e[pos] == nil) and "–" or (ok and num(e[pos]) or "(" .. num(e[pos]) .. ")")
        end
        return table.concat(parts, " / ")
      end
      lines[#lines + 1] = row { paper.arch_name(a), split, at("value"), at("query"), at("key"), split == "test" and on_test[a] or paper_says[a] }
    end
  end
  lines[#lines + 1] = ""
  para(lines, string.format("(Attrib at the layer-1 block input, the key corrupted; Fig. 5c plots every run, unfiltered, " ..
    "as the paper does. In parentheses: the %d of %d values whose run is below the 0.01 filter at that position and split, " ..
    "by the denominators in the rows.)", #below, total))
  return lines
end

tables["atr-floors"] = function(s)
  local lines = { "| setting | floor, first 320 documents | first 1,024 | the predictor that reaches it | hits: root head / query / by context (of 320) |",
    "|---|---|---|---|---|" }
  for _, st in ipairs(Fl.settings) do
    local f, f1024 = Fl.floor(st.preset, st.split, T.eval_docs), Fl.floor(st.preset, st.split, 1024)
    lines[#lines + 1] = row { st.title .. " (`" .. st.preset .. "`, " .. st.split .. ")", num(f.value, 3), num(f1024.value, 3),
      f.rule, string.format("%d / %d / %d", f.by_rule["root head"], f.by_rule.query, f.by_rule["by context"]) }
  end
  -- the cross-check: 1-layer Based and BaseConv, which never read the key
  local checks = {}
  for _, a in ipairs { "based", "base_conv" } do
    for _, w in ipairs { 32, 64 } do
      for _, e in ipairs(s.atr_layers[a][1][w]) do
        checks[#checks + 1] = string.format("%s d = %d on (5, 20) %s (the key's effect, the filter denominator, %s)",
          paper.arch_name(a), w, acc1(e), e.mixer_den[0] and num(e.mixer_den[0], 3) or "–")
      end
      for _, e in ipairs(s.sibling[a][1][w]) do
        checks[#checks + 1] = string.format("%s d = %d on sibling %s (%s)", paper.arch_name(a), w, acc1(e),
          e.mixer_den[0] and num(e.mixer_den[0], 3) or "–")
      end
    end
  end
  lines[#lines + 1] = ""
  para(lines, "(the best of the key-blind predictors of `lua/mech/paper/tables/floors.lua`, scored on the documents the " ..
    "runs were evaluated on. Cross-check, the 1-layer runs that cannot retrieve: " ..
    (#checks > 0 and table.concat(checks, "; ") or "not run yet") .. ".)")
  return lines
end

return tables
