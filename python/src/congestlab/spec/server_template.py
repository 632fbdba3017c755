"""Placeholders of a server's command, config template and environment: `{port}`,
`{docroot}`, ... are replaced by the instance's values when it starts
(servers/command.py). Only `{name}` with a lower-case identifier is a placeholder, so a
config's own braces (nginx blocks, a Caddyfile's `{http.request.uri}`) pass through; `{{name}}`
writes a literal `{name}`."""

from __future__ import annotations

import re

# name -> what it is replaced by (docs/servers.md lists them)
PLACEHOLDERS = {
    "port": "the server's TCP (and UDP) port",
    "addr4": "the host's IPv4 address",
    "addr6": "the host's IPv6 address",
    "listen4": "addr4:port",
    "listen6": "[addr6]:port",
    "docroot": "the directory of the served files (world-readable)",
    "workdir": "the instance's own directory (config, pid file, state)",
    "logdir": "the instance's log directory (kept in the run directory)",
    "config": "the rendered config template's path ({workdir}/<config_name>)",
    "cert": "the run's server certificate (PEM, with the CA after it)",
    "key": "the server certificate's private key (PEM)",
    "ca": "the run's CA certificate (PEM), which the run's clients trust",
}

_TOKEN = re.compile(r"\{\{([a-z][a-z0-9_]*)\}\}|\{([a-z][a-z0-9_]*)\}")


# the placeholders that exist only for a server with tls = true
TLS_PLACEHOLDERS = ("cert", "key", "ca")


def placeholders_in(text: str) -> list[str]:
    """The placeholders `text` uses (known or not; not the `{{name}}` literals)."""
    return sorted({m.group(2) for m in _TOKEN.finditer(text) if m.group(2)})


def unknown_placeholders(text: str) -> list[str]:
    """The `{name}` tokens of `text` that are not placeholders (a typo, or a server's own
    placeholder that needs `{{name}}`)."""
    return sorted({m.group(2) for m in _TOKEN.finditer(text) if m.group(2) and m.group(2) not in PLACEHOLDERS})


def render(text: str, values: dict[str, str]) -> str:
    """`text` with every placeholder replaced; `{{name}}` becomes `{name}`."""
    def one(match: re.Match) -> str:
        if match.group(1):
            return "{" + match.group(1) + "}"
        name = match.group(2)
        if name not in values:
            raise KeyError(name)
        return values[name]
    return _TOKEN.sub(one, text)
