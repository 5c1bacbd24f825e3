"""The embedded default models: a real Qwen target/drafter pair built from PyPI packages.

See :mod:`tokenlens.models.embedded` for the registry and :func:`ensure_model`.
"""
