"""The one version table (rig.contract.ngc): its rows agree with the release branches
(rig.runtimes.from_source.releases) and the cores the PyPI wheels bundle, its CuPy wheels and driver floors follow
the CUDA major, every user can import it; `rig matrix --runtimes all` in an NGC image (a fake
/opt/tritonserver through TRITON_HOME) includes the image's own core; `rig doctor` prints the
table's row and warns on an old driver, never failing without a GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT


def test_every_row_agrees_with_the_release_branches_and_the_wheels():
    from rig.runtimes.from_source import releases
    from rig.contract import ngc

    tags = [r.ngc_tag for r in ngc.RELEASES]
    assert tags == sorted(tags) and len(set(tags)) == len(tags)
    for r in ngc.RELEASES:
        if r.triton_version in releases.RELEASES:  # 24.10 on: the source builds' table
            assert releases.RELEASES[r.triton_version] == f"r{r.ngc_tag}", r
        for wheel in r.pytriton:
            assert ngc.PYTRITON_CORE[wheel] == r.triton_version
    assert ngc.by_triton("2.59.1").ngc_tag == "25.07"  # the month without a new minor
    assert ngc.by_tag("26.03").triton_version == "2.67.0" and ngc.by_triton("2.67").ngc_tag == "26.03"
    assert ngc.by_triton("2.51.0").pytriton == ("0.5.13", "0.5.14", "0.6.0", "0.7.0")
    assert ngc.by_tag("nvcr.io/nvidia/tritonserver:25.01-py3").triton_version == "2.54.0"
    assert ngc.by_triton("9.1.0") is None
    with pytest.raises(KeyError):
        ngc.by_tag("19.03")


def test_cuda_cupy_and_driver_floors_follow_nvidias_notes():
    from rig.contract import ngc

    for r in ngc.RELEASES:
        assert r.cupy == f"cupy-cuda{r.cuda_major}x"
        assert r.cuda_major == (13 if r.ngc_tag >= "25.08" else 12), r
        assert r.min_driver >= (580 if r.cuda_major == 13 else 525)
        assert set(r.unconfirmed) <= {"cuda", "ubuntu", "python"}
        assert ("cuda" in r.unconfirmed) == ("." not in r.cuda), r  # no minor given where none was read
        if r.ngc_tag >= "24.12":
            assert (r.ubuntu, r.python) == ("24.04", "3.12")
    assert ngc.by_tag("25.01").min_driver == 570 and ngc.by_tag("25.01").cuda.startswith("12.8")
    assert ngc.by_tag("25.08").min_driver == 580
    assert ngc.driver_floor("12") == 525 and ngc.driver_floor("13.0.2") == 580
    assert ngc.cupy_package("12.8.0.038") == "cupy-cuda12x"
    with pytest.raises(ValueError):
        ngc.cupy_package("10.2.89")
    assert ngc.by_tag(ngc.DEFAULT_TAG) and ngc.BASELINE_TAG < ngc.CANDIDATE_TAG
    assert "cuda" not in ngc.by_tag(ngc.CANDIDATE_TAG).unconfirmed


def test_driver_problem_names_the_floor_and_is_silent_when_unknown():
    from rig.contract import ngc

    row = ngc.by_tag("26.06")
    assert ngc.driver_problem(row, "580.65.06") is None
    assert ngc.driver_problem(row, None) is None and ngc.driver_problem(row, "") is None
    problem = ngc.driver_problem(row, "570.124.06")
    assert "570.124.06" in problem and "580" in problem and "26.06" in problem


def test_the_table_runs_without_the_rig_installed_stdlib_only():
    """As the image's build asks it, before `pip install .`: a bare python3 -S with the checkout on its path."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from rig.contract import ngc; "
            "sys.exit(ngc.main(['cupy', '--tag', '26.03']))")
    r = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.strip()) == (0, "cupy-cuda13x"), r.stderr
    r = subprocess.run([sys.executable, "-m", "rig.contract.ngc", "table"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert r.returncode == 0 and "| 26.03 | r26.03 | 2.67.0 | - | build 2.67.0 |" in r.stdout
    # one row joins every name of a core, and the command that works for it says the Triton version
    assert "| 24.07 | r24.07 | 2.48.0 | 0.5.10 | install 2.48.0 |" in r.stdout
    assert "| 24.10 | r24.10 | 2.51.0 | 0.5.13, 0.5.14, 0.6.0, 0.7.0 | install 2.51.0, build 2.51.0 |" in r.stdout


def test_the_runtimes_guide_holds_the_table():
    from rig.contract import ngc

    assert ngc.markdown() in (ROOT / "docs" / "guide" / "runtimes.md").read_text()


def _fake_container(tmp_path, version: str = "2.70.0"):
    home = tmp_path / "opt" / "tritonserver"
    (home / "lib").mkdir(parents=True)
    (home / "backends" / "python").mkdir(parents=True)
    (home / "lib" / "libtritonserver.so").write_bytes(b"")
    (home / "TRITON_VERSION").write_text(version + "\n")
    return home


def test_runtimes_all_in_an_ngc_image_includes_its_own_core(tmp_path, monkeypatch):
    from rig.workflows.matrix_plan import local_runtimes, parse_runtimes
    from rig.parent import runtime

    monkeypatch.setenv("RIG_HOME", str(tmp_path / "home"))  # nothing installed or built here
    monkeypatch.delenv("TRITON_HOME", raising=False)
    if runtime.container_home() is None:  # not in an image: no container core
        installed, container = local_runtimes()
        assert (installed, container) == ([], False)
        assert "container" not in parse_runtimes("all", installed, runtime.PYTRITON_CORE, container=container)
    monkeypatch.setenv("TRITON_HOME", str(_fake_container(tmp_path)))
    installed, container = local_runtimes()
    assert container is True and runtime.container_runtime().triton_version == "2.70.0"
    specs = parse_runtimes("all", installed, runtime.PYTRITON_CORE, container=container)
    assert specs[-1] == "container" and specs.count("container") == 1
    assert "0.7.0" in specs  # the embedded cores still
    assert parse_runtimes("installed", installed, runtime.PYTRITON_CORE, container=container) == ["container"]
    assert parse_runtimes("all,container", [], runtime.PYTRITON_CORE, container=True).count("container") == 1


def test_doctor_prints_the_row_of_the_containers_triton_and_warns_on_an_old_driver():
    from rig.workflows import doctor

    lines = doctor.version_lines("2.70.0", "570.124.06")
    assert lines[0].startswith("versions    this image: NGC 26.06: Triton 2.70.0")
    assert lines[1] == "driver      570.124.06"
    assert lines[2].startswith("warning     driver 570.124.06 is older than the 580")
    assert not any(line.startswith("warning") for line in doctor.version_lines("2.70.0", "580.65.06"))
    assert "not in the version table" in doctor.version_lines("2.99.0", None)[0]
    pair = doctor.version_lines(None, None)
    assert [line.split("NGC ")[1][:5] for line in pair] == ["26.03", "26.06"]


class _NoGpu:
    available = False


class _Gpu:
    available = True


class _Nvml:
    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def nvmlSystemGetDriverVersion(self):
        if self.error:
            raise self.error
        return self.value


def test_doctor_reads_the_driver_from_nvml_and_never_raises():
    from rig.workflows import doctor

    assert doctor.driver_version(_NoGpu(), _Nvml("580.65.06")) is None
    assert doctor.driver_version(_Gpu(), _Nvml(b"580.65.06")) == "580.65.06"
    assert doctor.driver_version(_Gpu(), _Nvml(error=RuntimeError("NVML_ERROR_NOT_SUPPORTED"))) is None


def test_doctor_runs_without_a_gpu_and_says_the_versions(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rig", "doctor"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "versions    " in r.stdout


def test_every_release_branch_named_with_a_version_names_the_right_one():
    """"core#483 in r26.05 (2.69.0)": a branch written beside a Triton version, in the scenarios'
    fixes and the guide, is that version's branch (r26.05 is 2.69.0; 25.07 was 2.59.1)."""
    import re

    from rig.runtimes.from_source.releases import RELEASES

    texts = [(ROOT / "rig" / "scenarios" / "catalog.py").read_text(),
             *(p.read_text() for p in (ROOT / "docs" / "guide").glob("*.md"))]
    pairs = [(b, v) for t in texts
             for b, v in re.findall(r"(r2[4-6]\.\d\d)(?: \(|[,;:] (?:Triton )?)(2\.\d+\.\d+)", t)]
    assert len(pairs) >= 10
    assert [(b, v) for b, v in pairs if RELEASES.get(v) != b] == []
