"""URLs as they may be shown: without the secrets they may carry."""

from __future__ import annotations

import re
import urllib.parse

#: Query parameters whose values are secrets in URLs (matched case-insensitively, as substrings).
_SECRET_PARAMS = re.compile(r"(?i)(password|passwd|secret|token|key|signature|sig|auth)")


def redact_url(url: str) -> str:
    """``url`` without the secrets it may carry: the password of ``user:password@`` and the
    values of query parameters named like secrets (``token``, ``api_key``, ``sig``...)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(_SECRET_PARAMS.search(name) for name, _ in pairs):
        query = "&".join(
            f"{urllib.parse.quote(k)}=***"
            if _SECRET_PARAMS.search(k)
            else urllib.parse.urlencode({k: v})
            for k, v in pairs
        )
    else:
        query = parts.query
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))
