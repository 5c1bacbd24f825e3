"""Replay reproduces the n-gram proposer of the runner a run was traced on, or refuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import REAL_RUN
from tokenlens.errors import TokenlensError
from tokenlens.replay.run import ReplayConfig, run_replay


def test_replay_refuses_n_gram_for_a_run_traced_on_model_runner_v2(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(REAL_RUN, run)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest["engine"] = {"model_runner": "V2"}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    requests = pq.read_table(run / "requests.parquet")  # the run predates prompt ids
    ids = pa.array([[1, 2, 3]] * requests.num_rows, pa.list_(pa.int64()))
    pq.write_table(requests.append_column("prompt_token_ids", ids), run / "requests.parquet")
    config = ReplayConfig(source=run, out=tmp_path / "out", methods=("ngram",), ks=(3,))
    with pytest.raises(TokenlensError, match="traced on vLLM's model runner V2"):
        run_replay(config)
    assert not (tmp_path / "out").exists()
