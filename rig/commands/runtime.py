"""`rig runtime install [VERSION]` and `rig runtime list`: the Triton runtimes this machine has."""

from __future__ import annotations

from rig.errors import Exit, RigError


def add_parser(sub, parser_class) -> None:
    r = sub.add_parser("runtime", help="install and list Triton runtimes")
    rs = r.add_subparsers(dest="runtime_command", parser_class=parser_class)
    ri = rs.add_parser("install", help="unpack an embedded runtime from the nvidia-pytriton wheel")
    ri.add_argument("version", nargs="?", default=None, help="nvidia-pytriton version (default the rig's pin)")
    ri.add_argument("--force", action="store_true")
    rs.add_parser("list", help="the runtimes installed here")
    r.set_defaults(func=run)


def run(args) -> int:
    from rig import runtime

    if args.runtime_command == "install":
        rt = runtime.install_embedded(args.version or runtime.DEFAULT_EMBEDDED, force=args.force,
                                      log=lambda m: print(m, flush=True))
        print(f"installed {rt.name}: Triton {rt.triton_version} in {rt.server_dir}")
        return Exit.OK
    if args.runtime_command == "list":
        rows = runtime.list_embedded()
        home = runtime.container_home()
        if home:
            print(f"container  Triton {runtime.container_runtime().triton_version}  {home}")
        for r in rows:
            print(f"{r['name']:<16} Triton {r['triton_version']:<8} stubs {','.join(r['stubs']) or '-':<24} {r['path']}")
        if not rows and not home:
            print(f"no runtime installed; `rig runtime install` adds the default ({runtime.DEFAULT_EMBEDDED})")
        return Exit.OK
    raise RigError("say `rig runtime install [VERSION]` or `rig runtime list`")
