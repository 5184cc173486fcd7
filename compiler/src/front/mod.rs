//! The NNEF front end: load → parse → resolve → evaluate → expand → lower.
//!
//! Input is a model on disk (folder, `.tgz`/`.tar`, or a bare `graph.nnef`); output is
//! an `ir::Graph` of primitive ops with every shape inferred, or diagnostics that point
//! at file, line and column. Nothing here knows about Cranelift or optimization.
//!
//! Stages: `syntax` (parser), `index` (fragment table and declaration checks, extension
//! gates), `eval` (compile-time values), `typeck` (castability, generics), `expand`
//! (argument binding, inlining compound fragments, the graph body), `lower` (the only
//! name → `ir::Op` mapping, with the native set of compounds kept whole).

pub mod call;
pub mod dat;
pub mod eval;
pub mod expand;
pub mod index;
pub mod load;
pub mod lower;
pub mod quant;
pub mod quantize;
pub mod syntax;
pub mod typeck;
pub mod value;

#[cfg(test)]
mod tests;

use crate::diag::{Diagnostic, Diagnostics, SourceMap};
use crate::ir;
use quantize::VarData;
use std::collections::BTreeMap;
use std::path::Path;

/// Our standard library: primitives as body-less declarations, compounds with bodies.
pub const STDLIB: &str = include_str!("stdlib.nnef");

/// Default of [`FrontOptions::max_recursion_depth`]: far above what real models nest
/// (a recursive `add_n` over a thousand tensors is a thousand levels), and within
/// [`FRONT_STACK_BYTES`] at the deepest.
pub const MAX_RECURSION_DEPTH: usize = 4096;

/// Default of [`FrontOptions::max_nodes`]: the most IR nodes lowering may create. The
/// largest real models have tens of thousands; a fragment that calls itself twice per
/// level would otherwise grow without bound before the depth limit stops it.
pub const MAX_NODES: usize = 1 << 20;

/// Stack of the thread the front end runs on. Parsing drops, evaluation and expansion
/// recurse once per expression level and per fragment call; [`syntax::MAX_NESTING`]
/// and [`MAX_RECURSION_DEPTH`] are chosen so that the deepest accepted document fits
/// (tested in debug builds, whose frames are the largest). Only touched pages cost
/// memory.
pub const FRONT_STACK_BYTES: usize = 512 << 20;

/// Knobs of the front end.
#[derive(Clone, Debug)]
pub struct FrontOptions {
    /// Overrides of external (graph input) shapes by input name; `None` leaves an
    /// extent open (unknown until run time).
    pub input_shapes: BTreeMap<String, Vec<Option<usize>>>,
    /// Maximum nesting of fragment expansions (recursion limit).
    pub max_recursion_depth: usize,
    /// Maximum number of IR nodes, and of fragment calls, the document may expand to.
    pub max_nodes: usize,
    /// Use zeros, with a warning, for variables without data (tests, shape-only use).
    /// Off by default: a missing `.dat` file is an error.
    pub allow_missing_variables: bool,
}

impl Default for FrontOptions {
    fn default() -> Self {
        FrontOptions {
            input_shapes: BTreeMap::new(),
            max_recursion_depth: MAX_RECURSION_DEPTH,
            max_nodes: MAX_NODES,
            allow_missing_variables: false,
        }
    }
}

/// A lowered model.
pub struct Lowered {
    pub graph: ir::Graph,
    pub sources: SourceMap,
    pub warnings: Vec<Diagnostic>,
    /// Human-readable list of graph inputs and outputs whose extents stay unknown.
    pub open_extents: Vec<String>,
    /// Per node of `graph` as lowered (before any pass), the graph statement it came
    /// from, if any (see `Evaluator::node_spans`).
    pub node_spans: Vec<Option<crate::diag::Span>>,
    /// Where the graph is declared (for diagnostics about the graph as a whole).
    pub graph_span: crate::diag::Span,
}

/// Why the front end failed; render it for the user.
pub struct FrontError {
    pub diagnostics: Diagnostics,
    pub sources: SourceMap,
    /// The options, not the model, are wrong (a shape override naming no input): the
    /// CLI reports this as a usage error.
    pub usage: bool,
}

impl FrontError {
    pub fn render(&self) -> String {
        self.diagnostics.render(&self.sources)
    }
}

impl std::fmt::Display for FrontError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for FrontError {}

impl std::fmt::Debug for FrontError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

/// Runs `f` on a thread with a [`FRONT_STACK_BYTES`] stack and returns its result; a
/// panic in `f` is resumed on the caller's thread. Fails with a diagnostic when the
/// thread cannot be created (no address space for its stack, e.g. a tight `ulimit -v`).
pub(crate) fn on_front_stack<T: Send>(
    f: impl FnOnce() -> Result<T, FrontError> + Send,
) -> Result<T, FrontError> {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("nnefc-front".into())
            .stack_size(FRONT_STACK_BYTES)
            .spawn_scoped(scope, f);
        match thread {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(e) => Err(FrontError {
                diagnostics: Diagnostic::error(format!(
                    "cannot start the front end's thread with a {} MiB stack: {e}",
                    FRONT_STACK_BYTES >> 20
                ))
                .into(),
                sources: SourceMap::new(),
                usage: false,
            }),
        }
    })
}

/// Loads a model (folder, `.tgz`/`.tar`, or bare `graph.nnef`) and lowers it,
/// applying `graph.quant` when present.
pub fn load_and_lower(path: &Path, opts: &FrontOptions) -> Result<Lowered, FrontError> {
    let src = load::load_model(path).map_err(|e| FrontError {
        diagnostics: Diagnostic::error(format!("cannot load the model: {e}")).into(),
        sources: SourceMap::new(),
        usage: false,
    })?;
    let lookup = |label: &str| -> VarData {
        let bytes = match src.variable(label) {
            Ok(b) => b,
            Err(load::LoadError::MissingVariable { .. } | load::LoadError::BareGraph { .. }) => {
                return VarData::Missing;
            }
            Err(e) => return VarData::Error(e.to_string()),
        };
        match dat::read_dat(&bytes) {
            Ok(t) if t.quant.is_some() => VarData::Quantized(t),
            Ok(t) => VarData::Plain(t.data),
            Err(e) => VarData::Error(format!("{}: {e}", src.variable_path(label))),
        }
    };
    let quant = src
        .quant
        .as_ref()
        .map(|q| (q.path.as_str(), q.text.as_str()));
    lower_model(&src.graph.path, &src.graph.text, quant, &lookup, opts)
}

/// The model's `graph.nnef` parsed and printed back in canonical form
/// (`nnefc dump --stage ast`).
pub fn dump_ast(path: &Path) -> Result<String, FrontError> {
    let src = load::load_model(path).map_err(|e| FrontError {
        diagnostics: Diagnostic::error(format!("cannot load the model: {e}")).into(),
        sources: SourceMap::new(),
        usage: false,
    })?;
    on_front_stack(|| {
        let mut sources = SourceMap::new();
        let file = sources.add(src.graph.path.clone(), src.graph.text.clone());
        match syntax::parse_document(file, &src.graph.text) {
            Ok(doc) => Ok(syntax::print::document(&doc)),
            Err(d) => Err(FrontError {
                diagnostics: d,
                sources,
                usage: false,
            }),
        }
    })
}

/// Lowers NNEF text; `variables` gives the data of each `variable` label.
pub fn lower_source(
    name: &str,
    text: &str,
    variables: &(dyn Fn(&str) -> Option<ir::Tensor> + Sync),
    opts: &FrontOptions,
) -> Result<Lowered, FrontError> {
    let lookup = |label: &str| variables(label).map_or(VarData::Missing, VarData::Plain);
    lower_model(name, text, None, &lookup, opts)
}

/// Lowers NNEF text with an optional `graph.quant` (name, text), on a thread with a
/// [`FRONT_STACK_BYTES`] stack.
pub fn lower_model(
    name: &str,
    text: &str,
    quant: Option<(&str, &str)>,
    variables: &(dyn Fn(&str) -> VarData + Sync),
    opts: &FrontOptions,
) -> Result<Lowered, FrontError> {
    on_front_stack(|| lower_here(name, text, quant, variables, opts))
}

fn lower_here(
    name: &str,
    text: &str,
    quant: Option<(&str, &str)>,
    variables: &dyn Fn(&str) -> VarData,
    opts: &FrontOptions,
) -> Result<Lowered, FrontError> {
    let mut sources = SourceMap::new();
    let user_file = sources.add(name, text);
    let std_file = sources.add("<stdlib>/stdlib.nnef", STDLIB);
    let quant_file = quant.map(|(qn, qt)| sources.add(qn, qt));
    let fail = |d: Diagnostics, sources: SourceMap| FrontError {
        diagnostics: d,
        sources,
        usage: false,
    };
    let doc = match syntax::parse_document(user_file, text) {
        Ok(d) => d,
        Err(d) => return Err(fail(d, sources)),
    };
    let stdlib = match syntax::parse_library(std_file, STDLIB) {
        Ok(d) => d,
        Err(d) => return Err(fail(d, sources)),
    };
    if let Err(d) = index::check_features(&doc) {
        return Err(fail(d, sources));
    }
    let table = match index::FragmentTable::build(&stdlib, &doc) {
        Ok(t) => t,
        Err(d) => return Err(fail(d, sources)),
    };
    let Some(graph_def) = &doc.graph else {
        return Err(fail(
            Diagnostic::error("the document has no `graph`").into(),
            sources,
        ));
    };
    let unknown: Vec<&String> = opts
        .input_shapes
        .keys()
        .filter(|k| !graph_def.params.iter().any(|p| &p.name == *k))
        .collect();
    if !unknown.is_empty() {
        let inputs: Vec<String> = graph_def
            .params
            .iter()
            .map(|p| format!("`{}`", p.name))
            .collect();
        let names: Vec<String> = unknown.iter().map(|k| format!("`{k}`")).collect();
        let d = Diagnostic::error(format!(
            "an input shape is given for {}, which {} not an input of graph `{}`",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" },
            graph_def.name.name
        ))
        .at(graph_def.name.span, "the graph's inputs are declared here")
        .with_note(if inputs.is_empty() {
            "the graph has no inputs".to_string()
        } else {
            format!("its inputs are: {}", inputs.join(", "))
        });
        return Err(FrontError {
            diagnostics: d.into(),
            sources,
            usage: true,
        });
    }
    let mut ev = eval::Evaluator::new(&table, &graph_def.name.name, opts, variables);
    if let (Some(file), Some((_, qt))) = (quant_file, quant) {
        let entries = match quant::parse_quant(qt, file) {
            Ok(e) => e,
            Err(d) => return Err(fail(d, sources)),
        };
        for e in entries {
            ev.quant.insert(e.tensor.clone(), e);
        }
    }
    if let Err(d) = ev.run_graph(graph_def) {
        return Err(fail(d, sources));
    }
    let graph = ev.graph;
    let open_extents = open_extents(&graph);
    let mut node_spans = ev.node_spans;
    node_spans.resize(graph.nodes.len(), None);
    Ok(Lowered {
        graph,
        sources,
        warnings: ev.warnings,
        open_extents,
        node_spans,
        graph_span: graph_def.name.span,
    })
}

fn open_extents(g: &ir::Graph) -> Vec<String> {
    let mut out = Vec::new();
    let name = |v: ir::ValueId| g.value(v).name.clone().unwrap_or_else(|| v.to_string());
    for &v in &g.inputs {
        if !g.ty(v).is_fully_known() {
            out.push(format!("input `{}`: {}", name(v), g.ty(v)));
        }
    }
    for &v in &g.outputs {
        if !g.ty(v).is_fully_known() {
            out.push(format!("output `{}`: {}", name(v), g.ty(v)));
        }
    }
    out
}
