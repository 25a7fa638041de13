"""Typed errors of the library. The CLI boundary turns each into one line and an exit code."""


class FscError(Exception):
    """Base of every error fsc reports to a user (never a bug)."""

    exit_code = 1


class RecipeError(FscError):
    """A recipe file is missing, malformed or inconsistent."""

    exit_code = 2


class UsageError(FscError):
    """Bad command-line values (a negative S, an unknown GPU name, ...)."""

    exit_code = 2


class NothingToDo(FscError):
    """A request already done (`--resume` of a run that finished): said on stderr, exit 0, so
    that a retry loop or a requeued job reads it as success; with --json, `facts` (the run or
    checkpoint it is about) and the message are the document on stdout."""

    exit_code = 0

    def __init__(self, message: str, **facts):
        super().__init__(message)
        self.facts = facts


class TuningError(UsageError):
    """$FSC_KERNEL_TUNING (or a tuned() change) names an unknown kernel, choice or value."""


class WeightsDoNotFit(UsageError):
    """A model's weights would not fit in the memory left on its device."""


class StoreError(FscError):
    """The DuckDB store could not be opened, migrated, read or written."""


class QueryError(StoreError):
    """SQL given to `fsc query` / `fsc export` is empty, malformed, refused by the sandbox or
    fails. The user's input, so exit 2."""

    exit_code = 2


class StorePathError(StoreError):
    """--store / $FSC_STORE names something that cannot hold a store (a file, a folder fsc
    cannot write, a file that is not a DuckDB database)."""

    exit_code = 2


class ImportRefused(FscError):
    """A published model cannot be imported: an unknown architecture, a feature fsc cannot
    express exactly, or a missing config or weight file."""

    exit_code = 2


class CheckpointError(FscError):
    """A checkpoint directory is incomplete, corrupt or does not match its recipe."""


class HubError(FscError):
    """The Hugging Face Hub refused or failed a push or pull."""


class KernelError(FscError):
    """A kernel was asked for on a device or dtype it does not support."""


def is_out_of_memory(e: BaseException) -> bool:
    """A CUDA or host allocation failure (torch.OutOfMemoryError, MemoryError, the CPU
    allocator's "can't allocate memory"), told apart from other failures without importing
    torch."""
    text = str(e).lower()
    return (isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"
            or any(s in text for s in ("out of memory", "can't allocate memory",
                                       "cannot allocate memory")))
