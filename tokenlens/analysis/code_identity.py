"""The text of code that an identity hash should see.

The verdict rules' identity (``rules:`` in every analysis signature) and the test bed's
truth identity both hash source code; both must ignore docstrings and comments, so
that rewording an explanation never changes which results count as comparable. One
function, so the two identities cannot drift apart.
"""

from __future__ import annotations

import ast


def code_text(source: str) -> str:
    """The structure of ``source`` without its docstrings (``ast.dump``): what a hash of
    code should see, so that rewording a docstring changes no identity."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
    return ast.dump(tree)
