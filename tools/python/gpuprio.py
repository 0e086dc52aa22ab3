"""gpuprio's C API (hook/include/gpuprio.h) for Python, through ctypes. Standard library only.

    import gpuprio

    with gpuprio.priority("high"):      # this thread's GPU work is high priority in the block
        y = model(x)

    gpuprio.set_thread_priority(-1)     # or "low"; GPUPRIO_PRIORITY_UNSET drops the setting
    gpuprio.get_thread_priority()       # an int, PRIORITY_UNSET when the thread has no setting
    gpuprio.stats()                     # one dict per priority level seen, highest first
    gpuprio.mode()                      # "schedule", "passthrough" or "off"
    gpuprio.available()                 # is libgpuprio.so loaded in this process?
    gpuprio.version()                   # the loaded library's version, else __version__

The functions are looked up in the process's global scope (dlsym RTLD_DEFAULT semantics), where
`gpuprio run` or LD_PRELOAD put libgpuprio.so; this module never loads the library itself. Without
it every call is a harmless no-op that warns once (RuntimeWarning), so one script runs with and
without gpuprio. A bad priority raises ValueError (or TypeError) either way.

Priorities are per thread (larger = more important): a thread's setting beats its stream's
priority, which beats the process default (GPUPRIO_PRIORITY).
"""

import contextlib
import ctypes
import os
import re
import threading
import warnings

__all__ = [
    "PRIORITY_LOW", "PRIORITY_NORMAL", "PRIORITY_HIGH", "PRIORITY_MIN", "PRIORITY_MAX",
    "PRIORITY_UNSET", "available", "set_thread_priority", "get_thread_priority",
    "default_priority", "mode", "stats", "priority", "to_priority", "version", "__version__",
]

# Mirrors of gpuprio.h's #defines (a test compares them with the header text).
PRIORITY_LOW = -1
PRIORITY_NORMAL = 0
PRIORITY_HIGH = 1
PRIORITY_MIN = -100
PRIORITY_MAX = 100
PRIORITY_UNSET = -1000  # "no thread setting": the stream's priority or the process default applies

_NAMED_PRIORITIES = {"low": PRIORITY_LOW, "normal": PRIORITY_NORMAL, "high": PRIORITY_HIGH}


def _own_version():
    """This module's version (docs/build.md, "Versions"): the first line of a file named VERSION
    beside it (where a package installs it) or, in a checkout, of the repository's top-level
    VERSION; "unknown" when neither is there or it is not MAJOR.MINOR.PATCH[-PRERELEASE]."""
    for here in (os.path.dirname(os.path.abspath(__file__)),
                 os.path.dirname(os.path.realpath(__file__))):
        for path in (os.path.join(here, "VERSION"), os.path.join(here, "..", "..", "VERSION")):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.readline().strip()
            except (OSError, UnicodeDecodeError):
                continue
            if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?", text):
                return text
            return "unknown"
    return "unknown"


__version__ = _own_version()


class _PriorityStats(ctypes.Structure):
    """gpuprio_priority_stats, field for field."""

    _fields_ = [
        ("priority", ctypes.c_int32),
        ("reserved", ctypes.c_uint32),
        ("ops_submitted", ctypes.c_uint64),
        ("ops_issued", ctypes.c_uint64),
        ("ops_on_caller", ctypes.c_uint64),
        ("queue_delay_ns_sum", ctypes.c_uint64),
        ("queue_delay_ns_max", ctypes.c_uint64),
        ("in_flight_ops", ctypes.c_uint64),
        ("in_flight_estimated_ns", ctypes.c_uint64),
    ]


# name -> (restype, argtypes), every function of gpuprio.h.
_SIGNATURES = {
    "gpuprio_set_thread_priority": (ctypes.c_int, [ctypes.c_int]),
    "gpuprio_get_thread_priority": (ctypes.c_int, []),
    "gpuprio_get_default_priority": (ctypes.c_int, []),
    "gpuprio_mode": (ctypes.c_char_p, []),
    "gpuprio_version": (ctypes.c_char_p, []),
    "gpuprio_get_stats": (ctypes.c_int, [ctypes.POINTER(_PriorityStats), ctypes.c_int]),
}

_lock = threading.Lock()
_api = None  # guarded by _lock until set: a dict name -> ctypes function, or {} when absent
_warned = False  # guarded by _lock


def _load():
    """The API functions, resolved once; {} when libgpuprio.so is not in the global scope."""
    global _api
    api = _api
    if api is not None:
        return api
    with _lock:
        if _api is None:
            try:
                scope = ctypes.CDLL(None)  # dlopen(NULL): the program and its global libraries
                found = {}
                for name, (restype, argtypes) in _SIGNATURES.items():
                    function = getattr(scope, name)
                    function.restype = restype
                    function.argtypes = argtypes
                    found[name] = function
            except (AttributeError, OSError):
                found = {}  # absent, or an older library without part of the API
            _api = found
        return _api


def _api_or_warn():
    """The API, or None after warning (once per process) that gpuprio is not loaded."""
    global _warned
    api = _load()
    if api:
        return api
    with _lock:
        first = not _warned
        _warned = True
    if first:
        warnings.warn(
            "gpuprio: libgpuprio.so is not loaded in this process (start the program with "
            "`gpuprio run` or LD_PRELOAD); gpuprio calls do nothing", RuntimeWarning,
            stacklevel=3)
    return None


def available():
    """True when libgpuprio.so (with the whole C API) is loaded in this process. Never warns."""
    return bool(_load())


def to_priority(p):
    """"low" / "normal" / "high" (any case) or an int in [PRIORITY_MIN, PRIORITY_MAX], or
    PRIORITY_UNSET, as the int the C API takes. ValueError or TypeError otherwise."""
    if isinstance(p, str):
        try:
            return _NAMED_PRIORITIES[p.strip().lower()]
        except KeyError:
            raise ValueError(f"gpuprio: priority {p!r} is not low, normal or high") from None
    if isinstance(p, bool) or not isinstance(p, int):
        raise TypeError(f"gpuprio: priority must be a str or an int, not {type(p).__name__}")
    if p != PRIORITY_UNSET and not PRIORITY_MIN <= p <= PRIORITY_MAX:
        raise ValueError(
            f"gpuprio: priority {p} is outside [{PRIORITY_MIN}, {PRIORITY_MAX}] "
            "and not PRIORITY_UNSET")
    return p


def set_thread_priority(p):
    """Sets the calling thread's priority for the GPU work it submits from now on."""
    value = to_priority(p)
    api = _api_or_warn()
    if api is None:
        return
    if api["gpuprio_set_thread_priority"](value) != 0:
        raise ValueError(f"gpuprio: the library rejected priority {value}")


def get_thread_priority():
    """The calling thread's setting, or PRIORITY_UNSET (also when gpuprio is not loaded)."""
    api = _api_or_warn()
    return PRIORITY_UNSET if api is None else api["gpuprio_get_thread_priority"]()


def default_priority():
    """The process default priority (GPUPRIO_PRIORITY), or None when gpuprio is not loaded."""
    api = _api_or_warn()
    return None if api is None else api["gpuprio_get_default_priority"]()


def mode():
    """"schedule", "passthrough" or "off"; None when gpuprio is not loaded."""
    api = _api_or_warn()
    if api is None:
        return None
    raw = api["gpuprio_mode"]()
    return raw.decode("ascii", "replace") if raw is not None else None


def version():
    """The version of the libgpuprio.so loaded in this process (gpuprio_version()), or this
    module's own __version__ when none is loaded. Never warns."""
    api = _load()
    raw = api["gpuprio_version"]() if api else None
    return raw.decode("ascii", "replace") if raw is not None else __version__


def stats():
    """One dict per priority level seen so far, highest priority first ([] when not loaded).

    Keys: priority, ops_submitted, ops_issued, ops_on_caller, queue_delay_ns_sum,
    queue_delay_ns_max, in_flight_ops, in_flight_estimated_ns (see gpuprio.h).
    """
    api = _api_or_warn()
    if api is None:
        return []
    get_stats = api["gpuprio_get_stats"]
    capacity = max(get_stats(None, 0), 0) + 4  # levels may appear between the two calls
    while True:
        buffer = (_PriorityStats * capacity)()
        count = get_stats(buffer, capacity)
        if count <= capacity:
            break
        capacity = count + 4
    names = [name for name, _ in _PriorityStats._fields_ if name != "reserved"]
    return [{name: getattr(entry, name) for name in names} for entry in buffer[:max(count, 0)]]


@contextlib.contextmanager
def priority(p):
    """Runs the block with the calling thread's priority set to `p`; restores the previous
    setting on exit, also when the block raises. Nests. Works as a decorator too.

    Only work submitted from this thread is affected: PyTorch's autograd runs backward() on its
    own threads, which follow the stream priority or the process default instead.
    """
    value = to_priority(p)
    api = _api_or_warn()
    if api is None:
        yield
        return
    previous = api["gpuprio_get_thread_priority"]()
    set_thread_priority(value)
    try:
        yield
    finally:
        api["gpuprio_set_thread_priority"](previous)
