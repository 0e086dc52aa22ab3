"""The probes of `gpuprio doctor`: the library preloaded into a child process, the driver asked
through ctypes in another (each with a time limit: a wedged driver can hang cuInit), the CUDA
toolkit, MPS and the isolation each GPU allows.
"""

import json
import os
import re
import sys

from .run import ASCII_SPACE, LIB_NAME, check_env_value, env_table, find_library
from .util import UsageError


# The driver, asked in a child process (a wedged driver can hang cuInit; a child is given a time
# limit and cannot disturb this one) through ctypes. It prints one JSON object. No context is
# created: cuInit, version, device count, names, UUIDs, attributes and the device's SM resource
# (what a green context would be split from) only.
DRIVER_PROBE = r'''
import ctypes, json, sys

CU_DEVICE_ATTRIBUTE = {"sms": 16, "cc_major": 75, "cc_minor": 76, "mps_enabled": 133}
CU_DEV_RESOURCE_TYPE_SM = 1
# CUdevResource (cuda.h, CUDA 12.4 on): int type, 92 bytes of padding, then CUdevSmResource:
# smCount, minSmPartitionSize, smCoscheduledAlignment (a driver older than the last two leaves
# them zero). A larger buffer than the struct, zeroed, whatever the driver writes.
SM_RESOURCE_OFFSET = 96
GREEN_CONTEXT_ENTRY_POINTS = ("cuDeviceGetDevResource", "cuDevSmResourceSplitByCount",
                              "cuDevResourceGenerateDesc", "cuGreenCtxCreate",
                              "cuGreenCtxDestroy", "cuGreenCtxStreamCreate")

def main():
    out = {"found": False}
    try:
        cuda = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libcuda.so.1")
    except OSError as e:
        out["error"] = str(e)
        return out
    out["found"] = True
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libcuda.so" in line}
        out["library"] = sorted(paths)[0] if paths else "libcuda.so.1"
    except OSError:
        out["library"] = "libcuda.so.1"

    def error_name(code):
        name = ctypes.c_char_p()
        try:
            if cuda.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
                return f"{name.value.decode('ascii', 'replace')} ({code})"
        except AttributeError:
            pass
        return f"CUDA error {code}"

    version = ctypes.c_int(0)
    r = cuda.cuDriverGetVersion(ctypes.byref(version))
    out["version"] = version.value if r == 0 else None
    out["green_context_entry_points"] = all(hasattr(cuda, n) for n in GREEN_CONTEXT_ENTRY_POINTS)
    r = cuda.cuInit(0)
    if r != 0:
        out["init_error"] = error_name(r)
        out["devices"] = []
        return out
    count = ctypes.c_int(0)
    r = cuda.cuDeviceGetCount(ctypes.byref(count))
    if r != 0:
        out["init_error"] = "cuDeviceGetCount: " + error_name(r)
        out["devices"] = []
        return out
    devices = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        entry = {"index": ordinal}
        r = cuda.cuDeviceGet(ctypes.byref(device), ordinal)
        if r != 0:
            entry["error"] = "cuDeviceGet: " + error_name(r)
            devices.append(entry)
            continue
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(name, 256, device) == 0:
            entry["name"] = name.value.decode("utf-8", "replace")
        uuid = ctypes.create_string_buffer(16)
        get_uuid = getattr(cuda, "cuDeviceGetUuid_v2", None) or getattr(cuda, "cuDeviceGetUuid")
        if get_uuid(uuid, device) == 0:
            entry["uuid"] = uuid.raw.hex()
        for key, attribute in CU_DEVICE_ATTRIBUTE.items():
            value = ctypes.c_int(0)
            if cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device) == 0:
                entry[key] = value.value
        if out["green_context_entry_points"]:
            resource = ctypes.create_string_buffer(512)
            r = cuda.cuDeviceGetDevResource(device, resource, CU_DEV_RESOURCE_TYPE_SM)
            if r == 0:
                sm_count, min_size, alignment = (
                    int.from_bytes(resource.raw[SM_RESOURCE_OFFSET + 4 * i:
                                                SM_RESOURCE_OFFSET + 4 * i + 4], "little")
                    for i in range(3))
                entry["sm_resource"] = {"sm_count": sm_count, "min_partition": min_size,
                                        "alignment": alignment}
            else:
                entry["sm_resource_error"] = "cuDeviceGetDevResource: " + error_name(r)
        devices.append(entry)
    out["devices"] = devices
    return out

print(json.dumps(main()))
'''

# The library, preloaded into a child Python that asks it for its version and mode: it loads as
# it would under `gpuprio run`, with GPUPRIO_MODE=off and coordination, tracing and the start line
# off, in a process that makes no CUDA call, so it can change nothing.
LIBRARY_PROBE = r'''
import ctypes, json
scope = ctypes.CDLL(None)
out = {}
for name in ("gpuprio_version", "gpuprio_mode"):
    try:
        function = getattr(scope, name)
    except AttributeError:
        continue
    function.restype = ctypes.c_char_p
    raw = function()
    out[name] = raw.decode("ascii", "replace") if raw is not None else None
print(json.dumps(out))
'''
PROBE_TIMEOUT_S = 60


def run_probe(code, env, args=(), timeout=PROBE_TIMEOUT_S):
    """Runs `code` in `python3 -I -S` (this interpreter) with `args` and exactly `env`: (parsed
    JSON or None, the child's stderr or why it gave no answer)."""
    import subprocess  # only doctor starts processes (run execs)
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", code, *args], env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL, capture_output=True)
    except subprocess.TimeoutExpired:
        return None, f"did not answer within {timeout} s"
    except OSError as e:
        return None, f"cannot start {sys.executable}: {e.strerror}"
    stderr = done.stderr.decode("utf-8", "replace").strip()
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            return json.loads(lines[-1]), stderr
        except ValueError:
            pass
    status = (f"exit {done.returncode}" if done.returncode >= 0
              else f"killed by signal {-done.returncode}")
    return None, f"{status}: {stderr.splitlines()[-1] if stderr else 'no output'}"


def probe_environment(environ, preload):
    """The environment for a probe child: this one without any GPUPRIO_* variable and without
    gpuprio in LD_PRELOAD (a shell that ran `eval "$(gpuprio env)"`), `preload` instead. The MPS
    client priority that gpuprio set (and marked) in this shell goes too: without its mark it
    would read as the user's."""
    env = {k: v for k, v in environ.items()
           if not k.startswith("GPUPRIO_") and k != "LD_PRELOAD"}
    if (environ.get("GPUPRIO_MPS_CLIENT_PRIORITY_SET", "").strip() == "1"
            and environ.get("CUDA_MPS_CLIENT_PRIORITY", "").strip() == "1"):
        env.pop("CUDA_MPS_CLIENT_PRIORITY", None)
    kept = [e for e in environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
            if e and os.path.basename(e) != LIB_NAME]
    if preload:
        kept.insert(0, preload)
    if kept:
        env["LD_PRELOAD"] = ":".join(kept)
    return env


def glibc_version():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    except (ValueError, OSError, AttributeError, IndexError):
        return None


def check_library(args, environ):
    """{"path", "found", "loads", "version", "mode", "error"}."""
    result = {"path": None, "found": False, "loads": False, "version": None, "error": None,
              "glibc": glibc_version()}
    try:
        result["path"] = find_library(args.lib, environ)
    except UsageError as e:
        result["error"] = str(e)
        return result
    result["found"] = True
    env = probe_environment(environ, result["path"])
    env.update({"GPUPRIO_MODE": "off", "GPUPRIO_COORDINATE": "0", "GPUPRIO_LOG": "error"})
    answer, stderr = run_probe(LIBRARY_PROBE, env)
    if answer and answer.get("gpuprio_version"):
        result.update({"loads": True, "version": answer["gpuprio_version"]})
        return result
    # The loader says why it skipped the library ("cannot open shared object file", "version
    # `GLIBC_2.38' not found", "wrong ELF class") on stderr, and runs the program without it.
    loader = [line for line in (stderr or "").splitlines()
              if "ld.so" in line or "LD_PRELOAD" in line]
    result["error"] = (loader[-1] if loader else stderr) or "it exports no gpuprio_version"
    return result


def check_driver(args, environ):
    env = probe_environment(environ, None)
    answer, why = run_probe(DRIVER_PROBE, env, [args.cuda_lib] if args.cuda_lib else [])
    if answer is None:
        return {"found": None, "error": f"the driver probe failed: {why}", "devices": []}
    answer.setdefault("devices", [])
    return answer


def driver_version_text(version):
    return None if version is None else f"{version // 1000}.{version % 1000 // 10}"


def reserved_setting(environ, name, default):
    """A GPUPRIO_* value as the library would take it here (a bad one: its default)."""
    text = environ.get(name, "")
    if not text.strip(ASCII_SPACE):
        return default
    try:
        return check_env_value(name, name, text)
    except UsageError:
        return default


def isolation_verdict(driver, device, environ):
    """(available: bool, text) for spatial isolation on `device`, as sm_partition.cc decides it:
    the driver's green-context entry points (cuGreenCtxStreamCreate is CUDA 12.5's: drivers of
    branch 555 on), the device's SM resource,
    and a split that leaves at least GPUPRIO_RESERVED_SMS SMs free in groups of the device's
    granularity."""
    table = env_table()
    isolation = reserved_setting(environ, "GPUPRIO_ISOLATION",
                                 table.get("GPUPRIO_ISOLATION", {}).get("default", "active"))
    reserved = int(reserved_setting(environ, "GPUPRIO_RESERVED_SMS",
                                    table.get("GPUPRIO_RESERVED_SMS", {}).get("default", "16")))
    if not driver.get("green_context_entry_points"):
        return False, ("no green contexts in this driver (a CUDA 12.5 driver or later needed): "
                       "lower work is kept to the in-flight budget instead")
    resource = device.get("sm_resource")
    if resource is None:
        return False, (f"the device's SMs cannot be partitioned "
                       f"({device.get('sm_resource_error', 'no SM resource')}; MIG instances and "
                       f"some GPUs have none): the in-flight budget instead")
    sms = resource["sm_count"]
    granularity = max(resource["alignment"], resource["min_partition"], 1)
    wanted = max(0, sms - max(0, reserved))
    confined = 0 if sms < 2 * granularity else max(granularity, wanted // granularity * granularity)
    if isolation == "off" or reserved == 0:
        return False, "off by GPUPRIO_ISOLATION / GPUPRIO_RESERVED_SMS: the in-flight budget"
    if confined == 0 or confined >= sms:
        return False, (f"{sms} SMs cannot keep {reserved} free in groups of {granularity}: the "
                       f"in-flight budget instead")
    return True, (f"green contexts: {confined} of {sms} SMs for confined work, {sms - confined} "
                  f"kept free (GPUPRIO_RESERVED_SMS={reserved}, groups of {granularity})")


def toolkit_version(root):
    """CUDART_VERSION of the toolkit at root as "MAJOR.MINOR", or None."""
    try:
        with open(os.path.join(root, "include", "cuda_runtime_api.h"), encoding="utf-8",
                  errors="replace") as f:
            for line in f:
                match = re.match(r"\s*#\s*define\s+CUDART_VERSION\s+([0-9]+)", line)
                if match:
                    value = int(match[1])
                    return f"{value // 1000}.{value % 1000 // 10}"
    except OSError:
        pass
    return None


def check_runtime(environ):
    """The CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda) and its runtime library. A
    program may bring its own runtime instead (PyTorch's wheels do): gpuprio needs none."""
    roots = []
    for candidate in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and candidate not in roots and os.path.isdir(candidate):
            roots.append(candidate)
    for root in roots:
        version = toolkit_version(root)
        if version is None:
            continue
        runtimes = []
        for lib_dir in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            try:
                names = os.listdir(os.path.join(root, lib_dir))
            except OSError:
                continue
            runtimes += [os.path.join(root, lib_dir, n) for n in sorted(names)
                         if re.fullmatch(r"libcudart\.so\.[0-9]+", n)]
        return {"toolkit": os.path.realpath(root), "version": version, "runtime": runtimes[:1]}
    return {"toolkit": None, "version": None, "runtime": []}


def check_mps(environ, driver):
    """Whether an MPS control daemon serves this environment (mps.serves: its pipe directory,
    CUDA_MPS_PIPE_DIRECTORY or NVIDIA's default, holds its control pipe and the pid file of a
    running daemon); and whether the driver reports MPS for each device
    (CU_DEVICE_ATTRIBUTE_MPS_ENABLED)."""
    import shutil  # only doctor needs it
    from .mps import SYSTEM_PIPE_DIR, serves
    enabled = [d["index"] for d in driver.get("devices", []) if d.get("mps_enabled")]
    return {"control_command": shutil.which("nvidia-cuda-mps-control",
                                            path=environ.get("PATH", os.defpath)),
            "pipe_directory": environ.get("CUDA_MPS_PIPE_DIRECTORY") or SYSTEM_PIPE_DIR,
            "running": serves(environ), "enabled_on_devices": enabled}


def check_sharing(environ, shm_dir, mps):
    """The GPUs where gpuprio processes of different priorities share the GPU (live slots of one
    segment, as `top` reads them) while no MPS daemon serves this environment and the driver
    reports MPS on no device: [{"gpu", "domain", "processes"}]; [] under MPS."""
    from .mps import mixed_priority_gpus, serves
    if serves(environ) or mps.get("enabled_on_devices"):
        return []
    every_gpu = {k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return mixed_priority_gpus(every_gpu, shm_dir=shm_dir)


def nvidia_kernel_driver():
    """The NVIDIA kernel module's version (the driver branch, 580.95.05 say), or None."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            match = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([0-9]+(?:\.[0-9]+)+)", f.read())
    except OSError:
        return None
    return match[1] if match else None


def version_tuple(text):
    return tuple(int(part) for part in text.split(".")) if text else None
