"""The cluster and its capacity: the EKS cluster and VPC, Auto Mode or Karpenter node pools,
warm spares, and the IAM and Pod Identity they need."""
