"""The benchmark harness runs (shortest settings) and writes valid JSON. No timing asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.ray
def test_weight_sync_benchmark_writes_json(tmp_path):
    # RLKIT_BENCH_RESULTS sends the output to tmp_path: the committed full-run JSON is untouched
    committed = ROOT / "benchmarks" / "results" / "weight_sync.json"
    before = committed.read_bytes() if committed.exists() else None
    subprocess.run([sys.executable, "-m", "benchmarks.weight_sync", "--repeats", "3"],
                   cwd=ROOT, check=True, timeout=300, capture_output=True,
                   env={**os.environ, "RLKIT_BENCH_RESULTS": str(tmp_path)})
    data = json.loads((tmp_path / "weight_sync.json").read_text())
    assert data["machine"]["logical_cores"] >= 1
    assert set(data["results"]) == {"dqn q-network 256x256", "sac actor 256x256",
                                    "dqn q-network 128x128 (notebooks 01-02)",
                                    "sac actor 128x128 (notebook 03)"}
    for entry in data["results"].values():
        assert entry["bytes"] > 0 and entry["total_ms_median"] > 0
        assert entry["blocking_total_ms_median"] > 0
    assert (committed.read_bytes() if committed.exists() else None) == before
