"""The run directory: the contract between running and reporting (docs/data-format.md).

The format layer: where things are (layout.py), where a command may write when the user
names the place (out_paths.py, every `--out`), the manifest's version and shape
(manifest.py), the records' schemas (records.py) and the one upgrade step for what older
runs lack (upgrade.py). Reading a run into types is congestlab.stored's.
"""

from congestlab.rundir.layout import (MANIFEST, PCAP_DIR, QUIC_DIR, QUIC_KEYLOG, RECORDS, REP_INFO, completed_repetitions, new_run_dir,
                                      rep_complete, rep_dir)
from congestlab.rundir.manifest import (FORMAT_VERSION, READABLE_VERSIONS, environment, git_revision,
                                        planned_repetitions, read_json_file, read_manifest, utc_now,
                                        write_manifest)
from congestlab.rundir.out_paths import (FULL_OR_READ_ONLY, check_new_dir, check_out_file, new_out_dir, open_out_file,
                                        prepare_out_dir)
from congestlab.rundir.records import RAW_KIND

__all__ = ["FORMAT_VERSION", "FULL_OR_READ_ONLY", "MANIFEST", "PCAP_DIR", "QUIC_DIR", "QUIC_KEYLOG", "RAW_KIND", "READABLE_VERSIONS", "RECORDS",
           "REP_INFO", "check_new_dir", "check_out_file", "completed_repetitions", "environment", "git_revision",
           "new_out_dir", "new_run_dir", "open_out_file", "planned_repetitions", "prepare_out_dir", "read_json_file",
           "read_manifest", "rep_complete", "rep_dir", "utc_now", "write_manifest"]
