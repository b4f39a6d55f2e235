"""On-storage file formats: rows, SSTs, root files, tree manifests (Arrow IPC)."""
