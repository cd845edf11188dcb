"""The model server: vLLM's workload and its Service, endpoint and load balancer, the weights
(stager, buckets) and the secrets it reads."""
