"""Who Prometheus is in the cluster: its release name, port, URL and the one label selector that
finds it, shared by the chart values, the scrape and query policies, and KEDA's and the adapter's
URLs (no import of the chart code, so the serving and policy modules can use it too)."""

from __future__ import annotations

PROMETHEUS_FULLNAME = "kps"  # fullnameOverride: services are kps-prometheus, kps-grafana, ...
PROMETHEUS_PORT = 9090  # kube-prometheus-stack 88.5.3 prometheus.service.port (and targetPort)
# The Prometheus object the chart creates: kube-prometheus-stack.prometheus.crname, i.e.
# `<fullname>-prometheus` (charts/kube-prometheus-stack/templates/_helpers.tpl at 88.5.3).
PROMETHEUS_OBJECT = f"{PROMETHEUS_FULLNAME}-prometheus"

# One selector for Prometheus' server pods and for its Service. The EKS network-policy agent judges
# egress before kube-proxy's DNAT, on the Service's ClusterIP, and the controller admits that
# ClusterIP for a podSelector peer only when the peer matches the Service's own spec.selector
# (aws/amazon-network-policy-controller-k8s v1.1.7 pkg/resolvers/endpoints.go,
# getMatchingServiceClusterIPs). The chart's Service selects exactly these two labels
# (templates/prometheus/service.yaml at 88.5.3), and prometheus-operator puts both on every server
# pod (pkg/prometheus/server/statefulset.go, podSelectorLabels): so a peer with this selector
# admits both the Service address and the pods, and nothing but this stack's Prometheus.
# reference/upstream/chart-workloads.json records both sources; tests/rendered/test_seams.py checks it.
PROMETHEUS_SELECTOR = {
    "app.kubernetes.io/name": "prometheus",
    "operator.prometheus.io/name": PROMETHEUS_OBJECT,
}


def prometheus_url(namespace: str) -> str:
    """In-cluster URL of Prometheus (for the adapter and KEDA)."""
    return f"http://{PROMETHEUS_OBJECT}.{namespace}.svc:{PROMETHEUS_PORT}"
