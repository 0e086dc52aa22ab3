"""`gpuprio doctor`: can gpuprio run here? The checks of doctor_checks.py and the segments,
reported on one screen (or as one JSON object) with what to do about each problem.
"""

import argparse
import json
import os
import sys

from .clean_segments import scan_segments, segment_line
from .doctor_checks import (
    check_driver, check_library, check_mps, check_runtime, check_sharing, driver_version_text,
    isolation_verdict, nvidia_kernel_driver, version_tuple)
from .mps import processes_text
from .run import LIB_NAME
from .segment_layout import SEGMENT_BYTES
from .segments import add_shm_dir_option, format_gpu_uuid, shm_dir_of
from .util import UsageError, ascii_text, plural_text, product_version


class Doctor:
    """The checks of `gpuprio doctor`, each {"check", "status", "text", "fix"}: status "ok",
    "info", "warning" (gpuprio runs, with less) or "error" (gpuprio cannot run here)."""

    def __init__(self):
        self.checks = []

    def add(self, check, status, text, fix=None):
        self.checks.append({"check": check, "status": status, "text": text, "fix": fix})

    def errors(self):
        return [c for c in self.checks if c["status"] == "error"]


def doctor_library(doctor, library):
    if not library["found"]:
        doctor.add("library", "error", library["error"],
                   f"build it (bazel build -c opt //hook:{LIB_NAME}), install the wheel or the "
                   ".deb (tools/package.sh), or pass --lib PATH / set GPUPRIO_LIB")
    elif not library["loads"]:
        fix = "rebuild it on this machine (bazel build -c opt //hook:libgpuprio.so)"
        if "GLIBC" in (library["error"] or ""):
            fix = (f"this system has glibc {library['glibc']}, older than the library needs: "
                   f"build it on this system, or use a build for this glibc "
                   f"(docs/compatibility.md)")
        doctor.add("library", "error", f"{library['path']} does not load: {library['error']}",
                   fix)
    else:
        doctor.add("library", "ok", f"{library['path']} loads: version {library['version']} "
                   f"(glibc {library['glibc'] or '?'} here)")


def doctor_driver(doctor, driver, environ):
    if driver.get("found") is None:
        doctor.add("driver", "error", driver["error"],
                   "check the driver with nvidia-smi; a hung probe means a wedged GPU or driver")
        return
    if not driver["found"]:
        doctor.add("driver", "error",
                   f"no NVIDIA driver: it cannot be loaded ({driver.get('error')}); "
                   f"there is no GPU work to schedule",
                   "install the NVIDIA driver (in a container: start it with the NVIDIA "
                   "Container Toolkit, e.g. docker run --gpus all); gpuprio's tests and demo run "
                   "without one, against tests/fake_cuda")
        return
    branch = nvidia_kernel_driver()
    api = driver_version_text(driver.get("version"))
    described = (f"{driver['library']}" + (f", kernel module {branch}" if branch else "")
                 + (f", CUDA {api} driver API" if api else ""))
    if driver.get("init_error"):
        visible = environ.get("CUDA_VISIBLE_DEVICES")
        fix = "check the GPUs with nvidia-smi"
        if visible is not None:
            fix += f" and CUDA_VISIBLE_DEVICES ({visible!r} here)"
        doctor.add("driver", "error", f"{described}: cuInit failed: {driver['init_error']}", fix)
        return
    if not driver["devices"]:
        doctor.add("driver", "error", f"{described}: no CUDA device",
                   "check nvidia-smi and CUDA_VISIBLE_DEVICES")
        return
    doctor.add("driver", "ok", described)
    for device in driver["devices"]:
        if "error" in device:
            doctor.add(f"GPU {device['index']}", "warning", device["error"])
            continue
        available, isolation = isolation_verdict(driver, device, environ)
        device["isolation"] = {"available": available, "detail": isolation}
        uuid = format_gpu_uuid(bytes.fromhex(device["uuid"])) if "uuid" in device else "?"
        cc = (f"{device['cc_major']}.{device['cc_minor']}" if "cc_major" in device else "?")
        text = (f"{device.get('name', '?')} ({uuid}), compute capability {cc}, "
                f"{device.get('sms', '?')} SMs; isolation: {isolation}")
        fix = None
        if not available and not driver.get("green_context_entry_points"):
            fix = ("for spatial isolation, a driver of CUDA 12.5 or later (branch 555 or later); "
                   "gpuprio works without it, with the in-flight budget")
        doctor.add(f"GPU {device['index']}", "ok" if available else "warning", text, fix)


def doctor_runtime(doctor, runtime, driver):
    if runtime["toolkit"] is None:
        doctor.add("runtime", "info", "no CUDA toolkit found (CUDA_HOME, CUDA_PATH, "
                   "/usr/local/cuda); programs that bring their own runtime (PyTorch's wheels) "
                   "need none, and gpuprio needs none")
        return
    text = (f"CUDA toolkit {runtime['version']} at {runtime['toolkit']}"
            + (f" ({os.path.basename(runtime['runtime'][0])})" if runtime["runtime"] else ""))
    api = driver_version_text(driver.get("version")) if driver.get("found") else None
    if api and version_tuple(runtime["version"]) > version_tuple(api):
        doctor.add("runtime", "warning",
                   f"{text}, newer than the driver (CUDA {api}): programs built with it fail "
                   "with 'the CUDA driver version is insufficient'",
                   f"install a driver of CUDA {runtime['version']} or later, or build with the "
                   f"toolkit of CUDA {api}")
    else:
        doctor.add("runtime", "info", text)


def doctor_mps(doctor, mps):
    where = mps["pipe_directory"]
    if mps["running"] or mps["enabled_on_devices"]:
        doctor.add("MPS", "info", f"running (control pipe in {where}): processes share the SMs, "
                   "and lower processes' work runs confined beside higher ones (docs/isolation.md)")
    else:
        found = ("nvidia-cuda-mps-control at " + mps["control_command"]
                 if mps["control_command"] else "nvidia-cuda-mps-control not found")
        doctor.add("MPS", "info", f"not running (no control pipe in {where}; {found}): processes "
                   "on a GPU time-slice, and gpuprio keeps lower processes' work to the in-flight "
                   "budget (docs/isolation.md)")


def doctor_segments(doctor, args, environ):
    """The segment directory and each segment; the scan (None if the directory is unusable)."""
    try:
        shm_dir = shm_dir_of(args, environ)
    except UsageError as e:
        doctor.add("segments", "warning", str(e), "give GPUPRIO_SHM_DIR an absolute path")
        return None
    try:
        scan = scan_segments(shm_dir)
    except UsageError as e:
        doctor.add("segments", "warning",
                   f"{e}: gpuprio processes cannot coordinate across processes here",
                   "create it, or set GPUPRIO_SHM_DIR to a directory on a tmpfs that every "
                   "process sharing the GPU sees (containers: mount the same one)")
        return None
    counts = {}
    for entry in scan["segments"]:
        counts[entry["state"]] = counts.get(entry["state"], 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none yet"
    doctor.add("segments", "ok", f"{shm_dir}: {summary}")
    stale = 0
    for entry in scan["segments"]:
        if entry["problem"]:
            name = os.path.basename(entry["path"])
            fix = (f"{name}: gpuprio clean-segments removes it" if entry["removable"]
                   else f"{name}: once no gpuprio process uses it, remove it (rm "
                        f"{entry['path']}), or use another GPUPRIO_DOMAIN")
            doctor.add("segment", "warning",
                       f"{segment_line(entry)}: gpuprio processes of domain {entry['domain']} on "
                       f"{entry['gpu']} do not coordinate", fix)
        elif entry["state"] != "in use":
            doctor.add("segment", "info", segment_line(entry))
            stale += entry["removable"]
    if stale:
        doctor.add("segments", "info",
                   f"{plural_text(stale, 'segment')} no process uses (harmless: the next process "
                   f"on that GPU and domain reuses it; each keeps {SEGMENT_BYTES // 1024} KiB of "
                   f"memory)", f"gpuprio clean-segments removes {'it' if stale == 1 else 'them'}")
    for entry in scan["ignored"]:
        doctor.add("segment", "warning", f"ignored: {entry['path']}: {entry['why']}",
                   "see docs/coordinator.md (\"The segment\")")
    return scan


def doctor_sharing(doctor, environ, scan, mps):
    """One warning per GPU where gpuprio processes of different priorities share the GPU without
    MPS: it time-slices between them, and nothing keeps a running kernel of the lower one off
    the SMs the higher one needs."""
    if scan is None:
        return
    for entry in check_sharing(environ, scan["shm_dir"], mps):
        doctor.add("sharing", "warning",
                   f"{entry['gpu']} (domain {entry['domain']}): gpuprio processes of different "
                   f"priorities share it without MPS ({processes_text(entry['processes'])}): "
                   "the GPU time-slices between them, and a running kernel of one delays the "
                   "other",
                   "start an MPS daemon (gpuprio mps start) and run these processes under it "
                   "(docs/mps.md)")


def doctor_text(doctor, usable, version):
    lines = [f"gpuprio doctor (gpuprio {version or 'unknown'})"]
    for c in doctor.checks:
        lines.append(f"  {'[' + c['status'] + ']':<10} {c['check']:<9} {ascii_text(c['text'])}")
    fixes = [c for c in doctor.checks if c["fix"]]
    if fixes:
        lines.append("what to do:")
        lines += [f"  {c['check']}: {ascii_text(c['fix'])}" for c in fixes]
    if usable:
        lines.append("verdict: gpuprio can run here (exit 0)")
    else:
        reasons = "; ".join(c["check"] for c in doctor.errors())
        lines.append(f"verdict: gpuprio cannot run here: see {reasons} above (exit 1)")
    return "\n".join(lines) + "\n"


def command_doctor(args, environ):
    doctor = Doctor()
    library = check_library(args, environ)
    doctor_library(doctor, library)
    driver = check_driver(args, environ)
    doctor_driver(doctor, driver, environ)
    runtime = check_runtime(environ)
    doctor_runtime(doctor, runtime, driver)
    mps = check_mps(environ, driver)
    doctor_mps(doctor, mps)
    scan = doctor_segments(doctor, args, environ)
    doctor_sharing(doctor, environ, scan, mps)
    usable = not doctor.errors()
    version = product_version()
    if args.json:
        segments = None
        if scan is not None:
            segments = {"shm_dir": scan["shm_dir"], "ignored": scan["ignored"],
                        "segments": [{k: v for k, v in entry.items() if k not in ("dev", "ino")}
                                     for entry in scan["segments"]]}
        report = {"usable": usable, "version": version, "checks": doctor.checks,
                  "library": library, "driver": driver, "runtime": runtime, "mps": mps,
                  "segments": segments}
        sys.stdout.write(json.dumps(report, sort_keys=True, allow_nan=False) + "\n")
    else:
        sys.stdout.write(doctor_text(doctor, usable, version))
    return 0 if usable else 1


def add_parser(subcommands):
    """`gpuprio doctor`."""
    doctor = subcommands.add_parser(
        "doctor", help="can this machine use gpuprio? (library, driver, GPUs, MPS, segments)",
        usage="gpuprio doctor [--json] [--lib PATH] [--shm-dir DIR]",
        description="Checks, on one screen, whether gpuprio can run here: the library is found "
                    "and loads (preloaded into a child process with GPUPRIO_MODE=off), the "
                    "NVIDIA driver and its CUDA version, each GPU (name, UUID, compute "
                    "capability, SMs, whether spatial isolation is available and with how many "
                    "SMs kept free), the CUDA toolkit, MPS, and the shared segments of this user "
                    "(in use, stale or damaged), with what to do about each problem. Exit 0 when "
                    "gpuprio can run (library loads, driver and a GPU present), 1 when it cannot, "
                    "2 for bad options.",
        epilog="examples: gpuprio doctor; gpuprio doctor --json | jq .usable")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.add_argument("--lib", metavar="PATH",
                        help=f"the {LIB_NAME} to check (default: as gpuprio run finds it)")
    add_shm_dir_option(doctor, "whose segments to check")
    # Test hook: the driver library to probe instead of libcuda.so.1 (the fake driver, or none).
    doctor.add_argument("--cuda-lib", metavar="PATH", help=argparse.SUPPRESS)
    doctor.set_defaults(handler=command_doctor)
