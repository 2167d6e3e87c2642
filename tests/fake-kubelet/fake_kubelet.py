"""A fake kubelet for tests/it/kubernetes.rs: serves the pod-resources v1
API (List and Get) of recorder/proto/podresources_v1.proto, compiled here
with grpcio-tools, on a unix socket.

Usage: fake_kubelet.py PROTO OUT_DIR SOCKET PODS_JSON

PODS_JSON holds a list of pods, read at every call:
[{"namespace": "nlp", "name": "trainer-0",
  "containers": [{"name": "main",
                  "devices": [{"resource_name": "nvidia.com/gpu",
                               "device_ids": ["GPU-..."]}]}]}]
Each call is appended to OUT_DIR/calls.log. Prints "serving" once it listens.
"""

import json
import os
import sys
import time
from concurrent import futures

from grpc_tools import protoc


def main():
    proto, out_dir, socket, pods_json = sys.argv[1:5]
    proto_dir, proto_file = os.path.split(os.path.abspath(proto))
    code = protoc.main(
        ["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", proto_file]
    )
    if code != 0:
        sys.exit(f"protoc failed on {proto}")
    sys.path.insert(0, out_dir)
    import grpc
    import podresources_v1_pb2 as pb
    import podresources_v1_pb2_grpc as pb_grpc

    def log(line):
        with open(os.path.join(out_dir, "calls.log"), "a") as f:
            f.write(line + "\n")

    def pods():
        with open(pods_json) as f:
            return [
                pb.PodResources(
                    name=p["name"],
                    namespace=p["namespace"],
                    containers=[
                        pb.ContainerResources(
                            name=c["name"],
                            devices=[
                                pb.ContainerDevices(resource_name=d["resource_name"], device_ids=d["device_ids"])
                                for d in c.get("devices", [])
                            ],
                        )
                        for c in p.get("containers", [])
                    ],
                )
                for p in json.load(f)
            ]

    class Lister(pb_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            log("List")
            return pb.ListPodResourcesResponse(pod_resources=pods())

        def Get(self, request, context):
            log(f"Get {request.pod_namespace}/{request.pod_name}")
            for p in pods():
                if p.namespace == request.pod_namespace and p.name == request.pod_name:
                    return pb.GetPodResourcesResponse(pod_resources=p)
            context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    print("serving", flush=True)
    while True:
        time.sleep(3600)


main()
