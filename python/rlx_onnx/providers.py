"""Execution providers: ONNX Runtime's names mapped to rlx-onnx targets."""

from . import _native
from ._native import InvalidArgument

# Provider name -> rlx-onnx target. rlx-onnx's own GPU paths have names of
# ONNX Runtime's form; a target's plain name is accepted too.
PROVIDERS = {
    "CUDAExecutionProvider": "cuda",
    "VulkanExecutionProvider": "vulkan",
    "WgpuExecutionProvider": "wgpu",
    "CPUExecutionProvider": "cpu",
}
_TARGETS = {t: p for p, t in PROVIDERS.items()}

_available = None


def get_all_providers():
    """Every provider rlx-onnx has, available on this machine or not."""
    return list(PROVIDERS)


def get_available_providers():
    """The providers whose device opens on this machine, fastest first
    (the CPU always, last)."""
    global _available
    if _available is None:
        targets = set(_native.available_targets())
        _available = [p for p, t in PROVIDERS.items() if t in targets]
    return list(_available)


def get_device():
    """``"GPU"`` when a CUDA device opens, else ``"CPU"``."""
    return "GPU" if "CUDAExecutionProvider" in get_available_providers() else "CPU"


def provider_name(target):
    return _TARGETS[target]


def resolve(providers, provider_options):
    """The (target, options) to try in order for ``providers`` (names, or
    (name, options) pairs, as ONNX Runtime takes them)."""
    if providers is None:
        providers = ["CPUExecutionProvider"]
    if isinstance(providers, str):
        providers = [providers]
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument(
            f"{len(provider_options)} provider options for {len(providers)} providers"
        )
    chosen = []
    for i, p in enumerate(providers):
        options = {}
        if isinstance(p, (tuple, list)):
            p, options = p
        if provider_options is not None:
            options = {**options, **provider_options[i]}
        target = PROVIDERS.get(p, p if p in _TARGETS else None)
        if target is None:
            raise InvalidArgument(
                f"unknown provider `{p}`; rlx-onnx's providers are {', '.join(PROVIDERS)}"
            )
        chosen.append((target, dict(options)))
    if not chosen:
        raise InvalidArgument("no providers given")
    return chosen
