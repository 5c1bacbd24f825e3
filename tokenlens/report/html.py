"""Page assembly: one self-contained HTML file per report.

Vega, Vega-Lite and vega-embed are inlined once (from ``vl-convert-python``'s bundle,
~0.9 MB), the chart specs go in one ``application/json`` script element, and a short
script of ours renders them. A Content-Security-Policy admits exactly those two
scripts by hash and forbids every fetch, so the page cannot reach the network and a
model output that slipped past escaping still could not run (defence in depth; the
escaping in :mod:`tokenlens.report.escape` is what the injection test checks).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import altair as alt

from tokenlens.report.assets import CSS, EMBED_JS
from tokenlens.report.escape import script_json
from tokenlens.report.escape import text as esc

Spec = dict[str, Any]


def vega_lite_version() -> str:
    """The Vega-Lite minor version Altair writes specs for (``v6.4.1`` -> ``6.4``)."""
    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega + Vega-Lite + vega-embed as one script, from the installed vl-convert."""
    import vl_convert

    # The stub marks ``snippet`` required; None gives the default (globals on window).
    bundle: str = vl_convert.javascript_bundle(None, vl_version=vega_lite_version())  # type: ignore[arg-type]
    if "</script" in bundle.lower():  # would end the inline element early
        raise RuntimeError("the vl-convert JavaScript bundle contains '</script'")
    return bundle


def _sha256(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def csp(scripts: Sequence[str]) -> str:
    """The page policy: our scripts by hash ('unsafe-eval' because Vega compiles its
    expressions with Function), inline styles (vega-embed adds some), no fetches."""
    hashes = " ".join(_sha256(s) for s in scripts)
    return (
        "default-src 'none'; "
        f"script-src {hashes} 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def chart_div(chart_id: str) -> str:
    """Where the page's script renders chart ``chart_id``."""
    return f'<div class="chart" id="chart-{esc(chart_id)}"></div>'


def page(title: str, body: str, specs: Mapping[str, Spec], signatures: Sequence[str]) -> str:
    """The whole document. ``body`` is HTML already escaped by its builders."""
    bundle = vega_bundle()
    policy = csp([bundle, EMBED_JS])
    footer = "".join(f"<p>signature: <code>{esc(sig)}</code></p>" for sig in signatures)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(policy)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f"{body}<footer>{footer}</footer>"
        f'<script type="application/json" id="tl-specs">{script_json(dict(specs))}</script>'
        f"<script>{bundle}</script><script>{EMBED_JS}</script>"
        "</body></html>\n"
    )
