"""The rig's version, recorded with every run."""

__version__ = "0.1.0"
