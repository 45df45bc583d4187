"""The ``flexmatch`` command: a thin layer over the public Python API."""
