"""Escaping for untrusted text (model outputs, token texts) on its way into a page.

Generated text can contain anything a model can emit: ``</script>``, ``<!--``, quotes,
U+2028/U+2029 (line terminators for older JavaScript parsers). Each place text enters
the page has its own rule, so each has its own function; nothing is inserted raw.
"""

from __future__ import annotations

import html
import json
from typing import Any

# Inside <script>, the HTML parser ends the element at "</script" and changes state at
# "<!--"; escaping every "<", ">" and "&" as JSON \u escapes removes both, and the
# value JSON.parse/JS reads is unchanged.
_SCRIPT_SAFE = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def text(value: object) -> str:
    """``value`` as HTML element content or a double-quoted attribute value."""
    return html.escape(str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON that is safe verbatim inside a ``<script>`` element (any type attribute)."""
    dumped = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return dumped.translate(_SCRIPT_SAFE)
