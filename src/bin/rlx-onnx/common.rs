//! What several commands share: compile options, loading a model or
//! artifact, inputs from files or generated, exit statuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rlx_onnx::ir::{Bindings, DType, Graph, Op, Tensor, TensorType, ValueKind};
use rlx_onnx::{artifact, CompiledModel, Compiler, Fallback, OptLevel, Precision, Target};

/// The exit statuses every command keeps to, as `--help` states them.
pub const EXIT_STATUS_HELP: &str = "Exit status: 0 when the command did its work and every \
check passed; 1 when it did its work and a check failed (an output outside tolerance, a failed \
conformance case, a divergence found by compare, a node inspect finds unsupported); 2 when it \
could not do its work (bad arguments, an unreadable, corrupt or unsupported model, an error \
while running).";

/// Exit status 1: the work was done and a check failed.
pub fn check_failed() -> ExitCode {
    ExitCode::from(1)
}

/// Exit status 2, after printing the error and its causes.
pub fn error(e: &dyn std::error::Error) -> ExitCode {
    crate::report(e);
    ExitCode::from(2)
}

/// Exit status 2, after printing a message.
pub fn error_msg(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// A `--target` value.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum TargetArg {
    Cpu,
    Cuda,
    Wgpu,
    Vulkan,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::Cpu => Target::Cpu,
            TargetArg::Cuda => Target::Cuda,
            TargetArg::Wgpu => Target::Wgpu,
            TargetArg::Vulkan => Target::Vulkan,
        }
    }
}

/// An `-O` value.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum OptArg {
    #[value(name = "0")]
    O0,
    #[value(name = "1")]
    O1,
    #[value(name = "2")]
    O2,
}

impl From<OptArg> for OptLevel {
    fn from(o: OptArg) -> OptLevel {
        match o {
            OptArg::O0 => OptLevel::O0,
            OptArg::O1 => OptLevel::O1,
            OptArg::O2 => OptLevel::O2,
        }
    }
}

/// A `--precision` value.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum PrecisionArg {
    Exact,
    Tf32,
    Fp16,
    Bf16,
}

impl From<PrecisionArg> for Precision {
    fn from(p: PrecisionArg) -> Precision {
        match p {
            PrecisionArg::Exact => Precision::Exact,
            PrecisionArg::Tf32 => Precision::Tf32,
            PrecisionArg::Fp16 => Precision::Fp16,
            PrecisionArg::Bf16 => Precision::Bf16,
        }
    }
}

/// A `--fallback` value.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum FallbackArg {
    Refuse,
    Cpu,
}

impl From<FallbackArg> for Fallback {
    fn from(f: FallbackArg) -> Fallback {
        match f {
            FallbackArg::Refuse => Fallback::Refuse,
            FallbackArg::Cpu => Fallback::Cpu,
        }
    }
}

/// Options that choose how a model is compiled. Given with an `.rlx`
/// artifact, each must agree with how the artifact was compiled.
#[derive(clap::Args, Clone, Default)]
pub struct CompileArgs {
    /// The backend to compile for [default: cpu].
    #[arg(long, value_enum)]
    pub target: Option<TargetArg>,
    /// Bind a symbolic dim: `--bind N=1` (repeatable).
    #[arg(long = "bind", value_name = "NAME=VALUE")]
    pub binds: Vec<String>,
    /// Optimization level [default: 2].
    #[arg(short = 'O', long = "opt-level", value_enum)]
    pub opt_level: Option<OptArg>,
    /// Arithmetic: exact (the model's dtypes, fp32 without TF32), tf32
    /// (CUDA: TF32 tensor cores for f32 GEMMs and convolutions), fp16 (f32
    /// computation in f16 where the target runs it) or bf16 (the same in
    /// bf16: f32's range, 8 bits of mantissa) [default: exact].
    #[arg(long, value_enum)]
    pub precision: Option<PrecisionArg>,
    /// What a GPU target does with nodes it cannot run (strings, sequences,
    /// ops without a GPU kernel, shapes that depend on data): refuse (an
    /// error naming each) or cpu (run them on the CPU backend, copying the
    /// values that cross once per run) [default: refuse].
    #[arg(long, value_enum)]
    pub fallback: Option<FallbackArg>,
    /// The most elements one tensor may have; a model asking for more is
    /// an error naming the node [default: 2^31].
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub max_tensor_elements: Option<u64>,
    /// The most iterations one Loop may run [default: 2^20].
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub max_loop_iterations: Option<u64>,
    /// The most nodes a model may have, its bodies' counted in [default: 2^22].
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub max_nodes: Option<u64>,
    /// The deepest nesting of control-flow bodies [default: 64].
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub max_nesting: Option<u64>,
    /// The largest arena of intermediate values a run may allocate, in
    /// bytes [default: 2^36].
    #[arg(long, value_name = "BYTES", help_heading = "Limits")]
    pub max_arena_bytes: Option<u64>,
}

impl CompileArgs {
    pub fn target(&self) -> Target {
        self.target.map_or(Target::Cpu, Target::from)
    }

    pub fn opt_level(&self) -> OptLevel {
        self.opt_level.map_or(OptLevel::O2, OptLevel::from)
    }

    pub fn compiler(&self) -> Result<Compiler, String> {
        Ok(Compiler {
            target: self.target(),
            opt_level: self.opt_level(),
            bindings: crate::parse_binds(&self.binds)?,
            verify: rlx_onnx::passes::verify_by_default(),
            precision: self.precision.map_or(Precision::Exact, Precision::from),
            fallback: self.fallback.map_or(Fallback::Refuse, Fallback::from),
            limits: self.limits(),
        })
    }

    pub fn limits(&self) -> rlx_onnx::Limits {
        let mut l = rlx_onnx::Limits::default();
        if let Some(n) = self.max_tensor_elements {
            l.max_tensor_elements = n;
        }
        if let Some(n) = self.max_loop_iterations {
            l.max_loop_iterations = n;
        }
        if let Some(n) = self.max_nodes {
            l.max_nodes = n;
        }
        if let Some(n) = self.max_nesting {
            l.max_nesting = n;
        }
        if let Some(n) = self.max_arena_bytes {
            l.max_arena_bytes = n;
        }
        l
    }

    /// Refuses options that contradict how an artifact was compiled (an
    /// artifact runs as it was compiled; it is not compiled again).
    fn agree_with(&self, path: &Path, m: &CompiledModel) -> Result<(), String> {
        let again = "convert the .onnx model again with it";
        if !self.binds.is_empty() {
            return Err(format!(
                "--bind applies when compiling an .onnx model, not to the artifact `{}`: \
                 give inputs of the shapes you want with --input, or {again}",
                path.display()
            ));
        }
        let conflict = |flag: &str, given: String, built: String| {
            Err(format!(
                "`{flag} {given}` conflicts with the artifact `{}`, compiled with \
                 {flag} {built}: drop {flag} to run it as compiled, or {again}",
                path.display()
            ))
        };
        if let Some(t) = self.target.map(Target::from) {
            if t != m.target {
                return conflict("--target", t.to_string(), m.target.to_string());
            }
        }
        if let Some(o) = self.opt_level.map(OptLevel::from) {
            if o != m.opt_level {
                return conflict("-O", o.name()[1..].into(), m.opt_level.name()[1..].into());
            }
        }
        if let Some(p) = self.precision.map(Precision::from) {
            if p != m.precision {
                return conflict("--precision", p.to_string(), m.precision.to_string());
            }
        }
        if let Some(f) = self.fallback.map(Fallback::from) {
            if f != m.fallback {
                return conflict("--fallback", f.to_string(), m.fallback.to_string());
            }
        }
        Ok(())
    }
}

/// True if `path` holds an `.rlx` artifact (by its magic bytes).
pub fn is_artifact(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    // Only a regular file is opened (a FIFO would block here).
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"RLXONNX\0"
}

/// Loads an artifact or compiles an ONNX model.
pub fn load_model(
    path: &Path,
    args: &CompileArgs,
) -> Result<CompiledModel, Box<dyn std::error::Error>> {
    if is_artifact(path) {
        let mut m = artifact::load(path)?;
        args.agree_with(path, &m)?;
        m.limits = args.limits();
        return Ok(m);
    }
    Ok(crate::progress::compile_file(&args.compiler()?, path)?)
}

/// Reads a value of type `ty` from `.npy`, `.npz` (a sequence: its arrays in
/// order) or `.pb` (a `TensorProto`, or a `SequenceProto` / `OptionalProto`
/// for a sequence or optional), by extension.
pub fn read_value(path: &Path, ty: &TensorType) -> Result<Tensor, Box<dyn std::error::Error>> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => Ok(rlx_onnx::npy::read(path)?),
        Some("npz") if ty.kind.unwrapped() == ValueKind::Sequence => {
            let elems = rlx_onnx::npy::read_npz(path)?
                .into_iter()
                .map(|(_, t)| t)
                .collect();
            Ok(Tensor::sequence(ty.dtype, elems)?)
        }
        Some("pb") => Ok(rlx_onnx::testdata::read_value_pb(path, ty)?),
        _ => Err(format!(
            "`{}`: expected a .npy or .pb file (or .npz for a sequence)",
            path.display()
        )
        .into()),
    }
}

/// Where a command's inputs come from: files, a directory, or generated.
#[derive(clap::Args, Clone, Default)]
#[command(next_help_heading = "Inputs")]
pub struct InputArgs {
    /// An input from a file: `--input name=file.npy` or `name=file.pb`
    /// (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub files: Vec<String>,
    /// A directory of inputs: `input_0.pb`, `input_1.pb`, ... in the ONNX
    /// backend-test layout (a `test_data_set_*` folder), or one `NAME.npy`
    /// (`.npz`, `.pb`) per input, named for it.
    #[arg(long = "inputs", value_name = "DIR", conflicts_with = "files")]
    pub data_set: Option<PathBuf>,
    /// Generate the inputs not given, with seeded random values (see --seed
    /// and --range). Without it, an input not given is an error.
    #[arg(long)]
    pub generate_missing: bool,
    /// Seed of generated inputs (implies --generate-missing) [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Values of generated inputs, half-open: `LO..HI` for every input or
    /// `NAME=LO..HI` for one (repeatable; implies --generate-missing).
    /// Default: floats in [-1, 1); integers in [0, 10), and below the size
    /// of every table the input indexes (token ids below the vocabulary
    /// size); bools 0 or 1.
    #[arg(long = "range", value_name = "[NAME=]LO..HI")]
    pub ranges: Vec<String>,
}

/// When a command generates the inputs it was not given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Generate {
    /// Only when asked (`--generate-missing`, `--seed`, `--range`): `run`,
    /// whose outputs would otherwise look like results of real data.
    WhenAsked,
    /// Also when no input at all is given (`bench`, and `compare` between
    /// two runs, which measure or compare whatever the data); an input
    /// missing from a set that was given is still an error.
    WhenNoneGiven,
}

/// A half-open range of generated values.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Range {
    lo: f64,
    hi: f64,
}

fn parse_range(s: &str) -> Result<(Option<String>, Range), String> {
    let (name, r) = match s.rsplit_once('=') {
        Some((n, r)) => (Some(n.trim().to_string()), r),
        None => (None, s),
    };
    let bad = || format!("`--range {s}`: expected LO..HI or NAME=LO..HI with numbers LO < HI");
    let (lo, hi) = r.split_once("..").ok_or_else(bad)?;
    let lo: f64 = lo.trim().parse().map_err(|_| bad())?;
    let hi: f64 = hi.trim().parse().map_err(|_| bad())?;
    if !(lo < hi) || !lo.is_finite() || !hi.is_finite() {
        return Err(bad());
    }
    Ok((name, Range { lo, hi }))
}

impl InputArgs {
    /// True if the user asked for generated inputs.
    fn asks_to_generate(&self) -> bool {
        self.generate_missing || self.seed.is_some() || !self.ranges.is_empty()
    }

    /// The named inputs of `model`: read from files or a directory, the
    /// rest generated where `generate` allows (symbolic dims of generated
    /// inputs come from `binds` and from the shapes of the inputs that were
    /// given; `artifact` says that the model was loaded, not compiled). With
    /// `verbose`, says what was generated.
    pub fn resolve(
        &self,
        model: &CompiledModel,
        binds: &Bindings,
        artifact: bool,
        generate: Generate,
        verbose: bool,
    ) -> Result<Vec<(String, Tensor)>, Box<dyn std::error::Error>> {
        let names = model.input_names();
        let mut given: Vec<(String, Tensor)> = match &self.data_set {
            Some(dir) => read_input_dir(dir, model)?,
            None => self
                .files
                .iter()
                .map(|s| {
                    let (name, path) = s
                        .split_once('=')
                        .ok_or_else(|| format!("`--input {s}`: expected NAME=FILE"))?;
                    if !names.iter().any(|n| n == name) {
                        return Err(format!(
                            "`--input {s}`: the model has no input `{name}`; its inputs: {}",
                            names.join(", ")
                        )
                        .into());
                    }
                    let ty = model.input_type(name).ok_or("no such input")?;
                    Ok((name.to_string(), read_value(&PathBuf::from(path), &ty)?))
                })
                .collect::<Result<_, Box<dyn std::error::Error>>>()?,
        };
        if verbose {
            let from = |name: &str| match &self.data_set {
                Some(dir) => dir.display().to_string(),
                None => self
                    .files
                    .iter()
                    .find_map(|s| s.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("?")
                    .to_string(),
            };
            for (name, t) in &given {
                println!(
                    "input {name}: {}{:?} from {}",
                    t.dtype(),
                    t.dims(),
                    from(name)
                );
            }
        }
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !given.iter().any(|(g, _)| g == *n))
            .collect();
        let allowed =
            self.asks_to_generate() || (generate == Generate::WhenNoneGiven && given.is_empty());
        if !missing.is_empty() && !allowed {
            let list: Vec<String> = missing
                .iter()
                .map(|n| match model.input_type(n) {
                    Some(t) => format!("{n}: {t}"),
                    None => n.to_string(),
                })
                .collect();
            let from = match &self.data_set {
                Some(dir) => format!(" (not in `{}`)", dir.display()),
                None => String::new(),
            };
            return Err(format!(
                "inputs not given{from}: {}; give them with --input NAME=FILE or --inputs DIR, \
                 or ask for seeded random values with --generate-missing",
                list.join(", ")
            )
            .into());
        }
        let mut ranges: BTreeMap<Option<String>, Range> = BTreeMap::new();
        for s in &self.ranges {
            let (name, r) = parse_range(s)?;
            if let Some(n) = &name {
                if !names.contains(n) {
                    return Err(format!(
                        "`--range {s}`: the model has no input `{n}`; its inputs: {}",
                        names.join(", ")
                    )
                    .into());
                }
            }
            ranges.insert(name, r);
        }
        let g = &model.graph;
        let mut bindings = binds.clone();
        for (name, t) in &given {
            let Some(i) = names.iter().position(|n| n == name) else {
                continue;
            };
            let ty = &g.node(g.inputs()[i]).outputs[0];
            if ty.kind != ValueKind::Tensor {
                continue;
            }
            for (d, &n) in ty.shape.dims().iter().zip(t.dims()) {
                if let Some(s) = d.as_symbol() {
                    bindings.entry(s.to_string()).or_insert(n as i64);
                }
            }
        }
        let mut rng = Rng::new(self.seed.unwrap_or(0));
        let mut generated = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if given.iter().any(|(n, _)| n == name) {
                continue;
            }
            let ty = &g.node(g.inputs()[i]).outputs[0];
            if !ty.is_plain() {
                return Err(format!(
                    "input `{name}` is {ty}: such inputs are not generated; give it with \
                     --input {name}=FILE (.npy of strings, .npz of a sequence's elements, or .pb)"
                )
                .into());
            }
            let dims = ty.shape.bind(&bindings)?.as_known().ok_or_else(|| {
                if artifact {
                    return format!(
                        "input `{name}` has symbolic dims {}: give the input with --input \
                         NAME=FILE (the artifact's dims are as it was converted)",
                        ty.shape
                    );
                }
                // The symbols left, as the flags that bind them.
                let mut binds: Vec<String> = Vec::new();
                for d in ty.shape.dims() {
                    if let Some(s) = d.as_symbol().filter(|s| !bindings.contains_key(*s)) {
                        let flag = format!("--bind {s}=SIZE");
                        if !binds.contains(&flag) {
                            binds.push(flag);
                        }
                    }
                }
                if binds.is_empty() {
                    binds.push("--bind NAME=SIZE".into());
                }
                format!(
                    "input `{name}` has symbolic dims {}: give their sizes ({}), or the input \
                     with --input {name}=FILE",
                    ty.shape,
                    binds.join(" ")
                )
            })?;
            let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            if n.is_none_or(|n| n > MAX_GENERATED) {
                return Err(format!(
                    "input `{name}` would have {} elements ({:?}): more than {MAX_GENERATED} \
                     are not generated; give it with --input",
                    n.map_or("too many".to_string(), |n| n.to_string()),
                    dims
                )
                .into());
            }
            let range = ranges
                .get(&Some(name.clone()))
                .or_else(|| ranges.get(&None))
                .copied();
            let t = generate_values(&mut rng, ty.dtype, &dims, range, index_bound(g, i))
                .ok_or_else(|| format!("input `{name}`: cannot generate {} values", ty.dtype))?;
            if verbose {
                println!("input {name}: generated {}{:?}", t.dtype(), t.dims());
            }
            generated.push((name.clone(), t));
        }
        given.extend(generated);
        Ok(given)
    }
}

/// The inputs in `dir`: `input_N.pb` files (the ONNX backend-test layout,
/// in the order of the model's inputs), or files named for the inputs
/// (`NAME.npy`, `.npz`, `.pb`; a name with characters a file name cannot
/// hold as `run` writes it, `x:0` as `x_0.npy`). A folder with neither, or
/// with a tensor file named for no input, is an error.
fn read_input_dir(
    dir: &Path,
    model: &CompiledModel,
) -> Result<Vec<(String, Tensor)>, Box<dyn std::error::Error>> {
    let names = model.input_names();
    if !dir.is_dir() {
        return Err(format!("--inputs `{}` is not a directory", dir.display()).into());
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read `{}`: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    let tensor_file = |p: &Path| {
        p.is_file()
            && p.extension()
                .is_some_and(|e| e == "npy" || e == "npz" || e == "pb")
    };
    // `input_0.pb`, not `input_ids.pb` (a file named for an input).
    let numbered = files.iter().any(|p| {
        p.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.strip_prefix("input_")
                .and_then(|r| r.strip_suffix(".pb"))
                .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        })
    });
    if numbered {
        let set = rlx_onnx::testdata::read_data_set_for(dir, &model.graph)?;
        if set.inputs.len() > names.len() {
            return Err(format!(
                "`{}` holds {} input_N.pb files; the model has {} inputs ({})",
                dir.display(),
                set.inputs.len(),
                names.len(),
                names.join(", ")
            )
            .into());
        }
        return Ok(names.into_iter().zip(set.inputs).collect());
    }
    let mut given = Vec::new();
    for p in files.iter().filter(|p| tensor_file(p)) {
        let stem = p.file_stem().map(|s| s.to_string_lossy().to_string());
        let stem = stem.unwrap_or_default();
        let name = names
            .iter()
            .find(|n| **n == stem)
            .or_else(|| names.iter().find(|n| crate::run::file_name(n) == stem))
            .ok_or_else(|| {
                format!(
                    "`{}` is named for no input of the model; its inputs: {}",
                    p.display(),
                    names.join(", ")
                )
            })?;
        let ty = model.input_type(name).ok_or("no such input")?;
        given.push((name.clone(), read_value(p, &ty)?));
    }
    if given.is_empty() {
        let sets = rlx_onnx::testdata::data_set_dirs(dir).unwrap_or_default();
        let hint = match sets.first() {
            Some(s) => format!(
                " (a test case: give one of its data sets, `{}`)",
                s.display()
            ),
            None => String::new(),
        };
        return Err(format!(
            "`{}` holds no inputs{hint}: expected input_0.pb, input_1.pb, ... (the ONNX \
             backend-test layout) or files named for the model's inputs, NAME.npy: {}",
            dir.display(),
            names.join(", ")
        )
        .into());
    }
    Ok(given)
}

/// The most elements of one generated input (4 GiB of f32).
const MAX_GENERATED: usize = 1 << 30;

/// Seeded xorshift64*, enough for test inputs.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed: every seed, 0 included, gives a good state.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn generate_values(
    rng: &mut Rng,
    dtype: DType,
    dims: &[usize],
    range: Option<Range>,
    bound: Option<usize>,
) -> Option<Tensor> {
    let n: usize = dims.iter().product();
    use rlx_onnx::ir::ops::values::{float_tensor, int_tensor};
    if dtype.is_float() {
        let r = range.unwrap_or(Range { lo: -1.0, hi: 1.0 });
        let v: Vec<f64> = (0..n).map(|_| r.lo + rng.unit() * (r.hi - r.lo)).collect();
        return float_tensor(dtype, dims, &v);
    }
    let r = match (range, dtype) {
        (Some(r), _) => r,
        (None, DType::Bool) => Range { lo: 0.0, hi: 2.0 },
        (None, _) => Range {
            lo: 0.0,
            hi: bound.map_or(10.0, |b| b.clamp(1, 10) as f64),
        },
    };
    let (lo, hi) = (r.lo.ceil() as i64, r.hi.ceil() as i64);
    let span = (hi - lo).max(1) as f64;
    let v: Vec<i64> = (0..n)
        .map(|_| {
            let x = lo + (rng.unit() * span) as i64;
            if dtype == DType::Bool {
                i64::from(x != 0)
            } else {
                x
            }
        })
        .collect();
    int_tensor(dtype, dims, &v)
}

/// The size of the smallest constant table that graph input `i` indexes
/// (through casts and reshapes) with Gather, if any: the vocabulary of
/// token ids, the number of token types.
fn index_bound(g: &Graph, i: usize) -> Option<usize> {
    let mut bound: Option<usize> = None;
    let mut stack = vec![rlx_onnx::ir::Value::of(g.inputs()[i])];
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        for (user, port) in g.users_of(v) {
            let node = g.node(user);
            match &node.op {
                Op::Cast(_)
                | Op::Reshape(_)
                | Op::Flatten(_)
                | Op::Squeeze(_)
                | Op::Unsqueeze(_) => {
                    if port == 0 {
                        stack.push(rlx_onnx::ir::Value::of(user));
                    }
                }
                Op::Gather(a) if port == 1 => {
                    let Some(data) = g.input(user, 0) else {
                        continue;
                    };
                    let table = g.node(data.node);
                    if !table.op.is_leaf() || matches!(table.op, Op::Input(_)) {
                        continue;
                    }
                    let Some(dims) = g.ty(data).shape.as_known() else {
                        continue;
                    };
                    let axis = if a.axis < 0 {
                        a.axis + dims.len() as i64
                    } else {
                        a.axis
                    };
                    if let Some(&n) = usize::try_from(axis).ok().and_then(|a| dims.get(a)) {
                        bound = Some(bound.map_or(n, |b| b.min(n)));
                    }
                }
                _ => {}
            }
        }
    }
    bound
}

/// The GPU devices of a command: CUDA kernels compiled by NVRTC are cached
/// under `$XDG_CACHE_HOME/rlx-onnx/cuda` (or `~/.cache/...`), so a model's
/// kernels compile once per machine, not once per process.
pub fn devices() -> std::sync::Arc<rlx_onnx::Devices> {
    devices_with(rlx_onnx::cuda::PlanOptions::default())
}

/// [`devices`] whose CUDA plans are made with `plan`.
pub fn devices_with(plan: rlx_onnx::cuda::PlanOptions) -> std::sync::Arc<rlx_onnx::Devices> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let options = rlx_onnx::cuda::ContextOptions {
        compile: rlx_onnx::cuda::CompileOptions {
            cache_dir: base.map(|b| b.join("rlx-onnx/cuda")),
        },
        plan,
        ..Default::default()
    };
    std::sync::Arc::new(rlx_onnx::Devices::with_cuda_options(options))
}

/// The one overwrite rule of every command that writes files (`run`,
/// `convert -o`, `graph -o`, `dump --out`): a file (or a symlink) already at
/// an output path is refused unless `--force` is given, checked before any
/// work is done and again, atomically, when the file is written.
pub fn existing(force: bool) -> rlx_onnx::files::Existing {
    if force {
        rlx_onnx::files::Existing::Replace
    } else {
        rlx_onnx::files::Existing::Refuse
    }
}

/// Refuses an output path where something exists (without `--force`), or
/// that is one of the command's inputs.
pub fn check_output(path: &Path, inputs: &[&Path], force: bool) -> Result<(), String> {
    let same = |a: &Path, b: &Path| {
        a.canonicalize()
            .ok()
            .is_some_and(|x| b.canonicalize().ok() == Some(x))
    };
    if inputs.iter().any(|i| same(path, i)) {
        return Err(format!(
            "the output `{}` is an input of this command; refusing to overwrite it",
            path.display()
        ));
    }
    if !force && std::fs::symlink_metadata(path).is_ok() {
        return Err(exists_message(path));
    }
    Ok(())
}

/// The error for an output that exists.
pub fn exists_message(path: &Path) -> String {
    format!("`{}` exists: --force replaces it", path.display())
}

/// Writes one output file under the overwrite rule.
pub fn write_output(path: &Path, bytes: &[u8], force: bool) -> Result<(), String> {
    rlx_onnx::files::write_file(path, bytes, existing(force)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            exists_message(path)
        } else {
            format!("cannot write `{}`: {e}", path.display())
        }
    })
}

/// Warns when an output's extension is not the one its content has
/// (`convert -o model.onnx` writes an RLX artifact).
pub fn warn_extension(path: &Path, want: &str, what: &str) {
    if path.extension().is_none_or(|e| e != want) {
        eprintln!(
            "warning: `{}` gets {what}; other tools go by its extension: name it .{want}",
            path.display()
        );
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be
/// a typo of it (`fuse-atention` for `fuse-attention`).
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 4).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// `; did you mean `X`?` for a close candidate, else nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(name, candidates).map_or(String::new(), |c| format!("; did you mean `{c}`?"))
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn typos_get_the_closest_name() {
        let passes = ["fuse-attention", "fuse-layer-norm", "simplify"];
        assert_eq!(
            super::suggest("fuse-atention", passes),
            Some("fuse-attention")
        );
        assert_eq!(super::suggest("simplfy", passes), Some("simplify"));
        assert_eq!(super::suggest("legalize", passes), None);
        assert_eq!(super::edit_distance("kitten", "sitting"), 3);
    }
}

/// Says which device runs `target`: the adapter or device (name, driver,
/// hardware or software) for wgpu and Vulkan, the GPU for CUDA; warns when
/// it is a software one, whose timings say nothing of a GPU.
pub fn print_device(
    target: Target,
    devices: &rlx_onnx::Devices,
    threads: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    match target {
        Target::Cpu => println!(
            "device: cpu, {threads} thread{}",
            if threads == 1 { "" } else { "s" }
        ),
        Target::Wgpu => {
            let c = devices.wgpu()?;
            println!("device: {}", c.describe());
            if c.is_software() {
                eprintln!(
                    "warning: the wgpu adapter `{}` is a software renderer on the CPU: it \
                     runs the model, far slower than a GPU",
                    c.info.name
                );
            }
        }
        Target::Vulkan => {
            let c = devices.vulkan()?;
            println!("device: {}", c.describe());
            if c.is_software() {
                eprintln!(
                    "warning: the Vulkan device `{}` is a software implementation on the CPU: \
                     it runs the model, far slower than a GPU",
                    c.info.name
                );
            }
        }
        Target::Cuda => {
            let c = devices.cuda()?;
            let (major, minor) = c.capability();
            println!("device: {} (CUDA, sm_{major}{minor})", c.name());
        }
    }
    Ok(())
}

/// A profile's table: time per kernel kind, then the slowest `top` steps
/// with their ONNX nodes.
pub fn print_steps(steps: &[(String, String, std::time::Duration)], top: usize) {
    let total: f64 = steps.iter().map(|s| s.2.as_secs_f64()).sum();
    let mut by_kind: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    for (label, _, t) in steps {
        let kind = label.split(' ').next().unwrap_or(label).to_string();
        let e = by_kind.entry(kind).or_default();
        e.0 += t.as_secs_f64();
        e.1 += 1;
    }
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    println!(
        "profile: {} steps, {:.3} ms in kernels",
        steps.len(),
        total * 1e3
    );
    for (k, (t, n)) in kinds {
        println!(
            "  {:<28} {:>9.3} ms {:>5.1}%  ({n} steps)",
            k,
            t * 1e3,
            100.0 * t / total.max(1e-12)
        );
    }
    let mut slow: Vec<_> = steps.iter().collect();
    slow.sort_by(|a, b| b.2.cmp(&a.2));
    println!("slowest ONNX nodes:");
    for (label, origin, t) in slow.iter().take(top) {
        println!("  {:>9.3} ms  {origin}  [{label}]", t.as_secs_f64() * 1e3);
    }
}
