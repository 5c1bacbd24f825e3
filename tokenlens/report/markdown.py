"""Markdown files from Jinja2 templates (``templates/*.md``, beside the HTML pages).

Markdown has no escaping a template engine could apply by itself (a backslash rule
per character, another inside code spans and table cells), so these templates render
with autoescape off and the context arrives escaped: every text from a file has gone
through :func:`tokenlens.format.md` or :func:`~tokenlens.format.code`, every number
through :mod:`tokenlens.format`. The template holds the headings, the fixed prose,
the lists and which tables go where; undefined names are errors, as for the pages.

At most one blank line in a row: Markdown gives more no meaning, so a template can
close each optional block with a blank line of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import jinja2

from tokenlens.format import md_table

_BLANK_LINES = re.compile(r"\n{3,}")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table (:func:`tokenlens.format.md_table`), without the blank line after it."""
    return "\n".join(md_table(header, rows)[:-1])


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The Markdown template environment: no autoescape, undefined names fail."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tokenlens.report", "templates"),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["table"] = table
    return env


def render_markdown(template: str, **context: Any) -> str:
    """Render ``template`` (a file name under templates/) with ``context``: at most one
    blank line in a row, one newline at the end."""
    text = environment().get_template(template).render(**context)
    return _BLANK_LINES.sub("\n\n", text).strip("\n") + "\n"
