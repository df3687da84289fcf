-- Fig. 7: learned positions against none, accuracy against width at the best learning rate;
-- facets AR, ATR (5, 20), ATR (10, 20); solid = NoPE, dashed = PE, colour by architecture. An
-- architecture is drawn in a panel where the rows hold both its PE and its NoPE runs: a pair is
-- the figure's point, and a line without its partner says nothing about positions. Both members
-- of a pair are the best over the learning rates they both ran at that width: the NoPE runs of
-- the AR slice span four rates, the PE partners one, and the best over four against one would
-- credit the rate to the absence of positions (Mamba d = 64: 0.82 at 3e-3 without positions,
-- 0.32 at 1e-3 with them, but 0.26 at 1e-3 without).
--   mechlab plots/paper/fig7.lua DIR [OUT.png]
local paper = require "mech.paper"

local sweeps = { "ar", "atr_easy", "atr_hard" }

-- The quick profile trains the main curves only (Attention with positions, the rest without);
-- the other member of each pair comes from a further profile of the sweep. Every profile of the
-- three sweeps beyond paper, quick and smoke is read as a slice (taken where its rows exist), so
-- that a profile added later for the missing pairs is drawn without a change here. A profile
-- trained in another precision (ar's bf16_64, issue 46) measures that, not positions: not read.
local function pair_slices()
  local at = {}
  for _, s in ipairs(sweeps) do
    local def, list = dofile(paper.sweep_file(s)), {}
    for name, prof in pairs(def.profiles or {}) do
      local other_precision = type(prof.grid) == "table" and prof.grid.precision ~= nil
      if name ~= "paper" and name ~= "quick" and name ~= "smoke" and not other_precision then list[#list + 1] = name end
    end
    table.sort(list)
    if #list > 0 then at[s] = list end
  end
  return { quick = at }
end

-- the learning rates at which both members of a pair ran, {arch = {d = {lr = true}}}, for the
-- architectures that have at least one such rate (the others keep all their rows: unpaired)
local function shared_rates(rows, preset)
  local ran, shared = {}, {}
  for _, r in ipairs(rows) do
    if r.pos_emb ~= nil and paper.task_is(r, preset) and r.metric == "accuracy" and r.split == "test" and r.step_kind == "report" then
      local key = r.arch .. "\0" .. r.d_model .. "\0" .. r.lr
      ran[key] = ran[key] or {}
      ran[key][r.pos_emb] = true
      if ran[key][not r.pos_emb] then
        shared[r.arch] = shared[r.arch] or {}
        shared[r.arch][r.d_model] = shared[r.arch][r.d_model] or {}
        shared[r.arch][r.d_model][r.lr] = true
      end
    end
  end
  return shared
end

local recipe = { id = "fig7", sweeps = sweeps, title = "PE (dashed) vs NoPE (solid)", slices = pair_slices() }

function recipe.draw(dirs, out)
  local settings = {
    { title = "AR, L = 32", rows = paper.results(dirs, "ar"), preset = "ar_32" },
    { title = "(5, 20)", rows = paper.results(dirs, "atr_easy"), preset = "pcfg_5_20" },
    { title = "(10, 20)", rows = paper.results(dirs, "atr_hard"), preset = "pcfg_10_20" },
  }
  local panels, keys, unpaired, npairs = {}, {}, {}, 0
  for _, st in ipairs(settings) do
    local shared = shared_rates(st.rows, st.preset)
    local by_pe, has = {}, {}
    for _, pe in ipairs { false, true } do
      local best, widths, archs = paper.best_per_width(st.rows, {
        where = function(r)
          local rates = shared[r.arch]
          return paper.task_is(r, st.preset) and r.pos_emb == pe and (not rates or (rates[r.d_model] or {})[r.lr])
        end })
      by_pe[pe] = { best = best, widths = widths, archs = archs }
      for _, a in ipairs(archs) do has[a] = (has[a] or 0) + 1 end
      for _, k in ipairs(paper.accuracy_keys(best, widths, archs, nil, st.title .. (pe and " PE " or " NoPE "))) do
        keys[#keys + 1] = k
      end
    end
    -- each paired architecture's NoPE then PE series, in the paper's order (its colour)
    local paired, alone = {}, {}
    for a, n in pairs(has) do if n == 2 then paired[#paired + 1] = a else alone[#alone + 1] = a end end
    paper.sort_keys(paired)
    paper.sort_keys(alone)
    -- each architecture's series, NoPE then PE; pair[a] says whether it has both
    local series, every = {}, paper.sort_keys(table.move(alone, 1, #alone, #paired + 1, table.move(paired, 1, #paired, 1, {})))
    for _, a in ipairs(every) do
      for _, pe in ipairs { false, true } do
        local e = by_pe[pe]
        for _, s in ipairs(e.best[a] and paper.accuracy_series(e.best, e.widths, { a }, { dashed = pe }) or {}) do
          s.paired = has[a] == 2
          series[#series + 1] = s
        end
      end
    end
    npairs = npairs + #paired
    for i, a in ipairs(alone) do alone[i] = paper.arch_name(a) end
    if #alone > 0 then unpaired[#unpaired + 1] = st.title .. ": " .. table.concat(alone, ", ") end
    panels[#panels + 1] = { title = paper.panel_title(st.title, st.rows), series = series, npaired = #paired }
    keys[#keys + 1] = string.format("%s: PE/NoPE pairs for %d architectures", st.title, #paired)
  end
  -- the pairs alone, once there is one; before that (a smoke profile), every line, and the
  -- caption says so
  local caption
  if npairs > 0 then
    -- a setting without a pair has nothing to draw: its panel is dropped, the caption names it
    local with_pairs = {}
    for _, p in ipairs(panels) do
      local kept = {}
      for _, s in ipairs(p.series) do if s.paired then kept[#kept + 1] = s end end
      p.series = kept
      if #kept > 0 then with_pairs[#with_pairs + 1] = p end
    end
    panels = with_pairs
    caption = "an architecture is drawn where both its PE and NoPE runs exist, each pair at the best of the learning rates both ran"
    if #unpaired > 0 then caption = caption .. "; one of the two only: " .. table.concat(unpaired, "; ") end
  else
    caption = "no architecture has both PE and NoPE runs yet: every line shown"
  end
  for _, p in ipairs(panels) do
    for _, s in ipairs(p.series) do s.paired = nil end
    p.npaired = nil
  end
  paper.draw_accuracy(panels, out, { title = "Positions: dashed PE, solid NoPE", legend = "bottom", width = 620,
    height = 340, dodge = 6, caption = caption })
  return keys
end

if select("#", ...) > 0 then paper.main(recipe, ...) end
return recipe
