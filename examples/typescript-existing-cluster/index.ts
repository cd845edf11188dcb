// Two DeepSeek-R1 services on an EKS cluster you already run (the TypeScript version of
// examples/existing-cluster): team A installs the cluster-wide add-ons, team B serves the 70B
// distill from its own S3 bucket and scales on queue depth; each in its own namespace.
import * as pulumi from "@pulumi/pulumi";
import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as deepseek from "@pulumi/deepseek-eks";

const config = new pulumi.Config();
const cluster = new k8s.Provider("existing-cluster", { kubeconfig: config.requireSecret("kubeconfig") });
const region = new aws.Provider("eu-west-1", { region: "eu-west-1" });
const providers = { kubernetes: cluster, aws: region };
// The platform team's network stack exports the VPC and node subnets: Outputs, which the wiring
// fields take (the fields that decide the plan, such as computeMode and the model, are plain).
const network = new pulumi.StackReference(config.require("networkStack"));
// Where both services go: the cluster, its node role, its VPC and node subnets.
const clusterWiring = {
    region: "eu-west-1",
    computeMode: "auto-mode" as const, // a literal of the schema's ComputeMode enum
    existingCluster: { clusterName: config.require("clusterName"), nodeRoleName: config.require("nodeRoleName") },
    network: {
        vpcId: network.requireOutput("vpcId") as pulumi.Output<string>,
        privateSubnetIds: network.requireOutput("privateSubnetIds") as pulumi.Output<string[]>,
    },
};

const teamA = new deepseek.DeepSeekService("team-a", {
    installSharedAddons: true,
    ...clusterWiring,
    model: { variant: "r1-distill-qwen-7b", maxModelLen: 16384 },
    gpu: { instanceFamilies: ["g6"] },
    autoscaling: { minReplicas: 1, maxReplicas: 2 },
}, { providers });

const teamB = new deepseek.DeepSeekService("team-b", {
    ...clusterWiring,
    model: { variant: "r1-distill-llama-70b" },
    weights: { source: "s3" },
    gpu: { instanceFamilies: ["g6e"], capacityTypes: ["on-demand"] },
    autoscaling: { signal: "queue-depth", minReplicas: 1, maxReplicas: 2 },
    apiKey: config.requireSecret("apiKey"),
}, { providers });

export const teamAInClusterUrl = teamA.inClusterUrl;
export const teamBInClusterUrl = teamB.inClusterUrl;
export const teamBHourlyUsdAtMax = teamB.hourlyUsdAtMax;
