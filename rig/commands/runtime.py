"""`rig runtime install [VERSION]` and `rig runtime list`: the Triton runtimes this machine has."""

from __future__ import annotations

from rig.common.errors import Exit, RigError
from rig.runtimes.from_source import identity
from rig.runtimes.from_source.cache import describe


def add_parser(sub) -> None:
    r = sub.add_parser("runtime", help="install and list Triton runtimes")
    rs = r.add_subparsers(dest="runtime_command", parser_class=type(r))  # the rig's parser: one line, not usage
    ri = rs.add_parser("install", help="unpack an embedded runtime from the nvidia-pytriton wheel")
    ri.add_argument(
        "version",
        nargs="?",
        default=None,
        help="a Triton version a PyPI wheel bundles (2.36.0 to 2.51.0) or the nvidia-pytriton "
        "release itself (0.5.10 = Triton 2.48.0) (default the rig's pin, 0.7.0 = Triton 2.51.0)",
    )
    ri.add_argument("--force", action="store_true")
    rb = rs.add_parser("build", help="build a Triton release (2.51.0 to 2.73.0) for CPU from source")
    rb.add_argument("version", help="a release: its Triton version (2.67.0, 2.67), NGC tag (26.03) or branch (r26.03)")
    rb.add_argument("--sources", metavar="DIR", help="a folder of git bundles (core.bundle, ...); default: GitHub")
    rb.add_argument(
        "--ref",
        action="append",
        metavar="COMPONENT=REF",
        help="build a component (core, common, backend, python_backend) at another branch, tag or commit: "
        "a variant of the release, named and cached apart from it (built-VERSION-vKEY)",
    )
    rb.add_argument(
        "--patch",
        action="append",
        metavar="COMPONENT=FILE",
        help="apply a diff (git diff, git format-patch) to a component before building it (repeatable, in "
        "order): a variant of the release, named and cached apart from it",
    )
    rb.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: ninja's)")
    rb.add_argument(
        "--python",
        metavar="PATH",
        help="build the backend stub for this interpreter (default: the rig's); a core built before is reused",
    )
    rb.add_argument("--force", action="store_true", help="build again even if built")
    rs.add_parser("list", help="the runtimes installed or built here")
    r.set_defaults(func=run)


def run(args) -> int:
    from rig.parent import runtime

    if args.runtime_command == "install":
        rt = runtime.install_embedded(
            args.version or runtime.DEFAULT_EMBEDDED, force=args.force, log=lambda m: print(m, flush=True)
        )
        print(
            f"installed Triton {rt.triton_version} ({rt.name}: nvidia-pytriton {rt.name[len('embedded-') :]}) "
            f"in {rt.server_dir}"
        )
        return Exit.OK
    if args.runtime_command == "build":
        from rig.runtimes.from_source import Request, build, releases

        build(
            Request(
                version=args.version,
                sources=args.sources,
                refs=releases.parse_refs(args.ref),
                patches=identity.parse_patches(args.patch, releases.COMPONENTS),
                force=args.force,
                jobs=args.jobs,
                python=args.python,
            ),
            out=lambda m: print(m, flush=True),
        )
        return Exit.OK
    if args.runtime_command == "list":
        rows = runtime.list_embedded()
        home = runtime.container_home()
        if home:
            print(f"Triton {runtime.container_runtime().triton_version:<8} {'container':<16} {home}")
        # the Triton version first (the name every command takes), then how it is here
        for r in rows:
            print(
                f"Triton {r['triton_version']:<8} {r['name']:<16} stubs {','.join(r['stubs']) or '-':<24} {r['path']}"
            )
        built = runtime.list_built()
        for b in built:
            print(
                f"Triton {b['triton_version']:<8} {b['name']:<16} stubs {','.join(b['pythons']) or '-':<24} {b['path']}"
            )
            print(f"{'':<32} {describe(b)}")
            if b["manifest"].get("variant"):
                print(f"{'':<32} {identity.describe_variant(b['manifest'])}")
        if not rows and not home and not built:
            print(
                "no runtime installed; `rig runtime install` adds the default, "
                f"{runtime.said(runtime.DEFAULT_EMBEDDED)}"
            )
        return Exit.OK
    raise RigError("say `rig runtime install [VERSION]` or `rig runtime list`")
