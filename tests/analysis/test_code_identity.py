"""The text that identity hashes see does not depend on the Python that reads the code.

``rules:`` in every analysis signature hashes the verdict rules' code; under Python 3.12
``ast.dump`` added ``type_params=[]`` to every function, so the same rules signed
differently (found by the fast suite under scripts/test_newest.sh with Python 3.12: the
committed demo's FINDINGS named another rules hash).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tokenlens.analysis.code_identity import code_text, dump

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tokenlens"
# Loads code_identity.py by path (it imports only ast) and hashes every package file.
DIGEST = """
import hashlib, importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("ci", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
h = hashlib.sha256()
for f in sorted(Path(sys.argv[2]).rglob("*.py")):
    h.update(m.code_text(f.read_text(encoding="utf-8")).encode())
print(h.hexdigest())
"""


def digest(python: str) -> str:
    out = subprocess.run(
        [python, "-c", DIGEST, str(PACKAGE / "analysis" / "code_identity.py"), str(PACKAGE)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return out.stdout.strip()


def pythons() -> dict[str, str]:
    """Python 3.11+ interpreters that run here: on PATH, or pyenv's (its shims may refuse)."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(11, 16)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(p) for p in sorted(pyenv.glob("3.1[1-9]*/bin/python3"))]
    found: dict[str, str] = {}
    for python in filter(None, candidates):
        try:
            out = subprocess.run(
                [python, "-c", "import sys; print(*sys.version_info[:2])"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        except OSError:
            continue
        if out.returncode == 0:
            found.setdefault(out.stdout.strip(), python)
    return found


def test_every_python_found_gives_the_same_text() -> None:
    found = pythons()
    if len(found) < 2:
        pytest.skip(f"fewer than two Python versions here: {found}")
    digests = {version: digest(python) for version, python in found.items()}
    assert len(set(digests.values())) == 1, digests


def test_the_text_is_what_python_3_11_ast_dump_writes() -> None:
    """The committed studies' rules hashes were made from 3.11's ast.dump: they hold."""
    source = (PACKAGE / "analysis" / "rules.py").read_text(encoding="utf-8")
    text = code_text(source)
    assert "type_params" not in text and text.startswith("Module(body=[")
    tree = ast.parse("def f(x: int = 1) -> None:\n    return None\n")
    assert dump(tree) == (
        "Module(body=[FunctionDef(name='f', args=arguments(posonlyargs=[], "
        "args=[arg(arg='x', annotation=Name(id='int', ctx=Load()))], kwonlyargs=[], "
        "kw_defaults=[], defaults=[Constant(value=1)]), body=[Return(value=Constant("
        "value=None))], decorator_list=[], returns=Constant(value=None))], type_ignores=[])"
    )
