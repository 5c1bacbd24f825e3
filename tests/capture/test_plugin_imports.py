"""The capture plugin is loaded inside every vLLM process: its import surface stays small.

vLLM imports ``tokenlens.capture.plugin`` (a ``vllm.general_plugins`` entry point) in
the engine core and every worker. It may pull in only plain standard-library modules
of tokenlens (the recorder, the step records, the surface check, the tiers, the engine's plain data
modules), never pandas, pyarrow, numpy or the analysis: checked in a fresh interpreter
after every move of code between modules.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import REPO

ALLOWED = {
    "tokenlens",
    "tokenlens.capture",
    "tokenlens.capture.layout",
    "tokenlens.capture.plugin",
    "tokenlens.capture.recorder",
    "tokenlens.capture.source_ast",
    "tokenlens.capture.step_records",
    "tokenlens.capture.surface",
    "tokenlens.capture.tiers",
    "tokenlens.engine",
    "tokenlens.engine.config",
    "tokenlens.engine.facts",
    "tokenlens.engine.methods",  # the method table (engine.config reads its defaults)
    "tokenlens.engine.vllm_source",
    "tokenlens.errors",
}
HEAVY = ("pandas", "pyarrow", "numpy", "torch", "vllm")


def test_the_plugin_imports_only_what_it_needs() -> None:
    code = (
        "import json, sys; import tokenlens.capture.plugin; "
        "print(json.dumps(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    loaded = set(json.loads(out))
    assert {m for m in loaded if m.startswith("tokenlens")} <= ALLOWED
    assert not [m for m in HEAVY if m in loaded]
