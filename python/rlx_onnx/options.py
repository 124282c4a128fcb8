"""Session and run options, with ONNX Runtime's names and rlx-onnx's own
additions (``precision``, ``limits``)."""

import enum

from ._native import NotImplemented as _NotImplemented


class GraphOptimizationLevel(enum.IntEnum):
    """How much the graph is optimized: ``ORT_DISABLE_ALL`` runs only what
    execution needs (rlx-onnx -O0), ``ORT_ENABLE_BASIC`` folds and
    simplifies (-O1), the others fuse too (-O2)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99

    def rlx_level(self):
        return min(int(self), 2)


class ExecutionMode(enum.IntEnum):
    """Accepted for ONNX Runtime scripts; rlx-onnx plans one schedule and
    splits each kernel over the session's threads either way."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    """Accepted for ONNX Runtime scripts; rlx-onnx's schedule orders the
    nodes itself (the memory plan's order)."""

    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    """ONNX Runtime's ``SessionOptions``.

    What rlx-onnx reads: ``intra_op_num_threads`` (0: one per core),
    ``graph_optimization_level``, ``add_free_dimension_override_by_name``
    (a symbolic dim bound at compile time), ``optimized_model_filepath``
    (a path ending in ``.rlx`` receives the compiled artifact), and its own
    ``precision`` (``"exact"``, ``"tf32"``, ``"fp16"``, ``"bf16"``) and ``limits`` (a dict
    of ``rlx_onnx`` resource limits: ``max_tensor_elements``,
    ``max_loop_iterations``, ``max_nodes``, ``max_nesting``,
    ``max_arena_bytes``, ``max_specializations``). Logging options are kept
    and have no effect; options rlx-onnx cannot honour (custom op libraries,
    profiling, initializers added from Python) raise ``NotImplemented``.
    """

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.optimized_model_filepath = ""
        self.profile_file_prefix = "onnxruntime_profile_"
        self.precision = "exact"
        self.limits = {}
        self._enable_profiling = False
        self._free_dims = {}
        self._config = {}

    @property
    def enable_profiling(self):
        return self._enable_profiling

    @enable_profiling.setter
    def enable_profiling(self, on):
        if on:
            raise _NotImplemented(
                "session profiling is not supported from Python; "
                "`rlx-onnx bench MODEL --profile` times every step by ONNX node"
            )
        self._enable_profiling = False

    def add_free_dimension_override_by_name(self, name, value):
        """Binds the symbolic dim ``name`` to ``value`` when compiling."""
        self._free_dims[str(name)] = int(value)

    def add_free_dimension_override_by_denotation(self, denotation, value):
        raise _NotImplemented(
            "dim denotations are not read; bind the dim by name "
            "(add_free_dimension_override_by_name)"
        )

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._config[str(key)]

    def add_initializer(self, name, value):
        raise _NotImplemented("initializers cannot be replaced from Python")

    def register_custom_ops_library(self, path):
        raise _NotImplemented(
            f"custom op libraries cannot be loaded ({path}): rlx-onnx runs "
            "only the ops it compiles"
        )

    def add_external_initializers(self, names, values):
        raise _NotImplemented("initializers cannot be replaced from Python")


class RunOptions:
    """ONNX Runtime's ``RunOptions``. ``terminate`` set before a run makes it
    fail at once; the logging fields are kept and have no effect."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        return self._config[str(key)]
