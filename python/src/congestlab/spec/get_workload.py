"""The measured GETs of a spec (`kind = "get"`): the requests (client, server, file, families,
HTTP and TLS version) and the client that sends them (curl, curl-cffi or Chromium), held to
what each server serves (workloads/get.py runs them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from congestlab.spec.request_timeouts import FROM_PUBLISHED, ChosenTimeout, choose, has_published_delay
from congestlab.spec.workload_base import Family, StrictModel, WorkloadModel
from congestlab.spec.workload_ends import Crossing, Named

if TYPE_CHECKING:
    from congestlab.spec.models import StudySpec


class GetRequest(StrictModel):
    client: str = Field(description="host sending the GET")
    server: str = Field(description="server asked")
    file_kib: int = Field(default=320, ge=1)
    families: list[Family] = Field(default=["v4", "v6"], min_length=1, description="one GET each, in turn")
    # the server's port decides TLS; a GET that negotiates another HTTP or TLS version is invalid
    http: Literal["1.1", "2", "3"] = Field(default="1.1", description="HTTP version asked for (\"2\" without "
                                             "TLS: h2c by prior knowledge; \"3\": QUIC, client_kind = \"curl-cffi\")")
    tls: bool = Field(default=False, description="over TLS (the server must have tls = true)")
    tls_version: Literal["1.2", "1.3"] = Field(default="1.3", description="with tls: exactly this TLS version")


class GetWorkload(WorkloadModel):
    """The measured request(s): one GET per family per repetition; several `requests` are
    sent at the same time (competing servers). `client_kind = "chromium"` fetches the file
    with headless Chromium as a download (a fresh profile each time; the analysis picks the
    connection that carried the file, as a browser may open others)."""

    kind: Literal["get"]
    requests: list[GetRequest] = Field(min_length=1)
    # the studies used a browser (Firefox 3.5); chromium fetches the file as a download,
    # with a fresh profile per request (traffic/chromium.py)
    # curl-cffi: libcurl with ngtcp2, HTTP/1.1, 2 and 3 from one client stack (traffic/cffi_get.py)
    client_kind: Literal["curl", "curl-cffi", "chromium"] = Field(
        default="curl", description="the client program: curl, curl-cffi (one libcurl for HTTP/1.1, 2 and 3), or "
        "headless chromium (a browser, as the studies)")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="give up after this long (with timeout = "
                             "\"from-published\": the most it waits, and the wait at a level with no published delay)")
    # the timeout per point from the seed's published delays (spec/request_timeouts.py)
    timeout: Literal["fixed", "from-published"] = Field(
        default="fixed", description="fixed: timeout_s everywhere; from-published: per point, timeout_margin x the "
        "longest delay the study publishes at the point's level, at least timeout_min_s, at most timeout_s")
    timeout_margin: float | None = Field(
        default=None, ge=1, le=100, description="from-published: the factor over the longest published delay (a "
        "published delay is a mean: the factor covers single GETs)")
    timeout_min_s: float | None = Field(
        default=None, gt=0, le=600, description="from-published: the shortest timeout chosen (a level whose "
        "published delays are short)")
    timeout_reason: str | None = Field(
        default=None, min_length=1, description="from-published: why this margin (shown in the manifest)")
    timeout_published: list[str] = Field(
        default=["delay_ms", "delay_s"], min_length=1, description="from-published: the published metrics read as "
        "delays, in ms or s by their name's suffix (_ms, _s)")

    @model_validator(mode="after")
    def _timeout_choice(self) -> "GetWorkload":
        chosen = self.timeout == "from-published"
        if chosen and (self.timeout_margin is None or not self.timeout_reason):
            raise ValueError('timeout = "from-published" needs timeout_margin (the factor over the longest '
                             "published delay) and timeout_reason (why that factor)")
        if not chosen and "timeout" not in self.model_fields_set:
            # a margin without the choice is a forgotten `timeout`; an explicit "fixed" (a variant's
            # [set] turning the choice off) leaves the other fields unread
            given = [f for f in ("timeout_margin", "timeout_min_s", "timeout_reason") if getattr(self, f) is not None]
            if given:
                raise ValueError(f'{given[0]} is only read with timeout = "from-published"')
        for name in self.timeout_published:
            if not name.endswith(("_ms", "_s")):
                raise ValueError(f"timeout_published: {name!r} names no unit: a delay metric ends in _ms or _s")
        if self.timeout_min_s is not None and self.timeout_min_s > self.timeout_s:
            raise ValueError(f"timeout_min_s {self.timeout_min_s:g} exceeds timeout_s {self.timeout_s:g} (the most "
                             "it waits)")
        return self

    @property
    def measures_gets(self) -> bool:
        return True

    def named(self) -> list[Named]:
        return [n for i, req in enumerate(self.requests)
                for n in (Named(f"requests[{i}].client", req.client),
                          Named(f"requests[{i}].server", req.server, server=True, file_kib=req.file_kib))]

    def crossings(self) -> list[Crossing]:
        return [Crossing(f"requests[{i}].client", req.client, req.server, server=True)
                for i, req in enumerate(self.requests)]

    def check_study(self, study: "StudySpec") -> None:
        where = f"workloads.{self.name}"
        # the study's [set] applies to every point, so a `timeout = "fixed"` there wins
        timeout = study.set.get(f"{where}.timeout", self.timeout)
        if timeout == FROM_PUBLISHED and not has_published_delay(study.published, self.timeout_published):
            raise ValueError(f'{where}.timeout: "from-published" but no published row has '
                             f"{' or '.join(self.timeout_published)} (give them, or timeout = \"fixed\")")
        for i, req in enumerate(self.requests):
            if req.tls != (server := study.server(req.server)).tls:
                raise ValueError(f"{where}.requests.{i}.tls = {str(req.tls).lower()} but server {req.server!r} "
                                 f"has tls = {str(server.tls).lower()}")
            if req.http not in server.http:
                raise ValueError(f"{where}.requests.{i}.http = \"{req.http}\" but server {req.server!r} serves "
                                 f"http = {server.http}")
            if req.http == "3" and self.client_kind == "curl":
                raise ValueError(f"{where}.requests.{i}.http = \"3\" needs client_kind = \"curl-cffi\" or "
                                 "\"chromium\" (the curl here has no HTTP/3)")
            if self.client_kind == "chromium" and req.http == "2" and not req.tls:
                raise ValueError(f"{where}.requests.{i}: chromium has no h2c (HTTP/2 without TLS)")

    def servers_asked(self) -> list[str]:
        return [r.server for r in self.requests]

    def chosen_timeout(self, level: str | None, published: list[dict]) -> ChosenTimeout | None:
        return choose(self, level, published) if self.timeout == FROM_PUBLISHED else None
