"""Page assembly: Jinja2 templates with autoescape, one self-contained HTML file each.

Every page comes from a template in ``tokenlens/report/templates/`` (package data),
rendered with autoescape on: any value a template prints is HTML-escaped unless it is
marked safe here (our own CSS and script, the Vega bundle, JSON made safe for a
``<script>`` element by :func:`script_json`). Model outputs, token texts and names
from plan files are therefore escaped by construction, not by remembering to.

Vega, Vega-Lite and vega-embed are inlined once (from ``vl-convert-python``'s bundle,
~0.9 MB), the chart specs go in one ``application/json`` script element, and a short
script of ours (``embed.js``) renders them. A Content-Security-Policy admits exactly
those two scripts by hash and forbids every fetch, so the page cannot reach the
network and a model output that slipped past escaping still could not run (defence
in depth; the browser test checks the escaping).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import altair as alt
import jinja2
from markupsafe import Markup

Spec = dict[str, Any]

# Inside <script>, the HTML parser ends the element at "</script" and changes state at
# "<!--"; escaping every "<", ">" and "&" as JSON \u escapes removes both, and the
# value JSON.parse reads is unchanged. U+2028/U+2029 end lines in older JavaScript
# parsers. (Jinja's own tojson filter sorts keys and leaves U+2028 as it is.)
_SCRIPT_SAFE = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def script_json(value: Any) -> Markup:
    """JSON that is safe verbatim inside a ``<script>`` element (any type attribute)."""
    dumped = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Markup(dumped.translate(_SCRIPT_SAFE))


def static(name: str) -> str:
    """A file of the templates folder as text (our CSS and script)."""
    return resources.files("tokenlens.report").joinpath("templates", name).read_text("utf-8")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The one template environment: autoescape always on, undefined names fail."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tokenlens.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["script_json"] = script_json
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a file name under templates/) with ``context``."""
    return environment().get_template(template).render(**context)


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


def chart_page(
    template: str,
    title: str,
    specs: Mapping[str, Spec],
    signatures: Sequence[str],
    **context: Any,
) -> str:
    """A report page with charts: ``template`` extends ``page.html``, which adds the
    policy, the CSS, the footer of ``signatures``, the specs and the scripts."""
    bundle, embed = vega_bundle(), static("embed.js")
    return render(
        template,
        title=title,
        policy=csp([bundle, embed]),
        css=Markup(static("report.css")),
        specs=dict(specs),
        signatures=list(signatures),
        bundle=Markup(bundle),
        embed_js=Markup(embed),
        **context,
    )
