"""The subcommands: one module each, with ``add_parser(sub)`` and the function its parser calls. Which
commands there are, and in what order `rig --help` lists them, is ``rig.cli.registry``, the one
registry. The commands over stored results open them with ``Store.open`` (one check, one error line)
and read ``--where`` through ``rig.store.where``."""
