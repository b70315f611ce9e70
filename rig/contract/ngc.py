"""One table of Triton's versions: NGC tag, Triton version, the nvidia-pytriton wheels that bundle
that core, the image's Ubuntu and Python, its CUDA, the CuPy wheel built for that CUDA and the
oldest NVIDIA driver it runs on (data and pure functions; stdlib only, so that the image's build
can ask it before the rig is installed: ``python3 -m rig.contract.ngc cupy --tag 26.06``).

Sources, read 2026 (docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html,
and the Deep Learning Frameworks Support Matrix they point to):

- Triton ``2.N.0`` ships as NGC ``YY.MM``, one minor a month (24.10 = 2.51.0, 25.02 = 2.55.0,
  26.03 = 2.67.0, 26.07 = 2.71.0: the release branches' TRITON_VERSION files, ``rig.runtimes.from_source.releases``);
  25.07 shipped no new minor but 2.59.1.
- CUDA per image, where a release note was read: 23.07 12.1.1, 23.08 12.2.1, 23.12 and 24.01 12.3.2,
  24.03 12.4.0, 24.04 and 24.05 12.4, 24.07 12.5.1, 24.10 12.6.2, 24.12 12.6.3, 25.01 and 25.02
  12.8.0, 25.03 12.8.1, 25.04 12.9.0, 25.06 12.9.1, 25.08 13.0.0, 25.10 13.0.2, 25.12 13.1.0, 26.02
  13.1.1, 26.04 13.2.1, 26.06 13.3.0. Every other row gives the CUDA major only (``"12"``, ``"13"``),
  from the neighbours on both sides and the switch to CUDA 13 at 25.08: not confirmed, and marked
  so in the row (``unconfirmed``).
- The driver floor: the CUDA toolkit's own minimum for the image's CUDA major.minor (12.8: 570,
  12.9: 575, 13.0: 580; the NGC notes of 25.03 and of the CUDA 13 images print older numbers, 560 and
  575, which CUDA's own table does not allow), else the floor of the CUDA major's minor-version
  compatibility (12.x: 525; 13.x: 580). Data-center GPUs may run older branches through CUDA's
  forward-compatibility package; the rig does not count on it.
- Ubuntu and Python: 22.04 with Python 3.10 up to 24.05 (read); 24.04 with Python 3.12 from 24.12
  (read) on; 24.06 to 24.11 not confirmed (given as 24.04 / 3.12, marked). The rig needs Python 3.11
  or newer in an image: older rows are listed for their Triton version and CUDA, not to be built.
- nvidia-pytriton: the core each release bundles, measured here (docs/guide/runtimes.md,
  FIELD_NOTES section 1): 2.36 to 2.51 only.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys

# The core each nvidia-pytriton release bundles (measured with TRITONSERVER_ServerMetadata on every
# release with a Python 3 stub); ``rig.parent.runtime`` files embedded results under these names.
PYTRITON_CORE = {
    "0.2.5": "2.33.0",
    "0.3.1": "2.36.0",
    "0.4.2": "2.39.0",
    "0.5.0": "2.41.0",
    "0.5.1": "2.42.0",
    "0.5.2": "2.42.0",
    "0.5.3": "2.43.0",
    "0.5.4": "2.44.0",
    "0.5.5": "2.44.0",
    "0.5.6": "2.44.0",
    "0.5.7": "2.45.0",
    "0.5.8": "2.46.0",
    "0.5.9": "2.47.0",
    "0.5.10": "2.48.0",
    "0.5.11": "2.49.0",
    "0.5.12": "2.50.0",
    "0.5.13": "2.51.0",
    "0.5.14": "2.51.0",
    "0.6.0": "2.51.0",
    "0.7.0": "2.51.0",
}

# The CuPy wheel built for each CUDA major. Its version follows numpy, not the image: every NGC
# image's bindings pin numpy<2, where the newest CuPy is 13.6.0 (CuPy 14 needs numpy>=2), so pip
# resolves 13.6.0 there (the Dockerfile holds the image's numpy; docs/guide/runtimes.md, "One
# install per place", and .ci/resolve-installs.py, which resolves it in CI).
CUPY_BY_CUDA_MAJOR = {11: "cupy-cuda11x", 12: "cupy-cuda12x", 13: "cupy-cuda13x"}

# The CUDA toolkit's minimum driver per major.minor (CUDA's release notes, "CUDA Toolkit and
# Minimum Required Driver Version"), and the floor of each major's minor-version compatibility.
TOOLKIT_DRIVER = {
    "12.0": 525,
    "12.1": 530,
    "12.2": 535,
    "12.3": 545,
    "12.4": 550,
    "12.5": 555,
    "12.6": 560,
    "12.8": 570,
    "12.9": 575,
    "13.0": 580,
}
MAJOR_DRIVER = {11: 450, 12: 525, 13: 580}

_U22, _U24 = ("22.04", "3.10"), ("24.04", "3.12")

# (NGC tag, Triton, CUDA as the release note gives it or its major alone, (Ubuntu, Python), fields
# not confirmed). Oldest first; 23.07 is the first core a PyPI wheel with a Python 3 stub bundles.
_ROWS = (
    ("23.07", "2.36.0", "12.1.1", _U22, ()),
    ("23.08", "2.37.0", "12.2.1", _U22, ()),
    ("23.09", "2.38.0", "12", _U22, ("cuda",)),
    ("23.10", "2.39.0", "12", _U22, ("cuda",)),
    ("23.11", "2.40.0", "12", _U22, ("cuda",)),
    ("23.12", "2.41.0", "12.3.2", _U22, ()),
    ("24.01", "2.42.0", "12.3.2", _U22, ()),
    ("24.02", "2.43.0", "12", _U22, ("cuda",)),
    ("24.03", "2.44.0", "12.4.0", _U22, ()),
    ("24.04", "2.45.0", "12.4", _U22, ()),
    ("24.05", "2.46.0", "12.4", _U22, ()),
    ("24.06", "2.47.0", "12", _U24, ("cuda", "ubuntu", "python")),
    ("24.07", "2.48.0", "12.5.1", _U24, ("ubuntu", "python")),
    ("24.08", "2.49.0", "12", _U24, ("cuda", "ubuntu", "python")),
    ("24.09", "2.50.0", "12", _U24, ("cuda", "ubuntu", "python")),
    ("24.10", "2.51.0", "12.6.2", _U24, ("ubuntu", "python")),
    ("24.11", "2.52.0", "12", _U24, ("cuda", "ubuntu", "python")),
    ("24.12", "2.53.0", "12.6.3", _U24, ()),
    ("25.01", "2.54.0", "12.8.0", _U24, ()),
    ("25.02", "2.55.0", "12.8.0", _U24, ()),
    ("25.03", "2.56.0", "12.8.1", _U24, ()),
    ("25.04", "2.57.0", "12.9.0", _U24, ()),
    ("25.05", "2.58.0", "12", _U24, ("cuda",)),
    ("25.06", "2.59.0", "12.9.1", _U24, ()),
    ("25.07", "2.59.1", "12", _U24, ("cuda",)),
    ("25.08", "2.60.0", "13.0.0", _U24, ()),
    ("25.09", "2.61.0", "13", _U24, ("cuda",)),
    ("25.10", "2.62.0", "13.0.2", _U24, ()),
    ("25.11", "2.63.0", "13", _U24, ("cuda",)),
    ("25.12", "2.64.0", "13.1.0", _U24, ()),
    ("26.01", "2.65.0", "13", _U24, ("cuda",)),
    ("26.02", "2.66.0", "13.1.1", _U24, ()),
    ("26.03", "2.67.0", "13", _U24, ("cuda",)),
    ("26.04", "2.68.0", "13.2.1", _U24, ()),
    ("26.05", "2.69.0", "13", _U24, ("cuda",)),
    ("26.06", "2.70.0", "13.3.0", _U24, ()),
    ("26.07", "2.71.0", "13", _U24, ("cuda",)),
    ("26.08", "2.72.0", "13", _U24, ("cuda",)),
    ("26.09", "2.73.0", "13", _U24, ("cuda",)),
)


@dataclasses.dataclass(frozen=True)
class Release:
    """One NGC ``tritonserver`` image and what it holds."""

    ngc_tag: str  # 26.03 (the image nvcr.io/nvidia/tritonserver:26.03-py3)
    triton_version: str  # 2.67.0 (its TRITON_VERSION; the rig's triton_version column)
    pytriton: tuple[str, ...]  # the nvidia-pytriton releases that bundle this core (empty: none)
    ubuntu: str
    python: str  # the image's python3, major.minor
    cuda: str  # 13.0.2, or the major alone ("13") where no release note was read
    cupy: str  # the CuPy wheel for that CUDA: cupy-cuda12x, cupy-cuda13x
    min_driver: int  # the oldest NVIDIA driver branch it runs on (570: R570)
    unconfirmed: tuple[str, ...]  # fields given from the neighbouring rows, not read for this one

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])

    @property
    def image(self) -> str:
        return f"nvcr.io/nvidia/tritonserver:{self.ngc_tag}-py3"

    @property
    def branch(self) -> str:
        """The release branch of core, common, backend and python_backend: ``r26.03``."""
        return f"r{self.ngc_tag}"

    @property
    def rig_gets_it(self) -> str:
        """How this machine gets the core, said with the Triton version (the one name that works
        everywhere): ``rig runtime install 2.48.0`` (a PyPI wheel bundles it), ``rig runtime build
        2.67.0`` (a source build), both for 2.51.0, or none (the NGC image only)."""
        ways = []
        if self.pytriton:
            ways.append(f"install {self.triton_version}")
        if int(self.triton_version.split(".")[1]) >= FIRST_BUILT_MINOR:
            ways.append(f"build {self.triton_version}")
        return ", ".join(ways) or "-"


# The first Triton built from source here (rig.runtimes.from_source.releases.FIRST): a Triton version below it is
# a PyPI wheel's core only, so its name can only mean that wheel.
FIRST_BUILT_MINOR = 51


def pytriton_of(triton: str) -> str | None:
    """The newest nvidia-pytriton release that bundles Triton ``triton`` (``2.48.0`` -> ``0.5.10``),
    or None where none does."""
    found = [p for p, t in PYTRITON_CORE.items() if t == triton]
    return max(found, key=lambda v: tuple(int(x) for x in v.split("."))) if found else None


def embedded_alias(name: str) -> str | None:
    """The nvidia-pytriton release a Triton version names where only a wheel can be meant (no source
    build of it: below 2.51.0), else None: ``--runtime 2.48.0`` is ``0.5.10``'s core."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != "2" or not all(p.isdigit() for p in parts):
        return None
    return pytriton_of(name) if int(parts[1]) < FIRST_BUILT_MINOR else None


def cupy_package(cuda: str) -> str:
    """The CuPy wheel for a CUDA version (``12.8.0.038``, ``13``); ValueError for one none is built for."""
    m = re.match(r"(\d+)(?:\.|$)", cuda.strip())
    if not m or int(m.group(1)) not in CUPY_BY_CUDA_MAJOR:
        raise ValueError(
            f"no CuPy wheel known for CUDA {cuda!r} (known majors: {', '.join(map(str, CUPY_BY_CUDA_MAJOR))})"
        )
    return CUPY_BY_CUDA_MAJOR[int(m.group(1))]


def driver_floor(cuda: str) -> int:
    """The oldest driver branch a CUDA version runs on: the toolkit's own minimum for its
    major.minor where known, else its major's minor-version compatibility floor."""
    parts = cuda.strip().split(".")
    major = int(parts[0])
    if len(parts) > 1 and f"{major}.{parts[1]}" in TOOLKIT_DRIVER:
        return TOOLKIT_DRIVER[f"{major}.{parts[1]}"]
    if major not in MAJOR_DRIVER:
        raise ValueError(f"no driver floor known for CUDA {cuda!r}")
    return MAJOR_DRIVER[major]


def _build() -> tuple[Release, ...]:
    out = []
    for tag, triton, cuda, (ubuntu, python), unconfirmed in _ROWS:
        wheels = tuple(v for v, core in PYTRITON_CORE.items() if core == triton)
        out.append(
            Release(tag, triton, wheels, ubuntu, python, cuda, cupy_package(cuda), driver_floor(cuda), unconfirmed)
        )
    return tuple(out)


RELEASES = _build()
BY_TAG = {r.ngc_tag: r for r in RELEASES}
BY_TRITON = {r.triton_version: r for r in RELEASES}

# The nightly's pair (deploy/k8s/nightly-cronjob.yaml, the Dockerfile's default): the release of
# server#8755, the seed's bug, against the newest one whose CUDA a release note confirms.
BASELINE_TAG = "26.03"
CANDIDATE_TAG = "26.06"
DEFAULT_TAG = CANDIDATE_TAG  # `docker build .` without --build-arg TRITON_TAG


def by_tag(tag: str) -> Release:
    """The row of an NGC tag (``26.03``, ``26.03-py3``, ``nvcr.io/nvidia/tritonserver:26.03-py3``)."""
    text = tag.strip().rsplit(":", 1)[-1].removesuffix("-py3")
    if text not in BY_TAG:
        raise KeyError(f"NGC tag {tag!r} is not in the table ({RELEASES[0].ngc_tag} to {RELEASES[-1].ngc_tag})")
    return BY_TAG[text]


def by_triton(version: str) -> Release | None:
    """The row of a Triton version (``2.67.0``, ``2.67``), or None where the table has none."""
    text = version.strip().removeprefix("v")
    if re.fullmatch(r"2\.\d+", text):
        text += ".0"
    return BY_TRITON.get(text)


def describe(r: Release) -> str:
    """One line: ``NGC 26.03: Triton 2.67.0, Ubuntu 24.04, Python 3.12, CUDA 13 (unconfirmed), ...``."""

    def mark(field: str, text: str) -> str:
        return f"{text} (unconfirmed)" if field in r.unconfirmed else text

    wheels = f"nvidia-pytriton {', '.join(r.pytriton)}" if r.pytriton else "no nvidia-pytriton wheel"
    return (
        f"NGC {r.ngc_tag}: Triton {r.triton_version}, {wheels}, {mark('ubuntu', 'Ubuntu ' + r.ubuntu)}, "
        f"{mark('python', 'Python ' + r.python)}, {mark('cuda', 'CUDA ' + r.cuda)}, {r.cupy}, "
        f"driver >= {r.min_driver}"
    )


def driver_problem(r: Release, driver: str | None) -> str | None:
    """Why a driver (NVML's ``580.65.06``) is too old for a row, or None where it is new enough or
    unknown."""
    m = re.match(r"(\d+)", driver or "")
    if not m:
        return None
    if int(m.group(1)) >= r.min_driver:
        return None
    return (
        f"driver {driver} is older than the {r.min_driver} that CUDA {r.cuda} of NGC {r.ngc_tag} needs: "
        f"the CUDA model fails to start; update the node's driver or run an older image"
    )


def markdown() -> str:
    """The table as Markdown (docs/guide/runtimes.md holds this text; a test keeps them the same)."""
    head = [
        "NGC tag",
        "branch",
        "Triton",
        "nvidia-pytriton",
        "rig runtime",
        "Ubuntu",
        "Python",
        "CUDA",
        "CuPy",
        "driver",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in RELEASES:

        def mark(field: str, text: str) -> str:
            return f"{text}*" if field in r.unconfirmed else text  # noqa: B023

        lines.append(
            "| "
            + " | ".join(
                [
                    r.ngc_tag,
                    r.branch,
                    r.triton_version,
                    ", ".join(r.pytriton) or "-",
                    r.rig_gets_it,
                    mark("ubuntu", r.ubuntu),
                    mark("python", r.python),
                    mark("cuda", r.cuda if "." in r.cuda else f"{r.cuda}.x"),
                    r.cupy,
                    f">= {r.min_driver}",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python3 -m rig.contract.ngc cupy --tag 26.06 | --cuda 13.0.2``: the CuPy wheel (the image's
    build asks it, before the rig is installed); ``row --tag T``: the row; ``table``: Markdown."""
    p = argparse.ArgumentParser(prog="python3 -m rig.contract.ngc")
    p.add_argument("what", choices=("cupy", "row", "table"))
    p.add_argument("--tag", help="an NGC tag (26.06)")
    p.add_argument("--cuda", help="a CUDA version (13.0.2; wins over --tag: what the image holds)")
    args = p.parse_args(argv)
    try:
        if args.what == "table":
            print(markdown())
        elif args.what == "row":
            print(describe(by_tag(args.tag or "")))
        elif args.cuda:
            print(cupy_package(args.cuda))
        elif args.tag:
            print(by_tag(args.tag).cupy)
        else:
            p.error("cupy needs --cuda or --tag")
    except (KeyError, ValueError) as e:
        print(f"rig.contract.ngc: {e.args[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
