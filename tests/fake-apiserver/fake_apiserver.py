"""A stand-in for the Kubernetes API server, for the tests of
recorder/src/kubernetes/apiserver.rs: serves `GET
/api/v1/namespaces/{ns}/pods/{name}` over HTTPS (HTTP/1.1), answering as
kube-apiserver does: a Pod's JSON, or a `Status` JSON for 401, 403 and 404.
Standard library only.

Usage: fake_apiserver.py --port-file PATH --cert PEM --key PEM --token TEXT
                         --pods JSON [--forbid NS]... [--log PATH]

--port-file  it listens on 127.0.0.1, port chosen by the system, and writes
             the port there (whole, by a rename) once listening.
--cert/--key the server's certificate (chain) and key, PEM.
--token      the bearer token a request must carry, else 401.
--pods       a JSON list of {"namespace", "name", "uid", "labels": {...}},
             read again at every request (a test may change it).
--forbid NS  (repeatable) every pod in NS is 403, as RBAC refuses it.
--log PATH   one line appended per request: METHOD PATH STATUS.
"""

import argparse
import json
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

# The service account the recorder runs as, for the 403 message.
USER = "system:serviceaccount:apron:apron-recorder"


def status(code, reason, message, details=None):
    """A Kubernetes `Status` (metav1.Status) as kube-apiserver writes it."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return code, body


def pod_json(p):
    """A Pod as `kubectl get pod -o json` shows one (trimmed): no selfLink
    (gone since 1.20), `labels` absent when there are none."""
    metadata = {
        "name": p["name"],
        "namespace": p["namespace"],
        "uid": p["uid"],
        "resourceVersion": str(p.get("resourceVersion", "48213")),
        "creationTimestamp": p.get("creationTimestamp", "2025-03-04T09:12:45Z"),
    }
    if p.get("labels"):
        metadata["labels"] = p["labels"]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": p.get("nodeName", "gpu-node-1"),
            "schedulerName": "default-scheduler",
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.11",
            "podIP": "10.244.1.17",
            "startTime": p.get("creationTimestamp", "2025-03-04T09:12:45Z"),
            "qosClass": "BestEffort",
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--pods", required=True)
    parser.add_argument("--forbid", action="append", default=[])
    parser.add_argument("--log")
    args = parser.parse_args()
    log_lock = threading.Lock()

    def answer(method, path, authorization):
        """(code, JSON body) for one request."""
        # kube-apiserver authenticates first, then authorizes, then looks.
        if authorization != f"Bearer {args.token}":
            return status(401, "Unauthorized", "Unauthorized")
        parts = path.split("?", 1)[0].split("/")
        # ['', 'api', 'v1', 'namespaces', NS, 'pods', NAME]
        if method != "GET" or len(parts) != 7 or parts[:4] != ["", "api", "v1", "namespaces"] or parts[5] != "pods":
            return status(404, "NotFound", "the server could not find the requested resource", {})
        namespace, name = unquote(parts[4]), unquote(parts[6])
        if namespace in args.forbid:
            return status(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: User "{USER}" cannot get resource "pods" '
                f'in API group "" in the namespace "{namespace}"',
                {"name": name, "kind": "pods"},
            )
        with open(args.pods) as f:
            pods = json.load(f)
        for p in pods:
            if p["namespace"] == namespace and p["name"] == name:
                return 200, pod_json(p)
        return status(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # An idle kept-alive connection is closed after this long.
        timeout = 30

        def setup(self):
            # The TLS handshake here, on the connection's own thread, not in
            # accept(): a client that refuses the certificate stalls no one.
            self.request.do_handshake()
            super().setup()

        def respond(self, method):
            code, body = answer(method, self.path, self.headers.get("Authorization"))
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if args.log:
                with log_lock, open(args.log, "a") as f:
                    f.write(f"{method} {self.path} {code}\n")

        def do_GET(self):
            self.respond("GET")

        def do_POST(self):
            self.respond("POST")

        def do_PUT(self):
            self.respond("PUT")

        def do_PATCH(self):
            self.respond("PATCH")

        def do_DELETE(self):
            self.respond("DELETE")

        def log_message(self, format, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            error = sys.exc_info()[1]
            print(f"fake apiserver: connection from {client_address[0]}: {error!r}", file=sys.stderr, flush=True)

    server = Server(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    port = server.server_address[1]
    tmp = f"{args.port_file}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.rename(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
