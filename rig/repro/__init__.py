"""The library of ``rig repro`` (its command: ``rig.commands.repro``), which writes a folder that
reproduces one conformance cell by itself, ready to file upstream: which scenarios it covers and the
cell it is made for (``cell``), the folder written and run once (``build``); the models with their
own finalize evidence (``models``), ``run.sh`` and ``README.md`` (``readme``); and the standalone
script ``repro.py``, joined by ``script`` from its parts (``head``, the rig's binding ``rig.capi`` as
it is, ``server``, ``load``, ``evidence``, ``env``, ``scenes``, ``main``), which import the standard
library, numpy and the parts before them alone. It never imports a command."""
