"""Triton runtimes, the cores the rig runs: today the cores built here from source
(``from_source``: ``rig runtime build VERSION``). Finding, installing and resolving a runtime by
name is the parent's (``rig.parent.runtime``); what a runtime is, of each kind, the contract's
(``rig.contract.runtime``)."""
