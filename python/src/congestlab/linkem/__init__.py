"""linkem: run the user-space link emulator (crates/linkem) on a router namespace."""

from congestlab.linkem.element import GilbertElliott, LinkemElement

__all__ = ["GilbertElliott", "LinkemElement"]
