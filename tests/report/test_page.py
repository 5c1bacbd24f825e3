"""The written page: self-contained, one bundle, specs intact, text escaped."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path

import pytest

from tests.support import PAYLOADS, REPO, parse_page
from tokenlens.analysis.summary_file import parse_summary
from tokenlens.errors import TokenlensError
from tokenlens.report import write_analyze_report
from tokenlens.report.charts import all_charts
from tokenlens.report.export import MAIN_CHARTS
from tokenlens.report.html import script_json, vega_bundle
from tokenlens.report.tokenview import Token, hover

SPECS = re.compile(r'<script type="application/json" id="tl-specs">(.*?)</script>', re.S)


def _specs(html: str) -> str:
    found = SPECS.search(html)
    assert found is not None
    return found[1]


@pytest.fixture(scope="module")
def report(analysis: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_analyze_report(analysis, tmp_path_factory.mktemp("rep") / "report.html")


def test_page_is_self_contained_with_one_bundle(report: Path, analysis: Path) -> None:
    html = report.read_text("utf-8")
    assert html.count("window.vegaEmbed=") == 1  # the bundle, inlined once
    assert html.count("</script>") == 3  # specs JSON, bundle, our embed script
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing remote
    meta = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    assert meta is not None
    policy = unescape(meta[1])
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    summary = json.loads((analysis / "summary.json").read_text("utf-8"))
    specs = all_charts(parse_summary(summary))
    assert json.loads(_specs(html)) == json.loads(json.dumps(specs))
    for chart_id in specs:
        assert f'id="chart-{chart_id}"' in html
    footer = html[html.index("<footer>") :]
    assert summary["signature"] in footer
    assert all(run["signature"] in footer for run in summary["runs"])


def test_main_charts_exported(report: Path, analysis: Path) -> None:
    summary = json.loads((analysis / "summary.json").read_text("utf-8"))
    for chart_id in MAIN_CHARTS:
        if chart_id == "domains" and not summary.get("domains"):
            continue  # analysed without --prompts: no domains, no chart
        assert (report.parent / "charts" / f"{chart_id}.svg").read_text("utf-8").startswith("<svg")
        png = (report.parent / "charts" / f"{chart_id}.png").read_bytes()
        assert png.startswith(b"\x89PNG")


def test_token_view_states_from_the_events(report: Path) -> None:
    html = report.read_text("utf-8")
    view = html[html.index('<div id="token-view">') :]
    assert view.count('class="request"') >= 2 and 'class="pair"' in view
    for state in ("accepted", "rejected", "plain"):
        assert f'class="t {state}"' in view
    assert re.search(r'class="t accepted" data-pos="\d+" title="step \d+, draft position', view)


def _without_runs(analysis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the analysis whose run directories are gone, rendered where loading a
    tokenizer fails: the report must need neither."""
    moved = tmp_path / "ana"
    shutil.copytree(analysis, moved)
    summary = json.loads((moved / "summary.json").read_text("utf-8"))
    for run in summary["runs"]:
        run["path"] = str(tmp_path / "gone" / run["label"])
    (moved / "summary.json").write_text(json.dumps(summary), "utf-8")

    def no_tokenizer(*args: object, **kwargs: object) -> None:
        raise AssertionError("the report loaded a tokenizer")

    import tokenlens.text
    import tokenlens.text.tokenizers

    monkeypatch.setattr(tokenlens.text, "load_tokenizer", no_tokenizer)
    monkeypatch.setattr(tokenlens.text.tokenizers, "load_tokenizer", no_tokenizer)
    return moved


def _view(analysis_dir: Path) -> str:
    html = write_analyze_report(analysis_dir).read_text("utf-8")
    return html[html.index('<div id="token-view">') :]


def test_token_view_texts_come_from_the_analysis(
    analysis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """outputs.parquet holds every output token: the bonus tokens show without the run."""
    view = _view(_without_runs(analysis, tmp_path, monkeypatch))
    assert 'class="t plain"' in view and 'class="t accepted"' in view
    assert 'class="t gap"' not in view


def test_analysis_without_outputs_file_shows_judged_tokens_only(
    analysis: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An analysis written before outputs.parquet existed still renders."""
    old = _without_runs(analysis, tmp_path, monkeypatch)
    (old / "outputs.parquet").unlink()
    view = _view(old)
    assert 'class="t plain"' not in view and 'class="t accepted"' in view
    assert 'class="t gap"' in view  # the bonus tokens, whose text only outputs.parquet has
    assert "written before outputs.parquet existed" in view


def test_missing_summary_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(TokenlensError, match=r"summary\.json: not found"):
        write_analyze_report(tmp_path)


def test_script_json_cannot_close_or_confuse_a_script_element() -> None:
    dumped = script_json({"k": list(PAYLOADS)})
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in dumped
    assert json.loads(dumped) == {"k": list(PAYLOADS)}


def test_hover_names_draft_emitted_and_confidence() -> None:
    token = Token("x", "rejected", 3, 1, "foo", " bar", 0.81, 0.25)
    text = hover(token)
    assert "step 3, draft position 1: rejected" in text
    assert 'draft: "foo"' in text and 'emitted: " bar"' in text
    assert "top-1 probability: 0.810" in text and "emitted token: 0.250" in text


def test_poisoned_outputs_are_escaped_everywhere(poisoned: Path) -> None:
    html = write_analyze_report(poisoned).read_text("utf-8")
    assert html.count("</script>") == 3
    html = html.replace(vega_bundle(), "")  # the library's own code mentions <img
    assert "<img" not in html and "<b id=pwn" not in html and "</textarea>" not in html
    assert "<!--" not in html
    tags, text = parse_page(html)
    assert [t for t, _ in tags if t in ("img", "b", "textarea")] == []
    assert [t for t, _ in tags].count("script") == 3
    view = text[text.index("Hover a token") :]
    for payload in PAYLOADS:  # shown as text: in the token view and the evidence
        assert payload in view and payload in text[: text.index("Hover a token")]
    specs = _specs(html)
    assert "\u2028" not in specs
    groups = [row["group"] for row in json.loads(specs)["by_pos"]["data"]["values"]]
    assert PAYLOADS[1] in groups  # survived the trip through the JSON intact


def test_templates_ship_as_package_data() -> None:
    """Every file of the templates folder matches a package-data pattern, so a wheel
    carries it (a page would fail to render without its template)."""
    import fnmatch
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["tokenlens.report"]
    folder = REPO / "tokenlens" / "report" / "templates"
    files = [p.relative_to(folder.parent).as_posix() for p in folder.iterdir()]
    assert files and all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)


def test_runs_analysed_despite_problems_are_flagged_at_the_top(
    analysis: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "ana"
    shutil.copytree(analysis, moved)
    summary = json.loads((moved / "summary.json").read_text("utf-8"))
    clean = write_analyze_report(moved, tmp_path / "clean.html").read_text("utf-8")
    assert 'id="input-warnings"' not in clean
    summary["inputs"] = {"warnings": ["run x is partial: analysed with --allow-partial"]}
    summary["runs"][1]["replayed"] = True
    (moved / "summary.json").write_text(json.dumps(summary), "utf-8")
    html = write_analyze_report(moved, tmp_path / "flagged.html").read_text("utf-8")
    banner = html[html.index('id="input-warnings"') : html.index("<h2>Hypotheses")]
    assert "run x is partial: analysed with --allow-partial" in banner
    assert html.index('id="input-warnings"') < html.index("<table")  # before every figure
    assert "replayed (counts derived from the events)" in html
