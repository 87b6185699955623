"""Credentials never printed: the user:password of a URL and the signing parameters of a presigned URL.

``redact`` is applied to every line repo-builder prints about a location (error lines in ``cli/main.py``,
store errors, progress lines) and to the URL a report names. It is idempotent and cheap (two regexes, linear
in the text), so callers apply it without asking whether a secret could be there.
"""

from __future__ import annotations

import re
from functools import cache

MASK = "***"
# scheme://userinfo@ : the userinfo holds no '/', '@' or blank (RFC 3986), so a path with '@' is untouched.
_USERINFO = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/\s@?#]+)@"
# Query parameters that carry a signature, a credential or a token (S3/GCS presigned URLs, Azure SAS).
_SECRET_PARAMS = (
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    "signature", "sig", "awsaccesskeyid", "token", "access_token", "sas", "skoid", "sktid", "password", "secret",
)
_QUERY = r"(?P<key>[?&;](?:" + "|".join(re.escape(p) for p in _SECRET_PARAMS) + r")=)[^&;\s#'\"]*"


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use (a few ms): most runs print no location, and every command imports this module.
    return re.compile(_USERINFO), re.compile(_QUERY, re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with URL credentials and signing parameters replaced by ``***``."""
    if "://" not in text and "=" not in text:
        return text  # the common case: nothing that could hold a credential
    userinfo, query = _patterns()
    text = userinfo.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return query.sub(lambda m: f"{m['key']}{MASK}", text)
