"""Which token classes cover comparable tokens in Japanese and English: the one table.

A Japanese − English difference within a class says "the same kind of token is harder
in Japanese" only where the class holds the same kind of token in both languages. A
label can hold different things per language: in the committed study English `spans`
tokens (one token over several words) are mostly Markdown and code punctuation
(` **`, `**:`, `###`, code fences; accepted about 93% of the time), Japanese `spans`
tokens multi-morpheme words (します, してください, により); English `mixed` tokens are
code identifiers (`.id`, `(path`), Japanese `mixed` tokens kanji+kana words (向け,
以下の). Their JA − EN differences measure what the label covers, not a language
effect.

How it is decided: by reading the tokens each class holds per language in the
committed verdict-grade study (reports/full, trained drafters' judged rows: the most
frequent token strings of each class and language). Words differ across languages by
nature, so the share of token strings both languages have in a class
(:func:`shared_token_share`) is evidence, not the rule: ``same`` (a token that is one
word or morpheme) holds different strings in the two languages but the same kind of
token. Measured there (share of Japanese / English rows whose string the other
language also has): digit 1.00 / 1.00, space 1.00 / 0.97, symbol 0.91 / 0.84, punct
0.37 / 0.85 (、。 against , .: sentence punctuation and Markdown marks in both),
``same`` 0.18 / 0.27, ``inside`` 0.11 / 0.49 (sub-word pieces in both); and for the
classes listed here latin 0.81 / 0.14, mixed 0.17 / 0.40, ``spans`` 0.30 / 0.62,
``crosses`` 0.07 / 0.32. A class whose members differ in kind is listed in
:data:`PER_LANGUAGE` with what each language puts there; the flag is the
``per_language`` column of the token-class table (:mod:`.token_classes`), and every
breakdown reads it through :func:`not_comparable`.

What readers do with it: the declared class contrasts (:mod:`.classes`) show such a
class per language with its reason and no difference (``status: per_language``); the
exploratory search (:mod:`.explore`) leaves it out; the gap's decomposition
(:mod:`.decompose`) counts its rows as out of support, as it does a class only one
language fills. Each contrast also carries the shared-token shares, the evidence a
reader can check the table against.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pandas as pd

from tokenlens.analysis.columns import label_codes, value_codes
from tokenlens.analysis.token_classes import TOKEN_CLASSES
from tokenlens.arrays import Mask

PER_LANGUAGE: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {c.column: c.per_language for c in TOKEN_CLASSES if c.per_language}
)
"""``{column: {class: what each language puts there}}``, from the token-class table
(:data:`tokenlens.analysis.token_classes.TOKEN_CLASSES`, ``per_language``)."""


def not_comparable(column: str | None, label: str) -> str | None:
    """Why class ``label`` of ``column`` is not contrasted across languages, or None
    when it may be."""
    if column is None:
        return None
    return PER_LANGUAGE.get(column, {}).get(label)


def shared_token_share(
    frame: pd.DataFrame, rows: Mask, column: str, label: str
) -> dict[str, float | None]:
    """``{ja, en}``: the share of each language's ``rows`` in class ``label`` whose token
    string also occurs among the other language's rows of the class (None without a
    row): how far the class holds the same tokens in both languages."""
    if "token_text" not in frame or column not in frame:
        return {"ja": None, "en": None}
    mine = rows & (label_codes(frame, column, [label]) == 0)
    lang = label_codes(frame, "lang", ["ja", "en"])
    ja, en = mine & (lang == 0), mine & (lang == 1)
    if not (ja.any() or en.any()):
        return {"ja": None, "en": None}
    # token strings as integer codes: a set lookup per row instead of sorting strings
    text = value_codes(frame, "token_text")
    out: dict[str, float | None] = {}
    for name, own, other in (("ja", ja, en), ("en", en, ja)):
        if not own.any():
            out[name] = None
            continue
        present = np.zeros(int(text.max()) + 1, dtype=bool)
        present[text[other]] = True
        out[name] = float(present[text[own]].mean())
    return out
