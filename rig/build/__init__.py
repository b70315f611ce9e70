"""Triton built from source: ``rig runtime build VERSION`` and the runtimes it leaves.

``releases`` maps versions to release branches, ``sources`` fetches them (GitHub or git
bundles), ``preflight`` checks the machine, ``recipe`` holds the CMake flags and Debian 12's
adaptations, ``builder`` runs the steps and lays the result out as a runtime.
"""

from rig.build.builder import Request, build, built_root, is_built, list_built, manifest

__all__ = ["Request", "build", "built_root", "is_built", "list_built", "manifest"]
