//! The driver: runs front end → passes → back end on a model and returns every artifact,
//! or dumps the text form of one pipeline stage.
//!
//! This is the one place that knows the order of the stages; the CLI, `nnefc::Build` and
//! the tests all go through it. It adds no behaviour of its own beyond sequencing,
//! verification between stages, and turning each stage's error into one [`Error`].

use crate::back::{self, Artifacts, BackendOptions, CodegenError};
use crate::diag::{Diagnostic, SourceMap};
use crate::front::{self, FrontError, FrontOptions};
use crate::ir::{self, Graph};
use crate::passes::{self, PassError, PassOptions, PassReport};
use std::fmt;
use std::path::Path;

/// Everything that steers a compilation.
#[derive(Clone, Debug)]
pub struct Options {
    pub front: FrontOptions,
    pub passes: PassOptions,
    /// Run the optimization pipeline (`-O2`); off (`-O0`) lowers the graph as written.
    pub optimize: bool,
    pub back: BackendOptions,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            front: FrontOptions::default(),
            passes: PassOptions::default(),
            optimize: true,
            back: BackendOptions::default(),
        }
    }
}

/// A pipeline stage whose text form can be dumped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The parsed `graph.nnef`, pretty-printed.
    Ast,
    /// The IR right after lowering (shapes inferred, nothing optimized).
    Lowered,
    /// The IR after the optimization pipeline.
    Optimized,
    /// The memory plan of the optimized graph.
    Plan,
    /// The back end's loop-nest kernels.
    Kernels,
}

impl Stage {
    pub const ALL: [(&'static str, Stage); 5] = [
        ("ast", Stage::Ast),
        ("lowered", Stage::Lowered),
        ("optimized", Stage::Optimized),
        ("plan", Stage::Plan),
        ("kernels", Stage::Kernels),
    ];
}

/// A failed compilation, with what is needed to render it.
#[derive(Debug)]
pub enum Error {
    /// The model is invalid: diagnostics with file, line and column.
    Front(FrontError),
    /// An optimization pass failed (a compiler bug; the message says which pass).
    Pass(PassError),
    /// Code generation failed (unsupported op, unknown extent, target problem).
    Codegen(CodegenError),
}

impl Error {
    /// The text to show a user: rendered diagnostics or the error message.
    pub fn render(&self) -> String {
        match self {
            Error::Front(e) => e.render(),
            Error::Pass(e) => format!("error: internal compiler error: {e}\n"),
            Error::Codegen(e) => format!("error: {e}\n"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.render().trim_end())
    }
}

impl std::error::Error for Error {}

/// The result of a successful compilation.
#[derive(Debug)]
pub struct Compiled {
    /// The optimized graph the code was generated from.
    pub graph: Graph,
    pub artifacts: Artifacts,
    pub warnings: Vec<Diagnostic>,
    pub sources: SourceMap,
    /// Extents that stayed unknown after inference (an error for code generation).
    pub open_extents: Vec<String>,
    pub passes: PassReport,
}

impl Compiled {
    /// Warnings rendered with source positions.
    pub fn render_warnings(&self) -> String {
        crate::diag::render_all(&self.warnings, &self.sources)
    }
}

/// Loads, lowers and optimizes a model (everything but code generation).
pub fn lower_and_optimize(
    path: &Path,
    opts: &Options,
) -> Result<(front::Lowered, PassReport), Error> {
    let mut lowered = front::load_and_lower(path, &opts.front).map_err(Error::Front)?;
    let report = if opts.optimize {
        passes::optimize(&mut lowered.graph, &opts.passes).map_err(Error::Pass)?
    } else {
        PassReport::default()
    };
    Ok((lowered, report))
}

/// Where a model comes from: a path (folder, `.tgz`/`.tar`, or bare `graph.nnef`), or
/// NNEF text with its variables' data in memory (the graph builder, `nnefc::graph`).
/// Both go through the same front end and everything after it.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Path(&'a Path),
    Text {
        /// Names the text in diagnostics (e.g. `graph.nnef` of a built graph).
        name: &'a str,
        text: &'a str,
        /// The data of each `variable` label.
        variables: &'a (dyn Fn(&str) -> Option<ir::Tensor> + Sync),
    },
}

impl Source<'_> {
    fn lower(&self, front: &FrontOptions) -> Result<front::Lowered, FrontError> {
        match *self {
            Source::Path(p) => front::load_and_lower(p, front),
            Source::Text {
                name,
                text,
                variables,
            } => front::lower_source(name, text, variables, front),
        }
    }
}

/// Compiles a model (folder, `.tgz`/`.tar`, or bare `graph.nnef`) to an object, header
/// and Rust bindings, with the symbol prefix `opts.back.prefix`.
pub fn compile(path: &Path, opts: &Options) -> Result<Compiled, Error> {
    let prefix = opts.back.prefix.clone();
    compile_with_prefix(path, opts, Some(&prefix))
}

/// [`compile`] with `prefix`, or with the graph's name made a C identifier
/// ([`c_identifier`]) when `None`.
///
/// An input shape override whose leading extent is unknown (`--input-shape x=?,3,224,224`)
/// asks for a **run-time batch**: the model is lowered with that extent 1 and 2, checked
/// by `passes::batch` (samples must stay independent), and compiled for one sample with
/// a sample loop in the entry point (`BackendOptions::batch`).
pub fn compile_with_prefix(
    path: &Path,
    opts: &Options,
    prefix: Option<&str>,
) -> Result<Compiled, Error> {
    compile_source(Source::Path(path), opts, prefix)
}

/// Compiles NNEF text whose variables are given in memory: what `nnefc::graph` calls for
/// a built graph. The same pipeline as [`compile_with_prefix`] (run-time batch included).
pub fn compile_graph(
    name: &str,
    text: &str,
    variables: &(dyn Fn(&str) -> Option<ir::Tensor> + Sync),
    opts: &Options,
    prefix: Option<&str>,
) -> Result<Compiled, Error> {
    compile_source(
        Source::Text {
            name,
            text,
            variables,
        },
        opts,
        prefix,
    )
}

/// The pipeline behind [`compile_with_prefix`] and [`compile_graph`].
pub fn compile_source(
    src: Source<'_>,
    opts: &Options,
    prefix: Option<&str>,
) -> Result<Compiled, Error> {
    let mut opts = opts.clone();
    let lowered = if run_time_batch(&opts) {
        let (lowered, batch) = lower_batched(src, &opts)?;
        opts.back.batch = Some(batch);
        lowered
    } else {
        src.lower(&opts.front).map_err(Error::Front)?
    };
    let mut lowered = lowered;
    let report = if opts.optimize {
        passes::optimize(&mut lowered.graph, &opts.passes).map_err(Error::Pass)?
    } else {
        PassReport::default()
    };
    opts.back.prefix = match prefix {
        Some(p) => p.to_string(),
        None => c_identifier(&lowered.graph.name),
    };
    compile_lowered(lowered, report, &opts)
}

/// Whether an input shape override leaves the leading extent to run time.
fn run_time_batch(opts: &Options) -> bool {
    opts.front
        .input_shapes
        .values()
        .any(|d| d.first().is_some_and(Option::is_none))
}

/// Lowers with the run-time batch fixed to 1 (the program) and 2 (for the check).
fn lower_batched(
    src: Source<'_>,
    opts: &Options,
) -> Result<(front::Lowered, passes::batch::RuntimeBatch), Error> {
    let at = |n: usize| {
        let mut f = opts.front.clone();
        for dims in f.input_shapes.values_mut() {
            if let Some(d @ None) = dims.first_mut() {
                *d = Some(n);
            }
        }
        f
    };
    let one = src.lower(&at(1)).map_err(Error::Front)?;
    let two = src.lower(&at(2)).map_err(|mut e| {
        e.diagnostics.0.insert(
            0,
            Diagnostic::error(
                "the model cannot take a run-time batch: lowered for a batch of 2, it fails",
            )
            .with_note("compile it for a fixed batch (--input-shape NAME=N,...)"),
        );
        Error::Front(e)
    })?;
    let batch = passes::batch::analyze(&one.graph, &two.graph, &one.node_spans, one.graph_span)
        .map_err(|d| {
            Error::Front(FrontError {
                diagnostics: d.into(),
                sources: one.sources.clone(),
                usage: false,
            })
        })?;
    Ok((one, batch))
}

/// Turns a graph name into a C identifier usable as a prefix (`my-net` → `my_net`).
pub fn c_identifier(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() {
        s.push_str("model");
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

fn compile_lowered(
    lowered: front::Lowered,
    report: PassReport,
    opts: &Options,
) -> Result<Compiled, Error> {
    if !lowered.open_extents.is_empty() {
        return Err(Error::Codegen(CodegenError::UnknownShape(format!(
            "{}; fix them with --input-shape NAME=D0,D1,...",
            lowered.open_extents.join("; ")
        ))));
    }
    let artifacts = back::compile(&lowered.graph, &opts.back).map_err(Error::Codegen)?;
    Ok(Compiled {
        graph: lowered.graph,
        artifacts,
        warnings: lowered.warnings,
        sources: lowered.sources,
        open_extents: lowered.open_extents,
        passes: report,
    })
}

/// The text form of one stage of the pipeline for a model.
pub fn dump(path: &Path, stage: Stage, opts: &Options) -> Result<String, Error> {
    match stage {
        Stage::Ast => front::dump_ast(path).map_err(Error::Front),
        Stage::Lowered => {
            let lowered = front::load_and_lower(path, &opts.front).map_err(Error::Front)?;
            Ok(ir::print::print(&lowered.graph))
        }
        Stage::Optimized => {
            let (lowered, _) = lower_and_optimize(path, opts)?;
            Ok(ir::print::print(&lowered.graph))
        }
        Stage::Plan => {
            let (lowered, _) = lower_and_optimize(path, opts)?;
            let plan = passes::memory_plan::plan(&lowered.graph)
                .map_err(|e| Error::Codegen(CodegenError::Plan(e)))?;
            let groups = passes::fusion::groups(&lowered.graph).describe(&lowered.graph);
            let blocks = passes::block::describe(&lowered.graph);
            Ok(format!("{groups}{blocks}{plan}"))
        }
        Stage::Kernels => {
            let (lowered, report) = lower_and_optimize(path, opts)?;
            Ok(compile_lowered(lowered, report, opts)?.artifacts.kernels)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Graphs with enormous tensors compile or fail with an error, never panic on
    /// overflow; a tensor whose byte size does not fit in the address space is an error.
    #[test]
    fn absurd_extents_are_errors() {
        let dir = std::env::temp_dir().join(format!("nnefc-session-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for (i, body) in [
            "x = external(shape = [100000, 100000, 100000]);\n    y = exp(x);",
            "x = external(shape = [2]);\n    y = tile(x, repeats = [4000000000000000000]);",
            "x = external(shape = [4611686018427387904, 4]);\n    y = relu(x);",
        ]
        .iter()
        .enumerate()
        {
            let path = dir.join(format!("g{i}.nnef"));
            std::fs::write(
                &path,
                format!("version 1.0;\ngraph g(x) -> (y)\n{{\n    {body}\n}}\n"),
            )
            .expect("write");
            let result = compile(&path, &Options::default());
            if i == 2 {
                assert!(result.is_err(), "case {i} compiled");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
