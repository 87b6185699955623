"""The page itself: one self-contained HTML file (inline CSS, inline SVG, no script), written atomically.

Jinja2 with autoescaping renders it: every name from a repository or a result file is escaped, so a model
called ``<script>`` is shown as text. Only the SVG that matplotlib wrote (its text escaped by its own
writer) is inserted as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import jinja2
from markupsafe import Markup

from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.report.records import Record
from repo_builder.report.sections import Page, build_page

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ page.title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0 auto;
       max-width: 980px; padding: 1.5rem; color: #1a1a1a; background: #fff; line-height: 1.45; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; } h2 { font-size: 1.2rem; margin: 2rem 0 .4rem; }
.lede { color: #444; margin: 0 0 1rem; }
.runs { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: .8rem; }
.run { border: 1px solid #ccc; border-radius: 6px; padding: .6rem .8rem; }
.run h3 { margin: 0 0 .3rem; font-size: 1rem; }
.run dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .8rem; margin: 0; font-size: .85rem; }
.run dt { color: #555; } .run dd { margin: 0; overflow-wrap: anywhere; }
figure.chart { margin: 0 0 .6rem; }
figure.chart svg { width: 100%; height: auto; display: block; }
figcaption { font-size: .9rem; color: #333; margin-top: .3rem; }
.notice { background: #fff4d6; border-left: 4px solid #E69F00; padding: .4rem .7rem; margin: .4rem 0; }
table { border-collapse: collapse; width: 100%; font-size: .82rem; margin: .4rem 0 1rem; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .45rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } .num { text-align: right; font-variant-numeric: tabular-nums; }
footer { color: #666; font-size: .8rem; margin-top: 2rem; }
</style>
</head>
<body>
<h1>{{ page.title }}</h1>
<p class="lede">Measured on a real tritonserver by repo-builder. Each chart has a table of the same numbers under it.</p>
<section class="runs">
{% for run in page.runs %}<div class="run"><h3>{{ run.label }}</h3><dl>
{% for name, value in run.facts %}<dt>{{ name }}</dt><dd>{{ value }}</dd>
{% endfor %}</dl>{% for notice in run.notices %}<p class="notice">{{ notice }}</p>{% endfor %}</div>
{% endfor %}</section>
{% if not page.charts %}<p class="notice">Nothing to chart: no result was given.</p>{% endif %}
{% for chart in page.charts %}<section class="chart-section">
<h2>{{ chart.title }}</h2>
{% for notice in chart.notices %}<p class="notice">{{ notice }}</p>
{% endfor %}{% if chart.svg %}<figure class="chart" id="{{ chart.chart_id }}" data-series="{{ chart.series }}">
{{ chart.svg }}
<figcaption>{{ chart.caption }}</figcaption>
</figure>{% endif %}
<table data-chart="{{ chart.chart_id }}"><thead><tr>{% for h in chart.table.headers %}<th{% if loop.index0 in chart.table.numeric %} class="num"{% endif %}>{{ h }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in chart.table.rows %}<tr>{% for cell in row %}<td{% if loop.index0 in chart.table.numeric %} class="num"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% else %}<tr><td colspan="{{ chart.table.headers|length }}">no rows</td></tr>{% endfor %}</tbody></table>
</section>
{% endfor %}<footer>Colours: the Okabe&ndash;Ito palette, which readers with colour-vision deficiencies can tell apart;
markers and hatching differ too. Charts drawn by matplotlib as inline SVG: this page loads nothing from the network.</footer>
</body>
</html>
"""


def render_page(page: Page) -> str:
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
    charts = tuple(replace(c, svg=Markup(c.svg) if c.svg else None) for c in page.charts)
    return env.from_string(TEMPLATE).render(page=replace(page, charts=charts))


def check_output(out: Path, inputs: Sequence[Path] = (), *, option: str = "-o") -> None:
    """Refuse before any work when the page could not be written, or would overwrite an input."""
    if out.is_dir():
        raise UserError(f"{option} {out}: is a folder; name the HTML file to write, e.g. {out / 'report.html'}")
    if not out.parent.is_dir():
        raise UserError(f"{option} {out}: folder {out.parent} does not exist; create it or write the page elsewhere")
    try:
        same = any(out.resolve() == p.resolve() for p in inputs)
    except (RuntimeError, OSError):  # a symbolic link loop (RuntimeError before Python 3.13)
        raise UserError(f"{option} {out}: is a symbolic link that never reaches a file; write the page to another file") from None
    if same:
        raise UserError(f"{option} {out}: is one of the result files read; write the page to another file")


def write_report(records: Sequence[Record], out: Path, *, budget_ms: float | None = None) -> Path:
    """Draw every chart, then write the page in one rename: a failure leaves no file behind."""
    check_output(out)
    write_text_atomic(out, render_page(build_page(records, budget_ms)))
    return out
