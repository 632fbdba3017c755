"""linkem: run the user-space link emulator (crates/linkem) on a router namespace."""

from congestlab.linkem.runner import GilbertElliott, LinkemElement

__all__ = ["GilbertElliott", "LinkemElement"]
