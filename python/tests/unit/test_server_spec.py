"""A server under test in the spec (spec/servers.py): any program as kind "command" with its
placeholders checked as read, what each built-in kind can serve, the ready check's fields,
and the GETs held to what their server serves (spec/get_workload.py GetWorkload.check_study)."""

from __future__ import annotations

import pytest

from congestlab.spec.loader import parse_spec
from congestlab.spec.models import StudySpec
from congestlab.spec.servers import BUILTIN_SERVES, ServerSpec
from congestlab.spec.validation_context import STORED
from spec_fixtures import TINY_NETWORK, refused


def study(server: str, request: str = 'client = "client", server = "web"', client_kind: str = "curl") -> str:
    """The tiny network with one server `web` (its TOML lines) and one GET of it."""
    return f'''name = "srv"
{TINY_NETWORK}
[[servers]]
name = "web"
node = "server"
{server}
[[workloads]]
name = "get"
kind = "get"
client_kind = "{client_kind}"
requests = [{{ {request} }}]
'''


COMMAND = '''kind = "command"
port = 8443
tls = true
http = ["1.1", "2"]
command = ["/usr/local/bin/srv", "--listen", "{listen4}", "--listen", "{listen6}", "--cert", "{cert}"]
config_template = """
root {docroot};
log {logdir}/access.log;
"""
config_name = "srv.conf"
version = ["/usr/local/bin/srv", "--version"]
env = { SRV_HOME = "{workdir}" }
ready = { kind = "log_regex", regex = "^listening on .*:8443$", log = "{logdir}/srv.log" }
stop = { signal = "QUIT", grace_s = 2 }'''
TLS_GET = 'client = "client", server = "web", tls = true'


def test_a_command_server_validates_with_every_field():
    spec = parse_spec(study(COMMAND, TLS_GET + ', http = "2"'), "x.toml")
    web = spec.server("web")
    assert web.kind == "command" and web.tls and web.http == ["1.1", "2"]
    assert web.command[2] == "{listen4}" and web.config_name == "srv.conf"
    assert web.ready.kind == "log_regex" and web.ready.log == "{logdir}/srv.log"
    assert web.stop.signal == "QUIT" and web.stop.grace_s == 2
    assert web.env == {"SRV_HOME": "{workdir}"} and web.version == ["/usr/local/bin/srv", "--version"]


def test_a_command_server_needs_its_command():
    message = refused(study('kind = "command"'))
    assert 'a server of kind "command" needs command (its argv)' in message, message


@pytest.mark.parametrize("field, line", [
    ("command", 'command = ["srv", "--port", "{prot}"]'),
    ("config_template", 'command = ["srv"]\nconfig_template = "listen {prot};"'),
    ("env", 'command = ["srv"]\nenv = { PORT = "{prot}" }'),
    ("version", 'command = ["srv"]\nversion = "srv {prot}"'),
    ("ready.log", 'command = ["srv"]\nready = { kind = "log_regex", regex = "up", log = "{prot}/x.log" }'),
])
def test_an_unknown_placeholder_is_refused_naming_it(field, line):
    message = refused(study(f'kind = "command"\n{line}'))
    assert f"{field}: unknown placeholder {{prot}}" in message, message
    assert "{{prot}} writes it literally" in message, message


def test_a_doubled_brace_is_a_literal_not_a_placeholder():
    server = ('kind = "command"\ncommand = ["srv", "{{name}}", "--port", "{port}"]\n'
              'config_template = "header {{http.request.uri}} {{upstream}}"')
    web = parse_spec(study(server), "x.toml").server("web")
    assert web.command[1] == "{{name}}"  # kept as written: servers/command.py renders it as {name}


@pytest.mark.parametrize("line, field", [
    ('command = ["httpd"]', "command"),
    ('config_template = "Listen 80"', "config_template"),
    ('config_name = "httpd.conf"', "config_name"),
    ('version = "2.4"', "version"),
    ('env = { A = "b" }', "env"),
])
def test_a_command_only_field_on_apache_is_refused(line, field):
    message = refused(study(f'kind = "apache"\n{line}'))
    assert f'{field} is for kind "command", not \'apache\'' in message, message


def test_a_stored_spec_that_spells_every_field_at_its_default_passes():
    stored = parse_spec(study('kind = "apache"'), "x.toml").model_dump(mode="json")
    (web,) = stored["servers"]
    assert web["config_name"] == "server.conf" and web["command"] is None and web["env"] == {}
    assert "ready" in web and "stop" in web
    again = StudySpec.model_validate(stored, context={STORED: True})
    assert again.server("web") == parse_spec(study('kind = "apache"'), "x.toml").server("web")
    assert ServerSpec.model_validate(web, context={STORED: True}).kind == "apache"


def test_a_stored_spec_does_not_hide_a_command_field_set_on_apache():
    stored = parse_spec(study('kind = "apache"'), "x.toml").model_dump(mode="json")
    stored["servers"][0]["config_template"] = "Listen 80"
    with pytest.raises(ValueError, match="config_template is for kind \"command\", not 'apache'"):
        StudySpec.model_validate(stored, context={STORED: True})


@pytest.mark.parametrize("kind, tls, http", [
    ("nginx", False, ["1.1", "2"]),  # plain HTTP/1.1 and h2c need two ports
    ("apache", False, ["2"]),  # mod_http2's h2c goes with HTTP/1.1 on its port
    ("lean", True, ["1.1"]),
    ("caddy", False, ["2"]),
    ("h2o", True, ["2"]),
    ("h2o", True, ["1.1"]),  # h2o 2.2 always offers h2 over TLS
])
def test_what_a_builtin_kind_cannot_serve_is_refused(kind, tls, http):
    assert tuple(sorted(http)) not in BUILTIN_SERVES[kind].get(tls, ())
    server = f'kind = "{kind}"\ntls = {str(tls).lower()}\nhttp = {http}'.replace("'", '"')
    request = 'client = "client", server = "web"' + (", tls = true" if tls else "")
    message = refused(study(server, request))
    assert f"a {kind} server cannot serve http = {http} with tls = {str(tls).lower()}" in message, message


@pytest.mark.parametrize("kind, tls, http", [
    ("nginx", False, ["2"]), ("nginx", True, ["1.1", "2"]), ("caddy", True, ["1.1", "2"]),
    ("lighttpd", False, ["1.1", "2"]), ("h2o", True, ["1.1", "2"]),
])
def test_what_a_builtin_kind_serves_loads(kind, tls, http):
    server = f'kind = "{kind}"\ntls = {str(tls).lower()}\nhttp = {http}'.replace("'", '"')
    request = f'client = "client", server = "web", http = "{http[0]}"' + (", tls = true" if tls else "")
    assert parse_spec(study(server, request), "x.toml").server("web").http == http


def test_a_version_named_twice_is_refused():
    message = refused(study('kind = "command"\ncommand = ["srv"]\nhttp = ["1.1", "1.1"]'))
    assert "names a version twice" in message, message


def test_a_log_regex_ready_check_needs_its_regex():
    message = refused(study('kind = "command"\ncommand = ["srv"]\nready = { kind = "log_regex" }'))
    assert 'ready.kind = "log_regex" needs ready.regex' in message, message


def test_a_log_regex_ready_check_with_a_bad_regex_is_refused():
    message = refused(study('kind = "command"\ncommand = ["srv"]\nready = { kind = "log_regex", regex = "(up" }'))
    assert "ready.regex '(up' is not a regular expression" in message, message


def test_a_regex_without_log_regex_is_refused():
    message = refused(study('kind = "command"\ncommand = ["srv"]\nready = { kind = "tcp_listen", regex = "up" }'))
    assert 'ready.regex and ready.log are for kind "log_regex", not \'tcp_listen\'' in message, message


def test_a_stop_signal_is_one_of_the_known():
    message = refused(study('kind = "command"\ncommand = ["srv"]\nstop = { signal = "USR9" }'))
    assert "signal" in message and "TERM" in message, message


def test_a_plain_get_of_a_tls_server_is_refused():
    message = refused(study(COMMAND))
    assert "workloads.get.requests.0.tls = false but server 'web' has tls = true" in message, message


def test_a_tls_get_of_a_plain_server_is_refused():
    message = refused(study('kind = "apache"', TLS_GET))
    assert "workloads.get.requests.0.tls = true but server 'web' has tls = false" in message, message


def test_an_http_version_the_server_does_not_serve_is_refused():
    message = refused(study('kind = "apache"', 'client = "client", server = "web", http = "2"'))
    assert "workloads.get.requests.0.http = \"2\" but server 'web' serves http = ['1.1']" in message, message


def test_a_chromium_get_over_h2c_is_refused():
    server, get = 'kind = "command"\ncommand = ["srv"]\nhttp = ["1.1", "2"]', 'client = "client", server = "web", http = "2"'
    message = refused(study(server, get, client_kind="chromium"))
    assert "workloads.get.requests.0: chromium has no h2c (HTTP/2 without TLS)" in message, message


@pytest.mark.parametrize("server, get", [
    ('kind = "command"\ncommand = ["srv"]\ntls = true', TLS_GET),
    (COMMAND, TLS_GET + ', http = "2"'),
    ('kind = "ngtcp2"\ntls = true\nhttp = ["3"]', TLS_GET + ', http = "3"'),
])
def test_a_chromium_get_over_tls_http2_or_http3_loads(server, get):
    assert parse_spec(study(server, get, client_kind="chromium"), "x.toml").workload("get").client_kind == "chromium"


def test_a_plain_http11_chromium_get_of_a_command_server_loads():
    text = study('kind = "command"\ncommand = ["srv"]\nhttp = ["1.1", "2"]', client_kind="chromium")
    assert parse_spec(text, "x.toml").workload("get").client_kind == "chromium"
