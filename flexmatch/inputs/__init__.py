"""The inputs: sources, files and folders, records and web pages → documents."""
