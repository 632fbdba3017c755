"""congestlab: web servers under congestion on an emulated test LAN."""

__version__ = "0.1.0"
