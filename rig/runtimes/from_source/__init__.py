"""Triton built from source: ``rig runtime build VERSION`` and the runtimes it leaves.

``releases`` maps versions to release branches, ``sources`` fetches them (GitHub or git
bundles), ``preflight`` checks the machine, ``recipe`` holds the CMake flags and Debian 12's
adaptations, ``builder`` runs the steps (``runner`` each command), ``assemble`` lays the result out
as a runtime and checks it, ``cache`` finds and describes the runtimes built.
"""

from rig.runtimes.from_source.builder import Request, build
from rig.runtimes.from_source.cache import built_root, is_built, list_built, manifest

__all__ = ["Request", "build", "built_root", "is_built", "list_built", "manifest"]
