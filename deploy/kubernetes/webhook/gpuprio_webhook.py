#!/usr/bin/env python3
"""gpuprio's mutating admission webhook: Python standard library only (ssl + http.server).

Accepts AdmissionReview v1 requests for Pods (POST, any path; GET /healthz answers "ok") and
answers an AdmissionReview v1 response. A Pod being created that

  * has the annotation gpuprio.io/priority: high|normal|low|<integer in [-100, 100]>, or whose
    spec.priorityClassName the configuration maps to one of those, and
  * has a container asking for a GPU (resources.limits or .requests of a configured resource,
    default nvidia.com/gpu, above 0), or containers named in the annotation
    gpuprio.io/containers ("name,name" or "*")

gets a JSONPatch (RFC 6902) that, in each such container (init containers only when they ask for a
GPU or are named), sets LD_PRELOAD (the library first, an existing value's entries kept after it),
GPUPRIO_PRIORITY, GPUPRIO_SHM_DIR (and GPUPRIO_SHARE_GROUP, CUDA_MPS_PIPE_DIRECTORY where
configured), mounts the node's library directory read-only and the segment directory, and marks
the Pod with the annotation gpuprio.io/injected. Everything else is allowed untouched. The webhook
never denies a Pod: what it cannot or will not do becomes a warning in the response.

Configuration: a JSON file (--config, a mounted ConfigMap; see DEFAULT_CONFIG for the keys).
TLS: --cert and --key (PEM); they are read again when their files change (cert-manager renews).
"""
import argparse
import base64
import copy
import http.server
import json
import os
import re
import socketserver
import ssl
import sys
import threading
import time

ANNOTATION_PRIORITY = "gpuprio.io/priority"
ANNOTATION_CONTAINERS = "gpuprio.io/containers"
ANNOTATION_INJECTED = "gpuprio.io/injected"

VOLUME_LIB = "gpuprio-lib"
VOLUME_SEGMENTS = "gpuprio-segments"
VOLUME_MPS_PIPE = "gpuprio-mps-pipe"
VOLUME_MPS_SHM = "gpuprio-mps-shm"

# The configuration's keys and their defaults; a file given with --config replaces those it names.
DEFAULT_CONFIG = {
    # The node directory the DaemonSet installs into, and where containers see it.
    "libraryHostPath": "/opt/gpuprio",
    "libraryMountPath": "/opt/gpuprio",
    "libraryName": "libgpuprio.so",
    # The node directory the segments live in (GPUPRIO_SHM_DIR), and where containers see it.
    "segmentHostPath": "/run/gpuprio",
    "segmentMountPath": "/run/gpuprio",
    # A group id: GPUPRIO_SHARE_GROUP and the Pod's securityContext.supplementalGroups get it, so
    # Pods of different uids coordinate. null: each uid coordinates with its own uid only.
    "shareGroup": None,
    # spec.priorityClassName -> gpuprio priority, for Pods without the annotation.
    "priorityClassMap": {},
    # Extended resources that count as a GPU.
    "gpuResources": ["nvidia.com/gpu"],
    # MPS: mount the control daemon's pipe directory and set CUDA_MPS_PIPE_DIRECTORY; shmHostPath,
    # when set, is the node directory the MPS daemon uses as /dev/shm, mounted at /dev/shm too.
    "mps": {"enabled": False, "pipeHostPath": "/run/nvidia-mps", "pipeMountPath": "/run/nvidia-mps",
            "shmHostPath": ""},
}

PRIORITY_NAMES = ("low", "normal", "high")
PRIORITY_MIN, PRIORITY_MAX = -100, 100  # scheduler/base/env_vars.def, GPUPRIO_PRIORITY
MAX_BODY = 8 * 1024 * 1024


def log(message):
    sys.stderr.write(f"gpuprio-webhook: {message}\n")
    sys.stderr.flush()


def load_config(path):
    config = copy.deepcopy(DEFAULT_CONFIG)
    if path:
        with open(path, encoding="utf-8") as f:
            given = json.load(f)
        if not isinstance(given, dict):
            raise ValueError(f"{path}: the configuration must be a JSON object")
        unknown = sorted(set(given) - set(DEFAULT_CONFIG))
        if unknown:
            raise ValueError(f"{path}: unknown keys {unknown}")
        for key, value in given.items():
            if key == "mps":
                if not isinstance(value, dict):
                    raise ValueError(f"{path}: mps must be an object")
                config["mps"].update(value)
            else:
                config[key] = value
    for key in ("libraryHostPath", "libraryMountPath", "segmentHostPath", "segmentMountPath"):
        if not isinstance(config[key], str) or not config[key].startswith("/"):
            raise ValueError(f"{key} must be an absolute path")
    group = config["shareGroup"]
    if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
        raise ValueError("shareGroup must be a group id (an integer >= 0) or null")
    if not isinstance(config["priorityClassMap"], dict):
        raise ValueError("priorityClassMap must be an object")
    for name, value in config["priorityClassMap"].items():
        if parse_priority(value) is None:
            raise ValueError(f"priorityClassMap[{name!r}]: {value!r} is no gpuprio priority")
    return config


def parse_priority(value):
    """'high'/'normal'/'low' (any case) or an integer in [-100, 100] as a normalized string; None
    for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.lower() in PRIORITY_NAMES:
        return text.lower()
    if re.fullmatch(r"[+-]?[0-9]{1,4}", text):
        number = int(text)
        if PRIORITY_MIN <= number <= PRIORITY_MAX:
            return str(number)
    return None


def quantity_positive(value):
    """Whether a resource quantity (1, "1", "2", "500m", "1k") is above zero."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value > 0
    if not isinstance(value, str):
        return False
    match = re.fullmatch(r"\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
    if not match:
        return False
    try:
        return float(match.group(1)) > 0
    except ValueError:
        return False


def wants_gpu(container, resources):
    spec = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = spec.get(section) or {}
        if isinstance(values, dict) and any(quantity_positive(values.get(r)) for r in resources):
            return True
    return False


def escape(token):
    """A JSON Pointer (RFC 6901) reference token."""
    return token.replace("~", "~0").replace("/", "~1")


def prepend_preload(lib, current):
    """As tools/cli/gpuprio's: `lib` first, the other entries kept in order, a copy of `lib`
    dropped; ld.so takes ':' and ' ' as separators, the result uses ':'."""
    entries = [e for e in current.replace(" ", ":").split(":") if e]
    return ":".join([lib] + [e for e in entries if e != lib])


class Mutation:
    """The JSONPatch for one Pod, and the warnings."""

    def __init__(self, config, pod):
        self.config = config
        self.pod = pod
        self.patch = []
        self.warnings = []

    def container_env(self, priority):
        config = self.config
        env = [("GPUPRIO_PRIORITY", priority), ("GPUPRIO_SHM_DIR", config["segmentMountPath"])]
        if config["shareGroup"] is not None:
            env.append(("GPUPRIO_SHARE_GROUP", str(config["shareGroup"])))
        if config["mps"].get("enabled"):
            env.append(("CUDA_MPS_PIPE_DIRECTORY", config["mps"]["pipeMountPath"]))
        return env

    def container_mounts(self):
        config = self.config
        mounts = [
            {"name": VOLUME_LIB, "mountPath": config["libraryMountPath"], "readOnly": True},
            {"name": VOLUME_SEGMENTS, "mountPath": config["segmentMountPath"]},
        ]
        if config["mps"].get("enabled"):
            mounts.append({"name": VOLUME_MPS_PIPE, "mountPath": config["mps"]["pipeMountPath"]})
            if config["mps"].get("shmHostPath"):
                mounts.append({"name": VOLUME_MPS_SHM, "mountPath": "/dev/shm"})
        return mounts

    def pod_volumes(self):
        config = self.config
        volumes = [
            {"name": VOLUME_LIB,
             "hostPath": {"path": config["libraryHostPath"], "type": "Directory"}},
            {"name": VOLUME_SEGMENTS,
             "hostPath": {"path": config["segmentHostPath"], "type": "Directory"}},
        ]
        if config["mps"].get("enabled"):
            volumes.append({"name": VOLUME_MPS_PIPE,
                            "hostPath": {"path": config["mps"]["pipeHostPath"],
                                         "type": "Directory"}})
            if config["mps"].get("shmHostPath"):
                volumes.append({"name": VOLUME_MPS_SHM,
                                "hostPath": {"path": config["mps"]["shmHostPath"],
                                             "type": "Directory"}})
        return volumes

    def inject_container(self, path, container, priority):
        name = container.get("name", "?")
        lib = self.config["libraryMountPath"].rstrip("/") + "/" + self.config["libraryName"]
        env = container.get("env")
        wanted = [("LD_PRELOAD", lib)] + self.container_env(priority)
        if not isinstance(env, list) or not env:
            self.patch.append({"op": "add", "path": f"{path}/env",
                               "value": [{"name": n, "value": v} for n, v in wanted]})
        else:
            by_name = {}
            for index, entry in enumerate(env):
                if isinstance(entry, dict) and "name" in entry:
                    by_name.setdefault(entry["name"], index)
            for var, value in wanted:
                index = by_name.get(var)
                if index is None:
                    self.patch.append({"op": "add", "path": f"{path}/env/-",
                                       "value": {"name": var, "value": value}})
                    continue
                entry = env[index]
                if "valueFrom" in entry:
                    self.warnings.append(
                        f"gpuprio: container {name}: {var} comes from valueFrom; left as it is"
                        + (f" (add {lib} to it for gpuprio to load)" if var == "LD_PRELOAD" else ""))
                    continue
                current = entry.get("value", "")
                if not isinstance(current, str):
                    current = ""
                if var == "LD_PRELOAD":
                    new = prepend_preload(lib, current)
                    if new != current:
                        self.patch.append({"op": "replace" if "value" in entry else "add",
                                           "path": f"{path}/env/{index}/value", "value": new})
                elif current != value:
                    # The container's own setting wins; say so.
                    self.warnings.append(f"gpuprio: container {name}: its own {var}={current} "
                                         f"kept (the webhook would set {value})")
        mounts = container.get("volumeMounts")
        wanted_mounts = self.container_mounts()
        if not isinstance(mounts, list) or not mounts:
            self.patch.append({"op": "add", "path": f"{path}/volumeMounts", "value": wanted_mounts})
        else:
            names = {m.get("name") for m in mounts if isinstance(m, dict)}
            paths = {m.get("mountPath") for m in mounts if isinstance(m, dict)}
            for mount in wanted_mounts:
                if mount["name"] in names:
                    continue
                if mount["mountPath"] in paths:
                    self.warnings.append(f"gpuprio: container {name}: something else is mounted "
                                         f"at {mount['mountPath']}; {mount['name']} not mounted")
                    continue
                self.patch.append({"op": "add", "path": f"{path}/volumeMounts/-", "value": mount})

    def run(self, priority, selected):
        spec = self.pod["spec"]
        for section in ("initContainers", "containers"):
            containers = spec.get(section)
            if not isinstance(containers, list):
                continue
            for index, container in enumerate(containers):
                if isinstance(container, dict) and container.get("name") in selected:
                    self.inject_container(f"/spec/{section}/{index}", container, priority)
        volumes = spec.get("volumes")
        wanted = self.pod_volumes()
        if not isinstance(volumes, list) or not volumes:
            self.patch.append({"op": "add", "path": "/spec/volumes", "value": wanted})
        else:
            names = {v.get("name") for v in volumes if isinstance(v, dict)}
            for volume in wanted:
                if volume["name"] not in names:
                    self.patch.append({"op": "add", "path": "/spec/volumes/-", "value": volume})
        group = self.config["shareGroup"]
        if group is not None:
            security = spec.get("securityContext")
            if not isinstance(security, dict):
                self.patch.append({"op": "add", "path": "/spec/securityContext",
                                   "value": {"supplementalGroups": [group]}})
            elif not isinstance(security.get("supplementalGroups"), list):
                self.patch.append({"op": "add", "path": "/spec/securityContext/supplementalGroups",
                                   "value": [group]})
            elif group not in security["supplementalGroups"]:
                self.patch.append({"op": "add",
                                   "path": "/spec/securityContext/supplementalGroups/-",
                                   "value": group})
        annotations = self.pod.get("metadata", {}).get("annotations")
        if not isinstance(annotations, dict):
            self.patch.append({"op": "add", "path": "/metadata/annotations",
                               "value": {ANNOTATION_INJECTED: "true"}})
        else:
            self.patch.append({"op": "add",
                               "path": "/metadata/annotations/" + escape(ANNOTATION_INJECTED),
                               "value": "true"})


def mutate_pod(config, pod):
    """(patch or None, warnings) for a Pod object being created."""
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return None, []
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = {}
    if ANNOTATION_INJECTED in annotations:
        return None, []  # injected already (a re-applied webhook, a second webhook pass)
    spec = pod["spec"]
    if ANNOTATION_PRIORITY in annotations:
        raw = annotations[ANNOTATION_PRIORITY]
        priority = parse_priority(raw)
        if priority is None:
            return None, [f"gpuprio: annotation {ANNOTATION_PRIORITY}={str(raw)[:40]!r} is not "
                          f"high, normal, low or an integer in [{PRIORITY_MIN}, {PRIORITY_MAX}]; "
                          "gpuprio not injected"]
    else:
        priority_class = spec.get("priorityClassName")
        mapped = config["priorityClassMap"].get(priority_class) if priority_class else None
        if mapped is None:
            return None, []
        priority = parse_priority(mapped)
    named = annotations.get(ANNOTATION_CONTAINERS)
    names = set()
    if isinstance(named, str):
        names = {n.strip() for n in named.split(",") if n.strip()}
    selected = set()
    for section in ("initContainers", "containers"):
        for container in spec.get(section) or []:
            if not isinstance(container, dict) or not isinstance(container.get("name"), str):
                continue
            if ("*" in names and section == "containers") or container["name"] in names or \
                    wants_gpu(container, config["gpuResources"]):
                selected.add(container["name"])
    if not selected:
        return None, []
    mutation = Mutation(config, pod)
    mutation.run(priority, selected)
    return mutation.patch, mutation.warnings


def review_response(config, review):
    """The AdmissionReview response for a parsed request body; ValueError if it is no
    AdmissionReview v1 request."""
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview" or \
            review.get("apiVersion") != "admission.k8s.io/v1":
        raise ValueError("not an admission.k8s.io/v1 AdmissionReview")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise ValueError("no request with a uid")
    response = {"uid": request["uid"], "allowed": True}
    kind = request.get("kind") or {}
    is_pod = isinstance(kind, dict) and kind.get("group", "") == "" and kind.get("kind") == "Pod"
    if is_pod and request.get("operation") == "CREATE" and not request.get("subResource"):
        try:
            patch, warnings = mutate_pod(config, request.get("object"))
        except Exception as error:  # never block a Pod over a bug here: fail open, say so
            log(f"request {request['uid']}: {type(error).__name__}: {error}")
            patch, warnings = None, [f"gpuprio: webhook error ({type(error).__name__}); "
                                     "gpuprio not injected"]
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        if warnings:
            response["warnings"] = warnings
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "gpuprio-webhook"
    protocol_version = "HTTP/1.1"
    timeout = 10  # seconds a connection may stay silent

    def log_message(self, fmt, *args):
        if self.server.verbose:
            log(f"{self.client_address[0]} {fmt % args}")

    def reply(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path in ("/healthz", "/readyz"):
            self.reply(200, "ok\n", "text/plain")
        else:
            self.reply(404, "not found\n", "text/plain")

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            self.reply(411 if "Content-Length" not in self.headers else 400,
                       json.dumps({"error": "a Content-Length is needed"}))
            return
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self.reply(413 if length > 0 else 400, json.dumps({"error": "bad body length"}))
            return
        body = self.rfile.read(length)
        try:
            review = json.loads(body.decode("utf-8"))
            answer = review_response(self.server.config, review)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            self.reply(400, json.dumps({"error": f"bad AdmissionReview: {error}"[:300]}))
            return
        self.reply(200, json.dumps(answer))


class WebhookServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """HTTPS: each accepted connection is wrapped with the current certificate; the files are
    checked for changes at most every `reload_s` seconds."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, config, cert, key, verbose=False, reload_s=30.0):
        super().__init__(address, Handler)
        self.config = config
        self.verbose = verbose
        self.cert, self.key, self.reload_s = cert, key, reload_s
        self.lock = threading.Lock()
        self.stamp = None
        self.checked = 0.0
        self.context = None
        self.reload_tls()

    def reload_tls(self):
        stamp = (os.stat(self.cert).st_mtime_ns, os.stat(self.key).st_mtime_ns)
        if stamp == self.stamp:
            return
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert, self.key)
        self.context, self.stamp = context, stamp
        log(f"serving with {self.cert}")

    def get_request(self):
        sock, address = self.socket.accept()
        with self.lock:
            now = time.monotonic()
            if now - self.checked >= self.reload_s:
                self.checked = now
                try:
                    self.reload_tls()
                except (OSError, ssl.SSLError) as error:  # keep the last good certificate
                    log(f"cannot reload {self.cert}: {error}")
            context = self.context
        sock.settimeout(Handler.timeout)
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request, client_address):
        # A failed handshake or a dropped connection: one line, no traceback, keep serving.
        log(f"{client_address[0]}: {sys.exc_info()[1]!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8443, help="port (default 8443; 0: any)")
    parser.add_argument("--cert", required=True, help="PEM serving certificate (chain)")
    parser.add_argument("--key", required=True, help="PEM private key")
    parser.add_argument("--config", default="", help="JSON configuration file")
    parser.add_argument("--port-file", default="", help="write the bound port there (tests)")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except (OSError, ValueError) as error:
        log(f"bad configuration: {error}")
        return 2
    server = WebhookServer((args.listen, args.port), config, args.cert, args.key, args.verbose)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    log(f"listening on {args.listen}:{port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
