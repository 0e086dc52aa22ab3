#!/usr/bin/env python3
"""Writes gpuprio's wheel and Debian package from a built libgpuprio.so (tools/package.sh).

  make_packages.py --repo DIR --lib LIBGPUPRIO_SO --out DIR

The wheel (written with zipfile: no PyPI, no build backend) holds the package `gpuprio`: the ctypes
helper (tools/python/gpuprio.py) as its __init__, the launcher (tools/cli/gpuprio) as
gpuprio/_cli.py with a `gpuprio` console script and its package (gpuprio/gpuprio_cli/, every module
of tools/cli/gpuprio_cli), env_vars.def and VERSION beside them, where the launcher and the helper
look first, libgpuprio.so in gpuprio/lib/ (a directory without an __init__.py, so pkgutil and
help(gpuprio) do not take the library for a module; the launcher looks there), and the licence and
notices in its .dist-info. The .deb puts the
launcher and its package, libgpuprio.so, env_vars.def and VERSION in /usr/lib/gpuprio
(/usr/bin/gpuprio links there; the launcher runs under Debian's /usr/bin/python3, whatever python3
comes first on PATH), the helper and VERSION in /usr/lib/python3/dist-packages/gpuprio, and the
docs, notices and copyright file in /usr/share/doc/gpuprio. A file either package ships that is
missing from --repo is an error.
Standard library only (and dpkg-deb, readelf).
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

# The glibc the library needs decides the platform tag and the .deb's libc6 dependency: the
# highest GLIBC_x.y it references, but never below GLIBC_FLOOR, the oldest glibc gpuprio is built
# and checked for (2.28, manylinux_2_28; docs/decisions/2026-11-27-glibc-floor.md): the library
# references nothing above 2.25 today, but nothing older than 2.28 is what the tests hold it to.
GLIBC_VERSION = re.compile(rb"GLIBC_2\.([0-9]+)")
GLIBC_FLOOR = 28
# What the .deb puts in /usr/share/doc/gpuprio (LICENSE goes there as `copyright`).
DOCS = ("README.md", "docs/user_guide.md", "docs/build.md", "CHANGELOG.md", "NOTICE",
        "THIRD_PARTY_NOTICES.md")
# The .deb's launcher runs under the system's Python (python3 is a dependency), not whichever
# python3 a user's PATH finds first (a venv, pyenv, conda).
DEB_SHEBANG = b"#!/usr/bin/python3"
# Where the wheel keeps the library inside the package: a directory with no __init__.py, which
# pkgutil does not list (the launcher's library_candidates() looks there).
WHEEL_LIB = "gpuprio/lib/libgpuprio.so"
# The launcher's package, which the launcher loads from its own directory (tools/cli/gpuprio's
# package_directory): gpuprio/gpuprio_cli/ beside gpuprio/_cli.py in the wheel,
# /usr/lib/gpuprio/gpuprio_cli/ in the .deb. Every module in it is shipped.
CLI_PACKAGE = "tools/cli/gpuprio_cli"
# What the wheel puts in its .dist-info: the Apache License's own terms require LICENSE and NOTICE
# to travel with the library; THIRD_PARTY_NOTICES.md names what libgpuprio.so contains.
WHEEL_NOTICES = ("LICENSE", "NOTICE", "THIRD_PARTY_NOTICES.md")


def glibc_minor(lib):
    """N of the glibc 2.N the library is said to need: the highest glibc 2.x symbol version it
    requires (its .gnu.version_r names), or GLIBC_FLOOR if that is higher."""
    out = subprocess.run(["readelf", "-V", "--wide", lib], check=True, capture_output=True).stdout
    needs = out.split(b"Version needs section", 1)
    minors = [int(m) for m in GLIBC_VERSION.findall(needs[1] if len(needs) > 1 else b"")]
    if not minors:
        raise SystemExit(f"make_packages: {lib} references no GLIBC_2.x version")
    return max(max(minors), GLIBC_FLOOR)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def require_files(repo, names):
    """Exits naming every one of `names` (relative to repo) that is not a file: a package without
    its licence, notices or docs must not be written."""
    missing = [name for name in names if not os.path.isfile(os.path.join(repo, name))]
    if missing:
        raise SystemExit(f"make_packages: missing from {repo}: {', '.join(missing)}")


def cli_modules(repo):
    """The launcher's package's modules, as repository paths (its __init__.py, which
    require_files asks for, and every other .py file in it), sorted."""
    directory = os.path.join(repo, CLI_PACKAGE)
    names = sorted(n for n in os.listdir(directory) if n.endswith(".py"))
    return [f"{CLI_PACKAGE}/{name}" for name in names]


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(repo, lib, version, out):
    minor = glibc_minor(lib)
    tag = f"py3-none-manylinux_2_{minor}_x86_64"
    dist = f"gpuprio-{version}.dist-info"
    files = [  # (name in the wheel, bytes, executable)
        ("gpuprio/__init__.py", read(os.path.join(repo, "tools/python/gpuprio.py"), "rb"), False),
        ("gpuprio/_cli.py", read(os.path.join(repo, "tools/cli/gpuprio"), "rb"), False),
    ] + [
        (f"gpuprio/gpuprio_cli/{os.path.basename(module)}", read(os.path.join(repo, module), "rb"),
         False)
        for module in cli_modules(repo)
    ] + [
        (WHEEL_LIB, read(lib, "rb"), True),
        ("gpuprio/env_vars.def", read(os.path.join(repo, "scheduler/base/env_vars.def"), "rb"),
         False),
        ("gpuprio/VERSION", read(os.path.join(repo, "VERSION"), "rb"), False),
    ]
    readme = read(os.path.join(repo, "README.md"))
    metadata = (f"Metadata-Version: 2.1\nName: gpuprio\nVersion: {version}\n"
                "Summary: Share one GPU between a latency-critical job and batch work "
                "(LD_PRELOAD priority scheduler for CUDA)\n"
                "License: Apache-2.0\nRequires-Python: >=3.9\n"
                "Classifier: Operating System :: POSIX :: Linux\n"
                "Classifier: License :: OSI Approved :: Apache Software License\n"
                "Description-Content-Type: text/markdown\n\n" + readme)
    wheel = (f"Wheel-Version: 1.0\nGenerator: gpuprio make_packages.py\nRoot-Is-Purelib: false\n"
             f"Tag: {tag}\n")
    entry_points = "[console_scripts]\ngpuprio = gpuprio._cli:entry\n"
    files += [
        (f"{dist}/METADATA", metadata.encode(), False),
        (f"{dist}/WHEEL", wheel.encode(), False),
        (f"{dist}/entry_points.txt", entry_points.encode(), False),
        (f"{dist}/top_level.txt", b"gpuprio\n", False),
    ]
    files += [(f"{dist}/{name}", read(os.path.join(repo, name), "rb"), False)
              for name in WHEEL_NOTICES]
    record = [record_line(name, data) for name, data, _ in files] + [f"{dist}/RECORD,,"]
    files.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode(), False))
    path = os.path.join(out, f"gpuprio-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 11, 25, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(info, data)
    return path


def install(src, dst, mode):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def with_shebang(script, shebang):
    """The script's bytes with its first line (a #! line) replaced by `shebang`."""
    if not script.startswith(b"#!"):
        raise SystemExit("make_packages: tools/cli/gpuprio does not start with a #! line")
    return shebang + script[script.index(b"\n"):]


def write_deb(repo, lib, version, out):
    minor = glibc_minor(lib)
    needed = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True,
                            text=True).stdout
    depends = ["python3 (>= 3.9)", f"libc6 (>= 2.{minor})"]
    if "libz.so.1" in needed:
        depends.append("zlib1g (>= 1:1.2.0)")
    if "libstdc++.so.6" in needed:
        depends.append("libstdc++6")
    if "libgcc_s.so.1" in needed:
        depends.append("libgcc-s1")
    with tempfile.TemporaryDirectory() as root:
        os.chmod(root, 0o755)
        lib_dir = os.path.join(root, "usr/lib/gpuprio")
        install(lib, os.path.join(lib_dir, "libgpuprio.so"), 0o644)
        launcher = os.path.join(lib_dir, "gpuprio")
        with open(launcher, "wb") as f:
            f.write(with_shebang(read(os.path.join(repo, "tools/cli/gpuprio"), "rb"),
                                 DEB_SHEBANG))
        os.chmod(launcher, 0o755)
        for module in cli_modules(repo):  # loaded by the launcher from its own directory
            install(os.path.join(repo, module),
                    os.path.join(lib_dir, "gpuprio_cli", os.path.basename(module)), 0o644)
        install(os.path.join(repo, "scheduler/base/env_vars.def"),
                os.path.join(lib_dir, "env_vars.def"), 0o644)
        install(os.path.join(repo, "VERSION"), os.path.join(lib_dir, "VERSION"), 0o644)
        helper_dir = os.path.join(root, "usr/lib/python3/dist-packages/gpuprio")
        install(os.path.join(repo, "tools/python/gpuprio.py"),
                os.path.join(helper_dir, "__init__.py"), 0o644)
        install(os.path.join(repo, "VERSION"), os.path.join(helper_dir, "VERSION"), 0o644)
        os.makedirs(os.path.join(root, "usr/bin"))
        os.symlink("../lib/gpuprio/gpuprio", os.path.join(root, "usr/bin/gpuprio"))
        doc = os.path.join(root, "usr/share/doc/gpuprio")
        for name in DOCS:
            install(os.path.join(repo, name), os.path.join(doc, os.path.basename(name)), 0o644)
        install(os.path.join(repo, "LICENSE"), os.path.join(doc, "copyright"), 0o644)
        size_kib = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root)
                       for f in fs if not os.path.islink(os.path.join(d, f))) // 1024 + 1
        os.makedirs(os.path.join(root, "DEBIAN"))
        with open(os.path.join(root, "DEBIAN/control"), "w") as f:
            f.write(f"Package: gpuprio\nVersion: {version}\nArchitecture: amd64\n"
                    f"Maintainer: gpuprio maintainers <gpuprio@localhost>\n"
                    f"Installed-Size: {size_kib}\nDepends: {', '.join(depends)}\n"
                    "Section: devel\nPriority: optional\n"
                    "Description: share one GPU between a latency-critical job and batch work\n"
                    " libgpuprio.so is LD_PRELOADed into CUDA programs and schedules their GPU\n"
                    " work by priority; `gpuprio run` starts a program under it.\n")
        path = os.path.join(out, f"gpuprio_{version}_amd64.deb")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root, path],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    require_files(args.repo, ("VERSION", "tools/python/gpuprio.py", "tools/cli/gpuprio",
                              "scheduler/base/env_vars.def", f"{CLI_PACKAGE}/__init__.py")
                  + DOCS
                  + WHEEL_NOTICES)
    version = read(os.path.join(args.repo, "VERSION")).strip()
    os.makedirs(args.out, exist_ok=True)
    for path in (write_wheel(args.repo, args.lib, version, args.out),
                 write_deb(args.repo, args.lib, version, args.out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
