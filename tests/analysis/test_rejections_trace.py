"""The rejection kinds of the committed real draft-model trace
(reports/full/traces/draft_model-k3: a real trace, so the drafter's later drafts of
each step are known), as ``tokenlens analyze`` reports them in summary.json →
``rejections``, against an independent oracle.

The oracle reads the raw parquet files and the Qwen2.5 vocabulary's token bytes only;
it walks each verification step on its own (pandas groupby, byte strings), sharing no
code with tokenlens.analysis.rejections.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support import REPO
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.pipeline import run_analyze
from tokenlens.text import load_tokenizer

TRACE = REPO / "reports" / "full" / "traces" / "draft_model-k3"

pytestmark = pytest.mark.skipif(not TRACE.is_dir(), reason="reports/full/traces not committed")


def oracle(run: Path) -> Counter[tuple[str, str]]:
    """(language, kind) -> number of rejections, straight from the definition."""
    token = load_tokenizer("qwen2.5").token_bytes
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    lang = dict(zip(requests["request_id"], requests["lang"], strict=True))
    output = dict(zip(requests["request_id"], requests["output_token_ids"], strict=True))
    events = pq.read_table(run / "events.parquet").to_pandas()
    counts: Counter[tuple[str, str]] = Counter()
    for (rid, _), step in events.groupby(["request_id", "step"], sort=False):
        step = step.sort_values("position")
        judged_rejections = step[~step["accepted"] & step["emitted_token_id"].notna()]
        if judged_rejections.empty:
            continue
        row = judged_rejections.iloc[0]
        if row["draft_token_id"] < 0:
            continue  # the rejected draft is hidden: no kind
        d = token[int(row["draft_token_id"])]
        e = token[int(row["emitted_token_id"])]
        if pd.isna(row["output_index"]):
            t, complete = e, False
        else:
            rest = list(output[rid])[int(row["output_index"]) :]
            t = b"".join(token[int(x)] for x in rest)
            complete = len(t) >= len(d)
        later = step[step["position"] > row["position"]]["draft_token_id"].tolist()
        c = d
        for x in later:
            if x < 0:
                break
            c += token[int(x)]
        if len(d) > len(e):
            kind = (
                "merge"
                if t[: len(d)] == d
                else "unknown"
                if not complete and d[: len(t)] == t
                else "text"
            )
        elif len(d) < len(e) and e[: len(d)] == d:
            if c[: len(e)] == e:
                kind = "confirmed"
            elif any(a != b for a, b in zip(c, e, strict=False)):
                kind = "prefix_diverged"
            else:
                kind = "prefix_open"
        else:
            kind = "text"
        counts[(str(lang[rid]), kind)] += 1
    return counts


def test_analyze_reports_the_kinds_of_the_real_trace(tmp_path: Path) -> None:
    run_analyze(AnalyzeConfig(runs=(TRACE,), out=tmp_path / "out", n_boot=50))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text("utf-8"))
    block = summary["rejections"]["runs"][TRACE.name]
    assert block["continuation"] == "known"  # a real trace: the drafter's later drafts
    expected = oracle(TRACE)
    for lang in ("ja", "en"):
        got = {kind: block[kind][lang]["count"] for kind in summary["rejections"]["kinds"]}
        got["unknown"] = block["unknown"][lang]
        want = {kind: expected[(lang, kind)] for kind in got}
        assert got == want, lang
        assert block["rejections"][lang] == sum(want.values())
        # every kind occurs: the trace exercises the whole definition
        assert all(want[kind] > 0 for kind in summary["rejections"]["kinds"])
    family = summary["rejections"]["families"]["trained"]
    assert family["confirmed"] == block["confirmed"]  # one run: the family is that run
