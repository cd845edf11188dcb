"""A stand-in for the Pulumi engine's two gRPC services, so the component provider can be started
and asked to ``Construct`` exactly as the engine does it for a program in another language.

The resource monitor answers through Pulumi's own mock monitor (``pulumi.runtime.mocks``) over the
project's strict recording mocks, and keeps every raw ``RegisterResourceRequest`` (provider
references and secret markers are checked on the wire, before any SDK decodes them)."""

from __future__ import annotations

from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, resource_pb2, resource_pb2_grpc

from deepseek_eks.testing.mocks import RecordingMocks


class _MockMonitor(pulumi_mocks.MockMonitor):
    """Pulumi's mock monitor with URNs made for the requested project and stack (the stock one
    reads them from this process's settings, which belong to no program here)."""

    def __init__(self, mocks: RecordingMocks, project: str, stack: str) -> None:
        super().__init__(mocks)
        self._prefix = f"urn:pulumi:{stack}::{project}::"

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # The engine qualifies a type with its parent's, except under the root stack.
        if parent and parent.split("::")[2] != "pulumi:pulumi:Stack":
            type_ = parent.split("::")[2] + "$" + type_
        return f"{self._prefix}{type_}::{name}"


class _Monitor(resource_pb2_grpc.ResourceMonitorServicer):
    def __init__(self, inner: _MockMonitor, requests: list[Any]) -> None:
        self._inner, self._requests = inner, requests

    def SupportsFeature(self, request: Any, context: Any) -> Any:
        return resource_pb2.SupportsFeatureResponse(hasSupport=request.id != "outputValues")

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:
        return self._inner.GetDeploymentInfo(request)

    def RegisterResource(self, request: Any, context: Any) -> Any:
        self._requests.append(request)
        return self._inner.RegisterResource(request)

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()

    def Invoke(self, request: Any, context: Any) -> Any:
        return self._inner.Invoke(request)

    def RegisterPackage(self, request: Any, context: Any) -> Any:
        return self._inner.RegisterPackage(request)

    def SignalAndWaitForShutdown(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()


class _Engine(engine_pb2_grpc.EngineServicer):
    def __init__(self, logs: list[str]) -> None:
        self._logs = logs

    def Log(self, request: Any, context: Any) -> Any:
        self._logs.append(request.message)
        return empty_pb2.Empty()

    def GetRootResource(self, request: Any, context: Any) -> Any:
        return engine_pb2.GetRootResourceResponse(urn="")

    def SetRootResource(self, request: Any, context: Any) -> Any:
        return engine_pb2.SetRootResourceResponse()


@dataclass
class FakeEngine:
    """The engine and resource monitor on two local ports, for one project and stack."""

    project: str
    stack: str
    mocks: RecordingMocks = field(default_factory=RecordingMocks)
    registrations: list[Any] = field(default_factory=list)
    """Every RegisterResourceRequest, as it came over the wire."""
    logs: list[str] = field(default_factory=list)

    def existing(self, type_: str, name: str, resource_id: str) -> str:
        """A resource the program made before (a provider of another language's program): the
        engine answers ``getResource`` for it. Returns its provider reference (``urn::id``)."""
        urn = f"urn:pulumi:{self.stack}::{self.project}::{type_}::{name}"
        self._known[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, resource_id, {})
        return f"{urn}::{resource_id}"

    def __post_init__(self) -> None:
        self._known: dict[str, Any] = {}

    def __enter__(self) -> FakeEngine:
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        inner = _MockMonitor(self.mocks, self.project, self.stack)
        inner.resources.update(self._known)
        monitor = _Monitor(inner, self.registrations)
        resource_pb2_grpc.add_ResourceMonitorServicer_to_server(monitor, self._server)
        engine_pb2_grpc.add_EngineServicer_to_server(_Engine(self.logs), self._server)
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)
