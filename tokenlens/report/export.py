"""PNG and SVG files of the main charts, for slides and blog posts (rendered by
vl-convert, no browser)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import vl_convert

from tokenlens.report.html import vega_lite_version

# The charts worth a figure of their own; the rest stay in the page.
MAIN_CHARTS = (
    "acceptance",
    "by_position",
    "by_position_conditional",
    "class_gaps",
    "domains",
    "by_script",
    "gap",
    "speed",
)


def export_charts(
    specs: Mapping[str, dict[str, Any]], out_dir: Path, chart_ids: Iterable[str] = MAIN_CHARTS
) -> list[Path]:
    """Write ``ID.svg`` and ``ID.png`` (2x scale) for each main chart present
    (``chart_ids``: the analyze report's by default; other reports name theirs)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    version = vega_lite_version()
    written: list[Path] = []
    for chart_id in chart_ids:
        spec = specs.get(chart_id)
        if spec is None:
            continue
        svg = out_dir / f"{chart_id}.svg"
        svg.write_text(vl_convert.vegalite_to_svg(spec, vl_version=version), "utf-8")
        png = out_dir / f"{chart_id}.png"
        png.write_bytes(vl_convert.vegalite_to_png(spec, vl_version=version, scale=2))
        written += [svg, png]
    return written
