"""Manifests that expose the vLLM service outside the cluster (pure: no resources created): the ALB
Ingress or the NLB Service, and the load balancers' deregistration and idle timings that a replica's
drain sets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .vllm import (
    APP,
    DEREGISTRATION_PAUSE_S,
    PORT_NAME,
    ROUTER_PEER,
    SERVICE_PORT,
    Workload,
    selector_labels,
    service,
)

# An ALB target group's deregistration delay is at most 3600 s (ELB target group attributes).
ALB_MAX_DEREGISTRATION_S = 3600
# A request without streaming is silent until its whole answer is ready: the load balancer's idle
# timeout must outlast the longest generation the plan allows (its drain time), with a margin.
IDLE_MARGIN_S = 60
# ALB idle timeout: at most 4000 s (ALB user guide, load balancer attributes).
ALB_MAX_IDLE_S = 4000
# NLB: a TCP listener's idle timeout is 60-6000 s (default 350), a TLS listener's is fixed at 350 s
# (NLB user guide, "Update the TCP idle timeout"). The AWS Load Balancer Controller v3.5.0 sets a
# listener's attributes from one annotation per <Protocol>-<Port> (docs/guide/service/
# annotations.md "listener-attributes"; pkg/service/model_build_listener.go
# buildListenerAttributes). Facts: reference/upstream/nlb-facts.json.
NLB_TCP_IDLE_RANGE_S = (60, 6000)
NLB_TLS_IDLE_S = 350
NLB_LISTENER_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-listener-attributes"

# The only paths the load balancer forwards: vLLM 0.33.0 checks the API key only for paths
# under /v1, /v2, /inference and /cohere (vllm/entrypoints/serve/middleware/authenticate.py,
# GUARDED_PREFIX), and the OpenAI-compatible API lives under /v1. /invocations, /tokenize,
# /pooling, /score, /metrics and the admin routes answer without a key, so they stay inside
# the cluster. The ALB's health check targets each pod directly (healthcheck-path), so it needs
# no route here.
ROUTED_PATH_PREFIXES = ("/v1",)


def deregistration_delay_seconds(drain_seconds: int) -> int:
    """How long the ALB keeps a deregistered target's open streams: from the moment the pod starts
    terminating, through the pause and vLLM's drain (capped at the ALB's own maximum)."""
    return min(ALB_MAX_DEREGISTRATION_S, DEREGISTRATION_PAUSE_S + drain_seconds)


def idle_seconds_needed(drain_seconds: int) -> int:
    """How long a load balancer must keep a silent connection: the longest generation, plus a
    margin."""
    return drain_seconds + IDLE_MARGIN_S


def nlb_tcp_idle_seconds(drain_seconds: int) -> int:
    """The NLB TCP listener's idle timeout for this drain budget, within what the NLB allows."""
    low, high = NLB_TCP_IDLE_RANGE_S
    return max(low, min(high, idle_seconds_needed(drain_seconds)))


def nlb_idle_warning(load_balancer: str, tls: bool, drain_seconds: int) -> str | None:
    """What an NLB's idle timeout cuts: a TLS listener's fixed 350 s, or a generation longer than
    the TCP maximum."""
    if load_balancer != "nlb":
        return None
    needed = idle_seconds_needed(drain_seconds)
    limit = NLB_TLS_IDLE_S if tls else NLB_TCP_IDLE_RANGE_S[1]
    if needed <= limit:
        return None
    why = "its TLS listener's idle timeout is fixed at" if tls else "its TCP idle timeout is at most"
    return (
        f"endpoint.loadBalancer = nlb: {why} {limit} s, and a request without streaming can stay "
        f"silent for up to {drain_seconds} s (the drain budget, endpoint.drainSeconds) before its "
        f'answer, so the NLB may close it first; stream responses ("stream": true keeps the '
        "connection busy), lower endpoint.drainSeconds or model.maxModelLen, or use "
        "endpoint.loadBalancer alb"
    )


@dataclass(frozen=True)
class Endpoint:
    """How the load balancer in front of vLLM is set up."""

    ingress_class: str
    internet_facing: bool
    allowed_cidrs: list[str]
    certificate_arn: str | None
    drain_seconds: int
    load_balancer: str = "alb"
    """``alb`` (an Ingress) or ``nlb`` (a Service of type LoadBalancer)."""
    nlb_class: str = "service.k8s.aws/nlb"
    """loadBalancerClass of the NLB controller: the AWS Load Balancer Controller's, or Auto Mode's
    ``eks.amazonaws.com/nlb`` (NLB_CLASSES)."""
    subnet_ids: tuple[str, ...] = ()
    """Subnets the load balancer must use (network.loadBalancerSubnetIds in your VPC); empty:
    the controller's tag discovery."""


# llm-d's router (serving/router.py): its Service, and the proxy's readiness listener the load
# balancer health-checks (port, path).
ROUTER_SERVICE = "vllm-router"
ROUTER_HEALTH = (19001, "/ready")

# The controller that provisions an NLB for a Service of type LoadBalancer: the AWS Load Balancer
# Controller (docs/guide/service/annotations.md, v3.5.0: loadBalancerClass service.k8s.aws/nlb) in
# Karpenter mode; EKS Auto Mode's own (EKS User Guide, auto-configure-nlb: eks.amazonaws.com/nlb).
NLB_CLASSES = {"karpenter": "service.k8s.aws/nlb", "auto-mode": "eks.amazonaws.com/nlb"}
NLB_ANNOTATION = "service.beta.kubernetes.io/"


def ingress(
    workload: Workload,
    endpoint: Endpoint,
    source_cidrs: list[str],
    name: str = APP,
    *,
    access_logs: tuple[str, str] | None = None,
    routed: bool = False,
) -> dict[str, Any]:
    """An ALB Ingress: internal unless configured otherwise, only the key-guarded API routed,
    health-checked on /health, idle timeout above the longest generation, targets drained as long
    as a stream may run. Paths outside ``ROUTED_PATH_PREFIXES`` get the ALB's default 404.

    ``source_cidrs`` become ``inbound-cidrs`` on every scheme: the AWS Load Balancer Controller
    admits 0.0.0.0/0 when it is unset (v3.5.0 docs/guide/ingress/annotations.md, "inbound-cidrs"),
    which for an internal ALB means every network routed to the VPC. With a certificate the ALB
    listens on 443 and on 80 only to redirect to 443 (``ssl-redirect``: every HTTP listener's
    default action becomes the redirect, so no request is served in plain HTTP).
    ``access_logs``: (bucket, prefix) the ALB writes its access logs to, as load balancer
    attributes (AWS Load Balancer Controller docs/guide/ingress/annotations.md,
    load-balancer-attributes: access_logs.s3.enabled, .bucket, .prefix).
    ``routed``: the targets are llm-d's router pods (its Service's ``http`` port), health-checked
    on the proxy's own /ready listener, which answers while no replica runs (a check through the
    proxy would reach a vLLM pod, and fail at zero replicas)."""
    listen = [{"HTTP": 80}, {"HTTPS": 443}] if endpoint.certificate_arn else [{"HTTP": 80}]
    idle = min(ALB_MAX_IDLE_S, idle_seconds_needed(endpoint.drain_seconds))
    attributes = f"idle_timeout.timeout_seconds={idle},routing.http.drop_invalid_header_fields.enabled=true"
    if access_logs:
        bucket, prefix = access_logs
        attributes += (
            f",access_logs.s3.enabled=true,access_logs.s3.bucket={bucket},access_logs.s3.prefix={prefix}"
        )
    annotations = {
        "alb.ingress.kubernetes.io/scheme": "internet-facing" if endpoint.internet_facing else "internal",
        "alb.ingress.kubernetes.io/target-type": "ip",
        "alb.ingress.kubernetes.io/listen-ports": json.dumps(listen),
        "alb.ingress.kubernetes.io/healthcheck-path": ROUTER_HEALTH[1] if routed else "/health",
        "alb.ingress.kubernetes.io/healthcheck-port": str(ROUTER_HEALTH[0]) if routed else "traffic-port",
        "alb.ingress.kubernetes.io/success-codes": "200",
        "alb.ingress.kubernetes.io/load-balancer-attributes": attributes,
        "alb.ingress.kubernetes.io/target-group-attributes": (
            f"deregistration_delay.timeout_seconds={deregistration_delay_seconds(endpoint.drain_seconds)}"
        ),
    }
    if endpoint.subnet_ids:  # AWS Load Balancer Controller v3.5.0 docs/guide/ingress/annotations.md
        annotations["alb.ingress.kubernetes.io/subnets"] = ",".join(endpoint.subnet_ids)
    if not source_cidrs:
        raise ValueError("ingress: no source CIDRs; the ALB would admit 0.0.0.0/0")
    annotations["alb.ingress.kubernetes.io/inbound-cidrs"] = ",".join(source_cidrs)
    if endpoint.certificate_arn:
        annotations["alb.ingress.kubernetes.io/ssl-redirect"] = "443"
        annotations["alb.ingress.kubernetes.io/certificate-arn"] = endpoint.certificate_arn
        annotations["alb.ingress.kubernetes.io/ssl-policy"] = "ELBSecurityPolicy-TLS13-1-2-2021-06"
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": {**workload.labels, **selector_labels()},
            "annotations": annotations,
        },
        "spec": {
            "ingressClassName": endpoint.ingress_class,
            "rules": [
                {
                    "http": {
                        "paths": [
                            {
                                "path": prefix,
                                "pathType": "Prefix",
                                "backend": {
                                    "service": {
                                        "name": ROUTER_SERVICE if routed else name,
                                        "port": {"name": PORT_NAME},
                                    }
                                },
                            }
                            for prefix in ROUTED_PATH_PREFIXES
                        ]
                    }
                }
            ],
        },
    }


def nlb_service(
    workload: Workload,
    endpoint: Endpoint,
    source_cidrs: list[str],
    *,
    leader_only: bool = False,
    name: str = "vllm-nlb",
    routed: bool = False,
) -> dict[str, Any]:
    """An NLB (L4) in front of vLLM: ip targets health-checked over HTTP on /health, internal
    unless configured otherwise, reachable only from ``source_cidrs`` (the allowed CIDRs, or the
    VPC for an internal one: the controllers default to 0.0.0.0/0), TLS on 443 with the
    certificate when one is given. Client IP preservation stays off, so targets see the NLB's own
    addresses in its subnets, which the NetworkPolicy admits. Every path reaches vLLM: settings
    refuse ``nlb`` with an API key (see settings._nlb_problems). ``routed``: the targets are llm-d's
    router pods, health-checked on the proxy's /ready listener (as ``ingress``)."""
    if not source_cidrs:
        raise ValueError("nlb_service: no source CIDRs; the NLB would be open to 0.0.0.0/0")
    a = NLB_ANNOTATION
    annotations = {
        f"{a}aws-load-balancer-scheme": "internet-facing" if endpoint.internet_facing else "internal",
        f"{a}aws-load-balancer-nlb-target-type": "ip",
        f"{a}aws-load-balancer-healthcheck-protocol": "http",
        f"{a}aws-load-balancer-healthcheck-path": "/health",
        f"{a}aws-load-balancer-healthcheck-port": "traffic-port",
        f"{a}aws-load-balancer-target-group-attributes": (
            f"deregistration_delay.timeout_seconds={deregistration_delay_seconds(endpoint.drain_seconds)},"
            "preserve_client_ip.enabled=false"
        ),
    }
    if endpoint.subnet_ids:  # AWS Load Balancer Controller v3.5.0 docs/guide/service/annotations.md
        annotations[f"{a}aws-load-balancer-subnets"] = ",".join(endpoint.subnet_ids)
    # Pulumi would wait for endpoints, which exist only once a replica has loaded (see ``service``).
    annotations["pulumi.com/skipAwait"] = "true"
    port = SERVICE_PORT
    if not endpoint.certificate_arn:
        # A TCP listener's idle timeout follows the drain budget (a TLS one cannot be changed:
        # nlb_idle_warning says what that costs).
        annotations[f"{NLB_LISTENER_ATTRIBUTES}.TCP-{port}"] = (
            f"tcp.idle_timeout.seconds={nlb_tcp_idle_seconds(endpoint.drain_seconds)}"
        )
    if endpoint.certificate_arn:
        port = 443
        annotations |= {
            f"{a}aws-load-balancer-ssl-cert": endpoint.certificate_arn,
            f"{a}aws-load-balancer-ssl-ports": "443",
            f"{a}aws-load-balancer-ssl-negotiation-policy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
        }
    if routed:
        annotations[f"{a}aws-load-balancer-healthcheck-path"] = ROUTER_HEALTH[1]
        annotations[f"{a}aws-load-balancer-healthcheck-port"] = str(ROUTER_HEALTH[0])
    nlb = service(workload, name, leader_only=leader_only)
    nlb["metadata"]["annotations"] = annotations
    if routed:  # the router's container port is named like vLLM's ("http")
        nlb["spec"]["selector"] = dict(ROUTER_PEER["podSelector"]["matchLabels"])
    nlb["spec"] |= {
        "type": "LoadBalancer",
        "loadBalancerClass": endpoint.nlb_class,
        "loadBalancerSourceRanges": list(source_cidrs),
    }
    nlb["spec"]["ports"][0]["port"] = port
    return nlb
