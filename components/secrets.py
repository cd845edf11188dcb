"""Kubernetes Secrets holding the stack's secret settings (Hugging Face token, API key)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "token"
API_KEY_SECRET = "vllm-api-key"
API_KEY_KEY = "api-key"


@dataclass
class ApiSecretsArgs:
    """Inputs of ``ApiSecrets``. A secret left ``None`` is not created."""

    namespace: pulumi.Input[str]
    """Namespace of the inference workload."""
    labels: dict[str, str]
    """Labels on each Secret."""
    hf_token: pulumi.Input[str] | None = None
    """Hugging Face token (a Pulumi secret) for gated or rate-limited downloads."""
    api_key: pulumi.Input[str] | None = None
    """Bearer key the vLLM server requires from clients (a Pulumi secret)."""


class ApiSecrets(pulumi.ComponentResource):
    """Secrets the vLLM pods mount as environment variables; values never leave Pulumi secrets."""

    hf_token_secret: pulumi.Output[str] | None
    """Name of the Secret holding the Hugging Face token, if one was configured."""
    api_key_secret: pulumi.Output[str] | None
    """Name of the Secret holding the API key, if one was configured."""

    def __init__(self, name: str, args: ApiSecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:ApiSecrets", name, None, opts)
        self.hf_token_secret = self._secret(name, args, HF_TOKEN_SECRET, HF_TOKEN_KEY, args.hf_token)
        self.api_key_secret = self._secret(name, args, API_KEY_SECRET, API_KEY_KEY, args.api_key)
        self.register_outputs({"hfTokenSecret": self.hf_token_secret, "apiKeySecret": self.api_key_secret})

    def _secret(
        self,
        name: str,
        args: ApiSecretsArgs,
        secret_name: str,
        key: str,
        value: pulumi.Input[str] | None,
    ) -> pulumi.Output[str] | None:
        if value is None:
            return None
        secret = k8s.core.v1.Secret(
            f"{name}-{secret_name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=secret_name, namespace=args.namespace, labels=args.labels
            ),
            type="Opaque",
            immutable=False,
            string_data={key: pulumi.Output.secret(value)},
            opts=pulumi.ResourceOptions(parent=self),
        )
        return secret.metadata.apply(lambda m: str(m.name))
