"""bench/scale-out in CI, with short phases: three daemons behind nginx
under inferd-bench load, each phase ending after a number of answers (not
seconds); SIGTERM to one must cost no request, SIGKILL to
another at most the requests it had in flight (the script checks both and
exits 1 otherwise; its figures are read back here too)."""
import json
import os
import subprocess

from conftest import BIN, MODELS, ROOT


def test_scale_out_sigterm_loses_nothing_sigkill_only_in_flight(tmp_path):
    bench = os.environ.get("INFERD_BENCH_BIN", os.path.join(ROOT, "build", "inferd-bench"))
    out = tmp_path / "scale-out.json"
    env = dict(os.environ, INFERD_BIN=BIN, INFERD_BENCH_BIN=bench, INFERD_MODELS=MODELS)
    # phases end on answers, not seconds: a busy machine only makes it slower
    r = subprocess.run([os.path.join(ROOT, "bench", "scale-out"), "--phase-answers", "4",
                        "--phase-timeout", "300", "--concurrency", "4", "--json", str(out)],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    f = json.loads(out.read_text())
    assert f["phases"][0]["failed"] == 0 and f["phases"][1]["failed"] == 0, f
    assert f["phases"][2]["failed"] <= f["in_flight_on_killed"], f
    assert f["d1_exit"] == 0
    assert all(p["answered"] > 0 for p in f["phases"]), f
    assert all(v > 0 for v in f["served"].values()), f
