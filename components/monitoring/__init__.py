"""Observability and autoscaling: Prometheus, DCGM and the adapter, dashboards and alerts, and
the HPA or KEDA ScaledObject that scales the model server on their metrics."""
