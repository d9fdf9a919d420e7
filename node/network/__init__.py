"""A local network on loopback: the registry, an optional demo site and nodes as child processes.

``spec`` (the YAML of ``a2a-node up``), ``children`` (one supervised child process each),
``launcher`` (start, wait until healthy and registered, supervise, stop).
"""

from __future__ import annotations
