"""ns-3 backend (optional: the ``ns3`` package). Importing this package does not import ns-3."""
