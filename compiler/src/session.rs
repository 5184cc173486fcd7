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

/// Compiles a model (folder, `.tgz`/`.tar`, or bare `graph.nnef`) to an object, header
/// and Rust bindings.
pub fn compile(path: &Path, opts: &Options) -> Result<Compiled, Error> {
    let (lowered, report) = lower_and_optimize(path, opts)?;
    compile_lowered(lowered, report, opts)
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
            Ok(plan.to_string())
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
