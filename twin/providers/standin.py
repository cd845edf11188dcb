"""Stand-in ``aws``, ``eks`` and ``random`` resource providers for the real Pulumi engine (the
real engine): gRPC ``ResourceProvider`` servers the engine starts as ``pulumi-resource-<name>`` from
``PATH``, answering from the tables the offline mocks use (``deepseek_eks/testing/mocks.py``:
``COMPUTED_OUTPUTS``, ``INVOKES``, ``resource_id``), so the engine, the state file and the diff are
real while AWS is not.

- Custom resources (``aws:*``, ``random:*``): Check echoes the inputs, Create/Update return the
  inputs plus the table's computed outputs, Diff compares old and new inputs, Read returns the
  state, Delete forgets. A type or invoke the tables lack is an error naming the table to extend,
  as in the mocks. Which changed inputs force a replacement is a coarse model (see
  ``REPLACING_INPUTS``), not the real providers' schemas.
- ``eks:index:Cluster`` is a remote component (pulumi-eks is a provider binary on no registry):
  Construct registers a component with the table's outputs; with
  ``DEEPSEEK_EKS_TWIN_KUBECONFIG`` set (a kubeconfig file of the local kube-apiserver) the
  ``kubeconfig``/``kubeconfigJson`` outputs are that file's, so the program's Kubernetes provider
  talks to the twin. The cluster's own internals (its IAM, node groups, add-ons) are not modelled.

Run as ``python standin.py <package> <engine address>``; ``write_launchers`` writes the
``pulumi-resource-<package>`` scripts that do so.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pulumi.provider as provider
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.provider.server import ProviderServicer
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs
from pulumi.runtime.proto import plugin_pb2, provider_pb2_grpc
from pulumi.runtime.proto import provider_pb2 as proto

from deepseek_eks.testing.mocks import COMPUTED_OUTPUTS, INVOKES, REGION, MockContext, resource_id

# The repository root, which the launchers put on PYTHONPATH (for deepseek_eks.testing.mocks).
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aws", "eks", "random")
KUBECONFIG_ENV = "DEEPSEEK_EKS_TWIN_KUBECONFIG"
# Schemas served by GetSchema: pulumi/pulumi-random provider/cmd/pulumi-resource-random/schema.json
# at f64d8726 (2026-08-14), pruned (reference/upstream/README.md).
SCHEMAS = {"random": ROOT / "reference" / "upstream" / "pulumi-random-schema.json"}
# Build metadata marking the reported version as a stand-in's (semver ignores it when comparing).
STANDIN_BUILD = "+twin.standin"
# The engine's marker for a value unknown during preview (pulumi sdk/go/common/resource/plugin
# rpc.go UnknownStringValue; the Python SDK's pulumi.runtime.rpc.UNKNOWN).
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# Inputs whose change replaces the resource (an AWS name cannot be changed in place; every input
# of pulumi-random's resources is replace-on-change). Everything else updates in place.
REPLACING_INPUTS: dict[str, frozenset[str] | None] = {
    "aws": frozenset({"name", "namePrefix", "bucket", "bucketPrefix"}),
    "random": None,  # None: every input
    "eks": frozenset(),
}


def standin_version(package: str) -> str:
    """The installed Python SDK's version plus ``+twin.standin``: the engine checks a plugin is at
    least the version the SDK asks for, and the build metadata says it is not the real one."""
    from importlib.metadata import version

    return version(f"pulumi_{package}") + STANDIN_BUILD


class UnknownTokenError(RuntimeError):
    """A type or invoke token the mock tables do not know."""


def _to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


def _to_struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(dict(values))
    return struct


def _name_and_type(urn: str) -> tuple[str, str]:
    """``urn:pulumi:stack::project::parent$type::name`` -> (name, type)."""
    qualified_type, name = urn.split("::", 3)[2:]
    return name, qualified_type.split("$")[-1]


def computed_state(token: str, name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """The id and the state (inputs plus computed outputs) the mock tables give a resource."""
    if token not in COMPUTED_OUTPUTS:
        raise unknown_type(token, name)
    rid = resource_id(token, name)
    args = MockResourceArgs(typ=token, name=name, inputs=inputs, provider="", resource_id=rid, custom=True)
    return rid, {**inputs, **COMPUTED_OUTPUTS[token](MockContext(args, rid, region))}


def unknown_type(token: str, name: str) -> UnknownTokenError:
    """The error for a resource type the tables lack, naming the table to extend."""
    return UnknownTokenError(
        f"the twin's stand-in provider has no outputs for {token!r} ({name}): add them to "
        "COMPUTED_OUTPUTS in deepseek_eks/testing/mocks.py"
    )


def changed_keys(olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
    """Top-level input keys whose values differ (a new value still unknown counts as changed)."""
    keys = set(olds) | set(news)
    return sorted(k for k in keys if olds.get(k) != news.get(k) or news.get(k) == UNKNOWN)


class ClusterStandIn(provider.Provider):
    """``eks:index:Cluster`` as a component whose outputs are shaped like pulumi-eks's."""

    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: pulumi.Inputs,
        options: pulumi.ResourceOptions | None = None,
    ) -> provider.ConstructResult:
        if resource_type != "eks:index:Cluster":
            raise UnknownTokenError(
                f"the twin's eks stand-in constructs only eks:index:Cluster, not {resource_type!r}"
            )
        component = pulumi.ComponentResource(resource_type, name, {}, options)
        local = os.environ.get(KUBECONFIG_ENV)
        kubeconfig = _local_kubeconfig(Path(local)) if local else None

        def outputs(plain: dict[str, Any]) -> dict[str, Any]:
            _, state = computed_state(resource_type, name, plain, REGION)
            if kubeconfig is not None:
                state |= {"kubeconfig": kubeconfig, "kubeconfigJson": json.dumps(kubeconfig)}
            return state

        keys = outputs({}).keys()
        resolved = pulumi.Output.from_input(inputs).apply(outputs)
        state = {key: resolved.apply(lambda s, k=key: s[k]) for key in keys}
        component.register_outputs(state)
        return provider.ConstructResult(urn=component.urn, state=state)


def _local_kubeconfig(path: Path) -> dict[str, Any]:
    """The local API server's kubeconfig (YAML or JSON) as the object pulumi-eks outputs."""
    import yaml

    return dict(yaml.safe_load(path.read_text()))


class StandInServicer(ProviderServicer):
    """The SDK's component servicer (Construct) plus the custom-resource RPCs, for one package."""

    def __init__(self, package: str, engine_address: str) -> None:
        super().__init__(ClusterStandIn(standin_version(package)), sys.argv[1:], engine_address)
        self.package = package
        self.region = REGION

    async def CheckConfig(self, request: Any, context: Any) -> proto.CheckResponse:
        return proto.CheckResponse(inputs=request.news)

    async def DiffConfig(self, request: Any, context: Any) -> proto.DiffResponse:
        changes = changed_keys(_to_dict(request.olds), _to_dict(request.news))
        return proto.DiffResponse(
            changes=proto.DiffResponse.DIFF_SOME if changes else proto.DiffResponse.DIFF_NONE, diffs=changes
        )

    async def Configure(self, request: Any, context: Any) -> proto.ConfigureResponse:
        args = _to_dict(request.args)
        self.region = str(
            args.get("region") or request.variables.get(f"{self.package}:config:region") or REGION
        )
        # eks: Construct takes secrets and resources; custom resources take plain values.
        components = self.package == "eks"
        return proto.ConfigureResponse(
            acceptSecrets=components,
            acceptResources=components,
            acceptOutputs=components,
            supportsPreview=False,
        )

    async def Check(self, request: Any, context: Any) -> proto.CheckResponse:
        name, token = _name_and_type(request.urn)
        if token not in COMPUTED_OUTPUTS:
            return proto.CheckResponse(
                failures=[proto.CheckFailure(property="", reason=str(unknown_type(token, name)))]
            )
        return proto.CheckResponse(inputs=request.news)

    async def Diff(self, request: Any, context: Any) -> proto.DiffResponse:
        olds = _to_dict(request.old_inputs) if request.HasField("old_inputs") else _to_dict(request.olds)
        news = _to_dict(request.news)
        changes = [k for k in changed_keys(olds, news) if k not in request.ignoreChanges]
        replacing = REPLACING_INPUTS.get(self.package, frozenset())
        replaces = [k for k in changes if replacing is None or k in replacing]
        return proto.DiffResponse(
            changes=proto.DiffResponse.DIFF_SOME if changes else proto.DiffResponse.DIFF_NONE,
            diffs=changes,
            replaces=replaces,
        )

    async def Create(self, request: Any, context: Any) -> proto.CreateResponse:
        name, token = _name_and_type(request.urn)
        rid, state = computed_state(token, name, _to_dict(request.properties), self.region)
        return proto.CreateResponse(id=rid, properties=_to_struct(state))

    async def Update(self, request: Any, context: Any) -> proto.UpdateResponse:
        name, token = _name_and_type(request.urn)
        _, state = computed_state(token, name, _to_dict(request.news), self.region)
        return proto.UpdateResponse(properties=_to_struct(state))

    async def Read(self, request: Any, context: Any) -> proto.ReadResponse:
        return proto.ReadResponse(id=request.id, properties=request.properties, inputs=request.inputs)

    async def Delete(self, request: Any, context: Any) -> empty_pb2.Empty:
        return empty_pb2.Empty()

    async def Invoke(self, request: Any, context: Any) -> proto.InvokeResponse:
        if request.tok not in INVOKES:
            raise UnknownTokenError(
                f"the twin's stand-in provider has no answer for invoke {request.tok!r}: add it to "
                "INVOKES in deepseek_eks/testing/mocks.py"
            )
        answer = INVOKES[request.tok](MockCallArgs(request.tok, _to_dict(request.args), ""), self.region)
        return proto.InvokeResponse(**{"return": _to_struct(answer)})

    async def GetSchema(self, request: Any, context: Any) -> proto.GetSchemaResponse:
        """The package's schema, where a language host needs one to type-check a program (the
        YAML host): pulumi-random's, pruned to the resources the mock tables answer for
        (reference/upstream/pulumi-random-schema.json); the SDK servicer's answer for the others."""
        schema = SCHEMAS.get(self.package)
        if schema is None:
            return await super().GetSchema(request, context)  # type: ignore[no-any-return]
        return proto.GetSchemaResponse(schema=schema.read_text())

    async def GetPluginInfo(self, request: Any, context: Any) -> plugin_pb2.PluginInfo:
        return plugin_pb2.PluginInfo(version=standin_version(self.package))


def serve(package: str, engine_address: str) -> None:
    """Serve ``package``'s stand-in on a free loopback port, printed first as the engine expects."""

    async def run() -> None:
        server = grpc.aio.server()
        provider_pb2_grpc.add_ResourceProviderServicer_to_server(
            StandInServicer(package, engine_address), server
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        await server.wait_for_termination()

    asyncio.run(run())


def write_launchers(
    bin_dir: Path, packages: tuple[str, ...] = PACKAGES, python: str = sys.executable
) -> list[Path]:
    """Write an executable ``pulumi-resource-<package>`` for each package into ``bin_dir``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for package in packages:
        path = bin_dir / f"pulumi-resource-{package}"
        launcher = f'PYTHONPATH="{ROOT}" exec "{python}" "{Path(__file__).resolve()}" {package} "$@"'
        path.write_text(f"#!/bin/sh\n{launcher}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written


def main(argv: list[str]) -> None:
    """``standin.py <package> <engine address> [flags the engine passes]``."""
    if len(argv) < 2 or argv[0] not in PACKAGES:
        raise SystemExit(f"usage: standin.py {{{','.join(PACKAGES)}}} <engine address>")
    engine = next((a for a in argv[1:] if not a.startswith("-")), "")
    serve(argv[0], engine)


if __name__ == "__main__":
    main(sys.argv[1:])
