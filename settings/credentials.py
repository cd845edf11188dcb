"""Values that look like credentials, so that no message ever repeats one.

A token pasted into the wrong setting (a Hugging Face token as ``model.repository``) is refused
like any bad value, but the error must not print it: it would land in a terminal's scrollback
and CI logs. The formats are the issuers' documented prefixes
(``reference/upstream/settings-rules.json`` "credential_formats"):
- Hugging Face user access tokens start ``hf_`` (Hugging Face Hub docs, "User access tokens");
- AWS access key ids start ``AKIA`` (long-term) or ``ASIA`` (temporary), 20 characters
  (IAM user guide, "Unique identifiers": ID prefixes);
- GitHub tokens start ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` or ``github_pat_``
  (GitHub docs, "About authentication to GitHub": GitHub's token formats);
- and, for the rest (an AWS secret access key is 40 characters of base64), any run of 32 or
  more letters, digits and ``+/=`` that mixes upper case, lower case and digits: no setting of
  this program takes such a value (ids are lower-case hex; names and repo ids are words joined by
  ``-``, ``_`` or ``.``, which end a run).
"""

from __future__ import annotations

import re

_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(hf_[A-Za-z0-9]{20,}|(AKIA|ASIA)[A-Z0-9]{16}|(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,})",
    re.ASCII,
)
_LONG_RUN = re.compile(r"[A-Za-z0-9+/=]{32,}", re.ASCII)


def _mixed(run: str) -> bool:
    return any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)


def looks_like_credential(text: str) -> bool:
    """Whether ``text`` holds something shaped like a token or secret key."""
    if _PREFIXED.search(text):
        return True
    return any(_mixed(run) for run in _LONG_RUN.findall(text))


_HIDDEN = "(hidden: looks like a credential)"


def redact(text: str) -> str:
    """``text`` with every credential-shaped part replaced, for messages that quote a value."""
    text = _PREFIXED.sub(_HIDDEN, text)
    return _LONG_RUN.sub(lambda m: _HIDDEN if _mixed(m.group()) else m.group(), text)
