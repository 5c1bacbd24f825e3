"""The text of code that an identity hash should see.

The verdict rules' identity (``rules:`` in every analysis signature) and the test bed's
truth identity both hash source code; both must ignore docstrings and comments, so
that rewording an explanation never changes which results count as comparable. One
function, so the two identities cannot drift apart.

The text must not depend on the Python that reads the code either: ``ast.dump`` does
(3.12 adds ``type_params=[]`` to every function and class, 3.13 leaves empty fields
out), so the same rules hashed differently under 3.11 and 3.12 and an analysis made
under one read as made by other rules under the other. :func:`dump` writes what
Python 3.11's ``ast.dump`` writes, under any Python: the hashes recorded in the
committed studies (made under 3.11) hold. (:func:`tokenlens.capture.source_ast.dump`
solves the same problem for vLLM's fingerprints, in a form of its own that its
recorded fingerprints are made in.)
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
    return dump(tree)


# Fields that later Pythons added to nodes 3.11 already had; left out when empty.
_NEWER_FIELDS = frozenset({"type_params"})


def dump(node: object) -> str:
    """``ast.dump(node)`` as Python 3.11 writes it, under any Python 3.11+.

    3.11's rule: every field by name, except an optional field (one whose class default
    is ``None``) holding ``None``; lists in full, empty ones too.
    """
    if isinstance(node, ast.AST):
        cls = type(node)
        parts = []
        for name in cls._fields:
            value = getattr(node, name, None)
            if name in _NEWER_FIELDS and not value:
                continue
            if value is None and _optional(cls, name):
                continue
            parts.append(f"{name}={dump(value)}")
        return f"{cls.__name__}({', '.join(parts)})"
    if isinstance(node, list):
        return "[" + ", ".join(dump(item) for item in node) + "]"
    return repr(node)


def _optional(cls: type, name: str) -> bool:
    """Whether ``name`` is an optional field of ``cls`` (``expr?`` in Python's ASDL)."""
    types = getattr(cls, "_field_types", None)  # 3.13+: the declared type
    if types is not None and name in types:
        return "None" in repr(types[name]) or "Optional" in repr(types[name])
    return getattr(cls, name, ...) is None
