"""The measured GETs: one per family per repetition, by curl, curl-cffi (one libcurl for
HTTP/1.1, 2 and 3: traffic/cffi_get.py, its TLS secrets into the repetition's key log for the
QUIC analysis) or headless Chromium from the client's namespace; several requests of one workload go out at the same time (competing
servers). The analysis turns each into a `request` row from the capture
(analysis/run_analysis.py): curl names its local port, for Chromium the analysis picks the
connection that carried the file.

Within time: the families of a request go in an order drawn per repetition from the study's
seed ("sequential" keeps the declared order) and are marked as one pair; each GET starts only
once the previous GET's connection has closed at its server (workloads/closed.py), also
across runs for a workload of one request, and its row says whether it had and how long it
waited."""

from __future__ import annotations

import random
import threading
import time

from congestlab.fidelity import Check
from congestlab.rundir import QUIC_DIR, QUIC_KEYLOG
from congestlab.rundir.records import RAW_KIND, GetRecord
from congestlab.testbed.cgroups import GetCpu
from congestlab.servers.files import url_path
from congestlab.traffic.chromium import CLOSE_GRACE_S, STARTUP_ALLOWANCE_S, fetch_with_chromium
from congestlab.traffic.cffi_get import cffi_argv, cffi_env, parse_cffi_json
from congestlab.traffic.http_request import curl_argv, parse_curl_json, url_for
from congestlab.workloads.base import Measuring, Record
from congestlab.workloads.closed import CLOSE_WAIT_MAX_S, ServerConnection, log_offset, wait_closed



class GetRunner(Measuring):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(r.client, study.server(r.server).node) for r in spec.requests}

    @classmethod
    def client_of(cls, spec, server_name: str) -> str | None:
        return next((req.client for req in spec.requests if req.server == server_name), None)

    @classmethod
    def measured_families(cls, spec, server_name: str) -> set[str]:
        return {family for req in spec.requests if req.server == server_name for family in req.families}

    @classmethod
    def leansim_background(cls, spec, study, lean_server: str, where: str) -> list[dict] | None:
        """No background: its GETs are the scenario's measured ones (simulate/mapping.py)."""
        return []

    @classmethod
    def tools(cls, spec) -> set[str]:
        """The browser or curl-cffi when it fetches with one (every run records curl's:
        runner/orchestrator.py)."""
        return {spec.client_kind} if spec.client_kind in ("chromium", "curl-cffi") else set()

    def run(self, repetition: int) -> tuple[list[Record], list]:
        results: list[list[Record]] = [[] for _ in self.spec.requests]
        # one request: its GETs follow the previous run's in one line (checked closed between)
        carried = len(self.spec.requests) == 1
        threads = [threading.Thread(target=self._one_request, args=(i, req, results[i], repetition, carried),
                                    daemon=True)
                   for i, req in enumerate(self.spec.requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        records = [rec for recs in results for rec in recs]
        checked = [row for _, row in records if row["previous_closed"] is not None]
        checks = []
        if checked:
            late = [row for row in checked if not row["previous_closed"]]
            checks.append(Check("get_previous_closed", not late, max(row["previous_wait_ms"] for row in checked),
                                f"every GET starts after the previous one's connection closed (waits at most "
                                f"{CLOSE_WAIT_MAX_S:g} s)",
                                f"{len(late)} of {len(checked)} GETs started before the previous connection "
                                "closed" if late else ""))
        return records, checks

    def families(self, req, index: int, repetition: int) -> list[str]:
        """The request's families in this repetition's order: drawn from the study's seed, the
        point and the repetition (reproducible); the declared order under "sequential"."""
        families = list(req.families)
        if self.ctx.study.order != "sequential":
            random.Random(f"{self.ctx.study.seed}-{self.ctx.point_id}-{repetition}-{index}").shuffle(families)
        return families

    def _one_request(self, index: int, req, out: list[Record], repetition: int, carried: bool) -> None:
        ctx = self.ctx
        server = ctx.servers[req.server]
        families = self.families(req, index, repetition)
        previous: ServerConnection | None = ctx.previous_get.get("conn") if carried else None
        if previous is not None and not _still_serving(ctx, previous):
            previous = None  # its server has stopped since: nothing of it can reach the path
        for position, family in enumerate(families):
            closed, waited_ms = wait_closed(ctx.tb, previous) if previous is not None else (None, 0.0)
            url = url_for(ctx.server_address(req.server, family), server.port, url_path(req.file_kib), req.tls)
            offset = log_offset(server.log_path)
            cpu = GetCpu(server.cpu_ns)
            if self.spec.client_kind == "chromium":
                self.log_dir.mkdir(parents=True, exist_ok=True)
                log = self.log_dir / f"chromium-{index}-{family}.log"
                result, argv, start = fetch_with_chromium(
                    ctx.tb, req.client, url, family, req.file_kib * 1024, self.spec.timeout_s, log, req.http,
                    ctx.tls_spki, self._keylog(req), req.tls_version if req.tls and req.http != "3" else None)
                if not self.argvs:
                    self.argvs.append(argv)  # the same line every time but for the temp profile
            elif self.spec.client_kind == "curl-cffi":
                result, start = self._cffi_get(req, url, family)
            else:
                tls_version = req.tls_version if req.tls else None
                argv = curl_argv(url, family, self.spec.timeout_s, req.http, ctx.ca_file, tls_version)
                self.argvs.append(argv)
                start = time.time()
                proc = ctx.tb.run(req.client, argv, check=False, timeout_s=self.spec.timeout_s + 5)
                result = parse_curl_json(family, url, req.file_kib * 1024, proc, req.http, tls_version)
            end = time.time()
            server_cpu_ns, host_softirq_ms = cpu.used()
            returncode = server.exited() if server.exited and not result.ok else None
            if returncode is not None:  # invalid for that reason, not for the client's symptom
                result.error = f"server {req.server} exited ({returncode}) before this GET ended: {result.error}"
            client_addr = ctx.address(req.client, family)
            out.append((RAW_KIND, GetRecord(
                workload=self.spec.name, request=index, server=req.server, server_port=server.port,
                server_kind=server.spec.kind, client=req.client, file_kib=req.file_kib,
                client_kind=self.spec.client_kind, client_addr=client_addr, timeout_s=self.spec.timeout_s,
                start_ts=start, end_ts=end, client_port=result.local_port,
                family_pair=f"{ctx.point_id}#{repetition}.{index}", family_position=position,
                family_order=",".join(families), previous_closed=closed, previous_wait_ms=waited_ms,
                http=req.http, tls=req.tls, server_cpu_ns=server_cpu_ns, host_softirq_ms=host_softirq_ms,
                **vars(result)).model_dump()))
            previous = ServerConnection(req.server, server.spec.node, server.port, client_addr, result.local_port,
                                        server.log_path, offset) if result.local_port else None
            if previous is not None and req.http == "3":  # drained, not closed, at its server (workloads/closed.py)
                previous.quic_ended_s = time.monotonic()
                previous.quic_rtt_s = result.time_connect_s if result.ok else None
            if position < len(families) - 1:
                time.sleep(ctx.study.gap_s)
        if carried:
            ctx.previous_get["conn"] = previous

    def _keylog(self, req):
        """The repetition's key log, for an HTTP/3 GET (the QUIC analysis decrypts with it)."""
        if req.http != "3":
            return None
        keylog = self.log_dir.parent / QUIC_DIR / QUIC_KEYLOG
        keylog.parent.mkdir(exist_ok=True)
        return keylog

    def _cffi_get(self, req, url: str, family: str):
        """One GET by curl-cffi in a Python process of its own: the start is when libcurl
        began (the interpreter's start-up is outside the GET), or before the process when it
        printed none."""
        ctx = self.ctx
        keylog = self._keylog(req)
        tls_version = req.tls_version if req.tls and req.http != "3" else None  # QUIC is TLS 1.3 by itself
        argv = cffi_argv(url, family, self.spec.timeout_s, req.http, ctx.ca_file, tls_version, env=cffi_env(keylog, None))
        self.argvs.append(argv)
        before = time.time()
        proc = ctx.tb.run(req.client, argv, check=False, timeout_s=self.spec.timeout_s + 10)
        result, started = parse_cffi_json(family, url, req.file_kib * 1024, proc, req.http, tls_version)
        return result, started if started is not None else before

    @classmethod
    def bytes_per_run(cls, spec) -> float | None:
        """Every request's file once per family (the responses; the requests are small)."""
        return float(sum(r.file_kib * 1024 * len(r.families) for r in spec.requests))

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        browser_s = {"chromium": STARTUP_ALLOWANCE_S + 2 * CLOSE_GRACE_S, "curl-cffi": 5.0}.get(spec.client_kind, 0.0)
        return max(len(r.families) for r in spec.requests) * (spec.timeout_s + 5 + browser_s + study.gap_s
                                                               + CLOSE_WAIT_MAX_S)


def _still_serving(ctx, conn: ServerConnection) -> bool:
    """The server of that connection runs now as the same instance (same node, port, log)."""
    now = ctx.servers.get(conn.server)
    return now is not None and now.spec.node == conn.node and now.port == conn.port and now.log_path == conn.log_path
