"""The attention viewer's pixels (issue 44, item 5): mechlab writes a page for a pattern with a
strong diagonal and for an SSM (its implicit attention), headless chromium takes screenshots, and
the pixel statistics must show the pattern, not a blank page: many saturated blue pixels in the
pattern page, and almost none in the same page with its script broken (the check can fail).
tests/lua/test_viz.lua checks the DOM (labels, hover). Run by ctest: python3 test_viewer.py
build/mechlab; skipped where chromium is not installed (scripts/setup.sh test installs it)."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernelspec  # noqa: E402

check = kernelspec.check


def decode_png(data):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG, as chromium writes them."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([(line[x * bpp], line[x * bpp + 1], line[x * bpp + 2]) for x in range(w)])
        prev = line
    return w, h, rows


def stats(png):
    w, h, rows = decode_png(png)
    blue = sum(1 for r in rows for (R, G, B) in r if B - R > 40)
    red = sum(1 for r in rows for (R, G, B) in r if R - B > 40)
    colours = len({p for r in rows for p in r})
    return w * h, blue, red, colours


def main():
    mechlab = kernelspec.mechlab_from_argv()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("skip  chromium is not installed here (scripts/setup.sh test installs it)")
        return
    tmp = tempfile.mkdtemp(prefix="mechlab-viewer-")
    try:
        script = """
local L = 16
local P = mech.zeros(2, L, L)
for q = 0, L - 1 do
  P[{0, q, q}] = 0.7; if q > 0 then P[{0, q, q - 1}] = 0.3 else P[{0, q, q}] = 1 end
  P[{1, q, 0}] = 1
end
local labels = {}
for i = 1, L do labels[i] = "t" .. (i - 1) end
mech.viz.attention{pattern = {P, P}, tokens = labels, out = arg[1] .. "/pattern.html", title = "diagonal"}
local m = mech.model{arch = "mamba", d_model = 16, n_layers = 2, vocab = 20, pos_emb = false, seed = 1}
mech.viz.attention{model = m, input = mech.randint(0, 20, 1, L), out = arg[1] .. "/ssm.html"}
"""
        with open(os.path.join(tmp, "make.lua"), "w") as f:
            f.write(script)
        subprocess.run([mechlab, os.path.join(tmp, "make.lua"), tmp], check=True, stderr=subprocess.DEVNULL)
        page = open(os.path.join(tmp, "pattern.html")).read()
        with open(os.path.join(tmp, "broken.html"), "w") as f:
            f.write(page.replace("function build() {", "function build() { undefined_call();", 1))

        def shot(name):
            out = os.path.join(tmp, name + ".png")
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                            "--user-data-dir=" + os.path.join(tmp, "profile"), "--window-size=800,700",
                            "--screenshot=" + out, "file://" + os.path.join(tmp, name + ".html")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            return stats(open(out, "rb").read())
        n, blue, red, colours = shot("pattern")
        print("pattern page: %d pixels, %d blue, %d colours" % (n, blue, colours))
        check(blue > 5000 and colours > 20, "the pattern page shows the pattern (%d blue pixels, %d colours)" % (blue, colours))
        n, bblue, _, bcolours = shot("broken")
        check(bblue < blue / 20, "a page whose script breaks is nearly blank (%d blue pixels)" % bblue)
        n, sblue, sred, scolours = shot("ssm")
        print("SSM page: %d blue, %d red, %d colours" % (sblue, sred, scolours))
        check(sblue + sred > 2000 and scolours > 20, "the SSM page shows its implicit attention (%d coloured pixels)" % (sblue + sred))
    finally:
        shutil.rmtree(tmp, True)
    kernelspec.finish()


if __name__ == "__main__":
    main()
