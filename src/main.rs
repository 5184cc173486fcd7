//! The `nnefc` command: compile an NNEF model to a native object (the default action),
//! check it, run it, time it, or dump a stage of the pipeline.
//!
//! This file is argument parsing, file naming and exit codes only; compiling is
//! `nnefc_compiler::session`, running is `nnefc::exec`. Errors print the front end's
//! rendered diagnostics (file:line:col and a caret) and exit with the codes listed in
//! [`EXIT_CODES`].

use clap::{Args, Parser, Subcommand, ValueEnum};
use nnefc::compiler::back::OptLevel;
use nnefc::compiler::ir::{self, Tensor};
use nnefc::compiler::session::{self, Options, Stage};
use nnefc::exec::{ExecError, LoadedModel};
use nnefc::{datfile, dot, tolerance};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The runtime's C entry points, kept in the executable (and exported by `-rdynamic`, see
/// `build.rs`) so a model loaded by `nnefc run` / `nnefc bench` binds to them.
struct EntryPoint(#[allow(dead_code)] *const ());
// SAFETY: only the addresses are stored; nothing is ever called or read through them.
unsafe impl Sync for EntryPoint {}
#[used]
static RUNTIME_ENTRY_POINTS: [EntryPoint; 11] = [
    EntryPoint(nnefc::runtime::nnefc_sgemm as *const ()),
    EntryPoint(nnefc::runtime::nnefc_sgemm_packed_a as *const ()),
    EntryPoint(nnefc::runtime::nnefc_sgemm_parallel as *const ()),
    EntryPoint(nnefc::runtime::nnefc_sgemm_batch_parallel as *const ()),
    EntryPoint(nnefc::runtime::nnefc_dwconv as *const ()),
    EntryPoint(nnefc::runtime::nnefc_maxpool as *const ()),
    EntryPoint(nnefc::runtime::nnefc_conv as *const ()),
    EntryPoint(nnefc::runtime::nnefc_winograd_in as *const ()),
    EntryPoint(nnefc::runtime::nnefc_winograd_out as *const ()),
    EntryPoint(nnefc::runtime::nnefc_winograd_fused as *const ()),
    EntryPoint(nnefc::runtime::nnefc_conv_pool as *const ()),
];

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  invalid model (the diagnostics say where: file:line:col)
  2  usage error (bad arguments, inputs that do not fit the model)
  3  cannot generate code (unsupported operation, unknown extent, bad target or prefix)
  4  I/O error (model or input file missing, output not writable)
  5  the compiled model could not be linked, loaded or run
  6  --compare: an output differs from the reference beyond the tolerance
  7  internal compiler error (a bug in nnefc; please report it)";

/// Exit codes; see [`EXIT_CODES`].
mod code {
    pub const INVALID_MODEL: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CODEGEN: u8 = 3;
    pub const IO: u8 = 4;
    pub const RUN: u8 = 5;
    pub const MISMATCH: u8 = 6;
    pub const INTERNAL: u8 = 7;
}

#[derive(Parser)]
#[command(
    name = "nnefc",
    version,
    about = "Ahead-of-time compiler from NNEF models to native object files",
    long_about = "Ahead-of-time compiler from NNEF models to native object files.\n\n\
        `nnefc MODEL -o model.o` compiles (the default action): the object defines \
        `PREFIX_run(inputs, outputs, workspace)` and the descriptor `PREFIX_info`, and \
        links with the nnefc-runtime static library. --emit header,rust adds a C header \
        and Rust bindings.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    compile: CompileArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile a model to an object file, header and bindings (the default action)
    #[command(after_help = EXIT_CODES)]
    Compile(CompileArgs),
    /// Validate a model and print its lowered graph (text IR with shapes)
    #[command(after_help = EXIT_CODES)]
    Check(CheckArgs),
    /// Compile, link and run a model on .dat inputs; write each output as DIR/<name>.dat
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Compile, load and time a model (median and minimum milliseconds per inference)
    #[command(after_help = EXIT_CODES)]
    Bench(BenchArgs),
    /// Print the text form of one stage of the pipeline
    #[command(after_help = EXIT_CODES)]
    Dump(DumpArgs),
}

#[derive(Args)]
struct ModelArgs {
    /// The model: a folder with graph.nnef and .dat files, a .tgz/.tar of one, or a bare graph.nnef
    #[arg(value_name = "MODEL", required = true)]
    model: Option<PathBuf>,
    /// Fix the shape of graph input NAME, e.g. --input-shape data=1,3,224,224; `?` leaves
    /// an extent unknown (code generation needs every extent). Repeatable.
    #[arg(long = "input-shape", value_name = "NAME=DIMS", value_parser = parse_shape)]
    input_shapes: Vec<(String, Vec<Option<usize>>)>,
    /// Optimization level: -O0 lowers the graph as written (and has Cranelift not
    /// optimize); -O2, the default, runs the graph optimizations (-O1 is the same as -O2)
    #[arg(short = 'O', value_name = "LEVEL", default_value = "2", value_parser = ["0", "1", "2"])]
    opt: String,
}

#[derive(Args)]
struct CodegenArgs {
    /// Target triple, e.g. x86_64-unknown-linux-gnu or aarch64-unknown-linux-gnu
    /// (default: this machine, using the CPU features it has)
    #[arg(long, value_name = "TRIPLE")]
    target: Option<String>,
    /// Prefix of every symbol (PREFIX_run, PREFIX_info) and C macro (PREFIX_NUM_INPUTS);
    /// a C identifier. Default: the graph's name
    #[arg(long, value_name = "NAME")]
    prefix: Option<String>,
    /// Cranelift CPU feature or preset to enable, e.g. x86-64-v3 or has_avx2 (repeatable)
    #[arg(long = "cpu-feature", value_name = "FEATURE")]
    cpu_features: Vec<String>,
    /// Profile: the object also exports PREFIX_run_profiled (calls a hook after every
    /// step) and PREFIX_profile_table; `bench` then prints time per layer
    #[arg(long, id = "profile")]
    profile: bool,
    /// Where the weights go: `embedded` in the object (the default), or `external`: the
    /// object holds code only and a weights file next to it (model.o → model.weights)
    /// holds every constant, which the caller passes to PREFIX_run_ex
    #[arg(long, value_enum, default_value = "embedded", value_name = "WHERE")]
    weights: WeightsArg,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WeightsArg {
    /// Read-only data in the object
    Embedded,
    /// A separate <stem>.weights file
    External,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The relocatable object (named by -o)
    Obj,
    /// The C header (<stem>.h)
    Header,
    /// The Rust bindings module (<stem>.rs)
    Rust,
    /// The optimized graph as text IR (<stem>.nnefir)
    Ir,
    /// The optimized graph for Graphviz (<stem>.dot; render with `dot -Tsvg`)
    Dot,
}

#[derive(Args)]
struct CompileArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// The object file to write. Other outputs are named after it (model.o → model.h,
    /// model.rs, model.nnefir, model.dot, model.weights). Default: <prefix>.o in the current directory
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// What to write, comma-separated: obj, header, rust, ir, dot
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "obj",
        value_name = "KINDS"
    )]
    emit: Vec<Emit>,
    /// Write the C header to FILE (implies --emit header)
    #[arg(long, value_name = "FILE")]
    header: Option<PathBuf>,
    /// Write the Rust bindings to FILE (implies --emit rust)
    #[arg(long, value_name = "FILE")]
    rust: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    model: ModelArgs,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// An input tensor: NAME=FILE.dat, or just FILE.dat when the model has one input (repeatable)
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Where to write the outputs, one DIR/<output name>.dat per output
    #[arg(long = "output-dir", value_name = "DIR", default_value = ".")]
    output_dir: PathBuf,
    /// Compare an output with a reference .dat: NAME=FILE, or FILE for a model with one
    /// output; fails (exit 6) beyond |ours - expected| <= 1e-4 * max(1, max|expected|)
    #[arg(long = "compare", value_name = "NAME=FILE")]
    compare: Vec<String>,
    /// Workers that large layers are split over, the calling thread included (0 = all
    /// cores); outputs are bit-identical whatever the number
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: usize,
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// An input tensor as in `nnefc run` (default: a fixed pseudo-random tensor per input)
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Untimed runs before timing
    #[arg(long, default_value_t = 10, value_name = "N")]
    warmup: usize,
    /// Timed runs
    #[arg(long, short = 'n', default_value_t = 100, value_name = "N")]
    iterations: usize,
    /// Workers that large layers are split over, the calling thread included (0 = all
    /// cores)
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: usize,
    /// With --profile: one row per generated step (im2col, GEMM, transforms, ...)
    /// instead of one per layer
    #[arg(long, requires = "profile")]
    per_step: bool,
    /// Samples per run for a model with a run-time batch (`--input-shape NAME=?,...`):
    /// synthetic inputs get this leading extent; times are per run
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum DumpStage {
    /// The parsed graph.nnef, printed back
    Ast,
    /// The IR right after lowering (shapes inferred)
    Lowered,
    /// The IR after the graph optimizations
    Optimized,
    /// The memory plan (arena offsets of intermediates)
    Plan,
    /// The back end's loop-nest kernels
    Kernels,
}

#[derive(Args)]
struct DumpArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    codegen: CodegenArgs,
    /// The stage to print
    #[arg(long, value_enum, default_value = "optimized")]
    stage: DumpStage,
}

/// Writes a line to stdout. A reader that went away (`nnefc bench … | head -1`) ends the
/// command quietly with status 0 instead of panicking as `println!` does;
/// another write error is a failure.
macro_rules! outln {
    ($($t:tt)*) => {
        write_out(format_args!("{}\n", format_args!($($t)*)))?
    };
}

/// Writes `args` to stdout (see [`outln!`]); `print!` without a newline for dumps.
fn write_out(args: std::fmt::Arguments<'_>) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_fmt(args).and_then(|()| out.flush()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::new(0, "")
        } else {
            Failure::new(1, format!("error: cannot write to standard output: {e}"))
        }
    })
}

/// A failure: what to print and the exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<session::Error> for Failure {
    fn from(e: session::Error) -> Failure {
        let code = match &e {
            session::Error::Front(f) if f.usage => code::USAGE,
            session::Error::Front(_) => code::INVALID_MODEL,
            session::Error::Pass(_) => code::INTERNAL,
            session::Error::Codegen(_) => code::CODEGEN,
        };
        Failure {
            code,
            message: e.render(),
        }
    }
}

impl From<ExecError> for Failure {
    fn from(e: ExecError) -> Failure {
        let code = match e {
            ExecError::Input(_) => code::USAGE,
            _ => code::RUN,
        };
        Failure {
            code,
            message: format!("error: {e}"),
        }
    }
}

impl From<datfile::DatFileError> for Failure {
    fn from(e: datfile::DatFileError) -> Failure {
        Failure {
            code: code::IO,
            message: format!("error: {e}"),
        }
    }
}

fn parse_shape(s: &str) -> Result<(String, Vec<Option<usize>>), String> {
    let (name, dims) = s
        .split_once('=')
        .ok_or("expected NAME=D0,D1,... (e.g. input=1,3,224,224)")?;
    if name.is_empty() {
        return Err("the input name is empty".into());
    }
    let dims = if dims.trim().is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| match d.trim() {
                "?" => Ok(None),
                d => d
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| format!("`{d}` is not an extent (a number or `?`)")),
            })
            .collect::<Result<_, _>>()?
    };
    Ok((name.to_string(), dims))
}

impl ModelArgs {
    fn path(&self) -> Result<&Path, Failure> {
        let p = self
            .model
            .as_deref()
            .ok_or_else(|| Failure::new(code::USAGE, "error: no MODEL given"))?;
        if !p.exists() {
            return Err(Failure::new(
                code::IO,
                format!("error: {}: no such file or directory", p.display()),
            ));
        }
        Ok(p)
    }

    fn options(&self) -> Options {
        let mut o = Options::default();
        o.front.input_shapes = self
            .input_shapes
            .iter()
            .cloned()
            .collect::<BTreeMap<_, _>>();
        o.optimize = self.opt != "0";
        if !o.optimize {
            o.back.opt_level = OptLevel::None;
        }
        o
    }
}

impl CodegenArgs {
    fn apply(&self, o: &mut Options) {
        o.back.target = self.target.clone();
        o.back.cpu_features = self.cpu_features.clone();
        o.back.profile = self.profile;
        o.back.external_weights = self.weights == WeightsArg::External;
    }
}

fn compile(model: &ModelArgs, codegen: &CodegenArgs) -> Result<session::Compiled, Failure> {
    let path = model.path()?;
    let mut opts = model.options();
    codegen.apply(&mut opts);
    let compiled = nnefc::compile_model(path, &opts, codegen.prefix.as_deref())?;
    eprint!("{}", compiled.render_warnings());
    Ok(compiled)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes).map_err(|e| {
        Failure::new(
            code::IO,
            format!("error: cannot write {}: {e}", path.display()),
        )
    })
}

fn cmd_compile(a: &CompileArgs) -> Result<(), Failure> {
    let mut emit = a.emit.clone();
    if a.header.is_some() && !emit.contains(&Emit::Header) {
        emit.push(Emit::Header);
    }
    if a.rust.is_some() && !emit.contains(&Emit::Rust) {
        emit.push(Emit::Rust);
    }
    let needs_code = emit
        .iter()
        .any(|e| matches!(e, Emit::Obj | Emit::Header | Emit::Rust));
    let path = a.model.path()?;
    let (graph, artifacts) = if needs_code {
        let c = compile(&a.model, &a.codegen)?;
        (c.graph, Some(c.artifacts))
    } else {
        let mut opts = a.model.options();
        a.codegen.apply(&mut opts);
        let (lowered, _) = session::lower_and_optimize(path, &opts)?;
        eprint!(
            "{}",
            nnefc::compiler::diag::render_all(&lowered.warnings, &lowered.sources)
        );
        (lowered.graph, None)
    };
    let object = a.output.clone().unwrap_or_else(|| {
        let prefix = match (&artifacts, &a.codegen.prefix) {
            (_, Some(p)) => p.clone(),
            (Some(art), None) => art.interface.prefix.clone(),
            (None, None) => nnefc::c_identifier(&graph.name),
        };
        PathBuf::from(format!("{prefix}.o"))
    });
    let sibling = |ext: &str| object.with_extension(ext);
    for e in &emit {
        match (e, &artifacts) {
            (Emit::Obj, Some(art)) => {
                write_file(&object, &art.object)?;
                if let Some(w) = &art.weights {
                    write_file(&sibling("weights"), w)?;
                }
            }
            (Emit::Header, Some(art)) => write_file(
                &a.header.clone().unwrap_or_else(|| sibling("h")),
                art.header.as_bytes(),
            )?,
            (Emit::Rust, Some(art)) => write_file(
                &a.rust.clone().unwrap_or_else(|| sibling("rs")),
                art.rust.as_bytes(),
            )?,
            (Emit::Ir, _) => write_file(&sibling("nnefir"), ir::print::print(&graph).as_bytes())?,
            (Emit::Dot, _) => write_file(&sibling("dot"), dot::to_dot(&graph).as_bytes())?,
            (_, None) => {}
        }
    }
    Ok(())
}

fn cmd_check(a: &CheckArgs) -> Result<(), Failure> {
    let path = a.model.path()?;
    let lowered = nnefc::compiler::front::load_and_lower(path, &a.model.options().front)
        .map_err(|e| Failure::from(session::Error::Front(e)))?;
    eprint!(
        "{}",
        nnefc::compiler::diag::render_all(&lowered.warnings, &lowered.sources)
    );
    if let Err(errors) = ir::verify::verify(&lowered.graph) {
        return Err(Failure::new(
            code::INTERNAL,
            format!(
                "error: internal compiler error: the lowered graph is invalid\n{}",
                ir::verify::render_errors(&errors)
            ),
        ));
    }
    write_out(format_args!("{}", ir::print::print(&lowered.graph)))?;
    for open in &lowered.open_extents {
        eprintln!("note: extent not known until run time: {open} (fix with --input-shape)");
    }
    eprintln!(
        "ok: {} is a valid model ({} nodes, {} inputs, {} outputs)",
        path.display(),
        lowered.graph.nodes.len(),
        lowered.graph.inputs.len(),
        lowered.graph.outputs.len()
    );
    Ok(())
}

/// Pairs `NAME=FILE` arguments (or a lone `FILE` when there is exactly one tensor) with the
/// model's tensor names; returns the file per name.
fn assign(
    kind: &str,
    args: &[String],
    names: &[String],
) -> Result<BTreeMap<String, PathBuf>, Failure> {
    let mut out = BTreeMap::new();
    for a in args {
        let (name, file) = match a.split_once('=') {
            Some((n, f)) if names.iter().any(|x| x == n) => (n.to_string(), PathBuf::from(f)),
            Some((n, _)) if !Path::new(a).exists() => {
                return Err(Failure::new(
                    code::USAGE,
                    format!(
                        "error: the model has no {kind} `{n}` (its {kind}s: {})",
                        names.join(", ")
                    ),
                ));
            }
            _ if names.len() == 1 => (names[0].clone(), PathBuf::from(a)),
            _ => {
                return Err(Failure::new(
                    code::USAGE,
                    format!(
                        "error: the model has {} {kind}s; write NAME=FILE (names: {})",
                        names.len(),
                        names.join(", ")
                    ),
                ));
            }
        };
        if out.insert(name.clone(), file).is_some() {
            return Err(Failure::new(
                code::USAGE,
                format!("error: {kind} `{name}` given twice"),
            ));
        }
    }
    Ok(out)
}

fn read_inputs(
    model: &LoadedModel,
    args: &[String],
    synthesize: bool,
    batch: usize,
) -> Result<Vec<Tensor>, Failure> {
    let names: Vec<String> = model
        .interface()
        .inputs
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let files = assign("input", args, &names)?;
    let mut inputs = Vec::new();
    for t in &model.interface().inputs {
        match files.get(&t.name) {
            Some(f) => inputs.push(datfile::read(f)?),
            None if synthesize => {
                let mut shape = t.shape.clone();
                if t.batched
                    && let Some(d) = shape.first_mut()
                {
                    *d *= batch;
                }
                inputs.push(nnefc::exec::synthetic_input(t.dtype, &shape))
            }
            None => {
                return Err(Failure::new(
                    code::USAGE,
                    format!(
                        "error: missing --input {}=FILE.dat ({}{:?})",
                        t.name, t.dtype, t.shape
                    ),
                ));
            }
        }
    }
    Ok(inputs)
}

/// A file name for an output: its name with path separators replaced.
fn output_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{}.dat", name.replace(['/', '\\'], "_")))
}

fn cmd_run(a: &RunArgs) -> Result<(), Failure> {
    let compiled = compile(&a.model, &a.codegen)?;
    let mut model = LoadedModel::load(&compiled.artifacts)?;
    model.set_threads(a.threads)?;
    let inputs = read_inputs(&model, &a.inputs, false, 1)?;
    let outputs = model.run(&inputs)?;
    std::fs::create_dir_all(&a.output_dir).map_err(|e| {
        Failure::new(
            code::IO,
            format!("error: cannot create {}: {e}", a.output_dir.display()),
        )
    })?;
    let infos = model.interface().outputs.clone();
    for (info, t) in infos.iter().zip(&outputs) {
        let file = output_file(&a.output_dir, &info.name);
        datfile::write(&file, t)?;
        outln!(
            "{}: {}{:?} -> {}",
            info.name,
            info.dtype,
            t.shape,
            file.display()
        );
    }
    let names: Vec<String> = infos.iter().map(|t| t.name.clone()).collect();
    let mut failed = false;
    for (name, file) in assign("output", &a.compare, &names)? {
        let expected = datfile::read(&file)?;
        let Some(k) = names.iter().position(|n| *n == name) else {
            continue;
        };
        let Some(ours) = outputs.get(k) else { continue };
        match tolerance::compare(ours, &expected) {
            Ok(c) => {
                outln!("{name} vs {}: {c}", file.display());
                failed |= !c.passed();
            }
            Err(e) => {
                outln!("{name} vs {}: {e}", file.display());
                failed = true;
            }
        }
    }
    if failed {
        return Err(Failure::new(
            code::MISMATCH,
            "error: outputs differ from the reference",
        ));
    }
    Ok(())
}

fn cmd_bench(a: &BenchArgs) -> Result<(), Failure> {
    let t = std::time::Instant::now();
    let compiled = compile(&a.model, &a.codegen)?;
    let compile_s = t.elapsed().as_secs_f64();
    let mut model = LoadedModel::load(&compiled.artifacts)?;
    model.set_threads(a.threads)?;
    let inputs = read_inputs(&model, &a.inputs, true, a.batch as usize)?;
    if a.codegen.profile {
        return print_profile(&mut model, &inputs, a);
    }
    let timing = model.time(&inputs, a.warmup, a.iterations)?;
    let per = per_run(&model, a);
    outln!(
        "{}: median {:.4} ms, min {:.4} ms {per} ({} runs after {} warm-up, {} thread{}; compiled in {:.2} s, workspace {} bytes)",
        a.model
            .model
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        timing.median_ms,
        timing.min_ms,
        timing.iterations,
        a.warmup,
        model.threads(),
        if model.threads() == 1 { "" } else { "s" },
        compile_s,
        model.interface().workspace_size_for(model.threads())
    );
    Ok(())
}

/// How a timed run is labelled: "per run of N samples" for a model with a run-time batch
/// (`--batch N`), else "per inference".
fn per_run(model: &LoadedModel, a: &BenchArgs) -> String {
    if model.interface().inputs.iter().any(|t| t.batched) {
        let s = if a.batch == 1 { "" } else { "s" };
        format!("per run of {} sample{s}", a.batch)
    } else {
        "per inference".to_string()
    }
}

/// `bench --profile`: time per graph node (the steps of a node summed), sorted by time.
fn print_profile(
    model: &mut LoadedModel,
    inputs: &[nnefc::compiler::ir::Tensor],
    a: &BenchArgs,
) -> Result<(), Failure> {
    let steps = model.profile(inputs, a.warmup, a.iterations)?;
    // Consecutive steps of one node form one row.
    let mut rows: Vec<(nnefc::compiler::back::profile::StepInfo, f64)> = Vec::new();
    let mut last = None;
    for (info, ms) in steps {
        let key = (info.node.clone(), info.op.clone());
        match rows.last_mut() {
            Some(r) if last.as_ref() == Some(&key) && !a.per_step => {
                r.1 += ms;
                r.0.flops += info.flops;
            }
            _ => rows.push((info, ms)),
        }
        last = Some(key);
    }
    let total: f64 = rows.iter().map(|r| r.1).sum();
    rows.sort_by(|x, y| y.1.total_cmp(&x.1));
    // With a run-time batch, times (and the flops `profile` reports) are per run of the
    // batch.
    let per = per_run(model, a);
    outln!(
        "{}: {:.4} ms {per} (mean of {} profiled runs, {} thread{}), {} {}",
        a.model
            .model
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        total,
        a.iterations.max(1),
        model.threads(),
        if model.threads() == 1 { "" } else { "s" },
        rows.len(),
        if a.per_step { "steps" } else { "layers" }
    );
    outln!(
        "{:<32} {:<20} {:<18} {:>9} {:>7} {:>9}",
        "node",
        "op",
        "shape",
        "ms",
        "share",
        "GFLOP/s"
    );
    for (info, ms) in &rows {
        let rate = if info.flops > 0.0 && *ms > 0.0 {
            format!("{:.1}", info.flops / (ms * 1e6))
        } else {
            "-".into()
        };
        outln!(
            "{:<32} {:<20} {:<18} {:>9.4} {:>6.1}% {:>9}",
            info.node,
            info.op,
            info.shape,
            ms,
            100.0 * ms / total.max(1e-12),
            rate
        );
    }
    Ok(())
}

fn cmd_dump(a: &DumpArgs) -> Result<(), Failure> {
    let path = a.model.path()?;
    let mut opts = a.model.options();
    a.codegen.apply(&mut opts);
    if let Some(p) = &a.codegen.prefix {
        opts.back.prefix = p.clone();
    }
    let stage = match a.stage {
        DumpStage::Ast => Stage::Ast,
        DumpStage::Lowered => Stage::Lowered,
        DumpStage::Optimized => Stage::Optimized,
        DumpStage::Plan => Stage::Plan,
        DumpStage::Kernels => Stage::Kernels,
    };
    write_out(format_args!("{}", session::dump(path, stage, &opts)?))?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // clap prints help/version to stdout with exit 0 and usage errors with exit 2.
        Err(e) => e.exit(),
    };
    let result = match &cli.command {
        None => cmd_compile(&cli.compile),
        Some(Cmd::Compile(a)) => cmd_compile(a),
        Some(Cmd::Check(a)) => cmd_check(a),
        Some(Cmd::Run(a)) => cmd_run(a),
        Some(Cmd::Bench(a)) => cmd_bench(a),
        Some(Cmd::Dump(a)) => cmd_dump(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprint!("{}", f.message);
            if !f.message.is_empty() && !f.message.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(f.code)
        }
    }
}
