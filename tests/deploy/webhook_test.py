"""deploy/kubernetes: the admission webhook over real HTTPS, gen_certs.sh, and the manifests.

Run by webhook_test.cc (a Catch2 case) with the paths in GPUPRIO_DEPLOY_DIR (deploy/ in the
runfiles). Certificates are made by gen_certs.sh with openssl in TEST_TMPDIR; two webhook servers
(MPS off / on) listen on ephemeral ports of 127.0.0.1; every request goes over TLS with the test's
CA verified. Each patch is applied with the RFC 6902 implementation below and the resulting pod is
checked. The manifests are parsed with a strict YAML subset parser (anything outside the subset
fails the test) and checked for the keys and cross-references named in ManifestTest.
"""
import base64
import copy
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

DEPLOY = os.environ.get("GPUPRIO_DEPLOY_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
WEBHOOK = os.path.join(K8S, "webhook", "gpuprio_webhook.py")
GEN_CERTS = os.path.join(K8S, "webhook", "gen_certs.sh")
TESTDATA = os.path.join(K8S, "webhook", "testdata")
LIB = "/opt/gpuprio/libgpuprio.so"


# --- RFC 6902 JSON Patch (add, remove, replace; the rest is not needed and refused) -------------

class PatchError(Exception):
    pass


def pointer_tokens(pointer):
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"bad pointer {pointer!r}")
    tokens = []
    for token in pointer[1:].split("/"):
        if re.search(r"~[^01]|~$", token):
            raise PatchError(f"bad escape in {pointer!r}")
        tokens.append(token.replace("~1", "/").replace("~0", "~"))
    return tokens


def array_index(container, token, for_add):
    if token == "-" and for_add:
        return len(container)
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise PatchError(f"bad array index {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not for_add):
        raise PatchError(f"index {index} out of range")
    return index


def apply_patch(document, patch):
    document = copy.deepcopy(document)
    for op in patch:
        kind, tokens = op["op"], pointer_tokens(op["path"])
        if not tokens:
            if kind in ("add", "replace"):
                document = copy.deepcopy(op["value"])
                continue
            raise PatchError("cannot remove the root")
        parent = document
        for token in tokens[:-1]:
            if isinstance(parent, list):
                parent = parent[array_index(parent, token, False)]
            elif isinstance(parent, dict) and token in parent:
                parent = parent[token]
            else:
                raise PatchError(f"{op['path']}: {token!r} does not exist")
        last = tokens[-1]
        if isinstance(parent, list):
            if kind == "add":
                parent.insert(array_index(parent, last, True), copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[array_index(parent, last, False)] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[array_index(parent, last, False)]
            else:
                raise PatchError(f"unsupported op {kind}")
        elif isinstance(parent, dict):
            if kind == "add":
                parent[last] = copy.deepcopy(op["value"])
            elif kind in ("replace", "remove"):
                if last not in parent:
                    raise PatchError(f"{op['path']} does not exist")
                if kind == "replace":
                    parent[last] = copy.deepcopy(op["value"])
                else:
                    del parent[last]
            else:
                raise PatchError(f"unsupported op {kind}")
        else:
            raise PatchError(f"{op['path']}: parent is no container")
    return document


class JsonPatchSelfTest(unittest.TestCase):
    def test_rfc6902_examples(self):
        doc = {"a": {"b~c": 1, "d/e": [1, 2]}, "f": []}
        out = apply_patch(doc, [
            {"op": "add", "path": "/a/d~1e/-", "value": 3},
            {"op": "add", "path": "/a/d~1e/0", "value": 0},
            {"op": "replace", "path": "/a/b~0c", "value": 2},
            {"op": "remove", "path": "/f"},
            {"op": "add", "path": "/g", "value": {"h": 1}},
        ])
        self.assertEqual(out, {"a": {"b~c": 2, "d/e": [0, 1, 2, 3]}, "g": {"h": 1}})
        self.assertEqual(doc["a"]["d/e"], [1, 2])  # the input is not changed
        for bad in ([{"op": "add", "path": "/x/y", "value": 1}],
                    [{"op": "replace", "path": "/a/zz", "value": 1}],
                    [{"op": "add", "path": "/a/d~1e/5", "value": 1}],
                    [{"op": "add", "path": "/a/d~1e/01", "value": 1}],
                    [{"op": "remove", "path": "/a/d~1e/-"}],
                    [{"op": "add", "path": "/a/b~2", "value": 1}]):
            with self.assertRaises(PatchError):
                apply_patch(doc, bad)


# --- The servers --------------------------------------------------------------------------------

TMP = None
SERVERS = {}  # name -> (process, port)
CONTEXT = None


def setUpModule():
    global TMP, CONTEXT
    TMP = tempfile.mkdtemp(prefix="webhook_test.", dir=os.environ.get("TEST_TMPDIR"))
    certs = os.path.join(TMP, "certs")
    subprocess.run(["bash", GEN_CERTS, "--out", certs, "--extra-san", "IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    CONTEXT = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    configs = {
        "plain": {"priorityClassMap": {"batch-low": "low", "serving": 50}, "shareGroup": 2300},
        "mps": {"mps": {"enabled": True, "shmHostPath": "/run/nvidia-mps-shm"}},
    }
    for name, config in configs.items():
        config_path = os.path.join(TMP, f"{name}.json")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        port_file = os.path.join(TMP, f"{name}.port")
        log = open(os.path.join(TMP, f"{name}.log"), "w", encoding="utf-8")
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", WEBHOOK, "--listen", "127.0.0.1", "--port", "0",
             "--cert", os.path.join(certs, "tls.crt"), "--key", os.path.join(certs, "tls.key"),
             "--config", config_path, "--port-file", port_file],
            stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"webhook {name} did not start: "
                                   + open(os.path.join(TMP, f"{name}.log")).read())
            time.sleep(0.02)
        with open(port_file, encoding="utf-8") as f:
            SERVERS[name] = (process, int(f.read()))


def tearDownModule():
    for process, _ in SERVERS.values():
        process.terminate()
        process.wait(timeout=10)


def post(server, body, content_type="application/json"):
    """(HTTP status, parsed JSON body) of a POST over verified HTTPS."""
    port = SERVERS[server][1]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"https://127.0.0.1:{port}/mutate", data=data,
                                     headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(request, context=CONTEXT, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def fixture(name):
    with open(os.path.join(TESTDATA, name), encoding="utf-8") as f:
        return json.load(f)


def review_for(pod, uid="uid-1", operation="CREATE"):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "operation": operation, "namespace": "default", "object": pod}}


def admit(pod, server="plain"):
    """(patched pod, response) for one CREATE review of `pod`; the patch is applied."""
    status, answer = post(server, review_for(pod, uid=f"uid-{id(pod)}"))
    assert status == 200, (status, answer)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == f"uid-{id(pod)}" and response["allowed"] is True
    if "patch" not in response:
        assert "patchType" not in response
        return pod, response
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    return apply_patch(pod, patch), response


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def names(items):
    return [i["name"] for i in items]


class WebhookTest(unittest.TestCase):
    def check_injected(self, container, priority, preload=LIB):
        env = env_of(container)
        self.assertEqual(len(env), len(container["env"]), "duplicate env names")
        if preload is not None:
            self.assertEqual(env["LD_PRELOAD"]["value"], preload)
        self.assertEqual(env["GPUPRIO_PRIORITY"]["value"], priority)
        self.assertEqual(env["GPUPRIO_SHM_DIR"]["value"], "/run/gpuprio")
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        self.assertEqual(len(mounts), len(container["volumeMounts"]))
        self.assertEqual(mounts["gpuprio-lib"], {"name": "gpuprio-lib",
                                                 "mountPath": "/opt/gpuprio", "readOnly": True})
        self.assertEqual(mounts["gpuprio-segments"]["mountPath"], "/run/gpuprio")
        self.assertNotIn("readOnly", mounts["gpuprio-segments"])

    def check_pod_volumes(self, pod):
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        self.assertEqual(len(volumes), len(pod["spec"]["volumes"]))
        self.assertEqual(volumes["gpuprio-lib"]["hostPath"]["path"], "/opt/gpuprio")
        self.assertEqual(volumes["gpuprio-segments"]["hostPath"]["path"], "/run/gpuprio")
        self.assertEqual(pod["metadata"]["annotations"]["gpuprio.io/injected"], "true")

    def test_annotated_gpu_pod(self):
        pod = fixture("pod_annotated_gpu.json")
        out, response = admit(pod)
        self.assertNotIn("warnings", response)
        app, sidecar = out["spec"]["containers"]
        # The existing LD_PRELOAD entry stays, after the library; other variables are kept.
        self.check_injected(app, "high", preload=f"{LIB}:/usr/lib/libfoo.so")
        self.assertEqual(env_of(app)["OTHER"]["value"], "1")
        self.assertEqual(env_of(app)["GPUPRIO_SHARE_GROUP"]["value"], "2300")
        self.assertEqual(app["volumeMounts"][0], {"name": "data", "mountPath": "/data"})
        # No GPU: the sidecar and the init container are left as they were.
        self.assertEqual(sidecar, pod["spec"]["containers"][1])
        self.assertEqual(out["spec"]["initContainers"], pod["spec"]["initContainers"])
        self.check_pod_volumes(out)
        self.assertEqual(names(out["spec"]["volumes"])[0], "data")
        self.assertEqual(out["spec"]["securityContext"], {"supplementalGroups": [2300]})
        self.assertEqual(out["metadata"]["annotations"]["team"], "a/b~c")
        # Nothing but the spec and the annotations changed.
        self.assertEqual({k: v for k, v in out.items() if k not in ("spec", "metadata")},
                         {k: v for k, v in pod.items() if k not in ("spec", "metadata")})

    def test_reapply_is_idempotent(self):
        once, _ = admit(fixture("pod_annotated_gpu.json"))
        twice, response = admit(once)
        self.assertNotIn("patch", response)
        self.assertEqual(twice, once)
        # Without the marker (removed by hand) a second pass still adds nothing twice.
        unmarked = copy.deepcopy(once)
        del unmarked["metadata"]["annotations"]["gpuprio.io/injected"]
        again, _ = admit(unmarked)
        self.assertEqual(again, once)
        # The library already first in LD_PRELOAD is not added again.
        self.assertEqual(env_of(again["spec"]["containers"][0])["LD_PRELOAD"]["value"],
                         f"{LIB}:/usr/lib/libfoo.so")

    def test_untouched_pods(self):
        for name in ("pod_no_annotation.json", "pod_no_gpu.json"):
            with self.subTest(name):
                pod = fixture(name)
                out, response = admit(pod)
                self.assertNotIn("patch", response)
                self.assertNotIn("warnings", response)
                self.assertEqual(out, pod)

    def test_bad_annotation_warns_without_patch(self):
        for value in ("urgent", "101", "", "1.5", "high low"):
            with self.subTest(value):
                pod = fixture("pod_bad_annotation.json")
                pod["metadata"]["annotations"]["gpuprio.io/priority"] = value
                _, response = admit(pod)
                self.assertNotIn("patch", response)
                self.assertEqual(len(response["warnings"]), 1)
                self.assertIn("gpuprio.io/priority", response["warnings"][0])

    def test_priority_values(self):
        for value, expected in (("HIGH", "high"), (" low ", "low"), ("-100", "-100"),
                                ("+7", "7"), ("100", "100")):
            with self.subTest(value):
                pod = fixture("pod_no_annotation.json")
                pod["metadata"]["annotations"]["gpuprio.io/priority"] = value
                out, _ = admit(pod)
                self.check_injected(out["spec"]["containers"][0], expected)

    def test_ld_preload_value_from_is_left_with_a_warning(self):
        pod = fixture("pod_valuefrom.json")
        out, response = admit(pod)
        app = out["spec"]["containers"][0]
        self.assertEqual(env_of(app)["LD_PRELOAD"], pod["spec"]["containers"][0]["env"][0])
        self.check_injected(app, "-20", preload=None)
        self.assertEqual(len(response["warnings"]), 1)
        self.assertIn("LD_PRELOAD comes from valueFrom", response["warnings"][0])

    def test_priority_class_mapping_and_gpu_init_container(self):
        pod = fixture("pod_priorityclass_init_gpu.json")
        out, response = admit(pod)
        self.assertNotIn("warnings", response)
        warmup, fetch = out["spec"]["initContainers"]
        self.check_injected(warmup, "low")
        self.assertEqual(fetch, pod["spec"]["initContainers"][1])
        self.check_injected(out["spec"]["containers"][0], "low")
        self.check_pod_volumes(out)
        # No annotations before: the whole map was added; securityContext kept, group appended.
        self.assertEqual(out["metadata"]["annotations"], {"gpuprio.io/injected": "true"})
        self.assertEqual(out["spec"]["securityContext"],
                         {"runAsUser": 1000, "supplementalGroups": [2300]})
        # An integer in the map; an annotation wins over the map; an unmapped class: untouched.
        pod["spec"]["priorityClassName"] = "serving"
        self.check_injected(admit(pod)[0]["spec"]["containers"][0], "50")
        pod["metadata"]["annotations"] = {"gpuprio.io/priority": "high"}
        self.check_injected(admit(pod)[0]["spec"]["containers"][0], "high")
        del pod["metadata"]["annotations"]
        pod["spec"]["priorityClassName"] = "other"
        self.assertNotIn("patch", admit(pod)[1])

    def test_containers_annotation_override(self):
        pod = fixture("pod_containers_override.json")
        out, _ = admit(pod)
        self.check_injected(out["spec"]["containers"][0], "normal")
        self.assertEqual(out["spec"]["containers"][1], pod["spec"]["containers"][1])

    def test_mps_on_and_off(self):
        pod = fixture("pod_no_annotation.json")
        pod["metadata"]["annotations"]["gpuprio.io/priority"] = "low"
        off, _ = admit(pod, "plain")
        self.assertNotIn("CUDA_MPS_PIPE_DIRECTORY", env_of(off["spec"]["containers"][0]))
        self.assertNotIn("gpuprio-mps-pipe", names(off["spec"]["volumes"]))
        on, _ = admit(pod, "mps")
        app = on["spec"]["containers"][0]
        self.check_injected(app, "low")
        self.assertEqual(env_of(app)["CUDA_MPS_PIPE_DIRECTORY"]["value"], "/run/nvidia-mps")
        self.assertNotIn("GPUPRIO_SHARE_GROUP", env_of(app))  # shareGroup null there
        mounts = {m["name"]: m["mountPath"] for m in app["volumeMounts"]}
        self.assertEqual(mounts["gpuprio-mps-pipe"], "/run/nvidia-mps")
        self.assertEqual(mounts["gpuprio-mps-shm"], "/dev/shm")
        volumes = {v["name"]: v["hostPath"]["path"] for v in on["spec"]["volumes"]}
        self.assertEqual(volumes["gpuprio-mps-pipe"], "/run/nvidia-mps")
        self.assertEqual(volumes["gpuprio-mps-shm"], "/run/nvidia-mps-shm")
        self.assertNotIn("securityContext", on["spec"])

    def test_mount_path_taken_is_a_warning(self):
        pod = fixture("pod_annotated_gpu.json")
        pod["spec"]["containers"][0]["volumeMounts"].append({"name": "mine",
                                                             "mountPath": "/opt/gpuprio"})
        out, response = admit(pod)
        app = out["spec"]["containers"][0]
        self.assertNotIn("gpuprio-lib", names(app["volumeMounts"]))
        self.assertTrue(any("/opt/gpuprio" in w for w in response["warnings"]))

    def test_other_requests_are_allowed_untouched(self):
        for name in ("review_configmap.json", "review_pod_delete.json"):
            with self.subTest(name):
                status, answer = post("plain", fixture(name))
                self.assertEqual(status, 200)
                self.assertEqual(answer["response"],
                                 {"uid": fixture(name)["request"]["uid"], "allowed": True})
        update = review_for(fixture("pod_annotated_gpu.json"), operation="UPDATE")
        self.assertEqual(post("plain", update)[1]["response"], {"uid": "uid-1", "allowed": True})

    def test_malformed_requests_get_400_and_the_server_lives_on(self):
        bad_bodies = [b"", b"{", b"\xff\xfe", b"[]", b"null", b'"x"',
                      json.dumps({"kind": "AdmissionReview"}).encode(),
                      json.dumps({"apiVersion": "admission.k8s.io/v1beta1",
                                  "kind": "AdmissionReview", "request": {"uid": "x"}}).encode(),
                      json.dumps({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "request": {"uid": 5}}).encode(),
                      b"[" * 100000]
        for body in bad_bodies:
            with self.subTest(body[:20]):
                status, answer = post("plain", body)
                self.assertEqual(status, 400)
                self.assertIn("error", answer)
        # A pod object of the wrong shape is allowed with no patch, never an error.
        weird = review_for({"spec": {"containers": [None, 5, {"name": 3}], "volumes": "x"},
                            "metadata": {"annotations": {"gpuprio.io/priority": "high"}}})
        status, answer = post("plain", weird)
        self.assertEqual(status, 200)
        self.assertTrue(answer["response"]["allowed"])
        # Plain HTTP on the TLS port, and a connection that says nothing: the server lives on.
        port = SERVERS["plain"][1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
            raw.recv(100)
        silent = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.healthy("plain")
        silent.close()
        self.assertIsNone(SERVERS["plain"][0].poll())

    def healthy(self, server):
        port = SERVERS[server][1]
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=CONTEXT,
                                    timeout=10) as answer:
            self.assertEqual(answer.read(), b"ok\n")

    def test_certificate_names_the_service(self):
        # What the API server checks: the serving certificate is valid for the Service's DNS name.
        port = SERVERS["plain"][1]
        for host in ("gpuprio-webhook.gpuprio.svc", "gpuprio-webhook.gpuprio.svc.cluster.local"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with CONTEXT.wrap_socket(raw, server_hostname=host) as tls:
                    self.assertEqual(tls.version() in ("TLSv1.2", "TLSv1.3"), True)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with self.assertRaises(ssl.SSLCertVerificationError):
                CONTEXT.wrap_socket(raw, server_hostname="other.gpuprio.svc")


# --- The manifests: a strict YAML subset --------------------------------------------------------

class YamlError(Exception):
    pass


SCALAR_PLAIN = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`][^#]*?|-[^\s#][^#]*?")


def parse_scalar(text, where):
    text = text.strip()
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise YamlError(f"{where}: unterminated string")
        return json.loads(text)
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise YamlError(f"{where}: unterminated string")
        return text[1:-1].replace("''", "'")
    if text == "{}":
        return {}
    if text.startswith("["):
        if not text.endswith("]"):
            raise YamlError(f"{where}: flow sequences must fit on one line")
        inner = text[1:-1].strip()
        return [parse_scalar(p, where) for p in inner.split(",")] if inner else []
    if text in ("null", "~"):
        return None
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if not SCALAR_PLAIN.fullmatch(text) or ": " in text or text.endswith(":"):
        raise YamlError(f"{where}: {text!r} is outside the YAML subset")
    return text


def strip_comment(line):
    """The line without a trailing comment (outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def parse_yaml_documents(text, name):
    """Documents of a YAML stream written in a subset: block mappings and sequences, plain,
    quoted and flow-on-one-line scalars, literal block scalars ('|'), comments, '---'. Anything
    else (anchors, tags, multi-line flow, folded scalars, tabs, duplicate keys) is an error."""
    if "\t" in text:
        raise YamlError(f"{name}: tabs")
    documents, current = [], []
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.rstrip() == "---":
            documents.append(current)
            current = []
        else:
            current.append((number, raw))
    documents.append(current)
    parsed = []
    for lines in documents:
        tokens = []
        block = None  # (indent of the owner, lines) while reading a literal block
        for number, raw in lines:
            if block is not None:
                owner_indent, store = block
                indent = len(raw) - len(raw.lstrip(" "))
                if raw.strip() == "" or indent > owner_indent:
                    store.append(raw)
                    continue
                block = None
            line = strip_comment(raw)
            if not line.strip():
                continue
            indent = len(line) - len(line.lstrip(" "))
            tokens.append([number, indent, line.strip(), None])
            if line.endswith(": |") or line.strip() == "- |" or line.endswith(": |-"):
                tokens[-1][3] = []
                block = (indent if not line.strip().startswith("- ") else indent, tokens[-1][3])
        if tokens:
            value, rest = parse_node(tokens, 0, tokens[0][1], name)
            if rest != len(tokens):
                raise YamlError(f"{name}:{tokens[rest][0]}: unexpected indentation")
            parsed.append(value)
    return parsed


def literal(lines, keep_last_newline=True):
    nonblank = [l for l in lines if l.strip()]
    if not nonblank:
        return ""
    indent = min(len(l) - len(l.lstrip(" ")) for l in nonblank)
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(l[indent:] for l in lines) + ("\n" if keep_last_newline else "")


def parse_node(tokens, i, indent, name):
    """The node starting at tokens[i] at `indent`: (value, index after it)."""
    number, _, text, _ = tokens[i]
    if text.startswith("- ") or text == "-":
        items = []
        while i < len(tokens) and tokens[i][1] == indent and \
                (tokens[i][2].startswith("- ") or tokens[i][2] == "-"):
            number, _, text, block = tokens[i]
            rest = text[2:].strip() if text != "-" else ""
            if rest == "" :
                value, i = parse_node(tokens, i + 1, tokens[i + 1][1], name)
                items.append(value)
                continue
            if rest in ("|", "|-"):
                items.append(literal(block, rest == "|"))
                i += 1
                continue
            if re.match(r"[^\s\"'\[{][^:]*:( |$)", rest):
                # "- key: value" opens a mapping whose keys are indented by 2 more.
                tokens[i] = [number, indent + 2, rest, block]
                value, i = parse_node(tokens, i, indent + 2, name)
                items.append(value)
                continue
            items.append(parse_scalar(rest, f"{name}:{number}"))
            i += 1
        return items, i
    mapping = {}
    while i < len(tokens) and tokens[i][1] == indent:
        number, _, text, block = tokens[i]
        if text.startswith("- "):
            break
        match = re.fullmatch(r"([A-Za-z0-9_.\-/]+|\"[^\"]*\"):( (.*))?", text)
        if not match:
            raise YamlError(f"{name}:{number}: {text!r} is no 'key: value' of the subset")
        key = json.loads(match.group(1)) if match.group(1).startswith('"') else match.group(1)
        if key in mapping:
            raise YamlError(f"{name}:{number}: duplicate key {key!r}")
        value_text = (match.group(3) or "").strip()
        i += 1
        if value_text in ("|", "|-"):
            mapping[key] = literal(block, value_text == "|")
        elif value_text:
            mapping[key] = parse_scalar(value_text, f"{name}:{number}")
        elif i < len(tokens) and (tokens[i][1] > indent or
                                  (tokens[i][1] == indent and tokens[i][2].startswith("- "))):
            mapping[key], i = parse_node(tokens, i, tokens[i][1], name)
        else:
            mapping[key] = None
    return mapping, i


def manifest_files():
    found = []
    for root, _, files in os.walk(K8S):
        found += [os.path.join(root, f) for f in files if f.endswith(".yaml")]
    return sorted(found)


def pod_specs(document):
    kind = document["kind"]
    if kind == "Pod":
        return [document["spec"]]
    if kind in ("DaemonSet", "Deployment"):
        return [document["spec"]["template"]["spec"]]
    return []


class ManifestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.documents = {}
        for path in manifest_files():
            with open(path, encoding="utf-8") as f:
                cls.documents[os.path.relpath(path, K8S)] = parse_yaml_documents(f.read(), path)

    def test_subset_parser(self):
        docs = parse_yaml_documents(
            "a: 1\nb:\n  - x\n  - name: y\n    v: \"q # r\"\n  - [1, \"2\"]\nc: |\n  l1\n"
            "    l2\nd: {}\n---\n# only a comment\n---\ne: 'it''s' # c\n", "t")
        self.assertEqual(docs, [{"a": 1, "b": ["x", {"name": "y", "v": "q # r"}, [1, "2"]],
                                 "c": "l1\n  l2\n", "d": {}}, {"e": "it's"}])
        for bad in ("a: 1\na: 2\n", "a: &x 1\n", "a: {b: 1}\n", "a:\n\tb: 1\n", "a: >\n  x\n",
                    "a: [1,\n  2]\n", "a: b: c\n"):
            with self.assertRaises(YamlError, msg=bad):
                parse_yaml_documents(bad, "t")

    def test_every_manifest_parses_with_the_required_keys(self):
        expected = {"namespace.yaml", "node/daemonset.yaml", "node/mps-daemonset.yaml",
                    "webhook/manifests.yaml", "webhook/cert-manager.yaml",
                    "examples/server-pod.yaml", "examples/training-pod.yaml",
                    "examples/device-plugin-time-slicing.yaml"}
        self.assertTrue(expected <= set(self.documents), set(self.documents))
        for path, documents in self.documents.items():
            self.assertTrue(documents, path)
            for document in documents:
                with self.subTest(path=path, kind=document.get("kind")):
                    self.assertIsInstance(document.get("apiVersion"), str)
                    self.assertIsInstance(document.get("kind"), str)
                    self.assertIsInstance(document["metadata"]["name"], str)
                    for key, value in document["metadata"].get("annotations", {}).items():
                        self.assertIsInstance(value, str, f"annotation {key} must be a string")
                    for key, value in document["metadata"].get("labels", {}).items():
                        self.assertIsInstance(value, str, f"label {key} must be a string")

    def test_pod_templates(self):
        for path, documents in self.documents.items():
            for document in documents:
                for spec in pod_specs(document):
                    with self.subTest(path=path, name=document["metadata"]["name"]):
                        if document["kind"] != "Pod":
                            selector = document["spec"]["selector"]["matchLabels"]
                            labels = document["spec"]["template"]["metadata"]["labels"]
                            self.assertLessEqual(selector.items(), labels.items())
                        volumes = {v["name"] for v in spec.get("volumes", [])}
                        containers = spec["containers"] + spec.get("initContainers", [])
                        self.assertEqual(len({c["name"] for c in containers}), len(containers))
                        for container in containers:
                            self.assertIsInstance(container["image"], str)
                            for mount in container.get("volumeMounts", []):
                                self.assertIn(mount["name"], volumes)
                                self.assertTrue(mount["mountPath"].startswith("/"))
                            for env in container.get("env", []):
                                self.assertEqual(len({"value", "valueFrom"} & set(env)), 1, env)
                                if "value" in env:
                                    self.assertIsInstance(env["value"], str, env)
                        for volume in spec.get("volumes", []):
                            if "hostPath" in volume:
                                self.assertTrue(volume["hostPath"]["path"].startswith("/"))

    def find(self, kind, name):
        for documents in self.documents.values():
            for document in documents:
                if document["kind"] == kind and document["metadata"]["name"] == name:
                    return document
        self.fail(f"no {kind} {name}")

    def test_webhook_wiring(self):
        config = self.find("MutatingWebhookConfiguration", "gpuprio-webhook")
        self.assertEqual(len(config["webhooks"]), 1)
        hook = config["webhooks"][0]
        self.assertEqual(hook["failurePolicy"], "Ignore")
        self.assertEqual(hook["sideEffects"], "None")
        self.assertEqual(hook["admissionReviewVersions"], ["v1"])
        self.assertLessEqual(hook["timeoutSeconds"], 10)
        self.assertIn("namespaceSelector", hook)
        self.assertEqual(hook["rules"][0]["resources"], ["pods"])
        self.assertEqual(hook["rules"][0]["operations"], ["CREATE"])
        service_ref = hook["clientConfig"]["service"]
        service = self.find("Service", service_ref["name"])
        self.assertEqual(service["metadata"]["namespace"], service_ref["namespace"])
        port = [p for p in service["spec"]["ports"] if p["port"] == service_ref["port"]][0]
        deployment = self.find("Deployment", "gpuprio-webhook")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(service["spec"]["selector"].items(), labels.items())
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        self.assertIn(port["targetPort"], [p["containerPort"] for p in container["ports"]])
        command = container["command"]
        self.assertEqual(command[command.index("--port") + 1], str(port["targetPort"]))
        self.assertTrue(command[1].endswith("/gpuprio_webhook.py"))
        # The namespace the webhook runs in is excluded by the selector.
        namespace = self.find("Namespace", service_ref["namespace"])
        expression = hook["namespaceSelector"]["matchExpressions"][0]
        self.assertEqual(expression["operator"], "NotIn")
        self.assertIn(namespace["metadata"]["labels"][expression["key"]], expression["values"])
        # The ServiceAccount exists, and the certificate (cert-manager) names the Service.
        self.find("ServiceAccount", deployment["spec"]["template"]["spec"]["serviceAccountName"])
        certificate = self.find("Certificate", "gpuprio-webhook")
        self.assertIn(f"{service_ref['name']}.{service_ref['namespace']}.svc",
                      certificate["spec"]["dnsNames"])
        secret = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}["tls"]
        self.assertEqual(secret["secret"]["secretName"], certificate["spec"]["secretName"])

    def test_configmap_is_a_valid_webhook_configuration(self):
        sys.path.insert(0, os.path.dirname(WEBHOOK))
        try:
            import gpuprio_webhook
        finally:
            sys.path.pop(0)
        config_map = self.find("ConfigMap", "gpuprio-webhook")
        path = os.path.join(TMP, "configmap.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_map["data"]["config.json"])
        config = gpuprio_webhook.load_config(path)
        # The node DaemonSet makes the directories the webhook mounts.
        daemonset = self.find("DaemonSet", "gpuprio-node")
        host_paths = {v["hostPath"]["path"] for v in daemonset["spec"]["template"]["spec"]["volumes"]}
        self.assertIn(config["libraryHostPath"], host_paths)
        self.assertIn(config["segmentHostPath"], host_paths)
        groups = daemonset["spec"]["template"]["spec"]["securityContext"]["supplementalGroups"]
        self.assertIn(config["shareGroup"], groups)
        mps = self.find("DaemonSet", "gpuprio-mps")
        mps_paths = {v["hostPath"]["path"] for v in mps["spec"]["template"]["spec"]["volumes"]}
        self.assertIn(config["mps"]["pipeHostPath"], mps_paths)
        self.assertIn(config["mps"]["shmHostPath"], mps_paths)
        # Bad configurations are refused at start, not at the first pod.
        for bad in ({"shareGroup": "x"}, {"priorityClassMap": {"a": "urgent"}},
                    {"segmentHostPath": "run"}, {"nosuchkey": 1}):
            with open(path, "w", encoding="utf-8") as f:
                json.dump(bad, f)
            with self.assertRaises(ValueError, msg=bad):
                gpuprio_webhook.load_config(path)

    def test_examples_ask_for_a_gpu_and_a_priority(self):
        for name in ("examples/server-pod.yaml", "examples/training-pod.yaml"):
            pod = self.documents[name][0]
            self.assertIn(pod["metadata"]["annotations"]["gpuprio.io/priority"], ("high", "low"))
            self.assertEqual(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 1)
            # What the webhook would make of it: injected, without warnings.
            out, response = admit(pod)
            self.assertNotIn("warnings", response)
            self.assertEqual(env_of(out["spec"]["containers"][0])["LD_PRELOAD"]["value"], LIB)


if __name__ == "__main__":
    unittest.main(verbosity=2)
