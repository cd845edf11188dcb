"""Kubernetes Secrets holding the stack's secret settings (Hugging Face token, API key)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

# 48 alphanumerics: about 286 bits, and no character that needs quoting in a shell or a header.
GENERATED_API_KEY_LENGTH = 48
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
    generate_api_key: bool = False
    """Generate the key (a ``random.RandomPassword``, kept secret in the state) when ``api_key`` is
    None: ``endpoint.auth`` api-key, the default, never serves without one."""


class ApiSecrets(pulumi.ComponentResource):
    """Secrets the vLLM pods mount as environment variables; values never leave Pulumi secrets."""

    hf_token_secret: pulumi.Output[str] | None
    """Name of the Secret holding the Hugging Face token, if one was configured."""
    api_key_secret: pulumi.Output[str] | None
    """Name of the Secret holding the API key, if there is one."""
    api_key: pulumi.Output[str] | None
    """The API key clients send (a secret Output): the configured one or the generated one."""

    def __init__(self, name: str, args: ApiSecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepseek-eks:index:ApiSecrets", name, None, opts)
        self.hf_token_secret = self._secret(name, args, HF_TOKEN_SECRET, HF_TOKEN_KEY, args.hf_token)
        key: pulumi.Input[str] | None = args.api_key
        if key is None and args.generate_api_key:
            key = random.RandomPassword(
                f"{name}-api-key",
                length=GENERATED_API_KEY_LENGTH,
                special=False,
                opts=pulumi.ResourceOptions(parent=self),
            ).result
        self.api_key = None if key is None else pulumi.Output.secret(key)
        self.api_key_secret = self._secret(name, args, API_KEY_SECRET, API_KEY_KEY, self.api_key)
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
