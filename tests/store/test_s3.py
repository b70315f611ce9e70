"""Results in object storage, end to end: real soaks written to a real S3-compatible server that the
module starts on loopback (moto's server mode), read back, reported, gated, checked, compacted, and
one soak killed with SIGKILL in the middle of an upload and resumed.

Runs (all the numpy template, a 1-second steady workload):
- ``a``: 2 cycles to ``s3://bkt/a`` with its credentials in the URI (none in the environment);
- ``local``: the same 2 cycles to a local folder;
- ``k``: 2 cycles with ``--retain last-response`` (``exit_timeout`` cycles) to ``s3://bkt/a`` with
  credentials from the environment, killed while it uploads cycle 2's windows, compacted with
  ``rig compact --run``, then resumed.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import threading

import pytest

from helpers import ROOT, rig, spawn

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-7f3a9c"  # the URI's secret key: must appear nowhere the rig writes or prints
SOAK = ("soak", "--cycles", "2", "--workload", "steady", "--users", "1", "--workload-seconds", "1")
DETERMINISTIC = ["cycle", "engine", "model", "retain", "outcome", "restart", "stop_strategy", "finalize_expected",
                 "finalize_before_stop", "finalize_errors", "stubs_killed", "shm_regions_leaked", "errors",
                 "outputs_ok", "bad_outputs", "lane", "schema_version", "triton_version"]


class _Server:
    """moto's S3 server (werkzeug, as ``moto.server.ThreadedMotoServer`` runs it) on 127.0.0.1 in a
    thread, with one hook: the process ``kill_pid`` is sent SIGKILL when a PUT of an object whose
    path matches ``kill_key`` arrives, before the server answers it."""

    def __init__(self):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        self.kill_pid, self.kill_key, self.hit = None, None, None
        app = DomainDispatcherApplication(create_backend_app)

        def hooked(environ, start_response):
            path, query = environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
            if environ["REQUEST_METHOD"] == "PUT" and self.kill_pid and re.search(self.kill_key, path):
                os.kill(self.kill_pid, signal.SIGKILL)
                self.hit, self.kill_pid = (path, query), None
            return app(environ, start_response)

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.httpd = make_server("127.0.0.1", 0, hooked, threaded=True, request_handler=MotoRequestHandler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.thread.join(10)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The server, a bucket ``bkt``, and how to reach it: ``{"port", "uri"(prefix, creds), "env"}``."""
    try:
        import boto3

        srv = _Server()
        port = srv.port
    except Exception as e:  # noqa: BLE001 - moto missing or the loopback port refused
        print(f"skipping: no S3-compatible server could start on loopback ({type(e).__name__}: {e})")
        pytest.skip(f"no S3-compatible server could start on loopback ({type(e).__name__}: {e})")
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="rigkey", aws_secret_access_key=SECRET)
    client.create_bucket(Bucket="bkt")
    tmp = tmp_path_factory.mktemp("s3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYTHONPATH=str(ROOT), AWS_EC2_METADATA_DISABLED="true", RIG_WORK_DIR=str(tmp / "work"),
               AWS_CONFIG_FILE=str(tmp / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"))
    query = f"endpoint_override={endpoint}&region=us-east-1"
    yield {"server": srv, "client": client, "tmp": tmp, "env": env,
           "uri": lambda prefix, creds=True: (f"s3://rigkey:{SECRET}@bkt/{prefix}?{query}" if creds
                                             else f"s3://bkt/{prefix}?{query}"),
           "key_env": {**env, "AWS_ACCESS_KEY_ID": "rigkey", "AWS_SECRET_ACCESS_KEY": SECRET}}
    srv.stop()


def _rig(env: dict, *args: str) -> subprocess.CompletedProcess:
    """The rig with this module's environment (no AWS_ variable but those ``env`` sets)."""
    return rig(*args, env=env, inherit_env=False, timeout=240)


def _run_id(text: str) -> str:
    return re.search(r"^run (\S+):", text, re.M).group(1)


@pytest.fixture(scope="module")
def runs(s3):
    """Soak ``a`` to S3 (URI credentials) and the same soak to a local folder."""
    a = _rig(s3["env"], *SOAK, "--results", s3["uri"]("a"))
    assert a.returncode == 0, a.stdout + a.stderr
    local = s3["tmp"] / "local"
    b = _rig(s3["env"], *SOAK, "--results", str(local))
    assert b.returncode == 0, b.stdout + b.stderr
    return {"a": _run_id(a.stdout), "a_out": a.stdout + a.stderr, "local": local}


def test_a_soak_to_s3_reads_back_like_the_same_soak_in_a_folder(s3, runs):
    from rig.store import Store

    remote, local = Store(s3["uri"]("a")), Store(runs["local"])
    for table in ("runs", "cycles", "windows"):
        r, l_ = remote.read(table, runs["a"]), local.read(table)
        assert list(r.columns) == list(l_.columns) and list(r.dtypes) == list(l_.dtypes), table
        assert len(r) == len(l_) > 0, table
    rc, lc = remote.read("cycles", runs["a"]), local.read("cycles")
    assert rc[DETERMINISTIC].equals(lc[DETERMINISTIC])
    assert list(rc.outcome) == ["clean", "clean"]
    keys = ["cycle", "window", "tool", "mode", "concurrency", "errors", "bad_outputs", "lane", "instances"]
    assert remote.read("windows", runs["a"])[keys].equals(local.read("windows")[keys])
    rr, lr = remote.read("runs", runs["a"]).iloc[0], local.read("runs").iloc[0]
    same = ("command", "engine", "runtime", "model", "rig_version", "python_version", "schema_version")
    assert [rr[k] for k in same] == [lr[k] for k in same]

    def strip(cfg):
        return [x for x in cfg.splitlines() if not x.startswith("results")]

    assert strip(rr.config) == strip(lr.config)
    # both compacted at the end of the soak: one merged object per table and partition, nothing else
    def names(store, rid):
        return sorted(f.rsplit("/", 1)[-1].replace(rid, "RUN") for t in ("runs", "cycles", "windows")
                      for f in store.files(t, run_id=rid))

    assert names(remote, runs["a"]) == names(local, local.read("runs").run_id[0]) == ["RUN-merged.parquet"] * 3


def test_credentials_of_the_uri_are_never_printed_or_stored(s3, runs):
    assert SECRET not in runs["a_out"] and "s3://rigkey:***@bkt/a" in runs["a_out"]
    for obj in s3["client"].list_objects_v2(Bucket="bkt", Prefix="a/")["Contents"]:
        assert SECRET.encode() not in s3["client"].get_object(Bucket="bkt", Key=obj["Key"])["Body"].read(), obj["Key"]
    work = s3["tmp"] / "work" / runs["a"]
    assert (work / "logs").is_dir()  # the work folder is local where the results are remote
    for f in (p for p in work.rglob("*") if p.is_file()):
        assert SECRET.encode() not in f.read_bytes(), f
    keys = [o["Key"] for o in s3["client"].list_objects_v2(Bucket="bkt")["Contents"]]
    assert not any("/_work/" in k for k in keys)


def _objects(client, prefix: str) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket="bkt", Prefix=prefix).get("Contents", [])]


def _whole(client, key: str) -> bool:
    """Whether the object is a whole file: a Parquet file that reads, or a plot that is a PNG."""
    import io

    import pyarrow.parquet as pq

    body = client.get_object(Bucket="bkt", Key=key)["Body"].read()
    if key.endswith("/"):  # pyarrow's marker of a folder emptied by a delete (compaction)
        return body == b""
    if key.endswith(".parquet"):
        try:
            return pq.read_table(io.BytesIO(body)).num_rows > 0
        except Exception:  # noqa: BLE001 - anything unreadable is what this looks for
            return False
    return "/plots/" in key and body[:4] == b"\x89PNG"


@pytest.fixture(scope="module")
def killed(s3, runs):
    """Soak ``k`` to ``s3://bkt/a``: killed with SIGKILL while it uploads cycle 2's windows, what the
    bucket then held, then ``rig compact --run`` (a killed run has ended), then ``--resume``."""
    from rig.store import Store

    srv, client = s3["server"], s3["client"]
    uri = s3["uri"]("a", creds=False)
    proc = spawn(*SOAK, "--retain", "last-response", "--exit-timeout", "1", "--results", uri,
                 env=s3["key_env"], inherit_env=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    srv.kill_key, srv.kill_pid = r"^/bkt/a/windows/.*-c000002\.parquet$", proc.pid
    out, _ = proc.communicate(timeout=180)
    srv.kill_pid = None
    run = _run_id(out)
    keys = _objects(client, "a/")
    found = {"run": run, "uri": uri, "rc": proc.returncode, "out": out, "hit": srv.hit, "keys": keys,
             "whole": {k: _whole(client, k) for k in keys}, "done": Store(uri).cycles_done(run),
             "uploads": [u["Key"] for u in client.list_multipart_uploads(Bucket="bkt").get("Uploads", [])]}
    found["compact"] = _rig(s3["key_env"], "compact", uri, "--run", run)
    found["after_compact"] = _objects(client, "a/")
    found["resume"] = _rig(s3["key_env"], "soak", "--resume", run, "--results", uri)
    return found


def test_a_soak_killed_mid_upload_leaves_no_partial_object_and_resumes(s3, killed):
    from rig.store import Store

    run = killed["run"]
    assert killed["rc"] == -signal.SIGKILL and killed["hit"], killed["out"]
    mine = [k for k in killed["keys"] if run in k]
    # cycle 1 is stored; cycle 2's windows were on their way and are absent, not cut short
    assert any("/cycles/" in k and k.endswith(f"{run}-c000001.parquet") for k in mine), mine
    assert not any(k.endswith("-c000002.parquet") for k in mine), mine
    if "uploadId" in killed["hit"][1]:  # a multipart upload: begun, never completed, invisible
        assert any(k.endswith(f"{run}-c000002.parquet") for k in killed["uploads"]), killed["uploads"]
    assert all(killed["whole"].values()), killed["whole"]  # every object in the bucket is whole
    assert killed["done"] == {1}
    # a killed run has ended: compacted over S3 with --run (the merged object, then the units removed)
    p = killed["compact"]
    assert p.returncode == 0 and "compacted 1 run(s)" in p.stdout, p.stdout + p.stderr
    assert sorted(k.rsplit("/", 1)[-1] for k in killed["after_compact"] if run in k) == [f"{run}-merged.parquet"] * 4  # runs, cycles, windows, memory
    # --resume finds the run's local work folder again and finishes the run (exit 1: exit_timeout)
    p = killed["resume"]
    assert p.returncode == 1 and "resuming: 1 cycle(s) stored, 1 to go" in p.stdout, p.stdout + p.stderr
    assert (s3["tmp"] / "work" / run / "spec-0001.json").exists()
    store = Store(killed["uri"])
    cycles = store.read("cycles", run)
    assert sorted(cycles.cycle) == [1, 2] and set(cycles.outcome) == {"exit_timeout"}
    assert sorted(store.read("windows", run).cycle.unique()) == [1, 2]
    assert sorted(k.rsplit("/", 1)[-1] for k in _objects(s3["client"], "a/") if run in k and "/plots/" not in k) \
        == [f"{run}-merged.parquet"] * 4


def test_report_gate_and_check_over_the_uri_answer_as_over_a_folder(s3, runs, killed):
    import pyarrow.fs as pafs

    from rig.store import Store

    uri, env = killed["uri"], s3["key_env"]
    mirror = s3["tmp"] / "mirror"
    store = Store(uri)
    pafs.copy_files(store.base, str(mirror), source_filesystem=store.fs, destination_filesystem=pafs.LocalFileSystem())
    a, k = runs["a"], killed["run"]
    for where in (s3["uri"]("a"), str(mirror)):  # the URI with its credentials: none may reach the page
        out = s3["tmp"] / f"report-{'s3' if '://' in where else 'dir'}.html"
        p = _rig(env, "report", where, "--out", str(out))
        assert p.returncode == 0, p.stdout + p.stderr
        assert SECRET not in out.read_text() + p.stdout + p.stderr
        gates = [_rig(env, "gate", where, "-a", x, "-b", y).returncode for x, y in ((a, k), (k, a))]
        assert gates == [1, 0], (where, gates)  # k's exit_timeout cycles are new to a: a regression
        assert _rig(env, "check", where).returncode == 0
    # a cut-short object: check names it (exit 1) and moves it aside within the bucket
    s3["client"].put_object(Bucket="bkt", Key="a/cycles/triton_version=2.51.0/date=2026-01-01/x-c000001.parquet",
                            Body=b"PAR1" + b"\0" * 40)
    p = _rig(env, "check", uri)
    assert p.returncode == 1 and "x-c000001.parquet: not a whole Parquet file" in p.stdout, p.stdout + p.stderr
    p = _rig(env, "check", uri, "--move-aside", s3["uri"]("aside", creds=False))
    assert p.returncode == 1 and "moved to bkt/aside/cycles/" in p.stdout, p.stdout + p.stderr
    assert _rig(env, "check", uri).returncode == 0
    # no locks on S3: compacting every run of a URI is refused (exit 2), --run is the way
    p = _rig(env, "compact", uri)
    assert p.returncode == 2 and "give --run RUN_ID" in p.stderr
