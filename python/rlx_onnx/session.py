"""``InferenceSession``: ONNX Runtime's session over an rlx-onnx compiled model."""

import os

from . import _native
from ._native import EPFail, InvalidArgument, RuntimeException
from .options import GraphOptimizationLevel, RunOptions, SessionOptions
from .providers import provider_name, resolve
from .values import IOBinding, OrtValue


class NodeArg:
    """An input or output: ``name``, ``type`` (``"tensor(float)"``) and
    ``shape`` (ints, and the names of symbolic dims as strings)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class ModelMetadata:
    """What the model says of itself (``ModelProto`` fields and
    ``metadata_props`` as ``custom_metadata_map``)."""

    def __init__(self, fields):
        self.producer_name = fields["producer_name"]
        self.graph_name = fields["graph_name"]
        self.domain = fields["domain"]
        self.description = fields["description"]
        self.graph_description = fields["graph_description"]
        self.version = fields["version"]
        self.custom_metadata_map = dict(fields["custom_metadata_map"])

    def __repr__(self):
        return (
            f"ModelMetadata(producer_name={self.producer_name!r}, graph_name={self.graph_name!r}, "
            f"version={self.version}, custom_metadata_map={self.custom_metadata_map!r})"
        )


def _model_arg(path_or_bytes):
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    if isinstance(path_or_bytes, (str, os.PathLike)):
        return os.fspath(path_or_bytes)
    raise TypeError(
        f"Unable to load from type '{type(path_or_bytes).__name__}': "
        "give a path (str or os.PathLike) or the model's bytes"
    )


class InferenceSession:
    """A model compiled for the first of ``providers`` whose device opens.

    ``providers`` are ONNX Runtime's names (or ``(name, options)`` pairs;
    ``device_id`` is read from the options): ``CUDAExecutionProvider``,
    ``VulkanExecutionProvider``, ``WgpuExecutionProvider``,
    ``CPUExecutionProvider`` (the default). A GPU provider whose device is
    missing is an error, unless the CPU is listed after it; a CPU listed
    after a GPU provider also runs the nodes that GPU cannot (ONNX Runtime's
    placement), otherwise such nodes are an error naming them.
    ``path_or_bytes`` may be an ``.onnx`` model or an ``.rlx`` artifact.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._model = _model_arg(path_or_bytes)
        self._model_path = self._model if isinstance(self._model, str) else None
        self._model_bytes = self._model if isinstance(self._model, bytes) else None
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._create(resolve(providers, provider_options))

    def _create(self, chosen):
        o = self._sess_options
        if not isinstance(o, SessionOptions):
            raise InvalidArgument("sess_options must be an rlx_onnx.SessionOptions")
        level = GraphOptimizationLevel(o.graph_optimization_level).rlx_level()
        for i, (target, options) in enumerate(chosen):
            cpu_after = any(t == "cpu" for t, _ in chosen[i + 1 :])
            fallback = "cpu" if target != "cpu" and cpu_after else "refuse"
            try:
                sess = _native.Session(
                    self._model,
                    target=target,
                    threads=int(o.intra_op_num_threads),
                    opt_level=level,
                    precision=str(o.precision),
                    fallback=fallback,
                    bindings=list(o._free_dims.items()),
                    device_id=int(options.get("device_id", 0)),
                    limits=dict(o.limits),
                )
            except EPFail:
                if cpu_after:
                    continue
                raise
            self._sess = sess
            self._providers = [provider_name(target)]
            self._provider_options = {provider_name(target): {k: str(v) for k, v in options.items()}}
            if fallback == "cpu":
                self._providers.append("CPUExecutionProvider")
                self._provider_options["CPUExecutionProvider"] = {}
            break
        path = o.optimized_model_filepath
        if path:
            if not str(path).endswith(".rlx"):
                raise _native.NotImplemented(
                    f"optimized_model_filepath `{path}`: rlx-onnx writes its compiled model as an "
                    ".rlx artifact (a path ending in .rlx), not as ONNX"
                )
            convert(self._model, path, target=self._sess.target, sess_options=o, force=True)
        self._inputs = [NodeArg(*io) for io in self._sess.inputs()]
        self._outputs = [NodeArg(*io) for io in self._sess.outputs()]
        if type(self).run is InferenceSession.run:
            # The same run, called without a Python frame between (half a
            # microsecond of a tiny model's call); a subclass's own `run`
            # is left alone.
            self.run = self._sess.run_feed

    # --- what the model takes and gives

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        """Initializers are compiled into the model: none can be overridden."""
        return []

    def get_modelmeta(self):
        return ModelMetadata(self._sess.metadata())

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {k: dict(v) for k, v in self._provider_options.items()}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        """Compiles the model again for ``providers``."""
        self._create(resolve(providers, provider_options))

    def end_profiling(self):
        return ""

    def get_profiling_start_time_ns(self):
        return 0

    # --- runs

    def run(self, output_names, input_feed, run_options=None):
        """Runs on ``input_feed`` (input name to numpy array or ``OrtValue``)
        and returns the outputs named (all when ``output_names`` is empty)."""
        # Checked and run natively (`run_feed`): OrtValues in the feed are
        # taken by the native run itself.
        return self._sess.run_feed(output_names, input_feed, run_options)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """Runs on ``OrtValue`` inputs; returns ``OrtValue`` outputs, on the host."""
        _check_run(run_options)
        names = list(output_names) if output_names else None
        outs = self._sess.run_values(names, _unwrap(dict(input_dict_ort_values)), [])
        return [OrtValue(v) for v in outs]

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        _check_run(run_options)
        iobinding._run(run_options)


def _check_run(run_options):
    if run_options is not None:
        if not isinstance(run_options, RunOptions):
            raise InvalidArgument("run_options must be an rlx_onnx.RunOptions")
        if run_options.terminate:
            raise RuntimeException("Exiting due to terminate flag being set to true.")


def _unwrap(feed):
    """The feed with each ``OrtValue`` replaced by the value it holds."""
    if not any(isinstance(v, OrtValue) for v in feed.values()):
        return feed
    return {k: (v._value if isinstance(v, OrtValue) else v) for k, v in feed.items()}


def convert(model, output, target="cpu", sess_options=None, force=False):
    """Compiles the ONNX model at ``model`` for ``target`` (``"cpu"``,
    ``"cuda"``, ``"wgpu"``, ``"vulkan"``, or a provider name) ahead of time and
    writes the ``.rlx`` artifact to ``output``, which an ``InferenceSession``
    loads without compiling. An existing ``output`` is kept unless ``force``."""
    o = sess_options if sess_options is not None else SessionOptions()
    (target, _), = resolve([target], None)
    if isinstance(model, (bytes, bytearray)):
        raise InvalidArgument("convert reads the model from a path")
    _native.convert(
        os.fspath(model),
        os.fspath(output),
        target=target,
        opt_level=GraphOptimizationLevel(o.graph_optimization_level).rlx_level(),
        precision=str(o.precision),
        fallback="refuse",
        bindings=list(o._free_dims.items()),
        force=bool(force),
    )
