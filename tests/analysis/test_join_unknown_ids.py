"""The join's treatment of unknown draft ids (-1) and of V2 n-gram filler drafts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tokenlens.analysis.join import join_run
from tokenlens.rundir import read_run
from tokenlens.testing import SCENARIOS, simulate_study, write_study


@pytest.fixture(scope="module")
def run_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim")
    study = simulate_study(SCENARIOS["h1_h2"], 4, seed=3)
    return write_study(study, root)[0]


def _rewrite(source: Path, dest: Path, filler_every: int, unknown_every: int) -> pa.Table:
    """A copy of ``source`` whose events mark some rows filler and hide some ids."""
    shutil.copytree(source, dest)
    ev = pq.read_table(dest / "events.parquet")
    n = ev.num_rows
    index = np.arange(n)
    rejected = ~ev.column("accepted").to_numpy(zero_copy_only=False)
    hide = rejected & (index % unknown_every == 0)
    draft = np.where(hide, -1, ev.column("draft_token_id").to_numpy())
    at = ev.schema.get_field_index("draft_token_id")
    ev = ev.set_column(at, "draft_token_id", pa.array(draft))
    filler = pa.array(index % filler_every == 0)
    ev = ev.append_column(pa.field("filler", pa.bool_()), filler)
    pq.write_table(ev, dest / "events.parquet")
    return ev


def test_unknown_ids_are_never_tokens_and_fillers_are_not_judged(
    run_path: Path, tmp_path: Path
) -> None:
    base = join_run(read_run(run_path), "base")
    ev = _rewrite(run_path, tmp_path / "run", filler_every=5, unknown_every=2)
    frame = join_run(read_run(tmp_path / "run"), "run")
    draft = ev.column("draft_token_id").to_numpy()
    filler = ev.column("filler").to_numpy(zero_copy_only=False)
    assert (draft < 0).any() and filler.any()
    assert (frame["draft_known"].to_numpy() == (draft >= 0)).all()
    assert frame.loc[draft < 0, "draft_text"].isna().all()
    assert frame.loc[draft < 0, "draft_target_rank"].isna().all()
    # A hidden id keeps its verdict and the class of the token that came out.
    assert (frame["accepted"].to_numpy() == base["accepted"].to_numpy()).all()
    keep = ~ev.column("filler").to_numpy(zero_copy_only=False)
    # missing classes as one marker (pandas 3 keeps NaN through astype(str); 2 wrote "nan")
    script = frame["script"].astype("string").fillna("<na>")
    base_script = base["script"].astype("string").fillna("<na>")
    assert (script.to_numpy()[keep] == base_script.to_numpy()[keep]).all()
    # Fillers count as rows (vLLM's figures) but not as judged ones.
    judged = frame["judged"].to_numpy()
    assert not judged[filler].any()
    assert (judged[~filler] == base["judged"].to_numpy()[~filler]).all()
    assert len(frame) == len(base) == ev.num_rows


def test_runs_without_the_column_read_as_no_fillers(run_path: Path) -> None:
    run = read_run(run_path)
    assert run.events is not None and "filler" in run.events.column_names
    assert pc.all(pc.is_null(run.events.column("filler"))).as_py()
    frame = join_run(run, "base")
    assert not frame["filler"].any()
