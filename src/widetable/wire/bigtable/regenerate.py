"""Development-time tool: rebuild ``descriptors.pb`` from the installed official client.

    python src/widetable/wire/bigtable/regenerate.py

The protocol definitions are Bigtable's (``google.bigtable.v2``, ``google.bigtable.admin.v2``),
``google.longrunning`` and ``google.rpc``, exactly as the pinned ``google-cloud-bigtable``
(see pyproject.toml) registers them in protobuf's default pool. proto-plus registers the
messages but not the services, so the services are rebuilt here from the method paths and
the request / response classes of the client's gRPC transports. The result is one
``FileDescriptorSet`` (dependencies first), which ``__init__`` loads into a private pool.

Nothing imports this module at run time; it needs google-cloud-bigtable, which the server
does not.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool

TRANSPORTS = {
    "google.bigtable.v2.Bigtable":
        "google.cloud.bigtable_v2.services.bigtable.transports.grpc",
    "google.bigtable.admin.v2.BigtableTableAdmin":
        "google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports.grpc",
    "google.bigtable.admin.v2.BigtableInstanceAdmin":
        "google.cloud.bigtable_admin_v2.services.bigtable_instance_admin.transports.grpc",
}
# a stub: "/pkg.Service/Method", its kind, the request class, the response class
_STUB = re.compile(
    r'\.(unary_unary|unary_stream|stream_unary|stream_stream)\(\s*"/([\w.]+)/(\w+)",\s*'
    r"request_serializer=([\w.]+)\.(?:serialize|SerializeToString),\s*"
    r"response_deserializer=([\w.]+)\.(?:deserialize|FromString),", re.S)
OUT = Path(__file__).with_name("descriptors.pb")
# proto-plus files are named after its modules; googleapis names them after the package
_FILES = {"google/cloud/bigtable_v2/types/": "google/bigtable/v2/",
          "google/cloud/bigtable_admin_v2/types/": "google/bigtable/admin/v2/"}
# proto-plus appends "_" to field names that are Python builtins; the .proto names have none
_RENAMED = {"type_", "max_", "min_"}


def _file_name(name: str) -> str:
    for old, new in _FILES.items():
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _restore_names(messages) -> None:
    for m in messages:
        for f in m.field:
            if f.name in _RENAMED:
                f.name = f.name[:-1]
        _restore_names(m.nested_type)


def _full_name(cls) -> str:
    pb = cls.pb() if hasattr(cls, "pb") else cls  # proto-plus class or protobuf class
    return pb.DESCRIPTOR.full_name


def _services() -> dict[str, list[tuple[str, str, str, bool, bool]]]:
    found: dict[str, list] = {}
    for service, module_name in TRANSPORTS.items():
        module = importlib.import_module(module_name)
        source = inspect.getsource(module)
        methods = []
        for kind, path_service, method, req, resp in _STUB.findall(source):
            if path_service != service:
                continue
            request = eval(req, module.__dict__)  # a dotted name in the transport's namespace
            response = eval(resp, module.__dict__)
            methods.append((method, _full_name(request), _full_name(response),
                            kind.startswith("stream"), kind.endswith("stream")))
        if not methods:
            raise SystemExit(f"no methods found for {service} in {module_name}")
        found[service] = sorted(set(methods))
    return found


def build() -> descriptor_pb2.FileDescriptorSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        services = _services()
        importlib.import_module("google.longrunning.operations_pb2")
    pool = descriptor_pool.Default()
    protos: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    order: list[str] = []

    def add(file) -> None:
        if _file_name(file.name) in protos:
            return
        for dep in file.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        proto.name = _file_name(proto.name)
        proto.dependency[:] = [_file_name(d) for d in proto.dependency]
        _restore_names(proto.message_type)
        protos[proto.name] = proto
        order.append(proto.name)

    for service, methods in services.items():
        for _, request, response, _, _ in methods:
            add(pool.FindMessageTypeByName(request).file)
            add(pool.FindMessageTypeByName(response).file)
    add(pool.FindServiceByName("google.longrunning.Operations").file)
    for service, methods in services.items():
        package, _, name = service.rpartition(".")
        # the service goes into the file that holds its first request message
        home = _file_name(pool.FindMessageTypeByName(methods[0][1]).file.name)
        proto = protos[home]
        if proto.package != package:
            raise SystemExit(f"{service}: {home} is package {proto.package}")
        svc = proto.service.add(name=name)
        for method, request, response, client_streaming, server_streaming in methods:
            svc.method.add(name=method, input_type=f".{request}", output_type=f".{response}",
                           client_streaming=client_streaming, server_streaming=server_streaming)
        for dep_name in {_file_name(pool.FindMessageTypeByName(t).file.name)
                         for m in methods for t in (m[1], m[2])}:
            if dep_name != home and dep_name not in proto.dependency:
                proto.dependency.append(dep_name)
    # a file must come after every file it depends on (the services added dependencies)
    done: set[str] = set()
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for dep in protos[name].dependency:
            visit(dep)
        ordered.append(name)

    for name in order:
        visit(name)
    return descriptor_pb2.FileDescriptorSet(file=[protos[n] for n in ordered])


def main() -> None:
    fds = build()
    OUT.write_bytes(fds.SerializeToString(deterministic=True))
    import google.cloud.bigtable as client
    print(f"wrote {OUT} ({len(fds.file)} files) from google-cloud-bigtable {client.__version__}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
