"""The measured GETs: one per family per repetition, by curl or headless Chromium from the
client's namespace; several requests of one workload go out at the same time (competing
servers). The analysis turns each into a `request` row from the capture
(analysis/run_analysis.py): curl names its local port, for Chromium the analysis picks the
connection that carried the file."""

from __future__ import annotations

import threading
import time

from congestlab.rundir import RAW_KIND
from congestlab.servers.files import url_path
from congestlab.traffic.chromium import CLOSE_GRACE_S, STARTUP_ALLOWANCE_S, fetch_with_chromium
from congestlab.traffic.http_request import curl_argv, parse_curl_json, url_for
from congestlab.workloads.base import Measuring, Record



class GetRunner(Measuring):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(r.client, study.server(r.server).node) for r in spec.requests}

    @classmethod
    def client_of(cls, spec, server_name: str) -> str | None:
        return next((req.client for req in spec.requests if req.server == server_name), None)

    def run(self, repetition: int) -> tuple[list[Record], list]:
        results: list[list[Record]] = [[] for _ in self.spec.requests]
        threads = [threading.Thread(target=self._one_request, args=(i, req, results[i]), daemon=True)
                   for i, req in enumerate(self.spec.requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [rec for recs in results for rec in recs], []

    def _one_request(self, index: int, req, out: list[Record]) -> None:
        ctx = self.ctx
        server = ctx.servers[req.server]
        for family in req.families:
            url = url_for(ctx.server_address(req.server, family), server.port, url_path(req.file_kib))
            if self.spec.client_kind == "chromium":
                self.log_dir.mkdir(parents=True, exist_ok=True)
                log = self.log_dir / f"chromium-{index}-{family}.log"
                result, argv, start = fetch_with_chromium(ctx.tb, req.client, url, family, req.file_kib * 1024,
                                                          self.spec.timeout_s, log)
                if not self.argvs:
                    self.argvs.append(argv)  # the same line every time but for the temp profile
            else:
                argv = curl_argv(url, family, self.spec.timeout_s)
                self.argvs.append(argv)
                start = time.time()
                proc = ctx.tb.run(req.client, argv, check=False, timeout_s=self.spec.timeout_s + 5)
                result = parse_curl_json(family, url, req.file_kib * 1024, proc)
            end = time.time()
            out.append((RAW_KIND, {
                "workload": self.spec.name, "request": index, "server": req.server, "server_port": server.port,
                "server_kind": server.spec.kind, "client": req.client, "family": family, "file_kib": req.file_kib,
                "client_kind": self.spec.client_kind, "client_addr": ctx.address(req.client, family),
                "start_ts": start, "end_ts": end, "client_port": result.local_port} | vars(result)))
            if family != req.families[-1]:
                time.sleep(ctx.study.gap_s)

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        browser_s = STARTUP_ALLOWANCE_S + 2 * CLOSE_GRACE_S if spec.client_kind == "chromium" else 0.0
        return max(len(r.families) for r in spec.requests) * (spec.timeout_s + 5 + browser_s + study.gap_s)
