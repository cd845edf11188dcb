"""Autoscaling simulator: a stack's rendered HPA or KEDA ScaledObject, its sizing plan and a traffic
trace in; replicas, queue and latency over time, SLO attainment, GPU-hours and cost out.
``python -m automation simulate --stack NAME [--compare]``; see ``run.py``."""
