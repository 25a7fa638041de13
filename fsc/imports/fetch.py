"""Hub sources of `fsc import`: a snapshot of a published repo's config (and weights and
tokenizer) in the Hugging Face cache, through huggingface_hub (HF_ENDPOINT, HF_TOKEN,
HF_HUB_OFFLINE as usual)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub import errors as hf

from fsc.checkpoint.layout import INDEX_FILE
from fsc.errors import HubError, ImportRefused
from fsc.hub.hub import hub_calls, quiet_unless_terminal

CONFIG_FILES = ["config.json"]
PICKLED = "pytorch_model.bin"
PICKLED_INDEX = "pytorch_model.bin.index.json"  # a pickled model in shards (pytorch_model-*.bin)
WEIGHT_FILES = ["*.safetensors", "*.safetensors.index.json", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"]


def snapshot(repo: str, revision: str | None, weights: bool) -> Path:
    """The local folder of `repo` at `revision`: config.json, and with `weights` the
    safetensors weights and tokenizer files; a repo with no safetensors (state-spaces' Mamba-2
    ships pytorch_model.bin alone) gets its pytorch_model.bin (or its shards and their index),
    which is read as plain tensors (fsc.imports.convert)."""
    quiet_unless_terminal()
    patterns = CONFIG_FILES + (WEIGHT_FILES if weights else [])
    try:
        with hub_calls(f"hf:{repo}", repo, revision):
            folder = Path(snapshot_download(repo, revision=revision, allow_patterns=patterns))
            if weights and not any(folder.glob("*.safetensors")):
                folder = Path(snapshot_download(repo, revision=revision,
                                                allow_patterns=patterns + ["pytorch_model*.bin",
                                                                            PICKLED_INDEX]))
            return folder
    except HubError as e:  # a name or revision that is not there is the user's to fix: exit 2
        if isinstance(e.__cause__, (hf.RepositoryNotFoundError, hf.RevisionNotFoundError)):
            raise ImportRefused(str(e)) from e
        if isinstance(e.__cause__, hf.LocalEntryNotFoundError) and isinstance(
                e.__cause__.__cause__, hf.OfflineModeIsEnabled):
            at = f"@{revision}" if revision else ""
            raise HubError(f"hf:{repo}{at}: not in the local Hugging Face cache "
                           f"({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set; unset it "
                           "to download it") from e
        raise


def holds_weights(repo: str, revision: str | None) -> bool | None:
    """Whether `repo` at `revision` holds weights fsc imports (fsc.imports.has_weights's rule),
    from its file list: nothing is downloaded. None with HF_HUB_OFFLINE (ask the cache)."""
    if constants.HF_HUB_OFFLINE:
        return None
    quiet_unless_terminal()
    with hub_calls(f"hf:{repo}", repo, revision):
        files = HfApi().model_info(repo, revision=revision).siblings or ()
    names = {f.rfilename for f in files}
    return any(n.endswith(".safetensors") and "/" not in n for n in names) or bool(
        names & {INDEX_FILE, PICKLED, PICKLED_INDEX})
