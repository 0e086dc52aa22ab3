"""What the benchmark reports share: the spread of a value over rounds, ratios that tolerate a
missing baseline, and formatting that prints "-" for what was not measured. Imported by the report
scripts next to it (run as `python3 tools/bench/SCRIPT.py`, so this directory is on sys.path)."""

import statistics


def spread(values):
    """Median, min and max of the values that were measured (None ones dropped)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(values), "median": statistics.median(values), "min": min(values),
            "max": max(values)}


def ratio(a, b):
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or not b:
        return None
    return a / b


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def fmt_spread(s, spec):
    """"median [min-max]", or the median alone for one value, or "-" for none."""
    if not s or s["median"] is None:
        return "-"
    if s["n"] == 1:
        return format(s["median"], spec)
    return "%s [%s-%s]" % (format(s["median"], spec), format(s["min"], spec), format(s["max"], spec))
