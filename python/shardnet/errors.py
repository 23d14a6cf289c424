"""The library's exceptions."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or no checkpoint can be resumed from."""


class ManifestError(CheckpointError):
    """A rank's manifest is missing or not 'SHA256 BYTES PATH' lines."""
