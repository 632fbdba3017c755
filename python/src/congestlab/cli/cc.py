"""`congestlab cc`: list, install and remove congestion controls; measure two-flow sharing."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from congestlab.cc import registry, share
from congestlab.runner import require_root
from congestlab.study import run_study

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


@app.command("list")
def list_cmd() -> None:
    """The kernel's available congestion controls; BPF ones are marked."""
    for name in registry.available():
        mark = "  (BPF struct_ops)" if name not in registry.BUILTIN and registry.is_struct_ops(name) else ""
        typer.echo(f"{name}{mark}")


@app.command("install")
def install_cmd(name: str = typer.Argument("compound", help="only 'compound' can be installed")) -> None:
    """Register Compound TCP (built by `make build`); idempotent; prints the kernel name."""
    typer.echo(registry.install(name))


@app.command("remove")
def remove_cmd(name: str = typer.Argument("compound", help="'compound' or a BPF kernel name")) -> None:
    """Unregister Compound TCP; prints what happened."""
    removed = registry.remove(name)
    typer.echo(f"removed {name}" if removed else f"{name} was not registered")


@app.command("share")
def share_cmd(
    seconds: float = typer.Option(10.0, min=1, max=300, help="duration of each pair's flows"),
    rate_mbit: int = typer.Option(100, min=1, max=1000, help="bottleneck rate"),
    fifo_packets: int = typer.Option(100, min=2, max=100000, help="bottleneck FIFO limit"),
    ack_delay_ms: float = typer.Option(0.0, min=0, max=1000, help="extra base RTT: delay of the receiver's ACKs"),
    out: Path = typer.Option(None, "--out", help="run directory (new or empty); default runs/cc-share-TIME-ID"),
) -> None:
    """Two iperf3 flows over one bottleneck: CUBIC vs Compound, Compound vs Compound, CUBIC vs CUBIC
    (the cc-share preset, with these options as its settings)."""
    require_root()
    spec = share.preset_with(seconds=seconds, rate_bps=rate_mbit * 1_000_000, queue_packets=fifo_packets,
                             ack_delay_ms=ack_delay_ms)
    run_dir = run_study(spec, out=out, preset=share.PRESET, console=Console(stderr=True))
    typer.echo(f"bottleneck {rate_mbit} Mbit/s, FIFO {fifo_packets} packets, ACK delay {ack_delay_ms:g} ms, "
               f"{seconds:g} s per pair")
    typer.echo(share.markdown_table(share.shares(run_dir)))
