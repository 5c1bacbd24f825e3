"""The surface fingerprint is the same whichever Python computes it (no vLLM needed).

It used to hash ``ast.dump``, whose text changes with Python (3.12 adds
``type_params=[]`` to every function, 3.13 leaves empty fields out), so the H200's
Python 3.12 read a recorded release as ``untested``.
"""

from __future__ import annotations

import ast
import glob
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.support import REPO
from tokenlens.capture import source_ast

SOURCE = textwrap.dedent(
    """
    class Scheduler:
        def update_from_output(self, scheduler_output, model_runner_output):
            for req_id in model_runner_output.req_ids:
                self.make_spec_decoding_stats(None, 3, 2, 0, request_id=req_id)
    """
)
# Written by hand from the rule (empty fields left out), not copied from a run.
EXPECTED = (
    "Module(body=[ClassDef(name='Scheduler', body=[FunctionDef(name='update_from_output', "
    "args=arguments(args=[arg(arg='self'), arg(arg='scheduler_output'), "
    "arg(arg='model_runner_output')]), body=[For(target=Name(id='req_id', ctx=Store()), "
    "iter=Attribute(value=Name(id='model_runner_output', ctx=Load()), attr='req_ids', "
    "ctx=Load()), body=[Expr(value=Call(func=Attribute(value=Name(id='self', ctx=Load()), "
    "attr='make_spec_decoding_stats', ctx=Load()), args=[Constant(value=None), "
    "Constant(value=3), Constant(value=2), Constant(value=0)], "
    "keywords=[keyword(arg='request_id', value=Name(id='req_id', ctx=Load()))]))])])])])"
)


def test_the_structure_leaves_empty_fields_out() -> None:
    assert source_ast.dump(ast.parse(SOURCE)) == EXPECTED


def _other_pythons() -> list[str]:
    found = {shutil.which(f"python3.{minor}") for minor in range(11, 15)}
    found.update(glob.glob("/root/.pyenv/versions/3.1[1-4]*/bin/python3.1?"))
    # pyenv's shims answer only for the versions pyenv has selected: use the real ones
    return sorted(p for p in found if p and "/shims/" not in p and p != sys.executable)


@pytest.mark.parametrize("python", _other_pythons() or [pytest.param(None, id="none")])
def test_other_pythons_compute_the_same_structure(python: str | None) -> None:
    if python is None:
        pytest.skip("no other Python 3.11-3.14 on this machine")
    code = (
        "import ast, sys; sys.path.insert(0, sys.argv[1]); "
        "from tokenlens.capture import source_ast; "
        "print(source_ast.dump(ast.parse(sys.stdin.read())))"
    )
    out = subprocess.run(
        [python, "-c", code, str(REPO)], input=SOURCE, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == EXPECTED
