"""The subcommands: one thin module each, with ``add_parser(sub)`` (its parser, ``set_defaults(func=run)``)
and ``run(args) -> int`` (parse, call, print, exit status). Which commands there are, and in what order
`rig --help` lists them, is ``rig.cli.registry``, the one registry. What a command that runs Triton does
lives below them, in ``rig.workflows``. The commands over stored results open them with ``Store.open``
(one check, one error line) and read ``--where`` through ``rig.store.where``."""
