"""The partial Plotly bundle (static/vendor/plotly/, built by `npm run build:plotly` in frontend/).

It must be there without npm, be a fraction of the full plotly.min.js, be the plotly.js that the
pinned Python plotly package writes its figure JSON for, and draw every trace type the portal's
figures use: the last is checked in headless Chromium on the real web server, under a portal
page's Content-Security-Policy, with figures made by plotly.py.
"""
import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.browser.conftest import CHROMIUM, PageProblems
from tests.core.test_compression import BUNDLE, BUNDLE_URL, portal_server  # noqa: F401 (fixture)

BASE_DIR = Path(__file__).resolve().parents[2]
FRONTEND = BASE_DIR / "frontend"
# The trace types of apps/*/figures.py (go.Scatter, go.Heatmap, go.Bar).
PORTAL_TRACE_TYPES = ["bar", "heatmap", "scatter"]
VERSION = re.compile(rb"plotly\.js v(\d+\.\d+\.\d+)")


def full_plotly() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def test_the_bundle_is_committed_and_about_a_quarter_of_the_full_plotly():
    assert BUNDLE.is_file(), "static/vendor/plotly/plotly-belvedere.min.js is missing: cd frontend && npm ci && npm run build:plotly"
    size, full = BUNDLE.stat().st_size, full_plotly().stat().st_size
    assert size < 0.35 * full, f"the partial bundle is {size:,} bytes, the full plotly.min.js {full:,}"
    # What a browser downloads: the gzip copy, unpacking to the very same bytes.
    packed = BUNDLE.with_name(BUNDLE.name + ".gz").read_bytes()
    assert gzip.decompress(packed) == BUNDLE.read_bytes()
    assert len(packed) < 0.1 * full


def test_the_bundle_is_the_plotly_js_that_plotly_py_writes_figures_for():
    bundled = VERSION.search(BUNDLE.read_bytes()[:500])
    shipped = VERSION.search(full_plotly().read_bytes()[:500])
    assert bundled and shipped
    assert bundled.group(1) == shipped.group(1), "pin plotly.js in frontend/package.json to the Python plotly's and rebuild"
    pinned = json.loads((FRONTEND / "package.json").read_text())["dependencies"]["plotly.js"]
    locked = json.loads((FRONTEND / "package-lock.json").read_text())["packages"]["node_modules/plotly.js"]["version"]
    assert pinned == locked == bundled.group(1).decode()


def test_the_bundle_runs_under_the_portal_csp_and_ships_its_licences():
    code = BUNDLE.read_text()
    # script-src 'self': no code built from strings at run time.
    assert "new Function" not in code and not re.search(r"\beval\(", code)
    licence = BUNDLE.with_name("LICENSE.txt").read_text()
    assert f"plotly.js@{VERSION.search(code.encode()).group(1).decode()} (MIT)" in licence
    assert "Permission is hereby granted, free of charge" in licence


def test_no_template_loads_the_full_plotly():
    offenders = [str(path.relative_to(BASE_DIR)) for path in (BASE_DIR / "templates").rglob("*.html")
                 if "vendor/plotly.min.js" in path.read_text()]
    assert offenders == []


FIGURE_CHECKS = """async ([figures, url]) => {
  const drawn = {};
  for (const [name, figure] of Object.entries(figures)) {
    const element = document.createElement("div");
    element.style.width = "600px"; element.style.height = "400px";
    document.body.appendChild(element);
    await Plotly.newPlot(element, figure.data, figure.layout);
    drawn[name] = {
      type: element._fullData[0].type,
      visible: element._fullData[0].visible,
      lines: element.querySelectorAll(".scatterlayer .trace path.js-line").length,
      markers: element.querySelectorAll(".scatterlayer .trace .points path").length,
      heatmaps: element.querySelectorAll(".heatmaplayer image").length,
      bars: element.querySelectorAll(".barlayer .point path").length,
      colorbars: element.querySelectorAll(".colorbar").length,
      pies: element.querySelectorAll(".pielayer .slice").length,
      png: (await Plotly.toImage(element, {format: "png", width: 300, height: 200})).slice(0, 22),
    };
  }
  const bytes = await (await fetch(url)).arrayBuffer();
  const digest = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))
    .map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return {registered: Object.keys(Plotly.PlotSchema.get().traces).sort(), version: Plotly.version, drawn, digest};
}"""


@pytest.mark.browser
def test_chromium_draws_each_portal_trace_type_from_plotly_py_json(portal_server, browser):  # noqa: F811
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    import plotly.graph_objects as go
    figures = {
        name: json.loads(figure.to_json())
        for name, figure in {
            "scatter": go.Figure(go.Scatter(x=[0, 60, 120, 180], y=[0.91, 0.88, 0.42, 0.9], mode="lines+markers")),
            "heatmap": go.Figure(go.Heatmap(z=[[0.9, 0.8, 0.2], [0.85, 0.1, 0.95]], x=[0, 60, 120], y=["gpu0", "gpu1"],
                                            colorscale="Viridis", zmin=0, zmax=1)),
            "bar": go.Figure(go.Bar(x=["nid000001", "nid000002", "nid000003"], y=[3, 1, 4])),
            # Not in the bundle: plotly.js leaves it undrawn (this is what a missing type looks like).
            "pie": go.Figure(go.Pie(values=[1, 2], labels=["a", "b"])),
        }.items()
    }
    page = browser.new_page()
    try:
        problems = PageProblems(page)
        # A portal page, so its Content-Security-Policy (script-src 'self') applies to the bundle.
        page.goto(f"{portal_server.url}/accounts/login/")
        with page.expect_response(lambda response: response.url.endswith(BUNDLE_URL)) as loaded:
            page.add_script_tag(url=f"{portal_server.url}{BUNDLE_URL}")
        assert loaded.value.status == 200
        assert loaded.value.headers.get("content-encoding") == "br"
        result = page.evaluate(FIGURE_CHECKS, [figures, f"{portal_server.url}{BUNDLE_URL}"])
        assert problems.take() == []
    finally:
        page.close()

    assert result["registered"] == PORTAL_TRACE_TYPES
    assert result["version"] == VERSION.search(BUNDLE.read_bytes()[:500]).group(1).decode()
    # The .br copy the browser got unpacks to the committed bundle.
    assert result["digest"] == hashlib.sha256(BUNDLE.read_bytes()).hexdigest()
    drawn = result["drawn"]
    assert drawn["scatter"]["type"] == "scatter" and drawn["scatter"]["visible"] is True
    assert drawn["scatter"]["lines"] == 1 and drawn["scatter"]["markers"] == 4
    assert drawn["heatmap"]["type"] == "heatmap" and drawn["heatmap"]["visible"] is True
    assert drawn["heatmap"]["heatmaps"] == 1 and drawn["heatmap"]["colorbars"] == 1
    assert drawn["bar"]["type"] == "bar" and drawn["bar"]["visible"] is True and drawn["bar"]["bars"] == 3
    assert drawn["pie"]["visible"] is False and drawn["pie"]["pies"] == 0
    for name in PORTAL_TRACE_TYPES:
        assert drawn[name]["png"] == "data:image/png;base64,", name
