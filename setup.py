"""Build hook: ship the repository's corpora/ and plans/ inside the wheel.

They stay at the repository root (the README's paths, the tests and the corpus
manifest point there); at build time they are copied to ``tokenlens/data/`` so an
installed tokenlens finds them (``tokenlens.packaged``) with the same relative layout
(a plan's ``../corpora/demo.jsonl`` resolves in both). Everything else is in
pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = {"corpora": ("*.jsonl", "MANIFEST.json"), "plans": ("*.toml",)}


class BuildWithData(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout itself
            return
        for folder, patterns in SHIPPED.items():
            target = Path(self.build_lib) / "tokenlens" / "data" / folder
            target.mkdir(parents=True, exist_ok=True)
            for pattern in patterns:
                for path in sorted((ROOT / folder).glob(pattern)):
                    shutil.copyfile(path, target / path.name)


setup(cmdclass={"build_py": BuildWithData})
