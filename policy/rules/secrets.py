"""No literal secrets in Kubernetes objects or Helm values: environment, arguments, ConfigMaps and
values whose key or flag names secret material hold a reference, never the value.
"""

from __future__ import annotations

import re

from .base import Props, as_list, containers, get_in, is_kind, object_name, walk

# Words that make a key or variable name hold secret material (after splitting camelCase, snake
# and kebab case); "existingSecret"-style keys name a Secret instead of holding one.
SECRET_WORDS = frozenset({"password", "passwd", "secret", "token", "credential", "credentials"})
SECRET_KEY_PREFIXES = frozenset({"api", "access", "private", "secret"})
SECRET_FLAGS = ("--api-key", "--hf-token")


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_.\-]+", spaced) if w]


def holds_secret(name: str) -> bool:
    """True when a key or variable called ``name`` would hold secret material."""
    words = _words(name)
    if not words or words[0] == "existing":
        return False
    last = words[-1]
    return last in SECRET_WORDS or (last == "key" and len(words) > 1 and words[-2] in SECRET_KEY_PREFIXES)


def no_plaintext_secrets(token: str, props: Props) -> list[str]:
    problems = []
    for path, container in containers(props):
        for env in as_list(container.get("env")):
            name = str(get_in(env, "name") or "")
            if holds_secret(name) and get_in(env, "value"):
                problems.append(f"{path}.env {name} holds a literal value: use valueFrom.secretKeyRef")
        args = [str(a) for a in [*as_list(container.get("command")), *as_list(container.get("args"))]]
        for index, arg in enumerate(args):
            flag = arg.split("=", 1)[0]
            if flag in SECRET_FLAGS and ("=" in arg or index + 1 < len(args)):
                problems.append(
                    f"{path} passes {flag} on the command line: read it from a Secret-backed env var"
                )
    if is_kind(token, "", "ConfigMap"):
        for section in ("data", "binaryData"):
            for key, value in (props.get(section) or {}).items():
                if holds_secret(str(key)) and value:
                    problems.append(
                        f"ConfigMap {object_name(props)} {section}.{key} looks like a secret: use a Secret"
                    )
    if token.startswith("kubernetes:helm.sh/"):
        for path, key, value in walk(props.get("values") or {}):
            if isinstance(value, str) and value and holds_secret(str(key)):
                problems.append(f"values.{path} is a literal secret: reference an existing Secret instead")
    return problems
