"""The inputs → documents: ``sources`` (files and folders, records, web pages, Git
repositories, each through its source type), read by ``parsing``, in ``isolation``'s
worker processes."""
